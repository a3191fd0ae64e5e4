//! What a sandbox can import, made visible: `GET /v1/packages` lists the runtime's built-in
//! distributions (checked against what the guest itself reports), and an uncaught
//! `ModuleNotFoundError` carries a hint. Over real HTTP.

use crate::http_support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_packages_are_listed_as_the_guest_sees_them() {
    let s = shared().await;
    let c = client();
    let (st, v) = get(&c, &s.url("/v1/packages")).await;
    assert_eq!(st, 200, "{v}");
    let list = v["builtin"].as_array().unwrap();
    assert!(list.len() >= 40, "{v}");
    let find = |name: &str| -> &Value {
        list.iter()
            .find(|p| p["name"].as_str().unwrap().eq_ignore_ascii_case(name))
            .unwrap_or_else(|| panic!("{name} not listed: {v}"))
    };
    assert!(
        find("scikit-learn")["imports"]
            .as_array()
            .unwrap()
            .contains(&json!("sklearn"))
    );
    assert!(
        find("pillow")["imports"]
            .as_array()
            .unwrap()
            .contains(&json!("PIL"))
    );
    // Every one provides something to import.
    for p in list {
        assert!(!p["imports"].as_array().unwrap().is_empty(), "{p}");
    }
    assert_eq!(v["extra"]["allowed"], true);
    // The versions are the ones the guest imports.
    let code = "import importlib.metadata as m\nfor d in ('numpy', 'pandas', 'scikit-learn'):\n    print(d, m.version(d))";
    let (st, r) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(st, 200, "{r}");
    for line in r["stdout"].as_str().unwrap().lines() {
        let (name, version) = line.split_once(' ').unwrap();
        assert_eq!(find(name)["version"], version, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_module_gets_a_hint() {
    let s = shared().await;
    let c = client();
    let error = |code: &'static str| {
        let (c, url) = (c.clone(), s.url("/v1/execute"));
        async move {
            let (st, v) = post(&c, &url, &json!({"code": code, "template": "python"})).await;
            assert_eq!(st, 200, "{v}");
            assert_eq!(v["error"]["type"], "ModuleNotFoundError", "{v}");
            v["error"].clone()
        }
    };
    let e = error("import scikit_learn").await;
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("import it as `sklearn`"),
        "{e}"
    );
    let e = error("import torch").await;
    assert!(e["hint"].as_str().unwrap().contains("native code"), "{e}");
    let e = error("import plotly.express as px").await;
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("`plotly` is not built into this sandbox; if it is a pure-Python package, add it with `packages`"),
        "{e}"
    );
    let e = error("import pandas.no_such_module").await;
    assert!(e.get("hint").is_none(), "{e}");
    // In a session turn too.
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    let id = v["id"].as_str().unwrap();
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({"code": "import pyyaml"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("import it as `yaml`"),
        "{v}"
    );
}
