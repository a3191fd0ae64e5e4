//! Regression tests for containment bugs the hostile corpus and fuzzer found (all fixed in
//! the core): each reproduces its bug minimally and checks containment from the host side.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use crate::common::fresh_host;
use vivarium::Limits;
use vivarium::testing::HostShare;
use vivarium::testing::{SandboxSpec, TurnLimits, run_on_guest_thread};

/// Bytes the host's disk really holds under `root` (allocated blocks), and the largest
/// apparent file size there.
fn real_usage(root: &Path) -> (u64, u64) {
    let (mut blocks, mut largest) = (0u64, 0u64);
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let m = e.path().symlink_metadata().unwrap();
            blocks += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            } else {
                largest = largest.max(m.len());
            }
        }
    }
    (blocks, largest)
}

/// Was: `fd_seek` far past the end and then `fd_write` one byte: the `fd_write` shadow in
/// `src/sandbox/fs_guard.rs` charged only the bytes written (`iovec_total`), never the file's
/// new end, while `fd_pwrite` and `fd_filestat_set_size` do check `offset + len` against the
/// quota. So (a) a 1 TiB sparse file appears in the host's scratch dir under a 4 MiB quota
/// (`usage.disk_bytes` then reports 1 TiB), and (b) one-byte writes a block apart allocate a
/// whole filesystem block each while being charged one byte: real disk use grows ~4096x the
/// quota (with the default 300 G fuel and 30 s, gigabytes per run).
///
/// Fixed in 6a19303: writes after a seek are checked where they land and charged in whole
/// blocks.
#[test]
fn seek_then_write_stays_within_the_disk_quota() {
    assert_turn_stays_within_the_quota(
        "
import os
fd = os.open('sparse.bin', os.O_CREAT | os.O_WRONLY)
os.lseek(fd, 1 << 40, 0)
os.write(fd, b'x')
fd2 = os.open('blocks.bin', os.O_CREAT | os.O_WRONLY)
for i in range(4 * 4096):
    os.lseek(fd2, i * 4096, 0)
    os.write(fd2, b'x')
os.close(fd); os.close(fd2)
",
    );
}

/// Runs `code` as one session turn under a 4 MiB disk quota, then checks from the host that
/// no file's apparent size and not the directory's real disk use went past it.
fn assert_turn_stays_within_the_quota(code: &'static str) {
    let (host, base) = fresh_host();
    let quota: u64 = 4 << 20;
    let h = host.clone();
    let (report, (blocks, largest)) = run_on_guest_thread(move || {
        let limits = Limits {
            timeout_ms: 20_000,
            fuel: 50_000_000_000,
            memory_bytes: 128 << 20,
            disk_bytes: quota,
            ..Limits::DEFAULT
        };
        let mut interp = h
            .prepare(SandboxSpec {
                host: HostShare::unlimited(),
                packages: h.no_packages(),
                limits,
                env: vec![],
                files: vec![],
                stdin: vec![],
                observer: None,
                cancel: Arc::new(Default::default()),
                setup: Default::default(),
                seed: None,
                volumes: Vec::new(),
                layer: None,
            })
            .unwrap()
            .into_interpreter();
        let out = interp
            .turn(code, vec![], &TurnLimits::from(&limits))
            .unwrap();
        (out.report, real_usage(interp.workdir().path()))
    })
    .unwrap();
    eprintln!(
        "status {:?}, stdout {:?}, stderr {:?}; host blocks {} MiB, largest file {} bytes, reported disk_bytes {}",
        report.status,
        report.stdout,
        report.stderr,
        blocks >> 20,
        largest,
        report.usage.disk_bytes
    );
    assert!(
        largest <= quota,
        "a file of {largest} bytes (apparent) under a {quota}-byte quota"
    );
    assert!(
        blocks <= quota + (1 << 20),
        "{blocks} bytes of real disk under a {quota}-byte quota"
    );
    assert_eq!(host.live_sandbox_dirs(), 0);
    drop(host);
    let _ = std::fs::remove_dir_all(base);
}

/// Concurrent processes sharing one scratch base (`VIVARIUM_SCRATCH`, the default
/// `<tmp>/vivarium-scratch` for every `vivarium run`) race in `ScratchRoot::create`
/// (`src/sandbox/workdir.rs`): process B's `remove_abandoned` removes A's fresh root when it
/// sees it between `create_dir` and the creation of `.lock` (a numeric name without a lock
/// file), or between `File::create(.lock)` and `lock()` (the lock can be taken). A then fails
/// (`creating <base>/<pid>/.lock: No such file or directory`, exit 70) or runs in a root that
/// was deleted under it. Seen in the corpus run with 4 parallel CLI children: 2 of 104 failed.
/// Not an escape, but one user's `vivarium run` can make another's fail.
///
/// Fixed in 6a19303: scratch roots are created under `<base>/.create.lock`.
#[test]
fn parallel_cli_runs_sharing_a_scratch_base_all_succeed() {
    let base: PathBuf = std::env::temp_dir().join(format!(
        "vivarium-race-{}-{:08x}",
        std::process::id(),
        common::rand_u32()
    ));
    let mut failures = Vec::new();
    for round in 0..6 {
        let children: Vec<_> = (0..8)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_vivarium"))
                    .args(["run", "--json", "-c", "print('ok')"])
                    .env("VIVARIUM_SCRATCH", &base)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "round {round}: {} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(
        failures.is_empty(),
        "{} of 48 runs failed: {failures:#?}",
        failures.len()
    );
}

/// Containment bug found by the `hostile_python` fuzzer (seed 20261201, 110th input):
/// the `fd_write` shadow in `src/sandbox/fs_guard.rs` decides "stdio, not counted against the
/// quota" by the descriptor *number* (`fd >= 3` is counted). A guest that closes stdin (or
/// stdout/stderr) and then opens a file gets that number back from wasmtime-wasi's descriptor
/// table, and every `fd_write` to the file skips the quota: real data without bound (here
/// 16 MiB under a 4 MiB quota; the default 300 G fuel and 30 s allow tens of GB) and, after a
/// seek, a 1 TiB sparse file. Minimal reproducer:
///
/// ```python
/// import os
/// os.close(0)
/// fd = os.open('big.bin', os.O_CREAT | os.O_WRONLY)   # fd == 0
/// for _ in range(64): os.write(fd, b'x' * (1 << 20))   # 64 MiB under a 4 MiB quota
/// ```
///
/// Fixed: the `fd_close` shadow refuses descriptors 0-2 (as `fd_renumber` already did), so a
/// file can never take their number.
#[test]
fn a_file_reusing_a_stdio_descriptor_stays_within_the_quota() {
    assert_turn_stays_within_the_quota(
        "
import os
try:
    os.close(0)
except OSError as e:
    print('close refused', e.errno)
fd = os.open('big.bin', os.O_CREAT | os.O_WRONLY)
try:
    for _ in range(16):
        os.write(fd, b'x' * (1 << 20))
    os.lseek(fd, 1 << 40, 0)
    os.write(fd, b'y')
except OSError as e:
    print('refused', e.errno)
",
    );
}
