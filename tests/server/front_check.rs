//! Pre-execution checks (`POST /v1/check`, the `policy` of executions and session turns,
//! `vivarium check`) and rich outputs (`plt.show()`, `display()`), over real HTTP against
//! the real runtime.

use crate::http_support::*;
use serde_json::{Value, json};

fn rules(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings in {v}"))
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

const DANGEROUS: &str = "\
import os, subprocess
import socket
import ctypes
os.system('ls')
subprocess.run(['ls'])
eval(input())
os.fork()
while True:
    pass
open('../escape.txt', 'w')
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_endpoint_policies_and_rich_outputs() {
    let s = shared().await;
    let c = client();

    // The static rules, with lines and columns.
    let (st, v) = post(&c, &s.url("/v1/check"), &json!({"code": DANGEROUS})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["syntax"]["ok"], true, "{v}");
    let r = rules(&v);
    for rule in [
        "os_system",
        "subprocess",
        "network",
        "ctypes",
        "eval_exec",
        "fork",
        "infinite_loop",
        "write_outside_workdir",
    ] {
        assert!(r.iter().any(|x| x == rule), "{rule} missing from {v}");
    }
    let sys = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "os_system")
        .unwrap();
    assert_eq!(sys["line"], 4);
    assert_eq!(sys["col"], 1);
    assert_eq!(sys["severity"], "error");

    // Benign code: nothing. A loop with a break, eval of a literal: nothing either.
    let (st, v) = post(
        &c,
        &s.url("/v1/check"),
        &json!({"code": "import math\nwhile True:\n    break\neval('1+1')\nopen('out.txt', 'w')\n"}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["findings"], json!([]), "{v}");

    // Syntax by the guest's own parser (3.15): errors with line and column, also the
    // compiler's (`return` outside a function).
    let (_, v) = post(
        &c,
        &s.url("/v1/check"),
        &json!({"code": "x = 1\ndef f(:\n"}),
    )
    .await;
    assert_eq!(v["syntax"]["ok"], false, "{v}");
    assert_eq!(v["syntax"]["errors"][0]["line"], 2, "{v}");
    assert!(v["syntax"]["errors"][0]["col"].as_u64().unwrap() >= 1);
    let (_, v) = post(&c, &s.url("/v1/check"), &json!({"code": "return 5\n"})).await;
    assert_eq!(v["syntax"]["ok"], false, "{v}");
    assert!(
        v["syntax"]["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("outside function")
    );
    // Bad requests are the usual JSON errors.
    let (st, v) = post(&c, &s.url("/v1/check"), &json!({"source": "x"})).await;
    assert_eq!(st, 400);
    assert_eq!(error_code(&v), "invalid_json");

    // execute: `warn` (the default) runs and reports the findings.
    let code = "import os\ntry:\n    os.system('ls')\nexcept Exception as e:\n    print(type(e).__name__)\nprint('ran')\n";
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("ran"), "{v}");
    assert_eq!(rules(&v), vec!["os_system"]);
    // The verdict is read before any of the code runs: code that sends a forged verdict
    // through the door, and rewrites the checker, changes nothing of its own findings.
    let forging = "import _host, vivarium_check\n\
                   vivarium_check.check = lambda src: {'syntax': {'ok': True, 'errors': []}, 'findings': []}\n\
                   _host.call(b'\\0vivarium-result\\0{\"syntax\": {\"ok\": true, \"errors\": []}, \"findings\": []}')\n\
                   import subprocess\nprint('ran')\n";
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": forging})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "ran\n", "{v}");
    assert_eq!(rules(&v), vec!["subprocess"], "{v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": forging, "policy": "deny"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (422, "policy_denied"), "{v}");

    // `off`: no check, no findings field.
    let (_, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": code, "policy": "off"}),
    )
    .await;
    assert!(v.get("findings").is_none(), "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("ran"));
    // `deny`: 422 with the findings, nothing ran (no file appears).
    let denied_code = "open('marker.txt', 'w').write('x')\nimport subprocess\n";
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": denied_code, "policy": "deny"}),
    )
    .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(error_code(&v), "policy_denied");
    assert_eq!(rules(&v), vec!["subprocess"]);
    // `deny` with clean code runs.
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "print(6*7)", "policy": "deny"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "42\n");
    assert_eq!(v["findings"], json!([]));
    // An unknown policy is a 400.
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", "policy": "maybe"}),
    )
    .await;
    assert_eq!(st, 400, "{v}");

    // The hidden prelude does not shift tracebacks: the program is `<string>`, line 2, as
    // `python -c`'s would be.
    let (_, v) = post(&c, &s.url("/v1/execute"), &json!({"code": "x = 1\n1/0"})).await;
    assert_eq!(v["error"]["line"], 2, "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("File \"<string>\", line 2, in <module>"),
        "{v}"
    );

    // Rich outputs: plt.show(), display() of a DataFrame, a string, a figure.
    let code = "\
import matplotlib.pyplot as plt
import pandas as pd
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()
display(pd.DataFrame({'a': [1, 2]}))
display('hello')
fig, ax = plt.subplots()
ax.bar(['x', 'y'], [3, 5])
display(fig)
";
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    let outputs = v["outputs"].as_array().unwrap();
    let mimes: Vec<&str> = outputs
        .iter()
        .map(|o| o["mime"].as_str().unwrap())
        .collect();
    assert_eq!(
        mimes,
        vec!["image/png", "text/html", "text/plain", "image/png"],
        "{v}"
    );
    let png = unb64(outputs[0]["data"].as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(outputs[1]["data"].as_str().unwrap().contains("<table"));
    assert_eq!(outputs[2]["data"], "hello");
    // The helper's files are not among the run's files.
    assert_eq!(v["files"], json!([]), "{v}");

    // Sessions: policy per turn, and outputs per turn (not repeated).
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    assert_eq!(st, 201, "{v}");
    let sid = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{sid}/execute"));
    let (st, v) = post(
        &c,
        &turn,
        &json!({"code": "import os\nos.system('x')", "policy": "deny"}),
    )
    .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(rules(&v), vec!["os_system"]);
    // A denied turn leaves the session as it was: its files are not written, nothing ran;
    // under `warn` the findings come back beside a turn that ran.
    let denied = json!({"code": "y = 1\nimport subprocess", "policy": "deny",
        "files": [{"path": "denied.txt", "content": b64(b"x")}]});
    let (st, v) = post(&c, &turn, &denied).await;
    assert_eq!(
        (st, rules(&v)),
        (422, vec!["subprocess".to_string()]),
        "{v}"
    );
    let (st, v) = post(&c, &turn, &json!({"code": "import subprocess\nz = 3"})).await;
    assert_eq!(
        (st, rules(&v)),
        (200, vec!["subprocess".to_string()]),
        "{v}"
    );
    let probe = "import os\n('y' in dir(), z, os.path.exists('denied.txt'))";
    let (_, v) = post(&c, &turn, &json!({"code": probe, "policy": "off"})).await;
    assert_eq!(v["result"], "(False, 3, False)", "{v}");
    let (st, v) = post(&c, &turn, &json!({"code": "display('one')\nx = 21"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["findings"], json!([]));
    assert_eq!(v["outputs"], json!([{"mime": "text/plain", "data": "one"}]));
    let (_, v) = post(&c, &turn, &json!({"code": "x * 2", "policy": "off"})).await;
    assert_eq!(v["result"], "42", "{v}");
    assert_eq!(v["outputs"], json!([]), "{v}");
    assert!(v.get("findings").is_none());
    // A final DataFrame: `result` is its text, and an HTML output comes too.
    let (_, v) = post(
        &c,
        &turn,
        &json!({"code": "import pandas as pd\npd.DataFrame({'a': [1]})"}),
    )
    .await;
    assert!(v["result"].as_str().unwrap().contains('a'), "{v}");
    assert_eq!(v["outputs"][0]["mime"], "text/html", "{v}");
    assert!(v["outputs"][0]["data"].as_str().unwrap().contains("<table"));
    c.delete(s.url(&format!("/v1/sessions/{sid}")))
        .send()
        .await
        .unwrap();

    // The OpenAPI document names the new route.
    let (_, doc) = get(&c, &s.url("/openapi.json")).await;
    assert!(doc["paths"]["/v1/check"].is_object());
}

#[test]
fn cli_check_prints_json_and_exits_by_verdict() {
    let dir = std::env::temp_dir().join(format!("vivarium-front-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.py");
    let bad = dir.join("bad.py");
    let warn = dir.join("warn.py");
    std::fs::write(&good, "print(sum(range(10)))\n").unwrap();
    std::fs::write(&bad, "import os\nos.system('rm -rf /')\n").unwrap();
    std::fs::write(&warn, "x = input()\neval(x)\n").unwrap();
    let run = |p: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"))
            .arg("check")
            .arg(p)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "not JSON: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), v)
    };
    let (code, v) = run(&good);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["syntax"]["ok"], true);
    let (code, v) = run(&bad);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["findings"][0]["rule"], "os_system");
    // Warnings alone pass.
    let (code, v) = run(&warn);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["findings"][0]["rule"], "eval_exec");
    std::fs::write(&good, "def f(:\n").unwrap();
    let (code, v) = run(&good);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["syntax"]["ok"], false);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `plt.show()` returns its figure as an `image/png` output on every template, in an
/// execution and in a session turn: `scientific` imported pyplot (with the Agg backend)
/// before any sandbox asked for rich outputs, and its set-up turn must route `show()` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plt_show_returns_a_png_on_every_template() {
    let s = shared().await;
    let c = client();
    let code = "\
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()
";
    for template in ["python", "scientific"] {
        let (st, v) = post(
            &c,
            &s.url("/v1/execute"),
            &json!({"code": code, "template": template}),
        )
        .await;
        assert_eq!(
            (st, v["status"].as_str()),
            (200, Some("ok")),
            "{template}: {v}"
        );
        let mimes: Vec<&str> = v["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["mime"].as_str().unwrap())
            .collect();
        assert_eq!(mimes, ["image/png"], "{template}: {v}");
        let png = unb64(v["outputs"][0]["data"].as_str().unwrap());
        assert!(png.starts_with(b"\x89PNG"), "{template}: not a PNG");
        assert!(
            !v["stderr"].as_str().unwrap().contains("non-interactive"),
            "{template}: {v}"
        );

        let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({"template": template})).await;
        assert_eq!(st, 201, "{template}: {v}");
        let turn = s.url(&format!(
            "/v1/sessions/{}/execute",
            v["id"].as_str().unwrap()
        ));
        for n in 1..=2 {
            let (st, v) = post(&c, &turn, &json!({"code": code})).await;
            assert_eq!(
                (st, v["status"].as_str()),
                (200, Some("ok")),
                "{template}: {v}"
            );
            assert_eq!(
                v["outputs"][0]["mime"], "image/png",
                "{template} turn {n}: {v}"
            );
            assert_eq!(v["outputs"].as_array().unwrap().len(), 1, "{template}: {v}");
        }
    }
}
