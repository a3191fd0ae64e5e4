//! The host's memory budget, shared by every sandbox of a process: what each one actually
//! holds is charged here as it grows, and growth past the budget is refused where it happens.
//!
//! A sandbox's own caps (`memory_bytes`, `disk_bytes`) bound what it *can* take; this bounds
//! what all of them *do* take together. The store limiter charges linear memory as
//! `memory.grow` asks for it (a refusal is the guest's `MemoryError`), the disk shadows
//! charge what a tmpfs working directory holds (a refusal is `ENOSPC`), and admission
//! charges a small reserve per sandbox for its host-side buffers. Each [`Charge`] gives its
//! bytes back when it is dropped, with the sandbox that held it.
//!
//! With worker processes the budget is still one: its counter is a word in a shared memory
//! page ([`HostBudget::shared`] in the supervisor, [`HostBudget::attach`] in each worker), so
//! admission in the supervisor and growth in every worker charge the same bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// The bytes every sandbox of the process may hold together, and what they hold now.
#[derive(Debug)]
pub struct HostBudget {
    limit: u64,
    charged: Counter,
    freed: Notify,
}

/// Where the charged bytes are counted.
#[derive(Debug)]
enum Counter {
    /// In this process.
    Own(AtomicU64),
    /// In a page shared with the other processes of the server (a memfd, mapped shared).
    Shared(SharedWord),
}

/// One `AtomicU64` at the start of a shared mapping, unmapped on drop.
#[derive(Debug)]
struct SharedWord {
    ptr: std::ptr::NonNull<AtomicU64>,
}

// SAFETY: the word is only ever used through atomic operations, from any thread.
unsafe impl Send for SharedWord {}
// SAFETY: as above.
unsafe impl Sync for SharedWord {}

const SHARED_BYTES: usize = 4096;

impl SharedWord {
    /// Maps the first page of `fd` (a memfd of at least one page) shared.
    fn map(fd: &std::os::fd::OwnedFd) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of a descriptor we own; the kernel picks the address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SHARED_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast::<AtomicU64>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(SharedWord { ptr })
    }

    fn get(&self) -> &AtomicU64 {
        // SAFETY: the mapping is page-aligned, at least 8 bytes, and lives as long as self;
        // every access to it (here and in the other processes) is atomic.
        unsafe { self.ptr.as_ref() }
    }
}

impl Drop for SharedWord {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made; nothing refers to it after this.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), SHARED_BYTES) };
    }
}

impl Counter {
    fn get(&self) -> &AtomicU64 {
        match self {
            Counter::Own(a) => a,
            Counter::Shared(w) => w.get(),
        }
    }
}

impl HostBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(HostBudget {
            limit,
            charged: Counter::Own(AtomicU64::new(0)),
            freed: Notify::new(),
        })
    }

    /// A budget of `limit` bytes whose counter other processes can share: the descriptor to
    /// hand them ([`HostBudget::attach`]).
    pub fn shared(limit: u64) -> std::io::Result<(Arc<Self>, std::os::fd::OwnedFd)> {
        let fd = rustix::fs::memfd_create("vivarium-budget", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, SHARED_BYTES as u64)?;
        let word = SharedWord::map(&fd)?;
        Ok((
            Arc::new(HostBudget {
                limit,
                charged: Counter::Shared(word),
                freed: Notify::new(),
            }),
            fd,
        ))
    }

    /// The budget of `limit` bytes counted in `fd` (from [`HostBudget::shared`]). Another
    /// process's frees wake no waiter here: waiters also look again every 50 ms.
    pub fn attach(limit: u64, fd: &std::os::fd::OwnedFd) -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(HostBudget {
            limit,
            charged: Counter::Shared(SharedWord::map(fd)?),
            freed: Notify::new(),
        }))
    }

    /// Whether other processes charge it too.
    fn is_shared(&self) -> bool {
        matches!(self.charged, Counter::Shared(_))
    }

    /// No budget beyond each sandbox's own caps (the CLI, tests, benches).
    pub fn unlimited() -> Arc<Self> {
        Self::new(u64::MAX)
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes charged right now.
    pub fn charged(&self) -> u64 {
        self.charged.get().load(Ordering::Acquire)
    }

    /// Bytes that may still be charged.
    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.charged())
    }

    /// Takes `bytes` if they fit, all or nothing.
    fn take(&self, bytes: u64) -> bool {
        self.take_if_room(bytes, bytes)
    }

    /// Takes `bytes` if `room` bytes (at least `bytes`) are free.
    fn take_if_room(&self, room: u64, bytes: u64) -> bool {
        self.charged
            .get()
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                c.checked_add(room.max(bytes))
                    .filter(|&n| n <= self.limit)
                    .map(|_| c + bytes)
            })
            .is_ok()
    }

    fn give(&self, bytes: u64) {
        if bytes > 0 {
            self.charged.get().fetch_sub(bytes, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }

    /// A charge of `bytes`, or `None` when they do not fit.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Option<Charge> {
        self.take(bytes).then(|| Charge {
            budget: self.clone(),
            bytes,
        })
    }

    /// Wakes every waiter, to look at its `give_up` (shutdown).
    pub fn wake(&self) {
        self.freed.notify_waiters();
    }

    /// A charge of nothing, to grow later.
    pub fn empty(self: &Arc<Self>) -> Charge {
        Charge {
            budget: self.clone(),
            bytes: 0,
        }
    }

    /// A charge of `bytes` if `room` bytes are free now: what a sandbox about to start
    /// holds for its host-side buffers, admitted only when its memory will fit beside it
    /// (the limiter charges that memory itself as the instance makes it).
    pub fn charge_with_room(self: &Arc<Self>, room: u64, bytes: u64) -> Option<Charge> {
        self.take_if_room(room, bytes).then(|| Charge {
            budget: self.clone(),
            bytes,
        })
    }

    /// [`HostBudget::charge_with_room`], waiting until `room` is free, or `until` passes or
    /// `give_up()` says so after a [`HostBudget::wake`] (`None` then).
    pub async fn charge_with_room_until(
        self: &Arc<Self>,
        room: u64,
        bytes: u64,
        until: tokio::time::Instant,
        give_up: impl Fn() -> bool,
    ) -> Option<Charge> {
        loop {
            if give_up() {
                return None;
            }
            // Registered before the attempt, so a release in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(c) = self.charge_with_room(room, bytes) {
                return Some(c);
            }
            // Frees in another process do not notify here: look again now and then.
            let wait = if self.is_shared() {
                until.min(tokio::time::Instant::now() + std::time::Duration::from_millis(50))
            } else {
                until
            };
            if tokio::time::timeout_at(wait, freed).await.is_err()
                && tokio::time::Instant::now() >= until
            {
                return None;
            }
        }
    }
}

/// Bytes one sandbox holds against a [`HostBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<HostBudget>,
    bytes: u64,
}

impl Charge {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `by` more, if they fit.
    pub fn grow(&mut self, by: u64) -> bool {
        let fits = self.budget.take(by);
        if fits {
            self.bytes += by;
        }
        fits
    }

    /// A charge of nothing on the same budget, to grow later (a sandbox's other holdings).
    pub fn sibling(&self) -> Charge {
        self.budget.empty()
    }

    /// Holds exactly `to`: grows (if it fits) or gives the difference back.
    pub fn set(&mut self, to: u64) -> bool {
        if to >= self.bytes {
            self.grow(to - self.bytes)
        } else {
            self.budget.give(self.bytes - to);
            self.bytes = to;
            true
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_or_are_refused_and_come_back_when_dropped() {
        let b = HostBudget::new(100);
        let mut a = b.charge(60).unwrap();
        assert!(b.charge(41).is_none());
        assert!(!a.grow(41));
        assert!(a.grow(40));
        assert_eq!(b.available(), 0);
        assert!(a.set(10));
        assert_eq!(b.charged(), 10);
        drop(a);
        assert_eq!(b.charged(), 0);
        assert!(b.charge(100).is_some());
    }

    #[tokio::test]
    async fn a_waiter_gets_its_charge_when_another_is_dropped() {
        let b = HostBudget::new(10);
        let held = b.charge(10).unwrap();
        let b2 = b.clone();
        let waiter = tokio::spawn(async move {
            let until = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
            b2.charge_with_room_until(5, 5, until, || false)
                .await
                .map(|c| c.bytes())
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
        assert_eq!(waiter.await.unwrap(), Some(5));
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
        let _c = b.charge(10).unwrap();
        assert!(
            b.charge_with_room_until(1, 1, until, || false)
                .await
                .is_none()
        );
    }

    #[test]
    fn room_is_asked_for_but_only_the_charge_is_taken() {
        let b = HostBudget::new(100);
        let c = b.charge_with_room(80, 10).unwrap();
        assert_eq!(b.charged(), 10);
        assert!(b.charge_with_room(91, 1).is_none());
        assert!(b.charge_with_room(90, 1).is_some());
        drop(c);
    }
}
