//! Extra packages for a run, under concurrency: identical requests in flight are joined,
//! and requests past a tenant's `package_jobs` wait their turn.
//!
//! - **Joined.** Requests whose specifiers are the same once normalised and sorted
//!   ([`Vivarium::package_key`]) share one resolution: the first to hold a place starts it
//!   (a blocking task of its own, so it goes on for the others if its caller hangs up) and
//!   every request for the same set waits on its result (a `watch` channel: the
//!   environment, or the error every waiter gets). A joined request starts no work, so it
//!   holds no place; it waits in its own tenant's line, counted against its bound.
//! - **Waiting.** Each tenant has `package_jobs` places (a [`Semaphore`]: granted in the
//!   order asked) and a line of at most [`WAITING_PER_JOB`] × `package_jobs` requests
//!   waiting for one or for a joined resolution. A request past that bound is refused at
//!   once (429 `quota_exceeded`, quota `package_jobs`, Retry-After); one that waits longer
//!   than `--queue-timeout-ms` for a place is refused with `package_resolution_timeout`.
//!   Tenants' lines are their own: one tenant's backlog never delays another's place (the
//!   package service's few resolutions at once are granted in arrival order, of which each
//!   tenant holds at most its `package_jobs`).
//! - A set already resolved and compiled is answered from the cache without a place.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::Runner;
use crate::packages::{PackageEnv, PackageError, PackageErrorKind};
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::tenants::{Quota, QuotaExceeded, Tenant};
use crate::sync::lock;
use crate::vivarium::Vivarium;

/// How many requests of a tenant may wait, per place of its `package_jobs`: 16 at the
/// default of 2. Enough for an agent's fan-out of parallel runs needing one set; a bound
/// still, on what one tenant's waiting requests hold.
pub const WAITING_PER_JOB: u64 = 8;

/// What one resolution ends with: what every request joined to it gets.
type Outcome = Result<Arc<PackageEnv>, PackageError>;

/// The tenants' lines and the resolutions in flight.
pub(super) struct PackageJobs {
    /// Per tenant id, made on its first request.
    lines: Mutex<HashMap<String, Arc<Line>>>,
    /// Per set's key: its resolution under way.
    flights: Arc<Mutex<HashMap<String, watch::Receiver<Option<Outcome>>>>>,
    /// How long a request waits for a place.
    wait: Duration,
}

/// A tenant's places and the requests waiting for one.
struct Line {
    /// `None`: no limit.
    places: Option<Arc<Semaphore>>,
    waiting: AtomicUsize,
    bound: usize,
}

/// A request's place in its tenant's line while it waits; given back on drop.
struct Waiting<'a>(&'a Line);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Line {
    fn enter(&self) -> Option<Waiting<'_>> {
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.bound).then_some(n + 1)
            })
            .ok()
            .map(|_| Waiting(self))
    }
}

/// What a resolution holds of its tenant: a place, and the count `/v1/usage` shows. Goes
/// with the `.pyc` compile the resolution starts, if it starts one. Fields drop in order:
/// the count first, so the next in line, granted the place at once, finds it given back.
struct Place {
    _held: crate::supervisor::tenants::Held,
    _permit: Option<OwnedSemaphorePermit>,
}

/// Takes the flight's entry out when its resolution ends, however it ends.
struct Landing {
    flights: Arc<Mutex<HashMap<String, watch::Receiver<Option<Outcome>>>>>,
    key: String,
}

impl Drop for Landing {
    fn drop(&mut self) {
        lock(&self.flights).remove(&self.key);
    }
}

impl PackageJobs {
    pub(super) fn new(wait: Duration) -> Self {
        PackageJobs {
            lines: Mutex::default(),
            flights: Arc::default(),
            wait,
        }
    }

    fn line(&self, tenant: &Tenant) -> Arc<Line> {
        lock(&self.lines)
            .entry(tenant.id().to_string())
            .or_insert_with(|| {
                let jobs = tenant.limit(Quota::PackageJobs);
                let unlimited = jobs >= Semaphore::MAX_PERMITS as u64;
                Arc::new(Line {
                    places: (!unlimited).then(|| Arc::new(Semaphore::new(jobs as usize))),
                    waiting: AtomicUsize::new(0),
                    bound: if unlimited {
                        usize::MAX
                    } else {
                        jobs.saturating_mul(WAITING_PER_JOB) as usize
                    },
                })
            })
            .clone()
    }

    /// The resolution of `key` in flight, if one is.
    fn flight(&self, key: &str) -> Option<watch::Receiver<Option<Outcome>>> {
        lock(&self.flights).get(key).cloned()
    }
}

/// Waits for `flight`'s outcome.
async fn landed(mut flight: watch::Receiver<Option<Outcome>>) -> Outcome {
    match flight.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone().expect("waited for Some"),
        // The resolution's task ended without an outcome: it panicked.
        Err(_) => Err(PackageError::host("the package resolution failed")),
    }
}

impl Runner {
    /// The environment of the packages `raw` names (checked by the front door), resolved off
    /// the executor (pip runs, and downloads on a first request); its wheels go on `record`.
    /// Nothing is admitted until it is there: a failed resolution runs nothing. A resolution
    /// holds one of the caller's tenant's `package_jobs` while it runs, and while the `.pyc`
    /// compile it started runs; requests past them wait (see this module).
    #[tracing::instrument(name = "packages.resolve", skip_all, fields(count = raw.len()))]
    pub async fn packages(
        &self,
        raw: Vec<String>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<PackageEnv>> {
        let host = self.host()?;
        if raw.is_empty() {
            return Ok(host.no_packages());
        }
        let key = host.package_key(&raw).map_err(SupervisorError::Package)?;
        let cached = {
            let (host, raw) = (host.clone(), raw.clone());
            tokio::task::spawn_blocking(move || host.cached_packages(&raw))
                .await
                .map_err(|e| SupervisorError::Internal(format!("package cache: {e}")))?
                .map_err(SupervisorError::Package)?
        };
        let env = match cached {
            Some(env) => env,
            None => {
                let tenant = self.tenant(record.key_id.as_deref());
                self.resolve_in_line(&tenant, key, host, raw).await?
            }
        };
        record.packages = env.pins.clone();
        Ok(env)
    }

    /// Joins the resolution of `key` in flight, or waits for a place of `tenant`'s and starts
    /// it.
    async fn resolve_in_line(
        &self,
        tenant: &Arc<Tenant>,
        key: String,
        host: Arc<Vivarium>,
        raw: Vec<String>,
    ) -> SupervisorResult<Arc<PackageEnv>> {
        let jobs = &self.package_jobs;
        let line = jobs.line(tenant);
        let waiting = line.enter().ok_or_else(|| {
            self.admission.refuse(QuotaExceeded {
                tenant: tenant.id().to_string(),
                quota: Quota::PackageJobs,
                used: tenant.used(Quota::PackageJobs),
                limit: tenant.limit(Quota::PackageJobs),
                asked: 1,
            })
        })?;
        if let Some(flight) = jobs.flight(&key) {
            return landed(flight).await.map_err(SupervisorError::Package);
        }
        let permit = match &line.places {
            None => None,
            Some(places) => {
                let granted = tokio::time::timeout(jobs.wait, places.clone().acquire_owned());
                match granted.await {
                    Ok(Ok(permit)) => Some(permit),
                    // The semaphore is never closed.
                    Ok(Err(_)) | Err(_) => {
                        return Err(SupervisorError::Package(PackageError::new(
                            PackageErrorKind::Timeout,
                            None,
                            format!(
                                "no place among tenant {:?}'s {} package_jobs came free within \
                                 {} ms (each resolution, and the .pyc compile of a new set, \
                                 holds one); retry later",
                                tenant.id(),
                                tenant.limit(Quota::PackageJobs),
                                jobs.wait.as_millis()
                            ),
                        )));
                    }
                }
            }
        };
        // Past its wait: it holds a place now (and a joined request never held one).
        drop(waiting);
        let flight = {
            let mut flights = lock(&jobs.flights);
            match flights.get(&key) {
                // Started while this one waited for its place: joined, the place given back.
                Some(flight) => Err(flight.clone()),
                None => {
                    let (tx, rx) = watch::channel(None);
                    flights.insert(key.clone(), rx.clone());
                    let landing = Landing {
                        flights: jobs.flights.clone(),
                        key,
                    };
                    Ok((tx, rx, landing))
                }
            }
        };
        let (tx, rx, landing) = match flight {
            Err(flight) => {
                drop(permit);
                return landed(flight).await.map_err(SupervisorError::Package);
            }
            Ok(started) => started,
        };
        // Never refused while the place is held (the places are the quota), but counted here
        // for `/v1/usage`; a refusal drops `landing`, and those joined hear of a failure.
        let held = tenant
            .take(Quota::PackageJobs, 1)
            .map_err(|q| self.admission.refuse(q))?;
        let place = Place {
            _held: held,
            _permit: permit,
        };
        // Its own task: it goes on when this caller hangs up, for those joined to it. The
        // place goes with the set's `.pyc` compile when this resolution starts one.
        tokio::task::spawn_blocking(move || {
            let outcome = host.packages_held(&raw, Box::new(place));
            drop(landing);
            tx.send_replace(Some(outcome));
        });
        landed(rx).await.map_err(SupervisorError::Package)
    }
}
