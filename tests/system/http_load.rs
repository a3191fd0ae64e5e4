//! A bounded load test: `VIVARIUM_LOAD_REQUESTS` requests (default 2000) at concurrency 16
//! (`VIVARIUM_LOAD_CONCURRENCY`), mixing hello world, a pandas snippet, infinite loops with
//! small timeouts and memory bombs. It ends with no 5xx, no leaked temp dirs or fds, and flat
//! RSS, and prints throughput and latency percentiles.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The request for the i-th job, and its kind: 1 in 50 pandas, 1 in 20 an infinite loop,
/// 1 in 20 a memory bomb, the rest hello world.
fn job(i: usize) -> (&'static str, Value, &'static str) {
    match i % 100 {
        0 | 50 => (
            "pandas",
            json!({"code": "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\nprint(df['a'].sum())"}),
            "ok",
        ),
        n if n % 20 == 7 => (
            "loop",
            json!({"code": "while True: pass", "limits": {"timeout_ms": 150}}),
            "timeout",
        ),
        n if n % 20 == 13 => (
            "membomb",
            json!({"code": "x = []\nwhile True:\n    x.append(bytearray(8 << 20))",
                   "limits": {"memory_bytes": 96 << 20}}),
            "memory_exceeded",
        ),
        _ => ("hello", json!({"code": "print('hello')"}), "ok"),
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bounded_load_mix() {
    let total = env_usize("VIVARIUM_LOAD_REQUESTS", 2000);
    let concurrency = env_usize("VIVARIUM_LOAD_CONCURRENCY", 16);
    let s = start("load", |_| {}).await;
    let url = s.url("/v1/execute");

    let run_batch = |from: usize, to: usize| {
        let url = url.clone();
        async move {
            let next = Arc::new(AtomicUsize::new(from));
            let c = client();
            let mut workers = Vec::new();
            for _ in 0..concurrency {
                let next = next.clone();
                let c = c.clone();
                let url = url.clone();
                workers.push(tokio::spawn(async move {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= to {
                            return out;
                        }
                        let (kind, body, expect) = job(i);
                        let t = Instant::now();
                        let r = c.post(&url).json(&body).send().await.unwrap();
                        let status = r.status().as_u16();
                        let v: Value = r.json().await.unwrap();
                        let ms = t.elapsed().as_secs_f64() * 1e3;
                        if status == 200 {
                            assert_eq!(v["status"], expect, "{kind}: {v}");
                        }
                        out.push((kind, status, ms));
                    }
                }));
            }
            let mut all = Vec::new();
            for w in workers {
                all.extend(w.await.unwrap());
            }
            all
        }
    };

    // Warm up, then measure the baseline.
    let warm = (total / 10).max(concurrency);
    let mut results = run_batch(0, warm).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_base = rss_bytes();
    let fds_base = open_fds();
    let started = Instant::now();
    results.extend(run_batch(warm, total).await);
    let elapsed = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_end = rss_bytes();
    let fds_end = open_fds();

    let measured = &results[warm.min(results.len())..];
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for (_, st, _) in &results {
        *by_status.entry(*st).or_default() += 1;
    }
    let mut lat: Vec<f64> = measured.iter().map(|r| r.2).collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "load: {} requests at concurrency {concurrency} in {elapsed:.1} s = {:.1} req/s; \
         latency p50 {:.0} ms, p95 {:.0} ms, p99 {:.0} ms; statuses {by_status:?}",
        measured.len(),
        measured.len() as f64 / elapsed,
        pct(&lat, 0.50),
        pct(&lat, 0.95),
        pct(&lat, 0.99),
    );
    for kind in ["hello", "pandas", "loop", "membomb"] {
        let mut l: Vec<f64> = measured
            .iter()
            .filter(|r| r.0 == kind)
            .map(|r| r.2)
            .collect();
        l.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "load: {kind:8} n={:5} p50 {:6.0} ms  p95 {:6.0} ms  p99 {:6.0} ms",
            l.len(),
            pct(&l, 0.50),
            pct(&l, 0.95),
            pct(&l, 0.99)
        );
    }
    println!(
        "load: RSS {:.0} MiB after warm-up, {:.0} MiB at the end; fds {fds_base} -> {fds_end}",
        rss_base as f64 / 1048576.0,
        rss_end as f64 / 1048576.0
    );

    assert_eq!(results.len(), total);
    assert!(
        by_status.keys().all(|st| *st < 500),
        "5xx responses: {by_status:?}"
    );
    assert_eq!(s.settled_sandbox_dirs().await, 0, "leaked sandbox dirs");
    assert!(
        fds_end <= fds_base + 8,
        "fds grew from {fds_base} to {fds_end}"
    );
    assert!(
        rss_end <= rss_base + rss_base / 2 + (128 << 20),
        "RSS grew from {rss_base} to {rss_end}"
    );
    s.stop().await;
}
