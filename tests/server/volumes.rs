//! Volumes over real HTTP (`/v1/volumes`): files written, read back, listed and removed
//! without a sandbox, kept on disk across a restart; uploads streamed past the body cap and
//! refused whole past a volume's room (the volume intact); hostile names, paths and a link a
//! guest could leave; another tenant's volume invisible; a file holding a secret withheld as
//! any output is; every change one audit line.

use serde_json::{Value, json};

use crate::http_support::*;

const ALICE: &str = "volumes-key-alice-0123456789";
const BOB: &str = "volumes-key-bob-0123456789ab";

async fn put(c: &reqwest::Client, url: &str, body: Vec<u8>) -> (u16, Value) {
    let r = c.put(url).body(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get_bytes(c: &reqwest::Client, url: &str) -> (u16, Vec<u8>) {
    let r = c.get(url).send().await.unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// `PUT path` sent as it is (a client library would resolve `%2e%2e` first): the status and
/// the body.
fn raw_put(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Asserts a 507 `volume_full` naming `limit`.
fn refused_as_full((status, body): (u16, Value), limit: &str) {
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (507, Some("volume_full")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(limit), "{body}");
}

async fn delete(c: &reqwest::Client, url: &str) -> u16 {
    c.delete(url).send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volumes_files_are_kept_listed_replaced_and_outlive_the_server() {
    let dir = scratch_dir("volumes-kept");
    let volumes = dir.join("volumes");
    let at = volumes.clone();
    let s = start("volumes-kept", move |a| {
        a.volume_dir = Some(at);
        // Uploads are streamed to disk: the body cap is not their bound.
        a.max_body_bytes = 1 << 20;
    })
    .await;
    let c = client();
    let (st, v) = post(&c, &s.url("/v1/volumes"), &json!({"name": "data"})).await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(
        (v["name"].as_str(), v["bytes"].as_u64()),
        (Some("data"), Some(0))
    );
    let (st, again) = post(&c, &s.url("/v1/volumes"), &json!({"name": "data"})).await;
    assert_eq!(
        (st, again["error"]["code"].as_str()),
        (409, Some("volume_exists"))
    );

    let csv = b"id,value\n1,10\n2,20\n".to_vec();
    let (st, up) = put(
        &c,
        &s.url("/v1/volumes/data/files/raw/2026/sales.csv"),
        csv.clone(),
    )
    .await;
    assert_eq!(st, 201, "{up}");
    assert_eq!(
        up,
        json!({"path": "/raw/2026/sales.csv", "size": csv.len()})
    );
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (st, up) = put(&c, &s.url("/v1/volumes/data/files/big.bin"), big.clone()).await;
    assert_eq!(st, 201, "a 3 MiB upload past a 1 MiB body cap: {up}");
    assert_eq!(
        get_bytes(&c, &s.url("/v1/volumes/data/files/big.bin")).await,
        (200, big.clone())
    );
    assert_eq!(
        get_bytes(&c, &s.url("/v1/volumes/data/files/raw/2026/sales.csv")).await,
        (200, csv.clone())
    );

    let (st, list) = get(&c, &s.url("/v1/volumes/data/files?depth=3")).await;
    assert_eq!(st, 200, "{list}");
    let shown: Vec<(String, String, u64)> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
                e["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = |p: &str, k: &str, n: usize| (p.to_string(), k.to_string(), n as u64);
    assert_eq!(
        shown,
        vec![
            want("big.bin", "file", big.len()),
            want("raw", "dir", 0),
            want("raw/2026", "dir", 0),
            want("raw/2026/sales.csv", "file", csv.len()),
        ]
    );
    let (_, top) = get(&c, &s.url("/v1/volumes/data/files")).await;
    assert_eq!(
        top["entries"].as_array().unwrap().len(),
        2,
        "depth 1 by default: {top}"
    );
    let (_, info) = get(&c, &s.url("/v1/volumes/data")).await;
    assert_eq!(
        info["bytes"].as_u64(),
        Some((big.len() + csv.len()) as u64),
        "{info}"
    );
    assert_eq!(info["files"].as_u64(), Some(4), "{info}");

    // A replacement is whole; a removal frees its bytes.
    let (st, _) = put(
        &c,
        &s.url("/v1/volumes/data/files/raw/2026/sales.csv"),
        b"id\n".to_vec(),
    )
    .await;
    assert_eq!(st, 201);
    assert_eq!(
        delete(&c, &s.url("/v1/volumes/data/files/big.bin")).await,
        204
    );
    assert_eq!(
        get_bytes(&c, &s.url("/v1/volumes/data/files/big.bin"))
            .await
            .0,
        404
    );
    let (_, info) = get(&c, &s.url("/v1/volumes/data")).await;
    assert_eq!(
        (info["bytes"].as_u64(), info["files"].as_u64()),
        (Some(3), Some(3)),
        "{info}"
    );
    let (st, made) = post(&c, &s.url("/v1/volumes/data/dirs/empty/inner"), &json!({})).await;
    assert_eq!((st, made["kind"].as_str()), (201, Some("dir")), "{made}");

    let audit = s.audit();
    let actions: Vec<&str> = audit.iter().filter_map(|l| l["action"].as_str()).collect();
    for a in [
        "volume_create",
        "volume_upload",
        "volume_download",
        "volume_file_operation",
    ] {
        assert!(actions.contains(&a), "{a} in {actions:?}");
    }
    s.stop().await;

    // A write that a process left half done (it died mid-upload, or its sandbox did).
    let tenant = std::fs::read_dir(&volumes)
        .unwrap()
        .flatten()
        .find(|e| e.path().join("data").is_dir())
        .unwrap()
        .path();
    let stray = tenant.join("data/incoming/0123456789abcdef-0");
    std::fs::write(&stray, b"half a file").unwrap();

    // A new server on the same directory has it all, and clears what no one will finish.
    let at = volumes.clone();
    let s = start("volumes-kept-2", move |a| a.volume_dir = Some(at)).await;
    assert!(!stray.exists(), "a stray write is left in incoming/");
    let (st, list) = get(&c, &s.url("/v1/volumes")).await;
    assert_eq!(st, 200);
    assert_eq!(list["volumes"][0]["name"], "data", "{list}");
    assert_eq!(list["volumes"][0]["bytes"].as_u64(), Some(3), "{list}");
    assert_eq!(
        get_bytes(&c, &s.url("/v1/volumes/data/files/raw/2026/sales.csv")).await,
        (200, b"id\n".to_vec())
    );
    assert_eq!(delete(&c, &s.url("/v1/volumes/data")).await, 204);
    let (st, gone) = get(&c, &s.url("/v1/volumes/data")).await;
    assert_eq!(
        (st, gone["error"]["code"].as_str()),
        (404, Some("volume_not_found"))
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_a_limit_is_refused_whole_and_the_volume_is_intact() {
    let s = start("volumes-full", |a| {
        a.volume_bytes = 1000;
        a.volume_tenant_bytes = 1500;
        a.volume_files = 4;
        a.volumes_per_tenant = 2;
    })
    .await;
    let c = client();
    for name in ["one", "two"] {
        assert_eq!(
            post(&c, &s.url("/v1/volumes"), &json!({"name": name}))
                .await
                .0,
            201
        );
    }
    let (st, e) = post(&c, &s.url("/v1/volumes"), &json!({"name": "three"})).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (429, Some("quota_exceeded")),
        "{e}"
    );

    assert_eq!(
        put(&c, &s.url("/v1/volumes/one/files/a"), vec![b'a'; 600])
            .await
            .0,
        201
    );
    refused_as_full(
        put(&c, &s.url("/v1/volumes/one/files/b"), vec![b'b'; 600]).await,
        "volume_bytes",
    );
    // The tenant's bytes bound the other volume: 600 used of 1,500.
    assert_eq!(
        put(&c, &s.url("/v1/volumes/two/files/c"), vec![b'c'; 800])
            .await
            .0,
        201
    );
    refused_as_full(
        put(&c, &s.url("/v1/volumes/two/files/d"), vec![b'd'; 200]).await,
        "tenant_bytes",
    );
    // Replacing a file counts only what it grows by.
    assert_eq!(
        put(&c, &s.url("/v1/volumes/one/files/a"), vec![b'A'; 650])
            .await
            .0,
        201
    );
    // Files and folders: `x/y/z` would make three entries beside `a`.
    refused_as_full(
        put(&c, &s.url("/v1/volumes/one/files/x/y/z/f"), vec![1]).await,
        "files",
    );

    // Intact: the first file whole, nothing of the refused ones, no upload left half-way.
    assert_eq!(
        get_bytes(&c, &s.url("/v1/volumes/one/files/a")).await,
        (200, vec![b'A'; 650])
    );
    let (_, list) = get(&c, &s.url("/v1/volumes/one/files?depth=8")).await;
    assert_eq!(list["entries"].as_array().unwrap().len(), 1, "{list}");
    let incoming: Vec<_> = walk(&s.scratch.with_extension("volumes"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/incoming/"))
        .collect();
    assert!(incoming.is_empty(), "uploads left behind: {incoming:?}");
    s.stop().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_paths_and_links_are_refused_by_name() {
    let s = start("volumes-hostile", |_| {}).await;
    let c = client();
    for name in ["..", ".hidden", "a/b", "", "x y", &"n".repeat(64)] {
        let (st, e) = post(&c, &s.url("/v1/volumes"), &json!({"name": name})).await;
        assert_eq!(
            (st, e["error"]["field"].as_str()),
            (400, Some("name")),
            "{name:?}: {e}"
        );
    }
    let (st, e) = post(&c, &s.url("/v1/volumes"), &json!({"name": "v", "extra": 1})).await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(
        post(&c, &s.url("/v1/volumes"), &json!({"name": "v"}))
            .await
            .0,
        201
    );
    // Encoded so that the client sends them as they are.
    for path in [
        "%2e%2e/escape",
        "a/%2e%2e/%2e%2e/escape",
        "a%2f%2e%2e%2f%2e%2e%2fescape",
        "a//b",
        "a/%00b",
    ] {
        let (st, e) = raw_put(s.addr, &format!("/v1/volumes/v/files/{path}"));
        assert_eq!(
            (st, e["error"]["code"].as_str()),
            (400, Some("invalid_path")),
            "{path}: {e}"
        );
    }
    assert!(
        !s.scratch
            .with_extension("volumes")
            .parent()
            .unwrap()
            .join("escape")
            .exists(),
        "nothing was written outside"
    );
    // A link left inside the volume (as a guest could make one) is listed, never followed.
    let files_dir = walk(&s.scratch.with_extension("volumes"))
        .into_iter()
        .find(|p| p.ends_with("volume.json"))
        .unwrap()
        .parent()
        .unwrap()
        .join("files");
    std::os::unix::fs::symlink("/etc", files_dir.join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", files_dir.join("name")).unwrap();
    let (st, e) = get(&c, &s.url("/v1/volumes/v/files/out/passwd")).await;
    assert!(matches!(st, 404 | 409), "{st} {e}");
    let (st, e) = get(&c, &s.url("/v1/volumes/v/files/name")).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (409, Some("invalid_path")),
        "{e}"
    );
    let (st, e) = put(&c, &s.url("/v1/volumes/v/files/out/new"), b"x".to_vec()).await;
    assert!(matches!(st, 404 | 409), "{st} {e}");
    assert!(!std::path::Path::new("/etc/new").exists());
    let (_, list) = get(&c, &s.url("/v1/volumes/v/files")).await;
    let kinds: Vec<&str> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["symlink", "symlink"], "{list}");
    // Removing a link removes the link, not what it points at.
    assert_eq!(delete(&c, &s.url("/v1/volumes/v/files/out")).await, 204);
    assert!(std::path::Path::new("/etc/hostname").exists());
    // A folder is not a file, nor the top.
    assert_eq!(
        post(&c, &s.url("/v1/volumes/v/dirs/d"), &json!({})).await.0,
        201
    );
    let (st, e) = put(&c, &s.url("/v1/volumes/v/files/d"), b"x".to_vec()).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (409, Some("invalid_path")),
        "{e}"
    );
    let (st, _) = get(&c, &s.url("/v1/volumes/v/files/d")).await;
    assert_eq!(st, 409);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_its_tenants_and_its_files_pass_the_leakage_scan() {
    let keys = two_tenant_keys("volumes-tenants", ALICE, BOB);
    let s = start("volumes-tenants", move |a| {
        a.api_keys_file = Some(keys);
        a.leakage = vivarium::LeakPolicy::Redact;
    })
    .await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    assert_eq!(
        post(&alice, &s.url("/v1/volumes"), &json!({"name": "data"}))
            .await
            .0,
        201
    );
    assert_eq!(
        put(
            &alice,
            &s.url("/v1/volumes/data/files/f"),
            b"alice's".to_vec()
        )
        .await
        .0,
        201
    );
    for url in [
        "/v1/volumes/data",
        "/v1/volumes/data/files/f",
        "/v1/volumes/data/files",
    ] {
        let (st, e) = get(&bob, &s.url(url)).await;
        assert_eq!(
            (st, e["error"]["code"].as_str()),
            (404, Some("volume_not_found")),
            "{url}"
        );
    }
    assert_eq!(delete(&bob, &s.url("/v1/volumes/data")).await, 404);
    let (_, list) = get(&bob, &s.url("/v1/volumes")).await;
    assert_eq!(list, json!({"volumes": []}));
    // The same name is the other tenant's own.
    assert_eq!(
        post(&bob, &s.url("/v1/volumes"), &json!({"name": "data"}))
            .await
            .0,
        201
    );
    assert_eq!(
        get_bytes(&bob, &s.url("/v1/volumes/data/files/f")).await.0,
        404
    );
    assert_eq!(
        get_bytes(&alice, &s.url("/v1/volumes/data/files/f")).await,
        (200, b"alice's".to_vec())
    );
    let no_key = client();
    assert_eq!(get(&no_key, &s.url("/v1/volumes")).await.0, 401);

    // A secret in a text file is withheld, as a session's large file is.
    let secret = "AKIA".to_string() + "X4M7Q2ZK5R3TJ6WP";
    let text = format!("config\naws_access_key_id = {secret}\n");
    assert_eq!(
        put(
            &alice,
            &s.url("/v1/volumes/data/files/creds.txt"),
            text.into_bytes()
        )
        .await
        .0,
        201
    );
    let (st, e) = get(&alice, &s.url("/v1/volumes/data/files/creds.txt")).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (422, Some("output_leak")),
        "{e}"
    );
    assert!(!e.to_string().contains(&secret), "{e}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_in_flight_count_against_the_room_they_would_take() {
    use std::io::{Read, Write};
    let s = start("volumes-inflight", |a| a.volume_bytes = 1000).await;
    let c = client();
    assert_eq!(
        post(&c, &s.url("/v1/volumes"), &json!({"name": "v"}))
            .await
            .0,
        201
    );
    // Two uploads of 700 bytes, each alone within the volume's 1,000: the first sends 600
    // bytes and waits; the second's first 600 would pass the room the two hold together.
    let open = |path: &str| {
        let mut t = std::net::TcpStream::connect(s.addr).unwrap();
        write!(
            t,
            "PUT /v1/volumes/v/files/{path} HTTP/1.1\r\nHost: x\r\nContent-Length: 700\r\n\r\n"
        )
        .unwrap();
        t.write_all(&[b'x'; 600]).unwrap();
        t
    };
    let mut first = open("first");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut second = open("second");
    second
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = second.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 507"), "{answer}");
    assert!(answer.contains("volume_full"), "{answer}");
    // The first completes, whole.
    first.write_all(&[b'x'; 100]).unwrap();
    first
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = first.read(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let (_, info) = get(&c, &s.url("/v1/volumes/v")).await;
    assert_eq!(info["bytes"].as_u64(), Some(700), "{info}");
    drop((first, second));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_folder_that_cannot_be_made_fails_its_calls_not_the_server() {
    // A regular file where the folder would go: nothing can be made below it.
    let dir = scratch_dir("volumes-unusable");
    std::fs::write(dir.join("blocked"), b"a file").unwrap();
    let at = dir.join("blocked").join("volumes");
    let s = start("volumes-unusable", move |a| a.volume_dir = Some(at)).await;
    let c = client();
    let (st, e) = post(&c, &s.url("/v1/volumes"), &json!({"name": "v"})).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (500, Some("internal")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("volume storage"),
        "{e}"
    );
    // Everything else is served.
    let (st, r) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "template": "python"}),
    )
    .await;
    assert_eq!((st, r["stdout"].as_str()), (200, Some("1\n")), "{r}");
    s.stop().await;
}
