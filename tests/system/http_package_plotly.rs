//! plotly from the public package index, as a notebook user expects it: `fig.show()` returns
//! a `text/html` output, `fig.write_html()` a file. Needs the index pip is configured with,
//! so it is `#[ignore]`d; `.ci/run` runs it (`cargo test --test system -- --ignored
//! http_package_plotly::`) when the index is reachable.

use crate::http_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the public package index; .ci/run runs it when the index is reachable"]
async fn plotly_figures_come_back_as_html_and_as_files() {
    let cache = scratch_dir("pkg-cache-plotly");
    let dir = cache.clone();
    let s = start("pkg-plotly", move |a| a.package_cache_dir = Some(dir)).await;
    let c = client();
    let code = "import plotly.express as px\n\
                fig = px.line(x=[1, 2, 3], y=[1, 4, 9], title='squares')\n\
                fig.show()\n\
                fig.write_html('chart.html')\n\
                print(type(fig).__module__)";
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": code, "packages": ["plotly"], "policy": "off"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["stdout"], "plotly.graph_objs._figure\n", "{v}");
    let outputs = v["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 1, "{v}");
    assert_eq!(outputs[0]["mime"], "text/html", "{}", outputs[0]);
    let html = outputs[0]["data"].as_str().unwrap();
    assert!(
        html.contains("Plotly.newPlot") && html.contains("squares"),
        "{html}"
    );
    assert!(html.contains("cdn.plot.ly"), "plotly.js from its CDN");
    let file = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "chart.html")
        .expect("chart.html returned");
    assert!(
        file["size"].as_u64().unwrap() > 1_000_000,
        "write_html inlines plotly.js: {file}"
    );
    // In a session, a figure as the final value shows as in a notebook.
    let id = open_session(&c, &s.base, &json!({"packages": ["plotly"]})).await;
    let v = session_turn(
        &c,
        &s.base,
        &id,
        "import plotly.graph_objects as go\ngo.Figure(go.Bar(y=[2, 3, 1]))",
    )
    .await;
    let outputs = v["outputs"].as_array().unwrap();
    assert!(outputs.iter().any(|o| o["mime"] == "text/html"), "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}
