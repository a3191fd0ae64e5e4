//! Running guest code off the async executor (the runner's half of it): every run goes to a guest thread (pooled, with
//! the big native stack guests need: `crate::sandbox::guest_threads`), and the handler awaits
//! its result. The cancel flags of runs in progress are kept here, so shutdown can end them and a
//! client that hangs up ends its own run.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::server::error::ApiError;
use crate::vivarium::ExecError;

#[derive(Default)]
pub struct GuestThreads {
    running: Arc<AtomicUsize>,
    next_id: AtomicU64,
    cancels: Mutex<HashMap<u64, Arc<AtomicBool>>>,
    /// Set once shutdown's grace period is over: new runs start cancelled.
    cancel_all: AtomicBool,
}

/// Keeps a run's cancel flag registered; dropping it (the handler finished, or the client
/// went away and the handler future was dropped) sets the flag and unregisters it. Setting
/// the flag after the run ended is harmless.
pub struct CancelGuard<'a> {
    threads: &'a GuestThreads,
    id: u64,
    flag: Arc<AtomicBool>,
    cancel_on_drop: bool,
}

impl CancelGuard<'_> {
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if self.cancel_on_drop {
            self.flag.store(true, Ordering::Relaxed);
        }
        lock(&self.threads.cancels).remove(&self.id);
    }
}

impl GuestThreads {
    /// Guest runs in progress now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Registers a fresh cancel flag for a run about to start; the flag is set when the
    /// guard drops, so a run whose client went away stops.
    pub fn register(&self) -> CancelGuard<'_> {
        self.register_flag(Arc::default(), true)
    }

    /// Registers a flag someone else owns (a session's), for shutdown only: dropping the
    /// guard leaves the flag alone.
    pub fn register_uncancelled(&self, flag: Arc<AtomicBool>) -> CancelGuard<'_> {
        self.register_flag(flag, false)
    }

    fn register_flag(&self, flag: Arc<AtomicBool>, cancel_on_drop: bool) -> CancelGuard<'_> {
        if self.cancel_all.load(Ordering::Relaxed) {
            flag.store(true, Ordering::Relaxed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.cancels).insert(id, flag.clone());
        CancelGuard {
            threads: self,
            id,
            flag,
            cancel_on_drop,
        }
    }

    /// Cancels every registered run, and every later one.
    pub fn cancel_all(&self) {
        self.cancel_all.store(true, Ordering::Relaxed);
        for flag in lock(&self.cancels).values() {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Waits until no guest thread is left, or `limit` passes; true when none is left.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while self.running() > 0 {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Runs `f` on a (pooled) guest thread and waits for it without blocking the executor.
    /// A panic in `f` becomes a 500 (its unwinding already dropped, and so removed, any
    /// sandbox it held). The thread runs to its end even if the awaiting future is dropped.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let running = self.running.clone();
        running.fetch_add(1, Ordering::AcqRel);
        struct Done(Arc<AtomicUsize>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let done = Done(running);
        // A sandbox the job ran is torn down after the result is sent.
        let spawned = crate::sandbox::guest_threads::spawn_deferring(move || {
            let _done = done;
            let result = std::panic::catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(result);
        });
        if let Err(e) = spawned {
            // The closure (and with it `done`) was dropped, so the count is already right.
            return Err(ApiError::Internal(format!(
                "could not start a guest thread: {e}"
            )));
        }
        match rx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(panic)) => {
                let msg = panic_message(&*panic);
                tracing::error!(panic = %msg, "guest thread panicked");
                Err(ApiError::from_exec(ExecError::Panicked(msg)))
            }
            Err(_) => Err(ApiError::Internal("the guest thread vanished".into())),
        }
    }
}

use crate::sandbox::guest_threads::panic_message;
use crate::sync::lock;
