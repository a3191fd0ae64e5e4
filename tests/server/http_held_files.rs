//! Returned files and session downloads are streamed from the sandbox's directory, never
//! held whole in memory (issue #26, item 7): over real HTTP against the real `vivarium serve`
//! binary, a run that returns a 256 MiB file and a session download of one grow the
//! supervisor and its worker together by at most 1.2× the file (plus a fixed slack for the
//! guest's own memory), and the bytes arrive intact. A large file is scanned for leaks from
//! disk, a chunk at a time, under every policy.

use std::path::Path;

use crate::http_support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const FILE_BYTES: u64 = 256 << 20;
const CHUNK_BYTES: u64 = 32 << 20;
/// What the guest itself and the server's fixed buffers may add: the guest's linear memory
/// (its 32 MiB blocks and the interpreter), pieces in flight, allocator slack.
const SLACK_BYTES: u64 = 160 << 20;

/// Python that writes `FILE_BYTES` to `big.bin` in `CHUNK_BYTES` writes, each block
/// starting with its index (so that a misplaced block shows).
fn writer(name: &str) -> String {
    format!(
        "block = bytearray(bytes(range(256)) * ({CHUNK_BYTES} // 256))\n\
         with open('{name}', 'wb') as f:\n\
         \x20   for i in range({}):\n\
         \x20       block[:8] = i.to_bytes(8, 'little')\n\
         \x20       f.write(block)\n",
        FILE_BYTES / CHUNK_BYTES
    )
}

fn expected_sha256() -> Vec<u8> {
    let mut block: Vec<u8> = (0..CHUNK_BYTES).map(|i| i as u8).collect();
    let mut h = Sha256::new();
    for i in 0..FILE_BYTES / CHUNK_BYTES {
        block[..8].copy_from_slice(&i.to_le_bytes());
        h.update(&block);
    }
    h.finalize().to_vec()
}

/// The server process, killed when the test ends, passed or failed.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pid` and its children (the worker processes).
fn family(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, then the parent's pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resets each process's peak resident set to its resident set now; their sum.
fn reset_peaks(pids: &[u32]) -> u64 {
    pids.iter()
        .map(|&p| {
            std::fs::write(format!("/proc/{p}/clear_refs"), "5").unwrap();
            status_kb(p, "VmRSS:") << 10
        })
        .sum()
}

/// The sum of each process's peak resident set since [`reset_peaks`].
fn peaks(pids: &[u32]) -> u64 {
    pids.iter().map(|&p| status_kb(p, "VmHWM:") << 10).sum()
}

/// A response body read a piece at a time (the test keeps it, the server must not).
async fn body_of(resp: reqwest::Response) -> Vec<u8> {
    let mut resp = resp;
    let mut out = Vec::new();
    while let Some(piece) = resp.chunk().await.unwrap() {
        out.extend_from_slice(&piece);
    }
    out
}

/// The base64 content of `path` in an execution's JSON result, decoded (found by scanning:
/// a 340 MiB JSON value is slow to parse in a test).
fn content_of(json: &[u8], path: &str, size: u64) -> Vec<u8> {
    let head = format!("{{\"path\":\"{path}\",\"size\":{size},\"content\":\"");
    let at = json
        .windows(head.len())
        .position(|w| w == head.as_bytes())
        .unwrap_or_else(|| panic!("no {head} in the result"))
        + head.len();
    let end = at + json[at..].iter().position(|&b| b == b'"').unwrap();
    unb64(std::str::from_utf8(&json[at..end]).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_file_and_a_download_stream_from_disk_within_1_2x_of_the_file() {
    let scratch = scratch_dir("held");
    let snaps = scratch.with_extension("snapshots");
    let Proc { child, base } = spawn_server(&scratch, Some(&snaps), &["--workers", "1"]);
    let server = Server(child);
    wait_ready_at(&base).await;
    let c = client();
    let pids = family(server.0.id());
    assert_eq!(pids.len(), 2, "a supervisor and one worker: {pids:?}");
    let limits = json!({ "disk_bytes": FILE_BYTES + (16 << 20), "memory_bytes": 512 << 20 });
    let want = expected_sha256();

    // A warm-up of the same shape (the guest's memory, the held path) before measuring.
    let small =
        writer("small.bin").replace(&format!("range({})", FILE_BYTES / CHUNK_BYTES), "range(1)");
    let (st, v) = post(
        &c,
        &format!("{base}/v1/execute"),
        &json!({ "code": small, "template": "python", "limits": limits }),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["files"][0]["size"], CHUNK_BYTES, "{}", v["stderr"]);

    let before = reset_peaks(&pids);
    let resp = c
        .post(format!("{base}/v1/execute"))
        .json(&json!({ "code": writer("big.bin"), "template": "python", "limits": limits }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let json = body_of(resp).await;
    let grew = peaks(&pids).saturating_sub(before);
    let bytes = content_of(&json, "big.bin", FILE_BYTES);
    drop(json);
    assert_eq!(bytes.len() as u64, FILE_BYTES);
    assert_eq!(
        Sha256::digest(&bytes).to_vec(),
        want,
        "the file arrives intact"
    );
    drop(bytes);
    eprintln!("execute: supervisor and worker grew {} MiB", grew >> 20);
    assert!(
        grew <= FILE_BYTES * 6 / 5 + SLACK_BYTES,
        "a 256 MiB returned file grew the server by {} MiB",
        grew >> 20
    );

    // A session's download.
    let id = open_session(
        &c,
        &base,
        &json!({ "template": "python", "limits": limits }),
    )
    .await;
    let (st, v) = post(
        &c,
        &format!("{base}/v1/sessions/{id}/execute"),
        &json!({ "code": writer("big.bin") }),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    let before = reset_peaks(&pids);
    let resp = c
        .get(format!("{base}/v1/sessions/{id}/files/big.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let bytes = body_of(resp).await;
    let grew = peaks(&pids).saturating_sub(before);
    assert_eq!(bytes.len() as u64, FILE_BYTES);
    assert_eq!(
        Sha256::digest(&bytes).to_vec(),
        want,
        "the download arrives intact"
    );
    eprintln!("download: supervisor and worker grew {} MiB", grew >> 20);
    assert!(
        grew <= FILE_BYTES * 6 / 5 + SLACK_BYTES,
        "a 256 MiB download grew the server by {} MiB",
        grew >> 20
    );

    // Nothing is left behind: the held copies went with their responses.
    let root = scratch.join(pids[1].to_string());
    let left = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("held-"))
        .count();
    assert_eq!(left, 0, "files left in {}", root.display());
    drop(server);
    cleanup(&scratch, &snaps);
}

fn cleanup(scratch: &Path, snaps: &Path) {
    let _ = std::fs::remove_dir_all(scratch);
    let _ = std::fs::remove_dir_all(snaps);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}

const GH: &str = "ghp_R2d4kPq8ZtW1xY7bN3mC5vL9sA0fH6jE2uTo";

/// Python that writes a 3 MiB text file with a GitHub token at `at`.
fn with_secret(at: usize) -> String {
    format!(
        "s = 'x' * {at} + ' {GH} ' + 'y' * {}\nopen('big.txt', 'w').write(s)\n",
        (3 << 20) - at
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_is_scanned_from_disk_under_every_policy_in_process_too() {
    // In process (`--workers 0`): the supervisor claims what its own sandboxes hold.
    let server = start("held-leaks", |a| a.workers = Some(0)).await;
    let c = client();
    let at = (2 << 20) + 5;
    let run = |policy: &'static str| {
        let c = c.clone();
        let url = server.url("/v1/execute");
        async move {
            post(
                &c,
                &url,
                &json!({ "code": with_secret(at), "template": "python", "leakage": policy }),
            )
            .await
        }
    };
    // report: found at its place in the whole file, the file returned as it is.
    let (st, v) = run("report").await;
    assert_eq!(st, 200, "{v}");
    let leak = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["file"] == "big.txt")
        .unwrap_or_else(|| panic!("no leak in the file: {}", v["leaks"]));
    assert_eq!(leak["rule"], "github-pat");
    assert_eq!(leak["offset"], at + 1);
    let content = unb64(v["files"][0]["content"].as_str().unwrap());
    assert_eq!(content.len(), (3 << 20) + GH.len() + 2);
    assert!(content.windows(GH.len()).any(|w| w == GH.as_bytes()));
    // redact: a held text file cannot be rewritten in place: withheld, its leak listed.
    let (st, v) = run("redact").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["files"][0]["path"], "big.txt");
    assert_eq!(v["files"][0]["content"], Value::Null, "withheld");
    assert!(
        v["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["file"] == "big.txt")
    );
    // deny: nothing leaves.
    let (st, v) = run("deny").await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(error_code(&v), "output_leak");

    // A session's download: redact cannot rewrite it, so it is refused as under deny.
    let id = open_session(&c, &server.base, &json!({ "template": "python" })).await;
    let (st, v) = post(
        &c,
        &server.url(&format!("/v1/sessions/{id}/execute")),
        &json!({ "code": with_secret(at) }),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let resp = c
        .get(server.url(&format!("/v1/sessions/{id}/files/big.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    server.stop().await;
}
