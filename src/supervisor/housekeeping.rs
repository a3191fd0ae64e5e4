//! The control plane's own work between requests, and at the end: the sweep (expired
//! sessions closed, idle ones hibernated, the coldest hibernated when resident places run
//! short, snapshots past their retention removed, code mode's long-suspended executions
//! evicted to their journals and expired ones forgotten, `sweep_executions`), this node's
//! heartbeat in a cluster, the drain when the server is told to stop, and what every
//! server does last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::cluster::Cluster;
use super::runner::Runner;

/// How often snapshots past their retention are looked for, at most (more often when the
/// retention is shorter).
const SNAPSHOT_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// The background tasks of a serving node; stopped with [`Housekeeping::stop`].
pub struct Housekeeping {
    sweeper: JoinHandle<()>,
    heart: Option<JoinHandle<()>>,
}

impl Housekeeping {
    /// Starts the sweep (idle sessions hibernate after `hibernate_after`; `None`: never;
    /// snapshots are kept `snapshot_retention`) and, in a cluster, the heartbeat.
    pub fn start(
        runner: Arc<Runner>,
        hibernate_after: Option<Duration>,
        snapshot_retention: Duration,
    ) -> Housekeeping {
        let heart = runner
            .cluster()
            .cloned()
            .map(|c| tokio::spawn(heartbeat(c)));
        let sweeper = tokio::spawn(sweep(runner, hibernate_after, snapshot_retention));
        Housekeeping { sweeper, heart }
    }

    pub fn stop(self) {
        self.sweeper.abort();
        if let Some(h) = self.heart {
            h.abort();
        }
    }
}

/// Closes expired sessions and hibernates idle ones, every sweep interval; hibernates the
/// coldest when resident sessions come close to the cap.
async fn sweep(runner: Arc<Runner>, hibernate_after: Option<Duration>, retention: Duration) {
    let mut tick = tokio::time::interval(runner.sweep_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The store is swept less often: it may be remote, and listing it is not free.
    let mut store_due = Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // Close to the resident cap: make spare places now, not at the next tick.
            _ = runner.pressed() => {
                runner.relieve_pressure().await;
                continue;
            }
        }
        runner.sweep_sessions();
        if let Some(after) = hibernate_after {
            runner.hibernate_idle(after).await;
        }
        // The store is listed once: what is no snapshot may be an expired journal.
        let mut not_snapshots = None;
        if Instant::now() >= store_due {
            not_snapshots = Some(runner.sweep_snapshots().await);
            store_due =
                Instant::now() + retention.clamp(Duration::from_secs(1), SNAPSHOT_SWEEP_INTERVAL);
        }
        runner.sweep_executions(not_snapshots).await;
    }
}

/// With `--cluster`: this node's heartbeat in the shared store, until the server stops.
async fn heartbeat(cluster: Arc<Cluster>) {
    let mut tick = tokio::time::interval(cluster.beat_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        match cluster.beat().await {
            Ok(()) if failing => {
                tracing::info!("the heartbeat reaches the store again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if !failing => {
                tracing::warn!(error = %e, "could not write the heartbeat: other nodes will take this node's durable sessions over after --node-ttl-ms");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

/// The drain, once the server is told to stop: first the proxy is told (readiness, the
/// heartbeat) while everything is still served for `delay`, then no new work is taken; in a
/// cluster, sessions go to the store at once; after `grace`, what still runs is cancelled
/// and every session closed. Returns when new work is refused (the grace period runs on).
pub async fn drain(runner: Arc<Runner>, delay: Duration, grace: Duration) {
    runner.start_leaving().await;
    if !delay.is_zero() {
        tracing::info!(
            delay_ms = delay.as_millis() as u64,
            "draining: /readyz says 503; still serving"
        );
        tokio::time::sleep(delay).await;
    }
    tracing::info!(
        grace_ms = grace.as_millis() as u64,
        "shutting down: no new work taken"
    );
    runner.stop_taking_work();
    // In a cluster, sessions go to the store first: other nodes wait for them
    // (`session_moving`) and take them as each is released.
    if runner.cluster().is_some() {
        let r = runner.clone();
        tokio::spawn(async move { r.close_all_sessions().await });
    }
    // After the grace period, end what still runs.
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if runner.running() > 0 {
            tracing::warn!(
                running = runner.running(),
                "grace period over: cancelling running executions"
            );
        }
        runner.cancel_all();
        runner.close_all_sessions().await;
    });
}

/// The end of every server's life: cancel what runs, close every session, wait for the guest
/// threads, stop the workers and the package compiles, remove the scratch root.
pub async fn finish(runner: &Runner) {
    runner.cancel_all();
    runner.close_all_sessions().await;
    if !runner.wait_idle(Duration::from_secs(10)).await {
        tracing::warn!(
            "guest threads still running after shutdown; removing the scratch root anyway"
        );
    }
    if let Some(workers) = runner.loaded_workers() {
        workers.stop(Duration::from_secs(5)).await;
    }
    if let Some(host) = runner.loaded_host().cloned() {
        let _ = tokio::task::spawn_blocking(move || {
            // A package compile runs outside admission, in a directory under the root.
            if !host.close_compiles(Duration::from_secs(10)) {
                tracing::warn!("a package compile still runs after shutdown");
            }
            std::fs::remove_dir_all(host.scratch_root())
        })
        .await;
    }
}
