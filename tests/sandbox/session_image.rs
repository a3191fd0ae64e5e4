//! A session as data, in process: an interpreter's state captured, carried through the
//! snapshot format, and restored into a new interpreter of the same template, with its
//! variables, imports, files, turn numbering and clock; what cannot be carried is refused.

use std::sync::Arc;
use std::time::Instant;

use crate::common::{host, python_interpreter};
use vivarium::testing::{Interpreter, TurnLimits, run_on_guest_thread};
use vivarium::{Limits, Template};

fn turn(i: &mut Interpreter, code: &str) -> (String, Option<String>) {
    let t = i
        .turn(code, vec![], &TurnLimits::from(&Limits::DEFAULT))
        .unwrap();
    assert_eq!(t.report.stderr, "", "{code}");
    (t.report.stdout, t.result)
}

#[test]
fn state_survives_capture_and_restore_and_both_diverge() {
    let host = host();
    run_on_guest_thread(move || {
        let mut a = python_interpreter(&host);
        turn(
            &mut a,
            "import json, time\nx = {'k': list(range(1000))}\nt0 = time.monotonic()\n\
             open('notes.txt', 'w').write('kept')\nimport os; os.makedirs('d/e', exist_ok=True)",
        );
        let started = Instant::now();
        let image = host.capture(&mut a, Template::Python).unwrap();
        let took = started.elapsed();
        eprintln!(
            "captured {} pages ({} KiB) of {} MiB in {took:?}",
            image.pages.len(),
            image.page_data.len() >> 10,
            image.memory_bytes >> 20
        );
        assert!(!image.pages.is_empty());
        assert!(
            image.page_data.len() < (image.memory_bytes / 2) as usize,
            "only what differs from the template is kept"
        );
        let mut b = host
            .restore_interpreter(Template::Python, image.clone(), Arc::default())
            .unwrap();
        let (_, r) = turn(
            &mut b,
            "len(x['k']), json.dumps(1), open('notes.txt').read()",
        );
        assert_eq!(r.as_deref(), Some("(1000, '1', 'kept')"));
        let (_, r) = turn(&mut b, "os.path.isdir('d/e'), time.monotonic() >= t0");
        assert_eq!(r.as_deref(), Some("(True, True)"));
        // They diverge: each has its own memory and its own files.
        turn(
            &mut a,
            "x['k'].append('a'); open('notes.txt', 'w').write('a')",
        );
        turn(&mut b, "x['k'].clear()");
        assert_eq!(
            turn(&mut a, "len(x['k']), open('notes.txt').read()")
                .1
                .as_deref(),
            Some("(1001, 'a')")
        );
        assert_eq!(
            turn(&mut b, "len(x['k']), open('notes.txt').read()")
                .1
                .as_deref(),
            Some("(0, 'kept')")
        );
        // A second restore of the same image; its tracebacks go on numbering turns where
        // the original's would.
        let mut c = host
            .restore_interpreter(Template::Python, image.clone(), Arc::default())
            .unwrap();
        let err = |i: &mut Interpreter| {
            let t = i
                .turn("1/0", vec![], &TurnLimits::from(&Limits::DEFAULT))
                .unwrap();
            t.report
                .stderr
                .lines()
                .find(|l| l.contains("<turn"))
                .map(str::to_string)
        };
        let mut d = host
            .restore_interpreter(Template::Python, image.clone(), Arc::default())
            .unwrap();
        turn(&mut d, "pass");
        let at = |n: u32| Some(format!("  File \"<turn {n}>\", line 1, in <module>"));
        assert_eq!(err(&mut c), at(image.turns_run + 1));
        assert_eq!(err(&mut d), at(image.turns_run + 2));
    })
    .unwrap();
}

#[test]
fn a_file_held_open_between_turns_is_carried_and_a_folder_is_refused_until_closed() {
    let host = host();
    run_on_guest_thread(move || {
        let mut a = python_interpreter(&host);
        turn(&mut a, "f = open('log.txt', 'w'); f.write('x')");
        let image = host.capture(&mut a, Template::Python).unwrap();
        assert_eq!(image.open_files.len(), 1, "{:?}", image.open_files);
        let mut b = host
            .restore_interpreter(Template::Python, image.clone(), Arc::default())
            .unwrap();
        assert_eq!(
            turn(&mut b, "f.write('y'); f.close(); open('log.txt').read()")
                .1
                .as_deref(),
            Some("'xy'")
        );
        turn(&mut a, "import os\nit = os.scandir('.')");
        let err = host.capture(&mut a, Template::Python).unwrap_err();
        assert!(err.to_string().contains("os.scandir"), "{err}");
        turn(&mut a, "it.close()");
        host.capture(&mut a, Template::Python).unwrap();
    })
    .unwrap();
}
