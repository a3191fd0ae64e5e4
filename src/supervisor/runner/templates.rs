//! User templates' builds and their use: a build is admitted like a run (a slot, its memory),
//! runs in a worker (`Job::Build`: a bare sandbox, its steps, its capture), and its image is
//! written as the template's layer before the record says `ready`; a run or session naming a
//! template gets its layer, environment and packages ([`Runner::choose_template`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::capture::encode_now;
use super::{Runner, failure, out_of_turn, reserve_for};
use crate::supervisor::admission::MemoryNeed;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::templates::{
    BuildFailure, BuildPlace, Chosen, Kept, TemplateStatus, UserTemplateError, UserTemplates,
};
use crate::supervisor::tenants::Tenant;
use crate::template::Template;
use crate::vivarium::{BuildError, BuildProgram, Built};
use crate::worker::{Job, PackageRef, Reply, Sinks};

/// How long a replaced or deleted version's layer stays for runs that were given it.
const OLD_LAYER_GRACE: Duration = Duration::from_secs(120);

/// A build ready to run: what to build, for whom, and the places it holds.
pub struct BuildPlan {
    /// The record as it stands while it builds.
    pub kept: Kept,
    pub tenant: Arc<Tenant>,
    pub program: BuildProgram,
    /// Its packages: what it was built from's, and its own.
    pub packages: Vec<String>,
    /// Its place among the tenant's builds in flight.
    pub place: BuildPlace,
    /// The memory the built-in template (with the layer built from) starts with.
    pub starts_with: u64,
    /// The request's audit record (its key: the packages' places are its tenant's).
    pub record: AuditRecord,
}

impl Runner {
    /// The tenants' templates (once the runtime is loaded).
    pub fn user_templates(&self) -> SupervisorResult<&UserTemplates> {
        self.host()?;
        self.templates.get().ok_or(SupervisorError::NotReady)
    }

    /// In a cluster, key `key`'s tenant's templates as the shared store has them (see
    /// `UserTemplates::sync`); nothing without one.
    pub async fn sync_templates(&self, key: Option<&str>) -> SupervisorResult<()> {
        let Some(store) = self.templates.get() else {
            return Ok(());
        };
        Ok(store.sync(self.tenant(key).id()).await?)
    }

    /// [`Runner::choose_template`] after [`Runner::sync_templates`] for a name that is not
    /// a built-in template's, and the layer it gives here (fetched from the shared store when
    /// this node lacks it).
    pub async fn template_for(
        &self,
        key: Option<&str>,
        name: Option<&str>,
    ) -> SupervisorResult<Chosen> {
        if name.is_some_and(|n| n.parse::<Template>().is_err()) {
            self.sync_templates(key).await?;
        }
        let chosen = self.choose_template(key, name)?;
        if let (Some(layer), Some(store)) = (&chosen.layer, self.templates.get()) {
            store.ensure_layer(layer, store.limits.bytes).await?;
        }
        Ok(chosen)
    }

    /// What `name` names for key `key`'s tenant: a built-in template (the default when
    /// `None`), or one of its own that is ready.
    pub fn choose_template(
        &self,
        key: Option<&str>,
        name: Option<&str>,
    ) -> SupervisorResult<Chosen> {
        let Some(name) = name else {
            return Ok(Chosen::builtin(Template::default()));
        };
        if let Ok(t) = name.parse::<Template>() {
            return Ok(Chosen::builtin(t));
        }
        let store = self.user_templates()?;
        let tenant = self.tenant(key);
        let host = self.host()?;
        let chosen = store.read(tenant.id(), name, |kept| match kept.info.status {
            TemplateStatus::Ready => Ok(Chosen {
                template: kept.info.base,
                layer: kept.layer(store, host.starting_bytes(kept.info.base, 0)),
                packages: kept.packages.clone(),
            }),
            TemplateStatus::Building => Err(UserTemplateError::Building(name.to_string())),
            TemplateStatus::Failed => {
                let e = kept.info.error.clone().unwrap_or(BuildFailure {
                    step: "build".into(),
                    reason: "unknown".into(),
                });
                Err(UserTemplateError::Failed {
                    name: name.to_string(),
                    step: e.step,
                    reason: e.reason,
                })
            }
        });
        Ok(
            chosen
                .ok_or_else(|| UserTemplateError::NotFound(name.chars().take(80).collect()))??,
        )
    }

    /// Runs `plan`'s build to its end (in a task of the caller's: a build outlives its
    /// request) and records how it ended. Never fails: a failure is the record's.
    pub async fn run_build(self: Arc<Self>, plan: BuildPlan) {
        let BuildPlan {
            mut kept,
            tenant,
            program,
            packages,
            place,
            starts_with,
            record,
        } = plan;
        let started = Instant::now();
        let outcome = self
            .build_in_worker(&tenant, record, program, packages, starts_with)
            .await;
        drop(place);
        let store = match self.user_templates() {
            Ok(store) => store,
            Err(_) => return,
        };
        match outcome {
            Ok((built, pins)) => {
                kept.log = built.log.clone();
                kept.info.packages = pins;
                match self.keep_layer(store, tenant.id(), &kept, built).await {
                    Ok((bytes, memory_bytes)) => {
                        kept.info.status = TemplateStatus::Ready;
                        kept.info.bytes = bytes;
                        kept.memory_bytes = memory_bytes;
                    }
                    Err(e) => fail(&mut kept, "build", e),
                }
            }
            Err(BuildEnd::Step { step, reason, log }) => {
                kept.log = log;
                fail(&mut kept, &step, reason);
            }
            Err(BuildEnd::Other(step, e)) => fail(&mut kept, step, e),
        }
        kept.info.build_ms = Some(started.elapsed().as_millis() as u64);
        kept.packages = kept.info.packages.clone();
        // A store that fails now leaves the record right here at least (other nodes read
        // it as building until it is an hour old).
        let put = match store.put(tenant.id(), kept.clone()).await {
            Ok(old) => Ok(old),
            Err(e) => {
                tracing::warn!(error = %e, template = %kept.info.name, "template record not shared");
                store.put_here(tenant.id(), kept)
            }
        };
        match put {
            Ok(Some(old)) => self.forget_layer_later(old),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "template record not written"),
        }
    }

    /// The build itself: packages resolved, admission, the worker's job. Its image and the
    /// packages pinned, or where it ended.
    async fn build_in_worker(
        &self,
        tenant: &Arc<Tenant>,
        record: AuditRecord,
        program: BuildProgram,
        packages: Vec<String>,
        starts_with: u64,
    ) -> Result<(Built, Vec<String>), BuildEnd> {
        let mut record = record;
        let env = self
            .packages(packages, &mut record)
            .await
            .map_err(|e| BuildEnd::Other("packages", e.to_string()))?;
        let pins: Vec<String> = env
            .pins
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect();
        let need = MemoryNeed {
            reserve: reserve_for(&program.limits),
            starts_with,
            counted: true,
        };
        self.make_room(need.reserve + need.starts_with, false).await;
        let ticket = self
            .admit_run(tenant, need)
            .await
            .map_err(|e| BuildEnd::Other("build", e.to_string()))?;
        let job = Job::Build {
            program: Box::new(program),
            packages: PackageRef::of(&env),
        };
        let reply = self
            .workers()
            .map_err(|e| BuildEnd::Other("build", e.to_string()))?
            .call(job, Sinks::default())
            .await;
        drop((ticket, env));
        match reply.map_err(|f| BuildEnd::Other("build", failure(f, "").to_string()))? {
            Reply::Built(built) => match *built {
                Ok(built) => Ok((built, pins)),
                Err(BuildError::Step {
                    step, reason, log, ..
                }) => Err(BuildEnd::Step { step, reason, log }),
                Err(e) => Err(BuildEnd::Other("build", e.to_string())),
            },
            _ => Err(BuildEnd::Other("build", out_of_turn().to_string())),
        }
    }

    /// Writes `built`'s image as `kept`'s layer, within the tenant's `template_bytes`.
    /// Returns its bytes and the memory it starts with.
    async fn keep_layer(
        &self,
        store: &UserTemplates,
        tenant: &str,
        kept: &Kept,
        built: Built,
    ) -> Result<(u64, u64), String> {
        let host = self.host().map_err(|e| e.to_string())?;
        let binding = host.binding(kept.info.base).map_err(|e| e.to_string())?;
        let memory_bytes = built.image.memory_bytes;
        let bytes = encode_now(*built.image, binding, None, 0, None)
            .await
            .map_err(|e| e.to_string())?;
        let size = bytes.len() as u64;
        let quota = store.limits.bytes;
        let (_, used) = store.usage(tenant, &kept.info.name);
        if used.saturating_add(size) > quota {
            return Err(format!(
                "the template takes {size} bytes and the tenant's other templates {used}: past its \
                 --template-bytes limit of {quota}; delete templates (DELETE /v1/templates/{{name}})"
            ));
        }
        let path = store.layer_path(&kept.info.id);
        tokio::task::spawn_blocking(move || {
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&tmp, &bytes).and_then(|()| std::fs::rename(&tmp, &path))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("writing the layer: {e}"))?;
        store
            .publish_layer(&kept.info.id)
            .await
            .map_err(|e| e.to_string())?;
        Ok((size, memory_bytes))
    }

    /// The packages of a run or session from `chosen` with `extra` of its own: the
    /// template's environment, kept once resolved, when it adds none; else resolved (the
    /// template's specifiers and `extra`) like any run's.
    pub async fn template_packages(
        &self,
        chosen: &Chosen,
        extra: Vec<String>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<crate::packages::PackageEnv>> {
        if extra.is_empty()
            && let (Some(layer), Some(store)) = (&chosen.layer, self.templates.get())
        {
            if let Some(env) = store.env(&layer.id) {
                record.packages = env.pins.clone();
                return Ok(env);
            }
            let env = self.packages(chosen.packages.clone(), record).await?;
            store.keep_env(&layer.id, env.clone());
            return Ok(env);
        }
        let mut all = chosen.packages.clone();
        all.extend(extra);
        self.packages(all, record).await
    }

    /// Removes `old`'s layer after a grace, unless a record still uses its id then.
    pub fn forget_layer_later(self: &Arc<Self>, old: Kept) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(OLD_LAYER_GRACE).await;
            let Ok(store) = this.user_templates() else {
                return;
            };
            if !store.layer_in_use(&old.info.id) {
                store.forget_env(&old.info.id);
                let _ = std::fs::remove_file(store.layer_path(&old.info.id));
                store.forget_shared_layer(&old.info.id).await;
            }
        });
    }
}

/// Where a build ended short of a layer.
enum BuildEnd {
    /// A step failed.
    Step {
        step: String,
        reason: String,
        log: Vec<crate::vivarium::StepLog>,
    },
    /// Something around the steps: (the step it is named by, why).
    Other(&'static str, String),
}

fn fail(kept: &mut Kept, step: &str, reason: String) {
    kept.info.status = TemplateStatus::Failed;
    kept.info.error = Some(BuildFailure {
        step: step.to_string(),
        reason,
    });
}
