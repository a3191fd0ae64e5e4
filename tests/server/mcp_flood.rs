//! The MCP front door bounded in host memory: the real `vivarium serve` binary, default
//! settings, two API keys. One key floods `/mcp` with `initialize` over keep-alive
//! connections; the supervisor's resident memory (`VmRSS`) stays within 200 MiB of idle, the
//! key gets exactly its tenant's quota of sessions (`--max-mcp-sessions-per-tenant`, 256)
//! and then 429 `quota_exceeded` naming `mcp_sessions` with a `Retry-After`, and the other
//! key's sessions (one open before, one opened after) are untouched. Sessions leave the
//! count when deleted and when idle past `--mcp-session-idle-secs`.
//!
//! `benches/mcp_flood.py` runs the same flood at the scale (100,000) on a release
//! build.

use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

const ALICE: &str = "key-alice-0123456789";
const BOB: &str = "key-bob-0123456789";
/// The default of `--max-mcp-sessions-per-tenant`.
const PER_TENANT: usize = 256;

fn keys_file(tag: &str) -> std::path::PathBuf {
    let path = scratch_dir(tag).with_extension("keys.txt");
    std::fs::write(&path, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    path
}

/// The supervisor's resident memory, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

fn initialize_body(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"}}})
}

/// One `initialize`: its status, the session id when one was made, the `Retry-After`, the
/// body.
async fn initialize(
    c: &reqwest::Client,
    url: &str,
    id: u64,
) -> (u16, Option<String>, Option<String>, String) {
    let r = c
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize_body(id))
        .send()
        .await
        .unwrap();
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (session, retry) = (header("mcp-session-id"), header("retry-after"));
    let status = r.status().as_u16();
    (status, session, retry, r.text().await.unwrap())
}

/// `tools/list` on session `session`: the HTTP status.
async fn list_tools(c: &reqwest::Client, url: &str, session: &str) -> u16 {
    let r = c
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    assert!(
        status != 200 || body.contains("execute_python"),
        "tools/list: {body}"
    );
    status
}

async fn delete(c: &reqwest::Client, url: &str, session: &str) -> u16 {
    c.delete(url)
        .header("mcp-session-id", session)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The flood's tally.
#[derive(Default)]
struct Tally {
    made: Vec<String>,
    refused: usize,
    /// One refusal, to read.
    refusal: Option<(Option<String>, String)>,
    other: Vec<(u16, String)>,
}

/// `requests` `initialize` through `client` over CONNECTIONS keep-alive connections, bounded
/// in time; asserts every answer was 200 or 429, that enough were sent, and that the
/// supervisor (`pid`) grew at most 200 MiB over `idle`.
async fn flood(client: reqwest::Client, url: &str, requests: u64, pid: u32, idle: u64) -> Tally {
    const CONNECTIONS: u64 = 8;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(40);
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|t| {
            let (url, client) = (url.to_string(), client.clone());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let mut i = t;
                while i < requests && Instant::now() < deadline {
                    match initialize(&client, &url, i).await {
                        (200, Some(session), _, _) => tally.made.push(session),
                        (429, _, retry, body) => {
                            tally.refused += 1;
                            tally.refusal.get_or_insert((retry, body));
                        }
                        (status, _, _, body) => tally.other.push((status, body)),
                    }
                    i += CONNECTIONS;
                }
                tally
            })
        })
        .collect();
    let mut tally = Tally::default();
    for t in tasks {
        let t = t.await.unwrap();
        tally.made.extend(t.made);
        tally.refused += t.refused;
        tally.refusal = tally.refusal.or(t.refusal);
        tally.other.extend(t.other);
    }
    let took = started.elapsed();
    let grown = rss(pid).saturating_sub(idle);
    let sent = tally.made.len() + tally.refused + tally.other.len();
    eprintln!(
        "{sent} initialize in {took:.1?}: {} sessions, {} refused; supervisor RSS +{} MiB",
        tally.made.len(),
        tally.refused,
        grown >> 20
    );
    assert!(tally.other.is_empty(), "{:?}", &tally.other[..1]);
    assert!(
        sent as u64 >= requests / 4,
        "only {sent} requests in {took:?}"
    );
    assert!(
        grown <= 200 << 20,
        "supervisor RSS grew {} MiB",
        grown >> 20
    );
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_flood_from_one_key_is_bounded_and_spares_the_other_key() {
    const REQUESTS: u64 = 20_000;
    let keys = keys_file("mcp-flood");
    let scratch = scratch_dir("mcp-flood");
    let Proc { mut child, base } =
        spawn_server(&scratch, None, &["--api-keys-file", keys.to_str().unwrap()]);
    wait_ready_at(&base).await;
    let url = format!("{base}/mcp");
    let bob = client_with_key(BOB);
    let (st, bob_before, _, body) = initialize(&bob, &url, 1).await;
    assert_eq!(st, 200, "{body}");
    let bob_before = bob_before.unwrap();
    let idle = rss(child.id());

    let tally = flood(client_with_key(ALICE), &url, REQUESTS, child.id(), idle).await;
    assert_eq!(tally.made.len(), PER_TENANT, "sessions made for one key");

    let (retry, body) = tally.refusal.expect("a refusal");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert_eq!(error_code(&v), "quota_exceeded", "{v}");
    assert_eq!(
        v["quota"],
        json!({"quota": "mcp_sessions", "used": PER_TENANT, "limit": PER_TENANT}),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("alice"), "{message}");
    let (_, usage) = get(&client_with_key(ALICE), &format!("{base}/v1/usage")).await;
    let mcp = usage["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == "mcp_sessions")
        .unwrap();
    assert_eq!(mcp["used"], PER_TENANT, "{usage}");
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");

    // The other key: its session from before is there, and it opens new ones.
    assert_eq!(list_tools(&bob, &url, &bob_before).await, 200);
    let (st, bob_after, _, body) = initialize(&bob, &url, 2).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(list_tools(&bob, &url, &bob_after.unwrap()).await, 200);

    // One of the flooder's sessions ended frees one place, and one only.
    let alice = client_with_key(ALICE);
    assert_eq!(list_tools(&alice, &url, &tally.made[0]).await, 200);
    assert_eq!(delete(&alice, &url, &tally.made[0]).await, 204);
    assert_eq!(initialize(&alice, &url, 1).await.0, 200);
    assert_eq!(initialize(&alice, &url, 2).await.0, 429);

    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(&keys);
}

/// A session nobody uses for `--mcp-session-idle-secs` ends, and its place with it; the
/// server-wide cap (`--max-mcp-sessions`) refuses with its own code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_mcp_sessions_expire_and_the_server_cap_holds() {
    let keys = keys_file("mcp-idle");
    let scratch = scratch_dir("mcp-idle");
    let Proc { mut child, base } = spawn_server(
        &scratch,
        None,
        &[
            "--api-keys-file",
            keys.to_str().unwrap(),
            "--max-mcp-sessions",
            "3",
            "--max-mcp-sessions-per-tenant",
            "2",
            "--mcp-session-idle-secs",
            "2",
        ],
    );
    let url = format!("{base}/mcp");
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    let (_, first, _, _) = initialize(&alice, &url, 1).await;
    assert_eq!(initialize(&alice, &url, 2).await.0, 200);
    let (st, _, _, body) = initialize(&alice, &url, 3).await;
    assert_eq!(st, 429, "{body}");
    assert!(body.contains("quota_exceeded"), "{body}");
    assert_eq!(initialize(&bob, &url, 1).await.0, 200);
    let (st, _, retry, body) = initialize(&bob, &url, 2).await;
    assert_eq!(st, 429, "{body}");
    assert!(body.contains("too_many_mcp_sessions"), "{body}");
    assert!(retry.is_some());

    // Idle past 2 s: every session ended, every place free.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(list_tools(&alice, &url, &first.unwrap()).await, 404);
    for c in [&alice, &alice, &bob] {
        let (st, _, _, body) = initialize(c, &url, 4).await;
        assert_eq!(st, 200, "{body}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(&keys);
}

/// Without API keys every caller is one tenant with no MCP quota of its own: the server's
/// cap (`--max-mcp-sessions`, 2048) bounds the flood, with `too_many_mcp_sessions`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialize_flood_without_keys_stops_at_the_server_cap() {
    let scratch = scratch_dir("mcp-flood-open");
    let Proc { mut child, base } = spawn_server(&scratch, None, &[]);
    wait_ready_at(&base).await;
    let url = format!("{base}/mcp");
    let idle = rss(child.id());
    let tally = flood(client(), &url, 10_000, child.id(), idle).await;
    assert_eq!(tally.made.len(), 2048, "sessions made");
    let (retry, body) = tally.refusal.expect("a refusal");
    assert!(body.contains("too_many_mcp_sessions"), "{body}");
    assert!(retry.is_some());
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&scratch);
}
