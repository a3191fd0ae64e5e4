//! The queue of `.pyc` compiles of new environments. Each compile is a sandbox the host runs
//! in its own process (see `Vivarium::packages_held`), outside admission, so they are bounded
//! here: at most [`max_compiling`] run at once, in the order they were queued, and at most
//! [`MAX_QUEUED`] wait; past that a set is left uncompiled (its modules compile on import,
//! as before) and offered again to the next request that gets it. When the server shuts
//! down, [`Compiles::close`] drops what waits, stops what runs through the compiles' cancel
//! flag and waits for the threads, so no compile outlives the scratch root it works in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// Compiles waiting for their turn, at most; more are not queued.
pub const MAX_QUEUED: usize = 16;

/// What a caller's package work holds while it is in flight, dropped when it ends: the
/// resolution, and the compile it started if it started one. Where a per-caller bound on
/// package work is kept (a tenant's count of resolutions and compiles in flight): the caller
/// takes its place before asking (`Vivarium::packages_held`) and hands the guard in here.
pub type PackageHold = Box<dyn Send + 'static>;

/// A compile to run: the host's own code, given by the layer that can run a sandbox.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Compiles running at once: half the cores, at least one (each is a CPU-bound sandbox
/// outside admission, so they must leave the runs room).
pub fn max_compiling() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// The queue; its threads start with the first compile and end when it is closed or dropped.
#[derive(Default)]
pub struct Compiles {
    /// The queue's open end, `None` before the first compile and after [`Compiles::close`].
    tx: Mutex<Option<SyncSender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Set by [`Compiles::close`]: a compile sandbox stops at it, a waiting one never starts.
    cancel: Arc<AtomicBool>,
}

impl Compiles {
    /// Queues `job` behind the compiles already queued; `false` when [`MAX_QUEUED`] wait
    /// already, the queue is closed or no thread could be started: the caller leaves its set
    /// uncompiled.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let mut tx = lock(&self.tx);
        if self.cancel.load(Ordering::SeqCst) {
            return false;
        }
        if tx.is_none() {
            *tx = self.start();
        }
        let Some(tx) = tx.as_ref() else {
            return false;
        };
        match tx.try_send(Box::new(job)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// The flag a compile's sandbox is given as its cancel flag.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    fn start(&self) -> Option<SyncSender<Job>> {
        let (tx, rx) = sync_channel::<Job>(MAX_QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = lock(&self.threads);
        for _ in 0..max_compiling() {
            let (rx, cancel) = (rx.clone(), self.cancel.clone());
            let spawned = std::thread::Builder::new()
                .name("vivarium-pyc".into())
                .spawn(move || serve(&rx, &cancel));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread to compile package environments");
                    // The threads started see the queue closed when `tx` drops here.
                    return None;
                }
            }
        }
        Some(tx)
    }

    /// Closes the queue: what waits is dropped unrun, what runs is cancelled, and the threads
    /// are waited for, up to `wait`. Returns whether they all ended. Later submits are refused.
    pub fn close(&self, wait: Duration) -> bool {
        self.cancel.store(true, Ordering::SeqCst);
        drop(lock(&self.tx).take());
        let threads = std::mem::take(&mut *lock(&self.threads));
        let until = Instant::now() + wait;
        while threads.iter().any(|t| !t.is_finished()) {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for t in threads {
            let _ = t.join();
        }
        true
    }
}

/// One compiling thread: takes the oldest waiting compile, runs it, until the queue closes;
/// once cancelled, what it takes is dropped unrun.
fn serve(rx: &Mutex<Receiver<Job>>, cancel: &AtomicBool) {
    loop {
        let job = lock(rx).recv();
        match job {
            Ok(job) if !cancel.load(Ordering::SeqCst) => job(),
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn at_most_max_compiling_run_at_once_in_order_and_the_queue_is_bounded() {
        let q = Compiles::default();
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let order = Arc::new(Mutex::new(Vec::new()));
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate_rx));
        let mut accepted = 0;
        for i in 0..MAX_QUEUED + max_compiling() + 4 {
            let (running, peak, order, gate) =
                (running.clone(), peak.clone(), order.clone(), gate.clone());
            if q.submit(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                lock(&order).push(i);
                let _ = lock(&gate).recv_timeout(Duration::from_secs(5));
                running.fetch_sub(1, Ordering::SeqCst);
            }) {
                accepted += 1;
            }
            // Let the threads take the first ones before the queue fills.
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(accepted <= MAX_QUEUED + max_compiling(), "{accepted}");
        assert!(accepted < MAX_QUEUED + max_compiling() + 4);
        for _ in 0..accepted {
            gate_tx.send(()).unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock(&order).len() < accepted || running.load(Ordering::SeqCst) > 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(peak.load(Ordering::SeqCst) <= max_compiling());
        if max_compiling() == 1 {
            let order = lock(&order).clone();
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(order, sorted, "in the order queued");
        }
    }

    #[test]
    fn closing_drops_what_waits_cancels_what_runs_and_waits_for_the_threads() {
        let q = Compiles::default();
        let ran = Arc::new(AtomicUsize::new(0));
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        for _ in 0..max_compiling() + 3 {
            let (ran, cancel, started) = (ran.clone(), q.cancel_flag(), started_tx.clone());
            assert!(q.submit(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                let _ = started.send(());
                // A compile sandbox: runs until its cancel flag is set.
                let until = std::time::Instant::now() + Duration::from_secs(30);
                while !cancel.load(Ordering::SeqCst) && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }));
        }
        for _ in 0..max_compiling() {
            started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        let t = std::time::Instant::now();
        assert!(q.close(Duration::from_secs(10)), "the threads ended");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(
            ran.load(Ordering::SeqCst),
            max_compiling(),
            "the waiting never ran"
        );
        assert!(!q.submit(|| {}), "a closed queue takes nothing");
    }
}
