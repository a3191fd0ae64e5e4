//! What a single execution does through the real runtime: output, errors, exit codes, stdin,
//! environment, files in and out, and the scientific stack.

use crate::common::{host, request, run};
use vivarium::InputFile;
use vivarium::{ExecRequest, Status};

#[test]
fn hello_world() {
    let r = run("print(sum(range(1, 11)))");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.stdout, "55\n");
    assert_eq!(r.stderr, "");
    assert!(r.usage.fuel > 0);
    assert!(r.usage.memory_peak_bytes >= 40 << 20);
}

#[test]
fn uncaught_exception_is_structured() {
    let r = run("x = 1\na = 10 / 0\n");
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.exit_code, Some(1));
    let e = r.error.expect("a parsed error");
    assert_eq!(e.kind, "ZeroDivisionError");
    assert_eq!(e.message, "division by zero");
    assert_eq!(e.line, Some(2));
    assert!(e.traceback.contains("a = 10 / 0"));
}

#[test]
fn error_inside_a_function_points_at_the_raising_line() {
    let r = run("def f(d):\n    return d['missing']\n\nf({})\n");
    let e = r.error.expect("a parsed error");
    assert_eq!(e.kind, "KeyError");
    assert_eq!(e.line, Some(2));
}

#[test]
fn syntax_error_is_reported_with_its_line() {
    let r = run("print('ok')\nx = (\n");
    assert_eq!(r.status, Status::Error);
    let e = r.error.expect("a parsed error");
    assert_eq!(e.kind, "SyntaxError");
    assert_eq!(e.line, Some(2));
    assert_eq!(r.stdout, "", "nothing runs when the program does not parse");
}

#[test]
fn exit_codes_are_the_programs() {
    assert_eq!(run("import sys; sys.exit(3)").exit_code, Some(3));
    assert_eq!(run("import sys; sys.exit(3)").status, Status::Error);
    let r = run("import os; print('bye', flush=True); os._exit(4)");
    assert_eq!((r.status, r.exit_code), (Status::Error, Some(4)));
    assert_eq!(r.stdout, "bye\n");
    assert_eq!(run("exit(0)").status, Status::Ok);
}

#[test]
fn a_final_expression_is_not_echoed_as_a_program() {
    let r = run("1 + 1");
    assert_eq!(r.stdout, "", "python -c '1 + 1' prints nothing");
}

#[test]
fn stdin_and_env_reach_the_guest() {
    let r = host()
        .execute(ExecRequest {
            stdin: b"hello from stdin".to_vec(),
            env: vec![("GREETING".into(), "hi".into())],
            ..request("import os, sys; print(sys.stdin.read().upper(), os.environ['GREETING'])")
        })
        .unwrap();
    assert_eq!(r.stdout, "HELLO FROM STDIN hi\n");
}

#[test]
fn files_in_are_readable_and_files_out_come_back_complete() {
    let r = host()
        .execute(ExecRequest {
            files: vec![InputFile {
                path: "in/data.txt".into(),
                content: b"abc".to_vec(),
            }],
            // `g` is left open: its buffer must still reach the host.
            ..request(
                "data = open('in/data.txt').read()\n\
                 open('out.txt', 'w').write(data * 2)\n\
                 g = open('left_open.txt', 'w'); g.write('yo')\n",
            )
        })
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    let find = |p: &str| r.files.iter().find(|f| f.path == p);
    assert_eq!(
        find("out.txt").unwrap().content.as_deref(),
        Some(&b"abcabc"[..])
    );
    assert_eq!(
        find("left_open.txt").unwrap().content.as_deref(),
        Some(&b"yo"[..])
    );
    assert!(
        find("in/data.txt").is_none(),
        "unchanged inputs are not output"
    );
}

#[test]
fn pandas_reads_a_csv_passed_in() {
    let r = host()
        .execute(ExecRequest {
            files: vec![InputFile {
                path: "data.csv".into(),
                content: b"city,temp\nOslo,3\nRome,18\nCairo,30\n".to_vec(),
            }],
            ..request(
                "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(df.temp.mean(), len(df))",
            )
        })
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    assert_eq!(r.stdout, "17.0 3\n");
}

#[test]
fn matplotlib_writes_a_png() {
    let r = run("import matplotlib.pyplot as plt\n\
         plt.plot(range(1000), [i * i for i in range(1000)])\n\
         plt.savefig('plot.png')\n");
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    let png = r
        .files
        .iter()
        .find(|f| f.path == "plot.png")
        .expect("plot.png");
    assert!(
        png.content
            .as_ref()
            .unwrap()
            .starts_with(b"\x89PNG\r\n\x1a\n")
    );
}

#[test]
fn scikit_learn_fits_a_linear_regression() {
    let r = run("from sklearn.linear_model import LinearRegression\n\
         import numpy as np\n\
         X = np.arange(20).reshape(-1, 1); y = 3 * X.ravel() + 2\n\
         m = LinearRegression().fit(X, y)\n\
         print(round(float(m.coef_[0]), 6), round(float(m.intercept_), 6))\n");
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    assert_eq!(r.stdout, "3.0 2.0\n");
}

#[test]
fn every_sandbox_gets_fresh_randomness() {
    let a = run("import random, os; print(random.random(), os.urandom(8).hex())");
    let b = run("import random, os; print(random.random(), os.urandom(8).hex())");
    assert_eq!(a.status, Status::Ok);
    assert_ne!(a.stdout, b.stdout);
}

#[test]
fn sandboxes_share_nothing() {
    let a = run("open('mine.txt', 'w').write('secret'); import builtins; builtins.LEAK = 1");
    assert_eq!(a.status, Status::Ok);
    let b = run("import os, builtins; print(sorted(os.listdir('.')), hasattr(builtins, 'LEAK'))");
    assert_eq!(b.stdout, "['tmp', 'usr'] False\n");
}
