//! Kept checkers (`sandbox::Checkers`): a session's turn is checked by an interpreter the
//! host keeps for checking, not by a fresh sandbox each time. Its verdicts must be the ones a
//! fresh execution's own set-up turn gives, whatever it checked before; a check a limit or a
//! cancel stops must not leave its checker kept; and the next check works.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use vivarium::testing::run_on_guest_thread;
use vivarium::{ExecError, ExecRequest, Policy};

use crate::common::{fresh_host, request};

/// Code the checker has something to say about, and code it has nothing to say about.
const CORPUS: &[&str] = &[
    "print('hello')",
    "import os\nos.system('ls')",
    "import subprocess as sp\nsp.run(['ls'])",
    "from urllib import request\nrequest.urlopen('https://example.com')",
    "import socket\ns = socket.socket()",
    "import ctypes",
    "import os\nos.fork()",
    "x = input()\neval(x)",
    "eval('1 + 1')",
    "open('../escape.txt', 'w').write('x')",
    "open('/usr/lib/x', 'w')",
    "open('/tmp/x', 'a')",
    "while True:\n    pass",
    "while True:\n    for i in range(3):\n        break",
    "while True:\n    break",
    "%matplotlib inline\nimport os\nos.system('ls')",
    "!ls\nfiles = !ls\nprint(files)",
    "import requests\nrequests.get('http://localhost')",
];

fn findings_of_a_fresh_run(host: &Arc<vivarium::Vivarium>, code: &str) -> Vec<vivarium::Finding> {
    match host.execute(ExecRequest {
        policy: Policy::Deny,
        ..request(code)
    }) {
        Err(ExecError::Denied(findings)) => findings,
        Ok(_) => Vec::new(),
        Err(e) => panic!("{code:?} could not be attempted: {e}"),
    }
}

#[test]
fn a_kept_checker_finds_what_a_fresh_runs_set_up_turn_finds_in_any_order() {
    let (host, base) = fresh_host();
    let expected: Vec<_> = CORPUS
        .iter()
        .map(|code| findings_of_a_fresh_run(&host, code))
        .collect();
    assert!(
        expected.iter().filter(|f| !f.is_empty()).count() >= 12,
        "the corpus exercises the rules: {expected:?}"
    );
    // Forwards, then backwards: what one check saw cannot change the next one's verdict.
    for order in [
        (0..CORPUS.len()).collect::<Vec<_>>(),
        (0..CORPUS.len()).rev().collect(),
    ] {
        for i in order {
            let got = host.check_blocking(CORPUS[i]).expect("the check answers");
            assert!(got.syntax.ok, "{:?}: {:?}", CORPUS[i], got.syntax);
            assert_eq!(got.findings, expected[i], "{:?}", CORPUS[i]);
        }
    }
    assert_eq!(host.idle_checkers(), 1, "one checker served every check");
    assert_eq!(
        host.live_sandbox_dirs(),
        0,
        "a kept checker's directory is apart from the sandboxes'"
    );
    let apart = std::fs::read_dir(host.scratch_root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".checker-"))
        .count();
    assert_eq!(apart, 1, "the kept checker's own directory");
    drop(host);
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn a_syntax_error_is_named_with_its_place() {
    let host = crate::common::host();
    for _ in 0..2 {
        let got = host
            .check_blocking("def f(:\n    pass")
            .expect("the check answers");
        assert!(!got.syntax.ok);
        assert_eq!(got.syntax.errors[0].line, 1);
        assert!(
            got.syntax.errors[0].message.starts_with("SyntaxError"),
            "{:?}",
            got.syntax.errors
        );
        let got = host.check_blocking("return 1").expect("the check answers");
        assert!(!got.syntax.ok, "the compiler's errors too");
    }
}

#[test]
fn a_check_that_runs_out_of_memory_says_so_and_its_checker_is_not_kept() {
    let (host, base) = fresh_host();
    host.check_blocking("x = 1").expect("the check answers");
    assert_eq!(host.idle_checkers(), 1);
    // Millions of nodes: the parser needs more than the checker's memory.
    let huge = format!("x = [{}]", "1,".repeat(6_000_000));
    let got = host.check_blocking(&huge).expect("the check answers");
    assert!(!got.syntax.ok);
    assert!(
        got.syntax.errors[0].message.starts_with("MemoryError"),
        "{:?}",
        got.syntax
    );
    assert_eq!(host.idle_checkers(), 0, "the grown checker is not kept");
    let got = host.check_blocking("import os\nos.system('x')").unwrap();
    assert_eq!(got.findings[0].rule, "os_system");
    assert_eq!(host.idle_checkers(), 1);
    drop(host);
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn a_checker_that_grew_is_not_kept() {
    let (host, base) = fresh_host();
    host.check_blocking("x = 1").unwrap();
    assert_eq!(host.idle_checkers(), 1);
    // Parsed fine, but its tree took tens of MiB the checker's memory keeps afterwards.
    let big = format!("x = [{}]", "1,".repeat(100_000));
    let got = host.check_blocking(&big).expect("the check answers");
    assert!(got.syntax.ok);
    assert_eq!(
        host.idle_checkers(),
        0,
        "a checker grown past its bound goes"
    );
    drop(host);
    let _ = std::fs::remove_dir_all(base);
}

#[test]
fn a_check_cancelled_while_it_runs_fails_and_its_checker_is_not_kept() {
    let (host, base) = fresh_host();
    host.check_blocking("x = 1").unwrap();
    assert_eq!(host.idle_checkers(), 1);
    let cancel = Arc::new(AtomicBool::new(false));
    let setter = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        })
    };
    // Long enough to parse that the cancel comes while it runs.
    let slow = "x = 1\n".repeat(100_000);
    let h = host.clone();
    let err =
        run_on_guest_thread(move || h.check(&slow, cancel).map(drop).map_err(|e| e.to_string()))
            .expect("the guest thread returns")
            .expect_err("a cancelled check does not answer");
    setter.join().unwrap();
    assert!(err.contains("cancelled"), "{err}");
    assert_eq!(host.idle_checkers(), 0);
    assert!(host.check_blocking("x = 3").unwrap().syntax.ok);
    assert_eq!(host.idle_checkers(), 1);
    drop(host);
    let _ = std::fs::remove_dir_all(base);
}
