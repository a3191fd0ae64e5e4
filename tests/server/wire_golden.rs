//! The wire format, byte for byte: one real server on 127.0.0.1 gets a fixed, ordered list of
//! requests through every front door (`/v1/execute` plain and streamed, `/v1/check`, sessions
//! and their files, Piston, MCP, the operational endpoints) with their error shapes. Each
//! exchange (method, path, what was sent, the status, the response headers, the body as
//! received), then every audit-log line, are rendered as a transcript and compared with
//! `tests/golden/wire.txt`.
//!
//! Only what differs between runs is normalised, on the raw text (never through a parsed
//! `serde_json::Value`, which would reorder keys): random ids (numbered in order of first
//! appearance, so the same id still shows as the same placeholder), RFC 3339 times, wall
//! times (`usage.wall_ms`, Piston's `wall_time`, the latency histogram's buckets and sum),
//! fuel (`usage.fuel`, Piston's `cpu_time`, the fuel counter), the client port in the audit
//! log, the gauges that follow teardowns done after the response, and the count of 503s (the
//! readiness polls made while the runtime loaded). Peak memory and disk use are the same in
//! every run and stay exact, as does everything else: keys, their order, strings, statuses,
//! headers (but `date` and `content-length`).
//!
//! `UPDATE_GOLDEN=1 cargo test --test server wire_golden::` rewrites the golden file.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::http_support::*;
use reqwest::Method;

const KEY: &str = "golden-key-0123456789abcdef";
const GOLDEN: &str = "tests/golden/wire.txt";
/// Stands for a body kept out of the normalisers, until they have run.
const KEPT: &str = "@@kept body ";
const KEPT_END: &str = "@@";

/// What a recorded exchange answered, raw (before normalisation).
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Reply {
    /// The string value of `"key":"…"` in a JSON body (the first one).
    fn json_str(&self, key: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body));
        v[key]
            .as_str()
            .unwrap_or_else(|| panic!("no string {key} in {}", self.body))
            .to_string()
    }
}

/// Sends requests one after the other and writes each exchange into the transcript.
struct Recorder {
    client: reqwest::Client,
    base: String,
    out: String,
    step: usize,
    /// Set before a request whose body holds nothing that varies but looks like it does
    /// (the OpenAPI document's example ids): it is kept out of the normalisers.
    keep_body: bool,
    kept: Vec<String>,
}

impl Recorder {
    /// One exchange. `auth`: send the API key. `headers`: sent (and recorded) as given.
    async fn send(
        &mut self,
        title: &str,
        method: Method,
        path: &str,
        auth: bool,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Reply {
        self.step += 1;
        let _ = writeln!(self.out, "=== {:02} {title}", self.step);
        let _ = writeln!(self.out, "{method} {path}");
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if auth {
            req = req.bearer_auth(KEY);
            let _ = writeln!(self.out, "> authorization: Bearer <key>");
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
            let _ = writeln!(self.out, "> {name}: {value}");
        }
        if let Some(body) = body {
            req = req.body(body.to_string());
            write_body(&mut self.out, ">|", body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.unwrap();
        let body = match String::from_utf8(bytes.to_vec()) {
            Ok(s) => s,
            Err(_) => format!("<{} bytes, not UTF-8: {}>", bytes.len(), hex_of(&bytes)),
        };
        let _ = writeln!(self.out, "< {status}");
        let mut names: Vec<&str> = headers
            .keys()
            .map(|n| n.as_str())
            .filter(|n| !matches!(*n, "date" | "content-length"))
            .collect();
        names.sort_unstable();
        for name in names {
            for value in headers.get_all(name) {
                let value = String::from_utf8_lossy(value.as_bytes());
                let _ = writeln!(self.out, "< {name}: {value}");
            }
        }
        if std::mem::take(&mut self.keep_body) {
            let _ = writeln!(self.out, "{}{}{KEPT_END}", KEPT, self.kept.len());
            self.kept.push(body.clone());
        } else {
            write_body(&mut self.out, "<|", &body);
        }
        self.out.push('\n');
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn post_json(&mut self, title: &str, path: &str, body: &str) -> Reply {
        self.send(
            title,
            Method::POST,
            path,
            true,
            &[("content-type", "application/json")],
            Some(body),
        )
        .await
    }

    async fn get(&mut self, title: &str, path: &str) -> Reply {
        self.send(title, Method::GET, path, true, &[], None).await
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A body, one `prefix` line per `\n`-separated piece: `a\n` gives `prefix a` and `prefix`,
/// so the bytes (and a missing or present final newline) are recoverable.
fn write_body(out: &mut String, prefix: &str, body: &str) {
    for line in body.split('\n') {
        if line.is_empty() {
            let _ = writeln!(out, "{prefix}");
        } else {
            let _ = writeln!(out, "{prefix} {line}");
        }
    }
}

// ---- normalisers: small scanners over the raw text ----

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Replaces every match of `matcher` (the length of a match starting at `i`, if one does);
/// `replace` gets the matched text. Matches are ASCII, so UTF-8 elsewhere passes untouched.
fn replace_matches(
    text: &str,
    matcher: impl Fn(&[u8], usize) -> Option<usize>,
    mut replace: impl FnMut(&str) -> String,
) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if let Some(len) = matcher(b, i) {
            out.push_str(&text[copied..i]);
            out.push_str(&replace(&text[i..i + len]));
            i += len;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Matches `shape` at `i`: `9` a digit, `h` a lowercase hex digit, anything else itself.
fn shape_at(b: &[u8], i: usize, shape: &str) -> bool {
    let s = shape.as_bytes();
    b.len() >= i + s.len()
        && s.iter().zip(&b[i..]).all(|(want, got)| match want {
            b'9' => got.is_ascii_digit(),
            b'h' => is_hex(*got),
            c => c == got,
        })
}

/// `2026-12-01T08:40:12.345Z` (fraction and offset of any RFC 3339 form).
fn rfc3339_at(b: &[u8], i: usize) -> Option<usize> {
    if !shape_at(b, i, "9999-99-99T99:99:99") || (i > 0 && is_word(b[i - 1])) {
        return None;
    }
    let mut j = i + 19;
    if b.get(j) == Some(&b'.') {
        j += 1;
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
    }
    match b.get(j) {
        Some(b'Z') => Some(j + 1 - i),
        Some(b'+' | b'-') if shape_at(b, j + 1, "99:99") => Some(j + 6 - i),
        _ => None,
    }
}

/// `prefix` then exactly `hex` lowercase hex digits, not inside a longer word.
fn hex_id_at(b: &[u8], i: usize, prefix: &str, hex: usize) -> Option<usize> {
    let p = prefix.as_bytes();
    if (i > 0 && (is_word(b[i - 1]) || b[i - 1] == b'-')) || !b[i..].starts_with(p) {
        return None;
    }
    let start = i + p.len();
    let digits = b[start..].iter().take_while(|c| is_hex(**c)).count();
    let after = b.get(start + digits).copied();
    (digits == hex && !after.is_some_and(is_word)).then_some(p.len() + hex)
}

/// A UUID as rmcp makes MCP session ids: 8-4-4-4-12 lowercase hex.
fn uuid_at(b: &[u8], i: usize) -> Option<usize> {
    let ok = shape_at(b, i, "hhhhhhhh-hhhh-hhhh-hhhh-hhhhhhhhhhhh")
        && !(i > 0 && is_word(b[i - 1]))
        && !b.get(i + 36).copied().is_some_and(is_word);
    ok.then_some(36)
}

/// Numbers the distinct matches of `matcher`: `<tag-1>`, `<tag-2>`, … in order of first
/// appearance, `prefix` kept, so equal ids stay visibly equal.
fn number_ids(
    text: &str,
    prefix: &str,
    tag: &str,
    matcher: impl Fn(&[u8], usize) -> Option<usize>,
) -> String {
    let mut seen: HashMap<String, usize> = HashMap::new();
    replace_matches(text, matcher, |id| {
        let next = seen.len() + 1;
        let n = *seen.entry(id.to_string()).or_insert(next);
        format!("{prefix}<{tag}-{n}>")
    })
}

/// The length of a JSON number at `i`.
fn number_len(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'))
        .count()
}

/// `"key":<number>` → `"key":<n>` wherever the key occurs in `text`. A value that is no
/// longer a number is left as it is (and so shows up as a difference).
fn mask_number_key(text: &str, key: &str) -> String {
    let pat = format!("\"{key}\":");
    replace_matches(
        text,
        |b, i| {
            b[i..].starts_with(pat.as_bytes()).then(|| {
                let n = number_len(b, i + pat.len());
                (n > 0).then_some(pat.len() + n)
            })?
        },
        |_| format!("{pat}<n>"),
    )
}

/// The figures of each `"usage":{…}` object (flat) that differ from run to run: the wall time,
/// and the fuel (mostly the same, but not always: a traceback, for one, has `linecache` stat
/// the file and work with its times). Peak memory and disk use come out the same in every
/// run, so they stay exact.
fn mask_usage(text: &str) -> String {
    const OPEN: &str = "\"usage\":{";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let body_start = at + OPEN.len();
        let Some(close) = rest[body_start..].find('}') else {
            break;
        };
        out.push_str(&rest[..body_start]);
        let mut inner = rest[body_start..body_start + close].to_string();
        for key in ["wall_ms", "fuel"] {
            inner = mask_number_key(&inner, key);
        }
        out.push_str(&inner);
        rest = &rest[body_start + close..];
    }
    out.push_str(rest);
    out
}

/// `127.0.0.1:54321` as a client address in the audit log.
fn mask_client_port(text: &str) -> String {
    const PAT: &str = "\"client\":\"127.0.0.1:";
    replace_matches(
        text,
        |b, i| {
            b[i..].starts_with(PAT.as_bytes()).then(|| {
                let n = b[i + PAT.len()..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                (n > 0).then_some(PAT.len() + n)
            })?
        },
        |_| format!("{PAT}<port>"),
    )
}

/// Metric samples whose values depend on timing. Returns `None` for a line to drop.
fn mask_metric_line(line: &str) -> Option<String> {
    let (lead, sample) = match line.strip_prefix("<| ") {
        Some(s) => ("<| ", s),
        None => return Some(line.to_string()),
    };
    // Counted 503s are the readiness polls made while the runtime loaded: 0 to many.
    if sample.starts_with("vivarium_http_responses_total{code=\"503\"} ") {
        return None;
    }
    let timing = |name: &str| {
        (sample.starts_with(&format!("{name}_bucket{{")) && !sample.contains("le=\"+Inf\""))
            || sample.starts_with(&format!("{name}_sum "))
    };
    let masked = timing("vivarium_execution_duration_seconds")
        // The runs' fuel, summed; gauges that follow teardowns done off the executor after
        // the response has left (a closed session's slot and memory, sandbox directories).
        || [
            "vivarium_fuel_consumed_total ",
            "vivarium_live_sessions ",
            "vivarium_memory_charged_bytes ",
            "vivarium_pooled_instances ",
            "vivarium_sandbox_dirs ",
        ]
        .iter()
        .any(|p| sample.starts_with(p));
    if !masked {
        return Some(line.to_string());
    }
    let (name, _) = sample.rsplit_once(' ')?;
    Some(format!("{lead}{name} <n>"))
}

/// Puts the kept bodies back in place of their markers, once the rest is normalised.
fn restore_kept(text: &str, kept: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let marker = line
            .strip_prefix(KEPT)
            .and_then(|l| l.trim_end().strip_suffix(KEPT_END))
            .and_then(|n| n.parse::<usize>().ok());
        match marker {
            Some(n) => write_body(&mut out, "<|", &kept[n]),
            None => out.push_str(line),
        }
    }
    out
}

fn normalise(raw: &str) -> String {
    let mut t = replace_matches(raw, rfc3339_at, |_| "<time>".into());
    for (prefix, tag) in [("ex-", "ex"), ("turn-", "turn"), ("s-", "s")] {
        t = number_ids(&t, prefix, tag, |b, i| hex_id_at(b, i, prefix, 32));
    }
    // Request ids (the `x-request-id` header, the audit log's `request_id`).
    t = number_ids(&t, "", "rid", |b, i| hex_id_at(b, i, "", 32));
    t = number_ids(&t, "", "mcp-session", uuid_at);
    t = mask_usage(&t);
    // Piston's `wall_time` and `cpu_time` (made from the fuel); its `memory` stays exact.
    for key in ["cpu_time", "wall_time"] {
        t = mask_number_key(&t, key);
    }
    t = mask_client_port(&t);
    let mut out = String::with_capacity(t.len());
    for line in t.split_inclusive('\n') {
        let (text, nl) = match line.strip_suffix('\n') {
            Some(l) => (l, "\n"),
            None => (line, ""),
        };
        if let Some(l) = mask_metric_line(text) {
            out.push_str(&l);
            out.push_str(nl);
        }
    }
    out
}

/// Compares with the golden file, or writes it under `UPDATE_GOLDEN=1`.
fn compare_with_golden(actual: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let golden = root.join(GOLDEN);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, actual).unwrap();
        eprintln!("wrote {}", golden.display());
        return;
    }
    let expected = std::fs::read_to_string(&golden).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); make it with UPDATE_GOLDEN=1 cargo test --test server wire_golden::",
            golden.display()
        )
    });
    if expected == actual {
        return;
    }
    let actual_file = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wire.actual.txt");
    let _ = std::fs::write(&actual_file, actual);
    panic!(
        "{}\nthe whole transcript is in {}; if the change is intended, \
         regenerate with UPDATE_GOLDEN=1 cargo test --test server wire_golden::",
        first_difference(&expected, actual),
        actual_file.display()
    );
}

/// The first differing line with a few lines of context, and where in the line it differs.
fn first_difference(expected: &str, actual: &str) -> String {
    let e: Vec<&str> = expected.split('\n').collect();
    let a: Vec<&str> = actual.split('\n').collect();
    let i = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    let mut msg = format!(
        "the wire transcript differs from {GOLDEN} at line {} (golden {} lines, actual {}):\n",
        i + 1,
        e.len(),
        a.len()
    );
    let from = i.saturating_sub(4);
    for (n, line) in e.iter().enumerate().take(i).skip(from) {
        let _ = writeln!(msg, "  {:>5}   {}", n + 1, clip(line, 0));
    }
    let (el, al) = (e.get(i).copied(), a.get(i).copied());
    let col = match (el, al) {
        (Some(x), Some(y)) => x
            .char_indices()
            .zip(y.chars())
            .find(|((_, c1), c2)| c1 != c2)
            .map_or(x.len().min(y.len()), |((at, _), _)| at),
        _ => 0,
    };
    let show = |l: Option<&str>| l.map_or("<end of file>".to_string(), |l| clip(l, col));
    let _ = writeln!(msg, "- {:>5}   {}", i + 1, show(el));
    let _ = writeln!(msg, "+ {:>5}   {}", i + 1, show(al));
    if el.is_some() && al.is_some() {
        let _ = writeln!(msg, "  (first difference at byte {} of the line)", col + 1);
    }
    for (n, line) in a.iter().enumerate().skip(i + 1).take(4) {
        let _ = writeln!(msg, "  {:>5}   {}", n + 1, clip(line, 0));
    }
    msg
}

/// A long line cut to a window around byte `at`.
fn clip(line: &str, at: usize) -> String {
    const WIDTH: usize = 160;
    if line.len() <= WIDTH {
        return line.to_string();
    }
    let mut start = at.saturating_sub(WIDTH / 2);
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + WIDTH).min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}{}{}",
        if start > 0 { "…" } else { "" },
        &line[start..end],
        if end < line.len() { "…" } else { "" }
    )
}

/// The text of the `data:` lines of a server-sent event stream, for reading values out.
fn sse_data(body: &str) -> String {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wire_format_matches_the_golden_transcript() {
    let keys_dir = scratch_dir("wire-keys");
    let keys = keys_dir.join("keys.txt");
    std::fs::write(&keys, format!("golden:{KEY}\n")).unwrap();
    // Our own audit log: `TestServer::stop` removes its default one.
    let audit_log = keys_dir.join("audit.jsonl");
    let (k, log) = (keys.clone(), audit_log.clone());
    let s = start("wire", move |a| {
        a.api_keys_file = Some(k);
        a.audit_log = Some(log);
        // Fixed where the defaults depend on the machine (cores, RAM).
        a.max_concurrency = Some(2);
        a.memory_budget_bytes = Some(8 << 30);
        // The `Vivarium-Node` header (the host name by default).
        a.node_id = Some("golden-node".into());
        a.workers = Some(2);
    })
    .await;
    let mut r = Recorder {
        client: client(),
        base: s.base.clone(),
        out: String::new(),
        step: 0,
        keep_body: false,
        kept: Vec::new(),
    };
    let json = &[("content-type", "application/json")][..];

    // Operations.
    r.send("liveness", Method::GET, "/healthz", false, &[], None)
        .await;
    r.send("readiness", Method::GET, "/readyz", false, &[], None)
        .await;
    r.send("index page", Method::GET, "/", false, &[], None)
        .await;
    r.keep_body = true;
    r.send(
        "OpenAPI document",
        Method::GET,
        "/openapi.json",
        false,
        &[],
        None,
    )
    .await;

    // API keys.
    let hello = r#"{"code":"print(6 * 7)"}"#;
    r.send(
        "no API key",
        Method::POST,
        "/v1/execute",
        false,
        json,
        Some(hello),
    )
    .await;
    r.send(
        "wrong API key",
        Method::POST,
        "/v1/execute",
        false,
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer wrong-key-wrong-key-wrong"),
        ],
        Some(hello),
    )
    .await;

    // POST /v1/execute.
    r.send(
        "execute: ok, with the caller's request id",
        Method::POST,
        "/v1/execute",
        true,
        &[
            ("content-type", "application/json"),
            ("x-request-id", "golden-request-1"),
        ],
        Some(hello),
    )
    .await;
    r.post_json(
        "execute: a Python error",
        "/v1/execute",
        r#"{"code":"1/0"}"#,
    )
    .await;
    let files_in = format!(
        r#"{{"code":"import os, sys\nrows = open('data.csv').read().splitlines()\nos.makedirs('out', exist_ok=True)\nwith open('out/result.txt', 'w') as f:\n    f.write(f'{{len(rows)}} rows\\n')\nprint(rows, sys.stdin.read(), os.environ['MODE'])","files":[{{"path":"data.csv","content":"{}"}}],"stdin":"from stdin","env":{{"MODE":"golden"}}}}"#,
        b64(b"a,b\n1,2\n")
    );
    r.post_json(
        "execute: input file, stdin, env, an output file",
        "/v1/execute",
        &files_in,
    )
    .await;
    r.post_json(
        "execute: policy warn (default) with a finding",
        "/v1/execute",
        r#"{"code":"x = eval(str(1 + 1))\nprint(x)"}"#,
    )
    .await;
    r.post_json(
        "execute: policy deny refuses os.system",
        "/v1/execute",
        r#"{"code":"import os; os.system('ls')","policy":"deny"}"#,
    )
    .await;
    r.post_json(
        "execute: policy off (no findings field)",
        "/v1/execute",
        r#"{"code":"print('unchecked')","policy":"off"}"#,
    )
    .await;
    r.post_json(
        "execute: a limit above the maximum",
        "/v1/execute",
        r#"{"code":"print(1)","limits":{"timeout_ms":600001}}"#,
    )
    .await;
    r.post_json(
        "execute: a limit below the minimum",
        "/v1/execute",
        r#"{"code":"print(1)","limits":{"memory_bytes":1024}}"#,
    )
    .await;
    r.post_json("execute: malformed JSON", "/v1/execute", r#"{"code": "#)
        .await;
    r.post_json(
        "execute: an unknown field",
        "/v1/execute",
        r#"{"code":"print(1)","bogus":true}"#,
    )
    .await;
    r.post_json(
        "execute: a wrong type",
        "/v1/execute",
        r#"{"code":"print(1)","policy":"sometimes"}"#,
    )
    .await;
    r.send(
        "execute: empty body",
        Method::POST,
        "/v1/execute",
        true,
        json,
        Some(""),
    )
    .await;
    r.post_json(
        "execute: a path that leaves the working directory",
        "/v1/execute",
        r#"{"code":"print(1)","files":[{"path":"../x","content":""}]}"#,
    )
    .await;
    r.post_json(
        "execute: content that is not base64",
        "/v1/execute",
        r#"{"code":"print(1)","files":[{"path":"x","content":"not base64!"}]}"#,
    )
    .await;

    // Streaming.
    let sse = &[
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
    ][..];
    r.send(
        "execute, streamed",
        Method::POST,
        "/v1/execute",
        true,
        sse,
        Some(
            r#"{"code":"import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('three')"}"#,
        ),
    )
    .await;
    r.send(
        "execute, streamed: policy deny ends the stream with an error event",
        Method::POST,
        "/v1/execute",
        true,
        sse,
        Some(r#"{"code":"import subprocess","policy":"deny"}"#),
    )
    .await;
    r.send(
        "execute, streamed: malformed JSON is a plain error",
        Method::POST,
        "/v1/execute",
        true,
        sse,
        Some("{"),
    )
    .await;

    // POST /v1/check.
    r.post_json("check: clean code", "/v1/check", r#"{"code":"print(1)"}"#)
        .await;
    r.post_json(
        "check: a finding",
        "/v1/check",
        r#"{"code":"import os\nos.system(\"ls\")"}"#,
    )
    .await;
    r.post_json(
        "check: a syntax error",
        "/v1/check",
        r#"{"code":"def f(:\n    pass"}"#,
    )
    .await;

    // Sessions.
    let opened = r
        .send(
            "session: open (empty body)",
            Method::POST,
            "/v1/sessions",
            true,
            &[],
            None,
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.body);
    let sid = opened.json_str("id");
    let turn = format!("/v1/sessions/{sid}/execute");
    r.post_json("session: turn 1", &turn, r#"{"code":"x = 21"}"#)
        .await;
    r.post_json(
        "session: turn 2 (an expression)",
        &turn,
        r#"{"code":"x * 2"}"#,
    )
    .await;
    r.get("session: info", &format!("/v1/sessions/{sid}")).await;
    r.send(
        "session: upload a file",
        Method::PUT,
        &format!("/v1/sessions/{sid}/files/data.csv"),
        true,
        &[("content-type", "application/octet-stream")],
        Some("a,b\n1,2\n"),
    )
    .await;
    r.post_json(
        "session: turn 3 (reads the file, writes one)",
        &turn,
        r#"{"code":"open('copy.txt', 'w').write(open('data.csv').read().upper())"}"#,
    )
    .await;
    r.get("session: list files", &format!("/v1/sessions/{sid}/files"))
        .await;
    r.get(
        "session: download a file",
        &format!("/v1/sessions/{sid}/files/copy.txt"),
    )
    .await;
    r.get(
        "session: download a missing file",
        &format!("/v1/sessions/{sid}/files/missing.txt"),
    )
    .await;
    r.post_json(
        "session: turn with policy deny",
        &turn,
        r#"{"code":"import os; os.system('ls')","policy":"deny"}"#,
    )
    .await;
    r.post_json(
        "session: a turn that raises (the session goes on)",
        &turn,
        r#"{"code":"undefined_name"}"#,
    )
    .await;
    r.post_json("session: exit() ends it", &turn, r#"{"code":"exit()"}"#)
        .await;
    r.post_json(
        "session: a turn after the end",
        &turn,
        r#"{"code":"print(1)"}"#,
    )
    .await;
    r.get("session: info once ended", &format!("/v1/sessions/{sid}"))
        .await;
    let second = r
        .post_json(
            "session: open a second one (with limits)",
            "/v1/sessions",
            r#"{"limits":{"timeout_ms":5000,"memory_bytes":268435456}}"#,
        )
        .await;
    assert_eq!(second.status, 201, "{}", second.body);
    let sid2 = second.json_str("id");
    r.send(
        "session: close",
        Method::DELETE,
        &format!("/v1/sessions/{sid2}"),
        true,
        &[],
        None,
    )
    .await;
    r.get("session: info once closed", &format!("/v1/sessions/{sid2}"))
        .await;
    r.get("session: an unknown id", "/v1/sessions/s-unknown")
        .await;
    r.send(
        "session: close an unknown id",
        Method::DELETE,
        "/v1/sessions/s-unknown",
        true,
        &[],
        None,
    )
    .await;
    r.post_json(
        "session: open with a limit above the maximum",
        "/v1/sessions",
        r#"{"limits":{"fuel":99999999999999999}}"#,
    )
    .await;

    // Piston.
    r.get("piston: runtimes", "/api/v2/runtimes").await;
    r.post_json(
        "piston: execute",
        "/api/v2/execute",
        r#"{"language":"python","version":"3.15.0","files":[{"name":"main.py","content":"import sys\nprint(sys.argv[1:], input())"}],"stdin":"hi","args":["a","b"],"run_timeout":3000}"#,
    )
    .await;
    r.post_json(
        "piston: a runtime error",
        "/api/v2/execute",
        r#"{"language":"py","version":"3","files":[{"content":"print('before')\n1/0"}]}"#,
    )
    .await;
    r.post_json(
        "piston: an unknown language",
        "/api/v2/execute",
        r#"{"language":"cobol","version":"*","files":[{"content":"DISPLAY 'HI'."}]}"#,
    )
    .await;
    r.post_json(
        "piston: malformed request",
        "/api/v2/execute",
        r#"{"language":"python"}"#,
    )
    .await;

    // MCP over the streamable HTTP transport, as plain JSON-RPC.
    let mcp_accept = ("accept", "application/json, text/event-stream");
    let init = r
        .send(
            "mcp: initialize",
            Method::POST,
            "/mcp",
            true,
            &[("content-type", "application/json"), mcp_accept],
            Some(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire-golden","version":"0"}}}"#,
            ),
        )
        .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let mcp_session = init
        .headers
        .get("mcp-session-id")
        .unwrap_or_else(|| panic!("no mcp-session-id: {:?}", init.headers))
        .to_str()
        .unwrap()
        .to_string();
    let in_session = [
        ("content-type", "application/json"),
        mcp_accept,
        ("mcp-session-id", mcp_session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    r.send(
        "mcp: initialized notification",
        Method::POST,
        "/mcp",
        true,
        &in_session,
        Some(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
    )
    .await;
    r.send(
        "mcp: tools/list",
        Method::POST,
        "/mcp",
        true,
        &in_session,
        Some(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#),
    )
    .await;
    let called = r
        .send(
            "mcp: tools/call execute_python",
            Method::POST,
            "/mcp",
            true,
            &in_session,
            Some(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_python","arguments":{"code":"print(6 * 7)"}}}"#,
            ),
        )
        .await;
    assert!(sse_data(&called.body).contains("42"), "{}", called.body);
    r.send(
        "mcp: tools/call check_python",
        Method::POST,
        "/mcp",
        true,
        &in_session,
        Some(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"check_python","arguments":{"code":"import os\nos.system('ls')"}}}"#,
        ),
    )
    .await;
    r.send(
        "mcp: end the MCP session",
        Method::DELETE,
        "/mcp",
        true,
        &[("mcp-session-id", mcp_session.as_str())],
        None,
    )
    .await;

    // Routing.
    r.get("an unknown route", "/v2/nothing-here").await;
    r.send(
        "a wrong method",
        Method::GET,
        "/v1/execute",
        true,
        &[],
        None,
    )
    .await;
    r.send(
        "a wrong method on a session",
        Method::PATCH,
        &format!("/v1/sessions/{sid}"),
        true,
        &[],
        None,
    )
    .await;

    // Metrics, the last request before stopping.
    r.send("metrics", Method::GET, "/metrics", false, &[], None)
        .await;

    s.stop().await;
    let audit = std::fs::read_to_string(&audit_log).unwrap();
    let _ = std::fs::remove_dir_all(&keys_dir);
    assert!(!audit.contains(KEY), "the API key must never be logged");

    let mut raw = std::mem::take(&mut r.out);
    raw.push_str("=== audit log\n");
    for line in audit.lines() {
        raw.push_str(line);
        raw.push('\n');
    }
    compare_with_golden(&restore_kept(&normalise(&raw), &r.kept));
}

#[test]
fn normalisers_touch_only_what_varies() {
    let t = "{\"id\":\"ex-0123456789abcdef0123456789abcdef\",\"x\":\"ex-0123456789abcdef0123456789abcdef\",\
             \"t\":\"2026-12-01T08:40:12.345Z\",\"sha\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\
             \"usage\":{\"wall_ms\":1.25,\"fuel\":12,\"memory_peak_bytes\":3,\"disk_bytes\":4},\
             \"limits\":{\"disk_bytes\":104857600},\"client\":\"127.0.0.1:40123\"}";
    assert_eq!(
        normalise(t),
        "{\"id\":\"ex-<ex-1>\",\"x\":\"ex-<ex-1>\",\"t\":\"<time>\",\
         \"sha\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\
         \"usage\":{\"wall_ms\":<n>,\"fuel\":<n>,\"memory_peak_bytes\":3,\"disk_bytes\":4},\
         \"limits\":{\"disk_bytes\":104857600},\"client\":\"127.0.0.1:<port>\"}"
    );
    assert_eq!(
        normalise(
            "<| vivarium_execution_duration_seconds_bucket{le=\"0.005\"} 3\n<| vivarium_execution_duration_seconds_bucket{le=\"+Inf\"} 7\n"
        ),
        "<| vivarium_execution_duration_seconds_bucket{le=\"0.005\"} <n>\n<| vivarium_execution_duration_seconds_bucket{le=\"+Inf\"} 7\n"
    );
    // A string where a number was is not hidden.
    assert_eq!(
        normalise("\"usage\":{\"wall_ms\":\"12\"}"),
        "\"usage\":{\"wall_ms\":\"12\"}"
    );
}
