//! Lifecycle events and webhooks over real HTTP: a tenant's events listed (`GET /v1/events`)
//! and delivered to a real receiver on 127.0.0.1 (allowed by `--webhook-allow-private`),
//! each signed as Standard Webhooks says and verified here with HMAC-SHA256; a failed
//! delivery retried (the same `webhook-id` again) before the next; a dead receiver beside a
//! live one; refused URLs; another tenant sees nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::http_support::*;

const ALICE: &str = "hooks-key-alice-0123456789";
const BOB: &str = "hooks-key-bob-0123456789ab";

/// One delivery as the receiver got it.
#[derive(Debug, Clone)]
struct Delivery {
    id: String,
    timestamp: String,
    signature: String,
    body: Vec<u8>,
}

/// A webhook receiver on 127.0.0.1: answers 500 to its first `fail_first` deliveries, then
/// 200, and keeps every delivery it got.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Delivery>>>,
}

impl Receiver {
    fn start(fail_first: usize) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = AtomicUsize::new(0);
        let kept = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let mut reader = BufReader::new(stream);
                let mut headers = std::collections::HashMap::new();
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                loop {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    let l = line.trim_end();
                    if l.is_empty() {
                        break;
                    }
                    if let Some((k, v)) = l.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers["content-length"].parse().unwrap();
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                kept.lock().unwrap().push(Delivery {
                    id: headers["webhook-id"].clone(),
                    timestamp: headers["webhook-timestamp"].clone(),
                    signature: headers["webhook-signature"].clone(),
                    body,
                });
                let status = if seen.fetch_add(1, Ordering::SeqCst) < fail_first {
                    "500 Internal Server Error"
                } else {
                    "200 OK"
                };
                let _ = reader.get_mut().write_all(
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .as_bytes(),
                );
            }
        });
        Receiver { url, got }
    }

    /// Waits until `n` deliveries came (at most 30 s); all of them.
    async fn wait_for(&self, n: usize) -> Vec<Delivery> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.got.lock().unwrap().clone();
            if got.len() >= n || Instant::now() > until {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Verifies a delivery's signature with `secret` (`whsec_…`), as a receiver's library does.
fn verified(d: &Delivery, secret: &str) -> Value {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.", d.id, d.timestamp).as_bytes());
    mac.update(&d.body);
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    assert_eq!(
        d.signature, expected,
        "a delivery's signature does not verify"
    );
    let age = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .abs_diff(d.timestamp.parse().unwrap());
    assert!(age < 120, "timestamp {} is {age} s off", d.timestamp);
    serde_json::from_slice(&d.body).unwrap()
}

async fn delete(c: &reqwest::Client, url: &str) -> u16 {
    c.delete(url).send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_listed_and_delivered_signed_in_order_retried_and_bounded_to_the_tenant() {
    let keys = two_tenant_keys("webhooks", ALICE, BOB);
    let s = start("webhooks", move |a| {
        a.api_keys_file = Some(keys);
        a.webhook_allow_private = "127.0.0.1".into();
    })
    .await;
    let alice = client_with_key(ALICE);
    // The receiver fails its first delivery: the event is sent again before any other.
    let live = Receiver::start(1);
    let (st, hook) = post(&alice, &s.url("/v1/webhooks"), &json!({"url": live.url})).await;
    assert_eq!(st, 201, "{hook}");
    let secret = hook["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{hook}");
    // A dead receiver (nothing listens there any more) beside it, for executions only.
    let dead_url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/gone", l.local_addr().unwrap())
    };
    let (st, dead) = post(
        &alice,
        &s.url("/v1/webhooks"),
        &json!({"url": dead_url, "events": ["execution.finished"]}),
    )
    .await;
    assert_eq!(st, 201, "{dead}");

    // A session's life, and a fresh execution.
    let id = open_session(&alice, &s.base, &json!({"template": "python"})).await;
    session_turn(&alice, &s.base, &id, "x = 6 * 7").await;
    take_snapshot(&alice, &s.base, &id).await;
    assert_eq!(
        delete(&alice, &s.url(&format!("/v1/sessions/{id}"))).await,
        204
    );
    let (st, v) = post(
        &alice,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "template": "python"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let kinds = [
        "session.created",
        "execution.finished",
        "session.snapshotted",
        "session.killed",
        "execution.finished",
    ];

    // Listed, in order, with what each says.
    let (st, page) = get(&alice, &s.url("/v1/events")).await;
    assert_eq!(st, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    let listed: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(listed, kinds, "{page}");
    assert_eq!(events[1]["session_id"], id.as_str(), "{page}");
    assert_eq!(events[1]["status"], "ok", "{page}");
    assert!(events[1]["usage"]["fuel"].as_u64().unwrap() > 0, "{page}");
    assert!(
        events[2]["snapshot_id"]
            .as_str()
            .unwrap()
            .starts_with("snap-"),
        "{page}"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let (_, created) = get(&alice, &s.url("/v1/events?type=session.created")).await;
    assert_eq!(created["events"].as_array().unwrap().len(), 1, "{created}");
    let (_, paged) = get(&alice, &s.url("/v1/events?limit=2")).await;
    assert_eq!(paged["next"], seqs[1], "{paged}");
    let (st, e) = get(&alice, &s.url("/v1/events?type=nope")).await;
    assert_eq!(st, 400, "{e}");

    // Delivered: the first try failed and was repeated, then every event once, in order,
    // each signed and verified.
    let got = live.wait_for(kinds.len() + 1).await;
    assert_eq!(got.len(), kinds.len() + 1, "{got:?}");
    assert_eq!(
        got[0].id, got[1].id,
        "the failed delivery is tried again first"
    );
    let bodies: Vec<Value> = got[1..].iter().map(|d| verified(d, &secret)).collect();
    let delivered: Vec<&str> = bodies.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(delivered, kinds);
    for ((b, e), d) in bodies.iter().zip(events).zip(&got[1..]) {
        assert_eq!(&b["data"], e, "a delivery carries the listed event");
        assert_eq!(
            b["data"]["id"],
            d.id.as_str(),
            "its webhook-id is the event's id"
        );
    }
    // Nothing of the code, its output or a key travels.
    let all = String::from_utf8(got.iter().flat_map(|d| d.body.clone()).collect()).unwrap();
    assert!(!all.contains("6 * 7") && !all.contains(ALICE), "{all}");

    // How each went: the live one delivered all, the dead one keeps failing its own.
    let (_, hooks) = get(&alice, &s.url("/v1/webhooks")).await;
    let hooks = hooks.as_array().unwrap();
    assert_eq!(hooks.len(), 2);
    let live_info = hooks.iter().find(|h| h["id"] == hook["id"]).unwrap();
    assert_eq!(live_info["delivered"], kinds.len(), "{live_info}");
    assert!(
        live_info.get("secret").is_none(),
        "a listing shows no secret: {live_info}"
    );
    let dead_info = hooks.iter().find(|h| h["id"] == dead["id"]).unwrap();
    assert_eq!(dead_info["delivered"], 0, "{dead_info}");
    assert!(dead_info["pending"].as_u64().unwrap() >= 1, "{dead_info}");

    // Another tenant sees no event and no webhook, and cannot delete one.
    let bob = client_with_key(BOB);
    let (_, theirs) = get(&bob, &s.url("/v1/events")).await;
    assert_eq!(theirs["events"], json!([]), "{theirs}");
    let (_, theirs) = get(&bob, &s.url("/v1/webhooks")).await;
    assert_eq!(theirs, json!([]));
    let hook_url = s.url(&format!("/v1/webhooks/{}", hook["id"].as_str().unwrap()));
    assert_eq!(delete(&bob, &hook_url).await, 404);
    assert_eq!(delete(&alice, &hook_url).await, 204);
    assert_eq!(delete(&alice, &hook_url).await, 404);

    // Audited, and never with the secret.
    let audit = std::fs::read_to_string(&s.audit_log).unwrap();
    assert!(audit.contains("\"webhook_create\"") && audit.contains("\"webhook_delete\""));
    assert!(!audit.contains(&secret));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_on_refused_addresses_or_out_of_shape_are_refused_at_registration() {
    // Loopback is not allowed here: only the operator's range may be.
    let s = start("webhooks-refused", |a| {
        a.webhook_allow_private = "10.9.0.0/16".into()
    })
    .await;
    let c = client();
    for (body, names) in [
        (json!({"url": "http://127.0.0.1:9/x"}), "127.0.0.1"),
        (
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
            "169.254.169.254",
        ),
        (json!({"url": "http://[::1]:8080/"}), "::1"),
        (json!({"url": "http://10.1.2.3/"}), "10.1.2.3"),
        (
            json!({"url": "http://localhost:8080/"}),
            "not a public address",
        ),
        (json!({"url": "ftp://example.com/"}), "http or https"),
        (json!({"url": "http://user:pw@10.9.0.1/"}), "credentials"),
        (
            json!({"url": "http://10.9.0.1/", "events": ["nope"]}),
            "nope",
        ),
        (
            json!({"url": "http://10.9.0.1/", "secret": "plain"}),
            "whsec_",
        ),
        (json!({"url": "http://10.9.0.1/", "extra": 1}), "extra"),
    ] {
        let (st, e) = post(&c, &s.url("/v1/webhooks"), &body).await;
        assert_eq!(st, 400, "{body}: {e}");
        assert!(e.to_string().contains(names), "{body}: {e}");
    }
    // The operator's range is allowed; a tenant has at most eight.
    for i in 0..8 {
        let (st, v) = post(
            &c,
            &s.url("/v1/webhooks"),
            &json!({"url": format!("http://10.9.0.{}/", i + 1)}),
        )
        .await;
        assert_eq!(st, 201, "{v}");
    }
    let (st, e) = post(
        &c,
        &s.url("/v1/webhooks"),
        &json!({"url": "http://10.9.0.99/"}),
    )
    .await;
    assert_eq!((st, error_code(&e)), (429, "quota_exceeded"), "{e}");
    s.stop().await;
}
