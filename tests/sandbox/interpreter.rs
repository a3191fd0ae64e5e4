//! A kept-alive interpreter (the core of sessions): state persists across turns, the final
//! expression is echoed and returned, a failing turn leaves it usable, `exit()` ends it.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::common::host;
use vivarium::testing::HostShare;
use vivarium::testing::{EndReason, Interpreter, SandboxSpec, TurnLimits, run_on_guest_thread};
use vivarium::{Limits, Status, Vivarium};

fn fresh_interpreter(host: &Vivarium) -> Interpreter {
    host.prepare(SandboxSpec {
        host: HostShare::unlimited(),
        packages: host.no_packages(),
        limits: Limits::DEFAULT,
        env: vec![],
        files: vec![],
        stdin: vec![],
        observer: None,
        cancel: Arc::new(AtomicBool::new(false)),
        setup: Default::default(),
        seed: None,
        volumes: Vec::new(),
        layer: None,
    })
    .unwrap()
    .into_interpreter()
}

#[test]
fn turns_share_state_and_end_on_exit() {
    let host = host();
    run_on_guest_thread(move || {
        let mut interp = fresh_interpreter(&host);
        let turn = TurnLimits::from(&Limits::DEFAULT);

        let t = interp
            .turn("x = 21\nprint('hello', x)", vec![], &turn)
            .unwrap();
        assert_eq!(t.report.stdout, "hello 21\n");
        assert_eq!(t.result, None);

        let t = interp.turn("x * 2", vec![], &turn).unwrap();
        assert_eq!(t.report.stdout, "42\n");
        assert_eq!(t.result.as_deref(), Some("42"));

        let t = interp.turn("1/0", vec![], &turn).unwrap();
        assert_eq!(t.report.status, Status::Error);
        assert_eq!(t.report.error.as_ref().unwrap().kind, "ZeroDivisionError");
        assert!(t.ended.is_none());

        let short = TurnLimits {
            timeout_ms: 200,
            ..turn
        };
        let t = interp
            .turn("import time; time.sleep(5)", vec![], &short)
            .unwrap();
        assert_eq!(t.report.status, Status::Timeout);
        assert_eq!(t.ended, Some(EndReason::Stopped(Status::Timeout)));
        assert!(
            interp.turn("x", vec![], &turn).is_err(),
            "a stopped instance takes no turns"
        );
    })
    .unwrap();
}

#[test]
fn exit_ends_the_interpreter_with_its_reason() {
    let host = host();
    run_on_guest_thread(move || {
        let mut interp = fresh_interpreter(&host);
        let turn = TurnLimits::from(&Limits::DEFAULT);
        let t = interp
            .turn("import sys; sys.exit(7)", vec![], &turn)
            .unwrap();
        assert_eq!(t.report.exit_code, Some(7));
        assert!(t.ended.is_none(), "sys.exit in a turn keeps the session");
        let t = interp
            .turn("y = input(); print(y[::-1])", b"abc".to_vec(), &turn)
            .unwrap();
        assert_eq!(t.report.stdout, "cba\n");
        let t = interp.turn("exit(3)", vec![], &turn).unwrap();
        assert_eq!(t.ended, Some(EndReason::Quit));
        assert_eq!(interp.turn("1", vec![], &turn).err(), Some(EndReason::Quit));
    })
    .unwrap();
}
