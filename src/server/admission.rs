//! Admission control: at most `max_concurrency` guest runs at once, at most `queue_depth`
//! requests waiting for one (each for at most `queue_timeout`), then 429 with Retry-After.
//!
//! Memory is admitted against what sandboxes use, not their caps: the host's budget
//! ([`crate::budget`]) is charged with every sandbox's linear memory as it grows (by the store
//! limiter), its tmpfs bytes as they are written (by the disk shadows), and a small reserve
//! for its host-side buffers, held from here for as long as it lives. A sandbox is admitted
//! only when its starting memory fits beside everything charged; past that it waits in the
//! queue, then gets 429. Growth past the budget later is refused where it happens (the
//! guest's `MemoryError` or `ENOSPC`), so the sum never passes the budget, whatever the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;
use super::metrics::{Metrics, Rejection};
use crate::budget::{Charge, HostBudget};

/// What admission holds for each sandbox and session besides what the budget is charged
/// as it runs: the store, page tables, output buffers up to their cap are counted on top.
pub const RESERVE_BYTES: u64 = 4 << 20;

pub struct Admission {
    slots: Arc<Semaphore>,
    max_concurrency: usize,
    budget: Arc<HostBudget>,
    closed: std::sync::atomic::AtomicBool,
    queue_depth: usize,
    queue_timeout: Duration,
    waiting: AtomicUsize,
    metrics: Arc<Metrics>,
}

/// The right to run guest code now; dropping it frees the slot and the memory reservation.
pub struct Ticket {
    _slot: OwnedSemaphorePermit,
    _memory: Option<MemoryReservation>,
}

/// A sandbox's or session's reserve in the memory budget, held as long as it lives.
pub struct MemoryReservation {
    _charge: Charge,
}

/// What a sandbox about to start asks of the budget.
#[derive(Debug, Clone, Copy)]
pub struct MemoryNeed {
    /// Held for its life (host-side buffers).
    pub reserve: u64,
    /// Must be free besides, when it is admitted: the memory it starts with, which its
    /// store limiter will charge.
    pub starts_with: u64,
}

impl Admission {
    pub fn new(
        max_concurrency: usize,
        queue_depth: usize,
        queue_timeout: Duration,
        budget: Arc<HostBudget>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_concurrency)),
            max_concurrency,
            budget,
            closed: Default::default(),
            queue_depth,
            queue_timeout,
            waiting: AtomicUsize::new(0),
            metrics,
        }
    }

    /// Requests waiting for a slot right now.
    pub fn queue_depth(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Guest runs in progress right now.
    pub fn running(&self) -> usize {
        self.max_concurrency - self.slots.available_permits().min(self.max_concurrency)
    }

    /// The budget every sandbox is charged to.
    pub fn budget(&self) -> &Arc<HostBudget> {
        &self.budget
    }

    /// Waits for a slot (and, with `memory`, room in the budget), or refuses.
    pub async fn admit(&self, memory: Option<MemoryNeed>) -> Result<Ticket, ApiError> {
        let deadline = Instant::now() + self.queue_timeout;
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(self.reject(Rejection::ShuttingDown));
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => self.wait_for_slot(deadline).await?,
        };
        let memory = match memory {
            Some(need) => Some(self.reserve_memory_until(need, deadline).await?),
            None => None,
        };
        Ok(Ticket {
            _slot: slot,
            _memory: memory,
        })
    }

    async fn wait_for_slot(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, ApiError> {
        // Count ourselves in the queue, or refuse when it is full.
        let queued = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < self.queue_depth).then_some(w + 1)
            });
        if queued.is_err() {
            return Err(self.reject(Rejection::QueueFull));
        }
        struct Dequeue<'a>(&'a AtomicUsize);
        impl Drop for Dequeue<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _dequeue = Dequeue(&self.waiting);
        match tokio::time::timeout_at(deadline.into(), self.slots.clone().acquire_owned()).await {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(self.reject(Rejection::ShuttingDown)),
            Err(_) => Err(self.reject(Rejection::QueueTimeout)),
        }
    }

    async fn reserve_memory_until(
        &self,
        need: MemoryNeed,
        deadline: Instant,
    ) -> Result<MemoryReservation, ApiError> {
        let room = need.reserve.saturating_add(need.starts_with);
        let charged = self
            .budget
            .charge_with_room_until(room, need.reserve, deadline.into(), || self.is_closed())
            .await;
        match charged {
            _ if self.is_closed() => Err(self.reject(Rejection::ShuttingDown)),
            Some(c) => Ok(MemoryReservation { _charge: c }),
            None => Err(self.reject(Rejection::MemoryBudget)),
        }
    }

    /// Reserves memory for a session now, or refuses (sessions do not queue).
    pub fn reserve_memory(&self, need: MemoryNeed) -> Result<MemoryReservation, ApiError> {
        if self.is_closed() {
            return Err(self.reject(Rejection::ShuttingDown));
        }
        self.try_reserve_memory(need)
            .ok_or_else(|| self.reject(Rejection::MemoryBudget))
    }

    /// [`Admission::reserve_memory`] without counting a refusal (the caller may make room
    /// and try again).
    pub fn try_reserve_memory(&self, need: MemoryNeed) -> Option<MemoryReservation> {
        let room = need.reserve.saturating_add(need.starts_with);
        self.budget
            .charge_with_room(room, need.reserve)
            .map(|c| MemoryReservation { _charge: c })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Counts a refusal and makes its error.
    pub fn reject(&self, why: Rejection) -> ApiError {
        self.metrics.rejected(why);
        let retry_after_secs = 1;
        match why {
            Rejection::QueueFull => ApiError::Overloaded {
                message: format!(
                    "all {} execution slots are busy and the wait queue ({}) is full",
                    self.max_concurrency, self.queue_depth
                ),
                retry_after_secs,
            },
            Rejection::QueueTimeout => ApiError::Overloaded {
                message: format!(
                    "no execution slot became free within {} ms",
                    self.queue_timeout.as_millis()
                ),
                retry_after_secs,
            },
            Rejection::MemoryBudget => ApiError::Overloaded {
                message: format!(
                    "the server's memory budget ({} MiB) is taken by what running sandboxes \
                     and resident sessions hold ({} MiB charged)",
                    self.budget.limit() >> 20,
                    self.budget.charged() >> 20
                ),
                retry_after_secs,
            },
            Rejection::TooManySessions => ApiError::TooManySessions {
                message:
                    "every resident session is busy and no more may hibernate; close one or retry later"
                        .into(),
                retry_after_secs: 5,
            },
            Rejection::ShuttingDown => ApiError::ShuttingDown,
            Rejection::Unauthorized => ApiError::Unauthorized,
        }
    }

    /// Refuses every later request and wakes every waiting one (shutdown).
    pub fn close(&self) {
        self.slots.close();
        self.closed.store(true, Ordering::Release);
        self.budget.wake();
    }
}
