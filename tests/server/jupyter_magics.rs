//! Notebook syntax through a Vivarium kernel (issue 49): the cells a JupyterLab user types by
//! habit, `%matplotlib inline`, `!ls`, `files = !ls`, `%%bash` and an unknown magic, sent over
//! the kernel WebSocket as Jupyter's messaging protocol carries them, answered as IPython
//! would (a plot's `display_data`, a `stream` of the command's output, a `UsageError`).

use std::time::Duration;

use crate::http_support::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends `code` as an `execute_request` and returns every message answering it, up to and
/// including its `status: idle`.
async fn run_cell(ws: &mut Socket, code: &str) -> Vec<Value> {
    let id = format!("{:032x}", rand::random::<u128>());
    let req = json!({
        "header": {"msg_id": id, "session": "magics", "username": "test",
                   "date": "2026-12-01T00:00:00Z", "msg_type": "execute_request",
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "buffers": [], "channel": "shell",
        "content": {"code": code, "silent": false, "store_history": true,
                    "user_expressions": {}, "allow_stdin": false, "stop_on_error": true},
    });
    ws.send(Frame::Text(req.to_string().into())).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("no idle in time")
            .expect("socket closed")
            .unwrap();
        let Frame::Text(t) = frame else { continue };
        let m: Value = serde_json::from_str(t.as_str()).unwrap();
        if m["parent_header"]["msg_id"] != id.as_str() {
            continue;
        }
        let idle = m["header"]["msg_type"] == "status" && m["content"]["execution_state"] == "idle";
        got.push(m);
        if idle {
            return got;
        }
    }
}

fn of_type<'a>(msgs: &'a [Value], t: &str) -> Vec<&'a Value> {
    msgs.iter()
        .filter(|m| m["header"]["msg_type"] == t)
        .collect()
}

/// A cell's stdout, its streams joined.
fn stdout(msgs: &[Value]) -> String {
    of_type(msgs, "stream")
        .iter()
        .filter(|m| m["content"]["name"] == "stdout")
        .filter_map(|m| m["content"]["text"].as_str())
        .collect()
}

/// The cell's `execute_reply` status (`ok`, `error`).
fn status(msgs: &[Value]) -> String {
    of_type(msgs, "execute_reply")[0]["content"]["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A new kernel of kernelspec `spec` on the server at `base`, and its channels' WebSocket.
async fn open_kernel(c: &reqwest::Client, base: &str, spec: &str) -> (String, Socket) {
    let (st, k) = post(c, &format!("{base}/api/kernels"), &json!({"name": spec})).await;
    assert_eq!(st, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_string();
    let url = format!(
        "{}/api/kernels/{id}/channels",
        base.replace("http://", "ws://")
    );
    (id, tokio_tungstenite::connect_async(url).await.unwrap().0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_runs_cells_with_magics_and_shell_lines() {
    let s = shared().await;
    let c = client();
    let (id, mut ws) = open_kernel(&c, &s.base, "vivarium-scientific").await;

    // `%matplotlib inline` as a plotting cell's first line: the plot, no error.
    let msgs = run_cell(
        &mut ws,
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    )
    .await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    let shown = of_type(&msgs, "display_data");
    assert!(
        shown
            .iter()
            .any(|m| m["content"]["data"]["image/png"].is_string()),
        "no PNG: {msgs:#?}"
    );

    // `!ls` after a file is written: the file is in the command's output.
    let msgs = run_cell(
        &mut ws,
        "open('from_kernel.txt', 'w').write('x')\n!ls\nprint('after')",
    )
    .await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    let out = stdout(&msgs);
    assert!(
        out.contains("from_kernel.txt\n") && out.ends_with("after\n"),
        "{out:?}"
    );

    // `files = !ls`: a list of the output's lines, in the kernel's namespace.
    let msgs = run_cell(
        &mut ws,
        "files = !ls\nprint('from_kernel.txt' in files, all(isinstance(f, str) for f in files))",
    )
    .await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    assert_eq!(stdout(&msgs), "True True\n");

    // `%%bash`: the cell is a shell script.
    let msgs = run_cell(&mut ws, "%%bash\necho $((6 * 7)) | tr 4 x").await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    assert_eq!(stdout(&msgs), "x2\n");

    // An unknown magic: IPython's UsageError naming it, not a SyntaxError.
    let msgs = run_cell(&mut ws, "%nosuchmagic 1").await;
    assert_eq!(status(&msgs), "error", "{msgs:#?}");
    let err = &of_type(&msgs, "error")[0]["content"];
    assert_eq!(err["ename"], "UsageError", "{err}");
    assert!(
        err["evalue"].as_str().unwrap().contains("nosuchmagic"),
        "{err}"
    );

    // Plain Python is untouched, and the state of the cells before is there.
    let msgs = run_cell(&mut ws, "len(files) >= 1").await;
    assert_eq!(
        of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
        "True",
        "{msgs:#?}"
    );
    drop(ws);
    let r = c
        .delete(s.url(&format!("/api/kernels/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
}

/// `%pip install` in a kernel's cell: the host gives the session the package before the
/// cell runs (as for a `/v1` turn), from the index the server is given, and the same cell
/// and the next import it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_in_a_kernels_cell_gives_it_the_package() {
    let index = PackageIndex::start("jupyter-pip");
    let (url, cache) = (index.url.clone(), scratch_dir("jupyter-pip-cache"));
    let s = start("jupyter-pip", move |a| {
        a.package_index = Some(url);
        a.package_cache_dir = Some(cache);
    })
    .await;
    let (_, mut ws) = open_kernel(&client(), &s.base, "vivarium-python").await;
    let msgs = run_cell(
        &mut ws,
        "%pip install -q vivtest-greet\nimport vivtest_greet\nprint(vivtest_greet.hello())",
    )
    .await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    assert!(
        stdout(&msgs).ends_with("hello from greet, base 1.0\n"),
        "{msgs:#?}"
    );
    let msgs = run_cell(&mut ws, "import vivtest_greet as g\nprint(g.hello())").await;
    assert_eq!(stdout(&msgs), "hello from greet, base 1.0\n", "{msgs:#?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ready_template_of_the_caller_is_a_kernelspec() {
    let s = start("jupyter-templates", |_| {}).await;
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "kernel-tpl", "setup": "GREETING = 'from the template'"}),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let v = template_built(&c, &s.base, "kernel-tpl").await;
    assert_eq!(v["status"], "ready", "{v}");
    let (st, specs) = get(&c, &s.url("/api/kernelspecs")).await;
    assert_eq!(st, 200, "{specs}");
    let spec = &specs["kernelspecs"]["vivarium-kernel-tpl"];
    assert_eq!(
        spec["spec"]["metadata"]["vivarium"]["template"], "kernel-tpl",
        "{specs}"
    );
    let (st, _) = get(
        &c,
        &s.url("/kernelspecs/vivarium-kernel-tpl/logo-64x64.png"),
    )
    .await;
    assert_eq!(st, 200);
    let (_, mut ws) = open_kernel(&c, &s.base, "vivarium-kernel-tpl").await;
    let msgs = run_cell(&mut ws, "print(GREETING)").await;
    assert_eq!(status(&msgs), "ok", "{msgs:#?}");
    assert_eq!(stdout(&msgs), "from the template\n", "{msgs:#?}");
    s.stop().await;
}
