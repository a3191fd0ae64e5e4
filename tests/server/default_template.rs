//! The default sandbox is the scientific one, everywhere a request names no template (HTTP,
//! sessions, MCP, Piston, the CLI), and plots always come back: `plt.show()`, `display(fig)`,
//! `fig.savefig` and a figure left open at the end, on every template, in executions and in
//! session turns. The user's namespace starts as a fresh interpreter's.

use crate::http_support::*;
use serde_json::{Value, json};

fn mimes(v: &Value) -> Vec<&str> {
    v["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs in {v}"))
        .iter()
        .map(|o| o["mime"].as_str().unwrap())
        .collect()
}

fn assert_png(v: &Value, i: usize, what: &str) {
    assert_eq!(v["outputs"][i]["mime"], "image/png", "{what}: {v}");
    let png = unb64(v["outputs"][i]["data"].as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "{what}: not a PNG");
}

/// `(name in the request, what it is)`: the default, and each template by name.
const TEMPLATES: [(Option<&str>, &str); 3] = [
    (None, "default"),
    (Some("python"), "python"),
    (Some("scientific"), "scientific"),
];

fn with_template(mut body: Value, template: Option<&str>) -> Value {
    if let Some(t) = template {
        body["template"] = json!(t);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plots_come_back_on_every_template_in_executions_and_sessions() {
    let s = shared().await;
    let c = client();
    let cases: [(&str, &str); 4] = [
        (
            "show",
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
        ),
        (
            "display",
            "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\n\
             display(fig)\nplt.close(fig)",
        ),
        (
            "left open",
            "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.title('no show')",
        ),
        (
            "savefig",
            "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\n\
             fig.savefig('plot.png')\nplt.close(fig)",
        ),
    ];
    for (template, name) in TEMPLATES {
        for (case, code) in cases {
            let what = format!("{name}, {case}");
            let (st, v) = post(
                &c,
                &s.url("/v1/execute"),
                &with_template(json!({"code": code}), template),
            )
            .await;
            assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{what}: {v}");
            if case == "savefig" {
                assert!(
                    mimes(&v).is_empty(),
                    "{what}: a closed figure came back: {v}"
                );
                let file = &v["files"][0];
                assert_eq!(file["path"], "plot.png", "{what}: {v}");
                assert!(unb64(file["content"].as_str().unwrap()).starts_with(b"\x89PNG"));
            } else {
                assert_eq!(mimes(&v), ["image/png"], "{what}: {v}");
                assert_png(&v, 0, &what);
            }
        }

        // A session: a figure left open comes back at the end of its turn, once; the next
        // turn keeps its number in tracebacks; a DataFrame as the final value is HTML too.
        let (st, opened) = post(
            &c,
            &s.url("/v1/sessions"),
            &with_template(json!({}), template),
        )
        .await;
        assert_eq!(st, 201, "{name}: {opened}");
        let turn = s.url(&format!(
            "/v1/sessions/{}/execute",
            opened["id"].as_str().unwrap()
        ));
        let (st, v) = post(&c, &turn, &json!({"code": cases[2].1})).await;
        assert_eq!(st, 200, "{name}: {v}");
        assert_eq!(mimes(&v), ["image/png"], "{name}: {v}");
        let (_, v) = post(
            &c,
            &turn,
            &json!({"code": "import matplotlib.pyplot as plt\nplt.get_fignums()"}),
        )
        .await;
        assert_eq!(v["result"], "[]", "{name}: the figure was not closed: {v}");
        assert!(mimes(&v).is_empty(), "{name}: {v}");
        let (_, v) = post(&c, &turn, &json!({"code": "1 / 0"})).await;
        assert!(
            v["stderr"].as_str().unwrap().contains("File \"<turn 3>\""),
            "{name}: turn numbers moved: {}",
            v["stderr"]
        );
        let (_, v) = post(
            &c,
            &turn,
            &json!({"code": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})"}),
        )
        .await;
        assert_eq!(mimes(&v), ["text/html"], "{name}: {v}");
        assert!(v["outputs"][0]["data"].as_str().unwrap().contains("<table"));
        assert!(
            v["result"].as_str().unwrap().contains("a  b"),
            "{name}: {v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_is_scientific_with_a_clean_namespace_and_fresh_state() {
    let s = shared().await;
    let c = client();
    let probe = "import sys\n\
                 print(sorted(m for m in ['numpy', 'pandas', 'matplotlib.pyplot', 'scipy.stats', \
                 'sklearn.linear_model', 'statsmodels.api', 'seaborn'] if m in sys.modules))";
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": probe})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["stdout"],
        "['matplotlib.pyplot', 'numpy', 'pandas', 'scipy.stats', 'seaborn', 'sklearn.linear_model', 'statsmodels.api']\n",
        "{v}"
    );
    // `dir()` shows what a fresh interpreter's does: the same on both templates, and only
    // module dunders.
    let code = "print(dir())";
    let (_, default) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    let (_, minimal) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": code, "template": "python"}),
    )
    .await;
    assert_eq!(default["stdout"], minimal["stdout"], "{default} {minimal}");
    let names: Vec<String> = serde_json::from_str(
        &default["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .replace('\'', "\""),
    )
    .unwrap();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("__") && n.ends_with("__")),
        "{names:?}"
    );
    // Fresh randomness in every sandbox of the default.
    let code = "import random, numpy, os\nprint(random.random(), numpy.random.rand(), os.urandom(8).hex())";
    let (_, a) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    let (_, b) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    let (a, b) = (a["stdout"].as_str().unwrap(), b["stdout"].as_str().unwrap());
    for (x, y) in a.split_whitespace().zip(b.split_whitespace()) {
        assert_ne!(x, y, "the same value in two sandboxes: {a} / {b}");
    }
    // A scikit-learn fit, as assistants write it, on the default.
    let code = "from sklearn.linear_model import LinearRegression\nimport numpy as np\n\
                X = np.arange(10).reshape(-1, 1)\nm = LinearRegression().fit(X, 3 * X.ravel() + 2)\n\
                print(round(float(m.coef_[0]), 6), round(float(m.intercept_), 6))";
    let (_, v) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(v["stdout"], "3.0 2.0\n", "{v}");

    // Piston and MCP get the default too.
    let (st, v) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "python", "version": "*", "files": [{"content": "import sys\nprint('pandas' in sys.modules)"}]}),
    )
    .await;
    assert_eq!(
        (st, v["run"]["stdout"].as_str()),
        (200, Some("True\n")),
        "{v}"
    );
    let mut mcp = McpClient::open(&s).await;
    // Image content on every template, and the scientific stack on the default.
    for (template, name) in TEMPLATES {
        let code = "import sys\nimport matplotlib.pyplot as plt\nprint('pandas' in sys.modules)\n\
                    plt.plot([1, 2])\nplt.show()";
        let (_, result) = mcp
            .call(
                "execute_python",
                with_template(json!({"code": code}), template),
            )
            .await;
        let content = result["result"]["content"].as_array().unwrap();
        let preimported = content[0]["text"].as_str().unwrap().contains("True");
        assert_eq!(preimported, template != Some("python"), "{name}: {result}");
        assert!(
            content
                .iter()
                .any(|c| c["type"] == "image" && c["mimeType"] == "image/png"),
            "{name}: no image: {result}"
        );
    }
}

/// The hidden turn that shows open figures runs code the guest can reach (it may replace the
/// helper), so it gets only what is left of the program's own limits: a guest cannot buy a
/// second budget through it, and its overrun is the program's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_figure_turn_runs_within_the_programs_own_limits() {
    let s = shared().await;
    let c = client();
    let code = "import time, vivarium_display\n\
                vivarium_display.turn_end = lambda: time.sleep(100)\n\
                import matplotlib.pyplot as plt\nplt.figure()\ntime.sleep(1.0)";
    let t0 = std::time::Instant::now();
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": code, "limits": {"timeout_ms": 1500}}),
    )
    .await;
    let elapsed = t0.elapsed();
    assert_eq!((st, v["status"].as_str()), (200, Some("timeout")), "{v}");
    assert!(
        v["usage"]["wall_ms"].as_f64().unwrap() < 1700.0,
        "the two turns took more than the program's deadline: {v}"
    );
    assert!(elapsed < std::time::Duration::from_secs(4), "{elapsed:?}");
}
