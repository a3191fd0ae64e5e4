//! The threads guests run on: big native stacks ([`GUEST_THREAD_STACK_BYTES`]), kept in a
//! small pool so an execution does not pay for a new thread (a 16 MiB stack mapping, its
//! first page faults, and the kernel's clone) every time.
//!
//! A finished worker waits for the next job for [`IDLE_KEEP`] and then exits; at most
//! [`max_idle`] wait at once, so a burst of concurrent runs leaves no crowd of threads behind.
//! A job that panics does not take its worker down (the job's own `catch_unwind` reports the
//! panic; the pool's only keeps the worker alive).
//!
//! A job that runs long is demoted ([`demote_current`]: its thread's nice value goes up, so
//! the kernel gives short runs the cores first); as a thread cannot take back a priority it
//! gave up without privilege, a demoted thread exits after its job instead of waiting for
//! the next.
//!
//! A job started with [`spawn_deferring`] may hand values to [`defer_drop`]; they are dropped
//! on the same thread after the job returned, that is after it sent its result. The server
//! uses this to tear a sandbox down (instance reset, directory removal) after the response
//! has left, off the request's latency.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use crate::engine::GUEST_THREAD_STACK_BYTES;
use crate::sync::lock;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle worker waits for another job before it exits.
pub const IDLE_KEEP: Duration = Duration::from_secs(30);

/// Idle workers kept at most: two per core, at least four.
pub fn max_idle() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get() * 2)
        .unwrap_or(4)
        .max(4)
}

struct Pool {
    /// Workers waiting for a job, by id (a worker that times out removes itself).
    idle: Mutex<Vec<(u64, Sender<Job>)>>,
    next_id: AtomicU64,
}

static POOL: LazyLock<Pool> = LazyLock::new(|| Pool {
    idle: Mutex::new(Vec::new()),
    next_id: AtomicU64::new(0),
});

fn idle() -> std::sync::MutexGuard<'static, Vec<(u64, Sender<Job>)>> {
    lock(&POOL.idle)
}

/// Runs `job` on a guest thread: an idle one, else a new one. Returns at once; `Err` only
/// when no thread could be started (the job is dropped unrun).
pub fn spawn(job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let mut job: Job = Box::new(job);
    loop {
        let Some((_, worker)) = idle().pop() else {
            break;
        };
        match worker.send(job) {
            Ok(()) => return Ok(()),
            // That worker exited after all: try the next.
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    let id = POOL.next_id.fetch_add(1, Ordering::Relaxed);
    std::thread::Builder::new()
        .name("vivarium-guest".into())
        .stack_size(GUEST_THREAD_STACK_BYTES)
        .spawn(move || worker(id, job))
        .map(|_| ())
}

fn worker(id: u64, first: Job) {
    let (tx, rx) = mpsc::channel::<Job>();
    let mut job = first;
    loop {
        // The job catches its own panics to report them; this only keeps the worker alive.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
        if DEMOTED.get() {
            return;
        }
        {
            let mut idle = idle();
            if idle.len() >= max_idle() {
                return;
            }
            idle.push((id, tx.clone()));
        }
        job = match rx.recv_timeout(IDLE_KEEP) {
            Ok(next) => next,
            Err(RecvTimeoutError::Timeout) => {
                let mut idle = idle();
                match idle.iter().position(|(i, _)| *i == id) {
                    Some(at) => {
                        idle.swap_remove(at);
                        return;
                    }
                    // Someone took this worker just now: its job is on the way.
                    None => {
                        drop(idle);
                        match rx.recv() {
                            Ok(next) => next,
                            Err(_) => return,
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
    }
}

/// The nice value of a demoted guest thread: a tenth of a normal thread's share of a core
/// when both want it (CFS weights 110 and 1024).
const DEMOTED_NICE: libc::c_int = 10;

thread_local! {
    /// Whether this thread was demoted ([`demote_current`]).
    static DEMOTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lowers the current guest thread's priority for the rest of its life (a long run: see
/// `hostcalls::state::LONG_CALL`); once per thread. It then ends after its job.
pub fn demote_current() {
    if DEMOTED.replace(true) {
        return;
    }
    // SAFETY: gettid has no preconditions; setpriority on one's own thread id only changes
    // that thread's nice value (lowering a priority needs no privilege).
    let failed = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, DEMOTED_NICE) != 0
    };
    if failed {
        tracing::debug!("a long run's guest thread could not be demoted");
    }
}

thread_local! {
    /// `Some` while a [`spawn_deferring`] job runs on this thread.
    static DEFERRED: RefCell<Option<Vec<Box<dyn Send>>>> = const { RefCell::new(None) };
}

/// Like `spawn`, but values the job passes to [`defer_drop`] are dropped after it returns.
pub fn spawn_deferring(job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    spawn(move || {
        DEFERRED.set(Some(Vec::new()));
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(job));
        drop(DEFERRED.take());
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    })
}

/// Drops `value` after the current [`spawn_deferring`] job returns; right now anywhere else.
pub fn defer_drop<T: Send + 'static>(value: T) {
    let now = DEFERRED.with_borrow_mut(|deferred| match deferred {
        Some(list) => {
            list.push(Box::new(value));
            None
        }
        None => Some(value),
    });
    drop(now);
}

/// Drops now what the current [`spawn_deferring`] job has deferred so far (once what had to
/// leave first has left); later [`defer_drop`]s are deferred again.
pub fn drop_deferred() {
    let list = DEFERRED.with_borrow_mut(|deferred| deferred.as_mut().map(std::mem::take));
    drop(list);
}

/// The text of a caught panic (`String` and `&str` payloads), for logs and error bodies.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// Runs `f` on a guest thread and waits for it. A panic in `f` comes back as `Err` (its
/// unwinding has already dropped, and so removed, any sandbox it held).
pub fn run_blocking<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> std::thread::Result<R> {
    let (tx, rx) = mpsc::sync_channel(1);
    let started = spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(AssertUnwindSafe(f)));
    });
    if let Err(e) = started {
        return Err(Box::new(format!("could not start a guest thread: {e}")));
    }
    rx.recv()
        .unwrap_or_else(|_| Err(Box::new("the guest thread vanished".to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_comes_back_and_the_next_job_still_runs_on_a_big_stack() {
        assert!(run_blocking(|| panic!("boom")).is_err());
        let big = run_blocking(|| {
            let buf = [1u8; 4 << 20];
            std::hint::black_box(&buf)[0]
        })
        .unwrap();
        assert_eq!(big, 1);
    }

    #[test]
    fn deferred_values_drop_after_the_job_and_inline_elsewhere() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let dropped = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let d = dropped.clone();
        spawn_deferring(move || {
            defer_drop(Flag(d.clone()));
            // Not yet: the job is still running.
            tx.send(d.load(Ordering::SeqCst)).unwrap();
        })
        .unwrap();
        assert!(!rx.recv().unwrap(), "dropped before the job returned");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "never dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
        let inline = Arc::new(AtomicBool::new(false));
        defer_drop(Flag(inline.clone()));
        assert!(
            inline.load(Ordering::SeqCst),
            "outside a deferring job, drop at once"
        );
    }
}
