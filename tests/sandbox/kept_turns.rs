//! Kept turns, in process: a session's interpreter goes back to the state after any kept
//! turn, in place when the state's shape is the one it is in (no instance made; the memory
//! may have grown since) and through a fresh instance when not (a folder made since), with
//! the same result either way; a query that only looked (not kept) is undone too.

use crate::common::{host, python_interpreter};
use vivarium::testing::{Interpreter, Rewound, TurnLimits, run_on_guest_thread};
use vivarium::{Limits, Template, TurnHistory, Vivarium};

/// Turn `n` of the session, `code`, as `Vivarium::turn` runs it (named, then refreshed).
fn turn(host: &Vivarium, i: &mut Interpreter, n: u64, code: &str) -> Option<String> {
    i.begin_turn(n, code, TurnHistory::DEFAULT);
    let t = host
        .session_turn(
            i,
            Template::Python,
            code,
            vec![],
            &TurnLimits::from(&Limits::DEFAULT),
            None,
        )
        .unwrap();
    assert_eq!(t.report.stderr, "", "{code}");
    t.result
}

fn kept(i: &Interpreter) -> Vec<u64> {
    i.kept_turns().iter().map(|s| s.mark.turn).collect()
}

#[test]
fn an_interpreter_goes_back_in_place_or_through_a_fresh_instance_alike() {
    let host = host();
    run_on_guest_thread(move || {
        let mut i = python_interpreter(&host);
        turn(
            &host,
            &mut i,
            1,
            "x = list(range(100))\nopen('f.txt', 'w').write('one')",
        );
        turn(
            &host,
            &mut i,
            2,
            "x.append('two')\nopen('f.txt', 'w').write('two')\nopen('g.txt', 'w').write('g')",
        );
        turn(
            &host,
            &mut i,
            3,
            "x.clear()\nimport os\nos.remove('g.txt')\ny = 3",
        );
        assert_eq!(kept(&i), [0, 1, 2, 3]);
        // A query that only looks runs guest code that is not kept.
        i.hidden_query(
            "z = 'looked'\nprint(len(x))",
            &TurnLimits::from(&Limits::DEFAULT),
        )
        .unwrap();

        // Same memory size, folders and open files: in place.
        let how = host.roll_back_to(&mut i, Template::Python, 2).unwrap();
        assert_eq!(how, Rewound::Done);
        let r = turn(
            &host,
            &mut i,
            3,
            "len(x), x[-1], open('f.txt').read(), open('g.txt').read(), 'y' in globals(), 'z' in globals()",
        );
        assert_eq!(r.as_deref(), Some("(101, 'two', 'two', 'g', False, False)"));
        assert_eq!(kept(&i), [0, 1, 2, 3]);

        // The memory grows since turn 3's state: still in place, the memory keeping its
        // size, and the allocator grows on from the state's end.
        turn(&host, &mut i, 4, "big = bytearray(64 << 20)\nbig[-1] = 1");
        let how = host.roll_back_to(&mut i, Template::Python, 3).unwrap();
        assert_eq!(how, Rewound::Done);
        let r = turn(
            &host,
            &mut i,
            4,
            "more = bytearray(96 << 20)\nmore[-1] = 2\n'big' in globals(), len(more), more[-1], x[-1]",
        );
        assert_eq!(r.as_deref(), Some("(False, 100663296, 2, 'two')"));
        // A folder made since turn 1's state: back through a fresh instance.
        turn(&host, &mut i, 5, "import os\nos.mkdir('d')");
        let how = host.roll_back_to(&mut i, Template::Python, 1).unwrap();
        assert_eq!(how, Rewound::NotInPlace);
        let r = turn(
            &host,
            &mut i,
            2,
            "import os\nlen(x), open('f.txt').read(), os.path.exists('g.txt'), os.path.exists('d'), 'more' in globals()",
        );
        assert_eq!(r.as_deref(), Some("(100, 'one', False, False, False)"));
        assert_eq!(kept(&i), [0, 1, 2]);
        // Back to the state it was opened in, in place, then on as if new.
        assert_eq!(
            host.roll_back_to(&mut i, Template::Python, 0).unwrap(),
            Rewound::Done
        );
        let r = turn(&host, &mut i, 1, "'x' in globals()");
        assert_eq!(r.as_deref(), Some("False"));
        // A state never kept is refused and changes nothing.
        assert!(
            host.roll_back_to(&mut i, Template::Python, 7)
                .unwrap_err()
                .is_none()
        );
        assert_eq!(kept(&i), [0, 1]);
    })
    .unwrap();
}
