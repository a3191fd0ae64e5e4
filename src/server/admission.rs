//! Admission control: at most `max_concurrency` guest runs at once, at most `queue_depth`
//! requests waiting for one (each for at most `queue_timeout`), then 429 with Retry-After.
//!
//! Memory is admitted too: every live sandbox and session holds a reservation of its memory
//! cap (in MiB) against the budget for as long as it lives, so the sum of the caps of
//! everything alive never passes the budget, whatever the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;
use super::metrics::{Metrics, Rejection};

const MIB: u64 = 1 << 20;

pub struct Admission {
    slots: Arc<Semaphore>,
    max_concurrency: usize,
    memory: Arc<Semaphore>,
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

/// A share of the memory budget, held as long as a sandbox or session lives.
pub struct MemoryReservation {
    _permit: OwnedSemaphorePermit,
}

fn mib(bytes: u64) -> u32 {
    bytes.div_ceil(MIB).min(u32::MAX as u64) as u32
}

impl Admission {
    pub fn new(
        max_concurrency: usize,
        queue_depth: usize,
        queue_timeout: Duration,
        memory_budget_bytes: u64,
        metrics: Arc<Metrics>,
    ) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_concurrency)),
            max_concurrency,
            memory: Arc::new(Semaphore::new(mib(memory_budget_bytes) as usize)),
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

    /// Bytes of the memory budget reserved right now.
    pub fn memory_reserved_mib(&self, budget_bytes: u64) -> u64 {
        (mib(budget_bytes) as u64).saturating_sub(self.memory.available_permits() as u64)
    }

    /// Waits for a slot (and, with `memory_bytes`, a memory reservation), or refuses.
    pub async fn admit(&self, memory_bytes: Option<u64>) -> Result<Ticket, ApiError> {
        let deadline = Instant::now() + self.queue_timeout;
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => {
                return Err(self.reject(Rejection::ShuttingDown));
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => self.wait_for_slot(deadline).await?,
        };
        let memory = match memory_bytes {
            Some(b) => Some(self.reserve_memory_until(b, deadline).await?),
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
        bytes: u64,
        deadline: Instant,
    ) -> Result<MemoryReservation, ApiError> {
        let n = mib(bytes);
        let acquire = self.memory.clone().acquire_many_owned(n);
        match tokio::time::timeout_at(deadline.into(), acquire).await {
            Ok(Ok(p)) => Ok(MemoryReservation { _permit: p }),
            Ok(Err(_)) => Err(self.reject(Rejection::ShuttingDown)),
            Err(_) => Err(self.reject(Rejection::MemoryBudget)),
        }
    }

    /// Reserves memory for a session now, or refuses (sessions do not queue).
    pub fn reserve_memory(&self, bytes: u64) -> Result<MemoryReservation, ApiError> {
        match self.memory.clone().try_acquire_many_owned(mib(bytes)) {
            Ok(p) => Ok(MemoryReservation { _permit: p }),
            Err(tokio::sync::TryAcquireError::Closed) => Err(self.reject(Rejection::ShuttingDown)),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                Err(self.reject(Rejection::MemoryBudget))
            }
        }
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
                message: "the server's memory budget is taken by running sandboxes and sessions"
                    .into(),
                retry_after_secs,
            },
            Rejection::TooManySessions => ApiError::TooManySessions {
                message:
                    "the server holds as many live sessions as it may; close one or retry later"
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
        self.memory.close();
    }
}
