//! Notebook cells over HTTP (issue 49): IPython's magics, `!` lines and `var = !cmd` in the
//! Python of `/v1/execute` and session turns, translated in the guest (`vivarium_ipy`), with
//! a real server on 127.0.0.1; plain Python untouched.

use crate::http_support::*;
use serde_json::{Value, json};

/// A fresh execution of `code` on `template`; its 200 result.
async fn cell(api: &Api, code: &str, template: &str) -> Value {
    api.execute(&json!({"code": code, "template": template}))
        .await
        .expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matplotlib_inline_first_then_a_plot() {
    let api = shared().await;
    let code =
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n";
    // Checked as it runs (the default policy, `warn`): no SyntaxError for the magic.
    let v = cell(&api, code, "scientific").await;
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["findings"], json!([]), "{v}");
    let mimes: Vec<&str> = v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["mime"].as_str().unwrap())
        .collect();
    assert_eq!(mimes, ["image/png"], "{v}");
    // Under `deny` too.
    let v = api
        .execute(&json!({"code": "%matplotlib inline\nprint(1)", "policy": "deny"}))
        .await
        .expect(200);
    assert_eq!(v["stdout"], "1\n", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_lines_and_their_output_as_a_list() {
    let api = shared().await;
    let v = cell(&api, "!echo hi\nprint('after')", "python").await;
    assert_eq!(
        (&v["status"], &v["stdout"]),
        (&json!("ok"), &json!("hi\nafter\n")),
        "{v}"
    );
    let v = api
        .execute(&json!({
            "code": "files = !ls *.txt\nprint(files)\nprint(len(files))",
            "template": "python",
            "files": [{"path": "a.txt", "content": b64(b"1")}, {"path": "b.txt", "content": b64(b"2")}],
        }))
        .await
        .expect(200);
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["stdout"], "['a.txt', 'b.txt']\n2\n", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cell_magics_bash_writefile_and_time() {
    let api = shared().await;
    let v = cell(
        &api,
        "%%bash\necho $((1 + 2))\nprintf 'x\\ny\\n' | wc -l\n",
        "python",
    )
    .await;
    assert_eq!(
        (&v["status"], &v["stdout"]),
        (&json!("ok"), &json!("3\n2\n")),
        "{v}"
    );
    let id = api.session(&json!({"template": "python"})).await;
    let v = api
        .turn_ok(&id, "%%writefile hello.py\nprint('hi from file')\n")
        .await;
    assert!(v["stdout"].as_str().unwrap().contains("hello.py"), "{v}");
    let v = api.turn_ok(&id, "!python hello.py").await;
    assert_eq!(v["stdout"], "hi from file\n", "{v}");
    let v = api.turn_ok(&id, "%time x = sum(range(1000))\nx").await;
    assert!(v["stdout"].as_str().unwrap().contains("Wall time"), "{v}");
    assert_eq!(v["result"], "499500", "{v}");
    api.close(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_magic_is_a_usage_error() {
    let api = shared().await;
    let v = cell(&api, "print('before')\n%nosuchmagic 1\n", "python").await;
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["error"]["type"], "UsageError", "{v}");
    assert_eq!(
        v["error"]["message"], "Line magic function `%nosuchmagic` not found.",
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracebacks_keep_the_callers_line_numbers() {
    let api = shared().await;
    let code = "%matplotlib inline\nx = 1\n!echo hi\ny = x / 0\n";
    let v = cell(&api, code, "python").await;
    assert_eq!(v["error"]["type"], "ZeroDivisionError", "{v}");
    assert_eq!(v["error"]["line"], 4, "{v}");
    let id = api.session(&json!({"template": "python"})).await;
    let a = api.turn(&id, &json!({"code": code})).await.expect(200);
    assert_eq!(
        (&a["error"]["type"], &a["error"]["line"]),
        (&json!("ZeroDivisionError"), &json!(4)),
        "{a}"
    );
    api.close(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_python_is_unchanged() {
    let api = shared().await;
    // Lines that only look like notebook syntax to a quick glance stay Python.
    let code = "s = 'what?'\nx = 7 % 4  # why?\nprint(s, x != 2, x)";
    let v = cell(&api, code, "python").await;
    assert_eq!(
        (&v["status"], &v["stdout"]),
        (&json!("ok"), &json!("what? True 3\n")),
        "{v}"
    );
    let id = api.session(&json!({"template": "python"})).await;
    // A final expression is echoed, as the REPL does, and is the turn's result.
    let v = api.turn_ok(&id, "print('hello')\n1 + 1").await;
    assert_eq!(
        (&v["stdout"], &v["result"]),
        (&json!("hello\n2\n"), &json!("2")),
        "{v}"
    );
    // A magic cell's final expression is the turn's result too.
    let v = api.turn_ok(&id, "%matplotlib inline\n2 + 2").await;
    assert_eq!(v["result"], "4", "{v}");
    api.close(&id).await;
}
