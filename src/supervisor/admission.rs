//! Admission control: at most `max_concurrency` guest runs at once (plus as many again for
//! tenants with nothing running: [`FairSlots`]), at most `queue_depth` requests waiting for
//! one (each for at most `queue_timeout`), then 429 with Retry-After. The queue is one per
//! tenant, served fairly; each tenant's runs in flight and waiting are its `runs` quota, and
//! what its sandboxes are admitted for is its share of the memory budget (`memory_bytes`).
//!
//! Memory is admitted against what sandboxes use, not their caps: the host's budget
//! ([`crate::budget`]) is charged with every sandbox's linear memory as it grows (by the store
//! limiter), its tmpfs bytes as they are written (by the disk shadows), and a small reserve
//! for its host-side buffers, held from here for as long as it lives. A sandbox is admitted
//! only when its starting memory fits beside everything charged; past that it waits in the
//! queue, then gets 429. Growth past the budget later is refused where it happens (the
//! guest's `MemoryError` or `ENOSPC`), so the sum never passes the budget, whatever the load.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tracing::Instrument as _;

use super::error::SupervisorError;
use super::fair::{FairSlots, NoSlot, Slot};
use super::metrics::{Metrics, Rejection};
use super::tenants::{Held, Quota, Tenant};
use crate::budget::{Charge, HostBudget};

/// What admission holds for each sandbox and session besides what the budget is charged
/// as it runs: the store, page tables, output buffers up to their cap are counted on top.
pub const RESERVE_BYTES: u64 = 4 << 20;

pub struct Admission {
    slots: Arc<FairSlots>,
    max_concurrency: usize,
    budget: Arc<HostBudget>,
    closed: std::sync::atomic::AtomicBool,
    queue_depth: usize,
    queue_timeout: Duration,
    metrics: Arc<Metrics>,
}

/// The right to run guest code now; dropping it frees the slot, the memory reservation and
/// the tenant's count of runs.
pub struct Ticket {
    slot: Arc<SlotCell>,
    _memory: Option<MemoryReservation>,
    _run: Held,
}

impl Ticket {
    /// Its execution slot, which a code-mode run gives back while it waits on its caller
    /// (its memory and its place in the tenant's `runs` stay held).
    pub fn slot(&self) -> Arc<SlotCell> {
        self.slot.clone()
    }
}

/// A ticket's execution slot: held, or parked while its run waits on its caller.
pub struct SlotCell {
    held: std::sync::Mutex<Option<Slot>>,
    parked: std::sync::Mutex<Option<super::fair::Parked>>,
}

impl crate::worker::Parking for SlotCell {
    fn park(&self) {
        if let Some(slot) = crate::sync::lock(&self.held).take() {
            *crate::sync::lock(&self.parked) = Some(slot.park());
        }
    }

    fn unpark(self: Arc<Self>) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            let parked = crate::sync::lock(&self.parked).take();
            if let Some(p) = parked {
                // Queued like any run of the tenant's; a server that closes admission lets
                // the program finish its round without one (it is cancelled at shutdown).
                let far = Instant::now() + std::time::Duration::from_secs(24 * 3600);
                if let Ok(slot) = p.unpark(far).await {
                    *crate::sync::lock(&self.held) = Some(slot);
                }
            }
        })
    }
}

/// A sandbox's or session's reserve in the memory budget, and its tenant's share of the
/// budget, held as long as it lives.
pub struct MemoryReservation {
    _charge: Charge,
    _share: Held,
}

/// What a sandbox about to start asks of the budget.
#[derive(Debug, Clone, Copy)]
pub struct MemoryNeed {
    /// Held for its life (host-side buffers).
    pub reserve: u64,
    /// Must be free besides, when it is admitted: the memory it starts with, which its
    /// store limiter will charge.
    pub starts_with: u64,
    /// Whether it counts against its tenant's share of the budget (a pre-execution check
    /// does not: a moment of the host's own before the caller's code, it must not make the
    /// tenant's sessions give way).
    pub counted: bool,
}

impl MemoryNeed {
    /// What it asks of the budget.
    fn room(&self) -> u64 {
        self.reserve.saturating_add(self.starts_with)
    }

    /// What it counts against its tenant's share of the budget.
    fn share(&self) -> u64 {
        if self.counted { self.room() } else { 0 }
    }
}

impl Admission {
    /// `max_concurrency` slots shared fairly between tenants, plus as many again for tenants
    /// with nothing running ([`FairSlots`]).
    pub fn new(
        max_concurrency: usize,
        queue_depth: usize,
        queue_timeout: Duration,
        budget: Arc<HostBudget>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Admission {
            slots: FairSlots::new(max_concurrency, max_concurrency, queue_depth),
            max_concurrency,
            budget,
            closed: Default::default(),
            queue_depth,
            queue_timeout,
            metrics,
        }
    }

    /// Requests waiting for a slot right now.
    pub fn queue_depth(&self) -> usize {
        self.slots.queued()
    }

    /// Guest runs in progress right now.
    pub fn running(&self) -> usize {
        self.slots.running()
    }

    /// The budget every sandbox is charged to.
    pub fn budget(&self) -> &Arc<HostBudget> {
        &self.budget
    }

    /// Waits for one of `tenant`'s slots (and, with `memory`, room in the budget and in its
    /// share of it), or refuses. The run counts against the tenant's `runs` quota from
    /// here, waiting or running.
    pub async fn admit(
        &self,
        tenant: &Arc<Tenant>,
        memory: Option<MemoryNeed>,
    ) -> Result<Ticket, SupervisorError> {
        let span = tracing::info_span!("admission", vivarium.tenant = tenant.id());
        self.admit_now(tenant, memory).instrument(span).await
    }

    async fn admit_now(
        &self,
        tenant: &Arc<Tenant>,
        memory: Option<MemoryNeed>,
    ) -> Result<Ticket, SupervisorError> {
        if self.is_closed() {
            return Err(self.reject(Rejection::ShuttingDown));
        }
        let run = tenant.take(Quota::Runs, 1).map_err(|q| self.refuse(q))?;
        let deadline = Instant::now() + self.queue_timeout;
        let slot = match self.slots.acquire(tenant.id(), deadline).await {
            Ok(slot) => slot,
            Err(NoSlot::QueueFull) => return Err(self.reject(Rejection::QueueFull)),
            Err(NoSlot::Timeout) => return Err(self.reject(Rejection::QueueTimeout)),
            Err(NoSlot::Closed) => return Err(self.reject(Rejection::ShuttingDown)),
        };
        let memory = match memory {
            Some(need) => Some(self.reserve_memory_until(tenant, need, deadline).await?),
            None => None,
        };
        Ok(Ticket {
            slot: Arc::new(SlotCell {
                held: std::sync::Mutex::new(Some(slot)),
                parked: std::sync::Mutex::new(None),
            }),
            _memory: memory,
            _run: run,
        })
    }

    /// Counts a tenant's quota refusal and makes its error.
    pub fn refuse(&self, q: super::tenants::QuotaExceeded) -> SupervisorError {
        self.metrics.rejected(Rejection::Quota);
        q.into()
    }

    async fn reserve_memory_until(
        &self,
        tenant: &Arc<Tenant>,
        need: MemoryNeed,
        deadline: Instant,
    ) -> Result<MemoryReservation, SupervisorError> {
        let share = tenant
            .take(Quota::MemoryBytes, need.share())
            .map_err(|q| self.refuse(q))?;
        let charged = self
            .budget
            .charge_with_room_until(need.room(), need.reserve, deadline.into(), || {
                self.is_closed()
            })
            .await;
        match charged {
            _ if self.is_closed() => Err(self.reject(Rejection::ShuttingDown)),
            Some(c) => Ok(MemoryReservation {
                _charge: c,
                _share: share,
            }),
            None => Err(self.reject(Rejection::MemoryBudget)),
        }
    }

    /// Reserves memory for a session of `tenant` now, or refuses (sessions do not queue).
    pub fn reserve_memory(
        &self,
        tenant: &Arc<Tenant>,
        need: MemoryNeed,
    ) -> Result<MemoryReservation, SupervisorError> {
        if self.is_closed() {
            return Err(self.reject(Rejection::ShuttingDown));
        }
        let share = tenant
            .take(Quota::MemoryBytes, need.share())
            .map_err(|q| self.refuse(q))?;
        self.budget
            .charge_with_room(need.room(), need.reserve)
            .map(|c| MemoryReservation {
                _charge: c,
                _share: share,
            })
            .ok_or_else(|| self.reject(Rejection::MemoryBudget))
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Counts a refusal and makes its error.
    pub fn reject(&self, why: Rejection) -> SupervisorError {
        self.metrics.rejected(why);
        let retry_after_secs = 1;
        match why {
            Rejection::QueueFull => SupervisorError::Overloaded {
                message: format!(
                    "all {} execution slots are busy and the wait queue ({}) is full",
                    self.max_concurrency, self.queue_depth
                ),
                retry_after_secs,
            },
            Rejection::QueueTimeout => SupervisorError::Overloaded {
                message: format!(
                    "no execution slot became free within {} ms",
                    self.queue_timeout.as_millis()
                ),
                retry_after_secs,
            },
            Rejection::MemoryBudget => SupervisorError::Overloaded {
                message: format!(
                    "the server's memory budget ({} MiB) is taken by what running sandboxes \
                     and resident sessions hold ({} MiB charged)",
                    self.budget.limit() >> 20,
                    self.budget.charged() >> 20
                ),
                retry_after_secs,
            },
            Rejection::TooManySessions => SupervisorError::TooManySessions {
                message:
                    "no resident place is free and no idle session could hibernate to make one (each is busy, or its tenant's hibernated or snapshot quota is full, or --max-hibernated-sessions are asleep); retry later"
                        .into(),
                retry_after_secs: 5,
            },
            Rejection::ShuttingDown => SupervisorError::ShuttingDown,
            // Counted by the HTTP layer's `auth`, which refuses the request itself: admission
            // never sees a caller without a key.
            Rejection::Unauthorized => {
                SupervisorError::Internal("an unauthenticated request reached admission".into())
            }
            // Made by `refuse`, which knows the quota; this is only its count's label.
            Rejection::Quota => SupervisorError::Overloaded {
                message: "a quota of the caller's tenant is reached".into(),
                retry_after_secs,
            },
        }
    }

    /// Refuses every later request and wakes every waiting one (shutdown).
    pub fn close(&self) {
        self.slots.close();
        self.closed.store(true, Ordering::Release);
        self.budget.wake();
    }
}
