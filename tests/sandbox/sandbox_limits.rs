//! Each limit breached through the real runtime, ending with its named status while the host
//! stays intact.

use std::time::{Duration, Instant};

use crate::common::{host, request, run, run_with};
use vivarium::{ExecRequest, Limits, LimitsRequest, Status};

fn limits() -> LimitsRequest {
    LimitsRequest::default()
}

#[test]
fn busy_loop_runs_out_of_fuel() {
    let r = run_with(
        "while True: pass",
        LimitsRequest {
            fuel: Some(1_000_000_000),
            ..limits()
        },
    );
    assert_eq!(r.status, Status::FuelExhausted);
    assert_eq!(r.exit_code, None);
    assert!(r.detail.unwrap().contains("fuel"));
}

#[test]
fn busy_loop_hits_the_wall_clock_limit() {
    let r = run_with(
        "while True: pass",
        LimitsRequest {
            timeout_ms: Some(500),
            ..limits()
        },
    );
    assert_eq!(r.status, Status::Timeout);
    assert!(r.usage.wall_ms >= 500.0);
    // The deadline is checked each time the guest's fuel is refilled (about a millisecond
    // of guest CPU: `engine::FUEL_CHECK_INTERVAL`), not when 30 s of fuel run out.
    assert!(r.usage.wall_ms < 5_000.0, "{}", r.usage.wall_ms);
    assert!(r.usage.fuel < Limits::DEFAULT.fuel / 3, "{}", r.usage.fuel);
}

#[test]
fn a_loop_inside_one_c_call_hits_the_wall_clock_limit() {
    // No Python bytecode runs while `sum` iterates: only the C loop's own fuel checks.
    let r = run_with(
        "print(sum(range(10**15)))",
        LimitsRequest {
            timeout_ms: Some(300),
            ..limits()
        },
    );
    assert_eq!(r.status, Status::Timeout);
    assert!(
        (300.0..5_000.0).contains(&r.usage.wall_ms),
        "{}",
        r.usage.wall_ms
    );
}

#[test]
fn sleep_does_not_outlive_the_deadline() {
    let started = Instant::now();
    let r = run_with(
        "import time\nprint('before', flush=True)\ntime.sleep(60)\nprint('after')",
        LimitsRequest {
            timeout_ms: Some(1000),
            ..limits()
        },
    );
    assert_eq!(r.status, Status::Timeout);
    assert_eq!(r.stdout, "before\n");
    // Containment, not speed: the 60 s sleep must not hold the host thread.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn select_and_short_sleeps_still_work() {
    let r = run(
        "import time, select\nt = time.monotonic()\ntime.sleep(0.05)\nselect.select([], [], [], 0.01)\nprint(time.monotonic() - t >= 0.05)",
    );
    assert_eq!(r.stdout, "True\n", "{}", r.stderr);
}

#[test]
fn allocating_past_the_memory_cap_raises_memory_error() {
    let r = run("x = bytearray(2**30)");
    assert_eq!(r.status, Status::MemoryExceeded);
    assert_eq!(r.error.unwrap().kind, "MemoryError");
    assert!(r.usage.memory_peak_bytes <= 512 << 20);
}

#[test]
fn a_caught_memory_error_lets_the_program_go_on() {
    let r = run("try:\n    x = bytearray(2**30)\nexcept MemoryError:\n    print('caught')\n");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.stdout, "caught\n");
}

#[test]
fn memory_cap_is_per_request() {
    let r = run_with(
        "x = bytearray(100 * 2**20); print('ok')",
        LimitsRequest {
            memory_bytes: Some(64 << 20),
            ..limits()
        },
    );
    assert_eq!(r.status, Status::MemoryExceeded);
    let r = run("x = bytearray(100 * 2**20); print('ok')");
    assert_eq!(r.stdout, "ok\n");
}

#[test]
fn the_memory_limit_counts_beyond_the_templates_image() {
    // 64 MiB on top of `python`'s 40 MiB image: 48 MiB fits, 80 MiB does not.
    let l = LimitsRequest {
        memory_bytes: Some(64 << 20),
        ..limits()
    };
    let r = run_with("x = bytearray(48 << 20); print('ok')", l);
    assert_eq!(r.stdout, "ok\n", "{}", r.stderr);
    assert!(r.usage.memory_peak_bytes > 80 << 20, "{:?}", r.usage);
    let r = run_with("x = bytearray(80 << 20)", l);
    assert_eq!(r.status, Status::MemoryExceeded);
    assert!(
        r.usage.memory_peak_bytes <= (40 + 64) << 20,
        "{:?}",
        r.usage
    );
}

#[test]
fn a_huge_print_is_truncated_and_the_program_runs_on() {
    let r = run("import sys\nsys.stdout.write('x' * 100_000_000)\nprint('done', file=sys.stderr)");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.stdout.len(), 1 << 20);
    assert!(r.truncated.stdout);
    assert!(!r.truncated.stderr);
    assert_eq!(r.stderr, "done\n");
}

#[test]
fn a_traceback_after_a_stderr_flood_is_still_parsed() {
    let r = run_with(
        "import sys\nsys.stderr.write('e' * 100_000)\nraise ValueError('late')",
        LimitsRequest {
            output_bytes: Some(1000),
            ..limits()
        },
    );
    assert!(r.truncated.stderr);
    assert_eq!(r.error.unwrap().kind, "ValueError");
}

#[test]
fn writing_past_the_disk_quota_fails_with_enospc() {
    let r = run("chunk = b'x' * (1 << 20)\n\
         n = 0\n\
         try:\n\
         \x20   with open('big', 'wb') as f:\n\
         \x20       for i in range(1024):\n\
         \x20           f.write(chunk); f.flush(); n += 1\n\
         except OSError as e:\n\
         \x20   print('stopped', e.errno)\n\
         print(n)\n");
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    let mut lines = r.stdout.lines();
    assert_eq!(lines.next(), Some("stopped 51"), "ENOSPC (51)");
    let written: u64 = lines.next().unwrap().parse().unwrap();
    assert!(
        (90..100).contains(&written),
        "stopped near 100 MiB, at {written} MiB"
    );
    assert!(r.usage.disk_bytes <= 100 << 20);
}

#[test]
fn disk_quota_counts_every_file_and_folder() {
    let r = run_with(
        "import os\nn = 0\ntry:\n    while True:\n        os.mkdir(f'd{n}'); n += 1\nexcept OSError as e:\n    print(e.errno, n)\n",
        LimitsRequest {
            disk_bytes: Some(1 << 20),
            ..limits()
        },
    );
    let out: Vec<u64> = r
        .stdout
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(out[0], 51);
    assert!(
        out[1] < 256,
        "a 1 MiB quota bounds folders at 4 KiB each: {}",
        out[1]
    );
}

#[test]
fn deleting_files_frees_quota() {
    let r = run_with(
        "import os\nfor i in range(5):\n    open('f', 'wb').write(b'x' * 600_000)\n    os.remove('f')\nprint('ok')",
        LimitsRequest {
            disk_bytes: Some(1 << 20),
            ..limits()
        },
    );
    assert_eq!(r.stdout, "ok\n", "{}", r.stderr);
}

#[test]
fn opening_ten_thousand_files_stops_at_the_cap() {
    let r = run(
        "fs = []\ntry:\n    for i in range(10000):\n        fs.append(open(f'f{i}', 'w'))\nexcept OSError as e:\n    print(e.errno, len(fs))\n",
    );
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    // 256 descriptors, of which stdio and four preopens are already taken.
    assert_eq!(r.stdout, "33 249\n", "EMFILE (33) after 249 opens");
}

#[test]
fn closing_files_gives_descriptors_back() {
    let r = run("for i in range(2000):\n    with open('f', 'w') as f: f.write('x')\nprint('ok')");
    assert_eq!(r.stdout, "ok\n", "{}", r.stderr);
}

#[test]
fn unbounded_recursion_is_a_recursion_error() {
    let r = run("def f(n): return f(n + 1)\nf(0)");
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.error.unwrap().kind, "RecursionError");
}

#[test]
fn freeing_a_deeply_nested_list_overflows_the_stack_cleanly() {
    let r = run("l = []\nfor i in range(200000): l = [l]\ndel l\nprint('survived')");
    assert!(
        matches!(r.status, Status::StackOverflow | Status::Ok | Status::Error),
        "{:?}",
        r.status
    );
    // Whatever the interpreter did, the host goes on.
    assert_eq!(run("print(1)").stdout, "1\n");
}

#[test]
fn limits_above_the_maximum_are_refused_by_name() {
    let err = host()
        .execute(ExecRequest {
            limits: LimitsRequest {
                timeout_ms: Some(24 * 3600 * 1000),
                ..limits()
            },
            ..request("print(1)")
        })
        .expect_err("refused");
    assert!(err.to_string().contains("timeout_ms"), "{err}");
}

#[test]
fn cancelling_stops_a_run() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, Ordering::Relaxed);
    });
    let r = host()
        .execute(ExecRequest {
            cancel: Some(cancel),
            ..request("import time\nwhile True: time.sleep(0.001)")
        })
        .unwrap();
    assert_eq!(r.status, Status::Cancelled);
}
