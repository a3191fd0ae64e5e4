//! The `vivarium` binary as a user runs it: pass-through output, exit statuses, files in and
//! out, JSON output, and the runtime subcommands.

use std::path::PathBuf;
use std::process::{Command, Output};

fn vivarium(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args(args)
        .output()
        .expect("running vivarium")
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vivarium-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn runs_code_like_python() {
    let out = vivarium(&["run", "-c", "print(sum(range(1,11)))"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "55\n");
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("compiling"),
        "the compiled module is cached: {stderr}"
    );
}

#[test]
fn exit_status_is_the_guests_or_names_the_breach() {
    let out = vivarium(&[
        "run",
        "-c",
        "import sys; print('x', file=sys.stderr); sys.exit(5)",
    ]);
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "x\n");
    let out = vivarium(&["run", "--timeout-ms", "300", "-c", "while True: pass"]);
    assert_eq!(out.status.code(), Some(124));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timeout"));
    let out = vivarium(&["run", "--fuel", "100000000", "-c", "while True: pass"]);
    assert_eq!(out.status.code(), Some(152));
    let out = vivarium(&["run", "-c", "1/0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ZeroDivisionError"));
}

#[test]
fn script_stdin_files_and_out_dir() {
    let dir = temp_dir("files");
    std::fs::write(dir.join("data.csv"), "a,b\n1,2\n3,4\n").unwrap();
    std::fs::write(dir.join("input.txt"), "from stdin").unwrap();
    std::fs::write(
        dir.join("script.py"),
        "import sys, pandas as pd\n\
         df = pd.read_csv('data.csv')\n\
         print(int(df.b.sum()), sys.stdin.read())\n\
         import matplotlib.pyplot as plt\n\
         plt.plot(df.a, df.b); plt.savefig('plot.png')\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = vivarium(&[
        "run",
        dir.join("script.py").to_str().unwrap(),
        "--file",
        &format!("data.csv={}", dir.join("data.csv").display()),
        "--stdin",
        dir.join("input.txt").to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "6 from stdin\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(out_dir.join("plot.png")).expect("plot.png copied out");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(
        !out_dir.join("data.csv").exists(),
        "unchanged inputs are not copied out"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn json_output_is_the_result_type() {
    let out = vivarium(&["run", "--json", "-c", "a = 10 / 0"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["type"], "ZeroDivisionError");
    assert_eq!(v["error"]["line"], 1);
    assert!(v["usage"]["fuel"].as_u64().unwrap() > 0);

    // Rich outputs come back in the JSON report.
    let out = vivarium(&["run", "--json", "-c", "display('hi')\nprint(1)"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stdout"], "1\n");
    assert_eq!(v["outputs"][0]["mime"], "text/plain", "{v}");
    assert_eq!(v["outputs"][0]["data"], "hi");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let out = vivarium(&["run", "--file", "../escape=/etc/passwd", "-c", "pass"]);
    assert_eq!(out.status.code(), Some(70));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'..'"));
    let out = vivarium(&["run", "--memory-bytes", "99999999999999", "-c", "pass"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("memory_bytes"));
}

#[test]
fn runtime_verify_and_info() {
    let out = vivarium(&["runtime", "verify"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = vivarium(&["runtime", "info"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v.to_string()
            .contains("3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc")
    );
}

#[test]
fn plt_show_is_a_png_output_in_json_on_every_template() {
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.show()";
    // The default (no `--template`: scientific), and each by name.
    for template in [None, Some("python"), Some("scientific")] {
        let choose: Vec<&str> = template.map_or(vec![], |t| vec!["--template", t]);
        let template = template.unwrap_or("default");
        let args = [&["run", "--json"][..], &choose, &["-c", code]].concat();
        let out = vivarium(&args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], "ok", "{template}: {v}");
        assert_eq!(v["outputs"][0]["mime"], "image/png", "{template}: {v}");
        assert_eq!(v["outputs"].as_array().unwrap().len(), 1, "{template}: {v}");
        // Without --json no rich outputs are collected: `show()` warns as Agg does.
        let args = [&["run"][..], &choose, &["-c", code]].concat();
        let out = vivarium(&args);
        assert_eq!(out.status.code(), Some(0), "{template}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("non-interactive"), "{template}: {stderr}");
    }
}
