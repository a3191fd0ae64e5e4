//! Output leakage controls over real HTTP: secrets of real formats (generated here, so none
//! sits in the repository) pass through the real runtime and every place output leaves —
//! stdout, stderr, the parsed error, rich outputs, files, a session's result and files, SSE
//! chunks, MCP and Piston — under each policy; the audit log names rules, never secrets; and
//! ordinary program output is left alone.

use crate::http_support::*;
use serde_json::{Value, json};

/// Random characters from `alphabet`.
fn random(alphabet: &[u8], n: usize) -> String {
    (0..n)
        .map(|_| alphabet[rand::random::<u32>() as usize % alphabet.len()] as char)
        .collect()
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A Visa number with a valid Luhn digit.
fn card() -> String {
    let mut digits: Vec<u32> = std::iter::once(4)
        .chain((0..14).map(|_| rand::random::<u32>() % 10))
        .collect();
    // From the right, the check digit will be first: the payload's last digit is doubled.
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2 == 0, d * 2) {
            (true, d2) if d2 > 9 => d2 - 9,
            (true, d2) => d2,
            (false, _) => d,
        })
        .sum();
    digits.push((10 - sum % 10) % 10);
    digits.iter().map(|d| char::from(b'0' + *d as u8)).collect()
}

/// A German IBAN with valid check digits.
fn iban() -> String {
    let bban = random(b"0123456789", 18);
    let numeric = format!("{bban}131400"); // "DE00" moved to the end, D=13, E=14
    let rem = numeric
        .bytes()
        .fold(0u32, |r, b| (r * 10 + u32::from(b - b'0')) % 97);
    format!("DE{:02}{bban}", 98 - rem)
}

/// One secret per rule family the issue names, and the rule that must find it.
fn secrets() -> Vec<(&'static str, String)> {
    let b64url = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    };
    let pem_body: Vec<String> = (0..4).map(|_| random(ALNUM, 64)).collect();
    vec![
        ("github-pat", format!("ghp_{}", random(ALNUM, 36))),
        (
            "aws-access-token",
            format!("AKIA{}", random(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
        ),
        ("gitlab-pat", format!("glpat-{}", random(ALNUM, 20))),
        (
            "slack-bot-token",
            format!(
                "xoxb-{}-{}-{}",
                random(b"0123456789", 12),
                random(b"0123456789", 13),
                random(ALNUM, 24)
            ),
        ),
        (
            "stripe-access-token",
            format!("sk_live_{}", random(ALNUM, 24)),
        ),
        (
            "jwt",
            format!(
                "{}.{}.{}",
                b64url(r#"{"alg":"HS256","typ":"JWT"}"#),
                b64url(&format!(
                    r#"{{"sub":"{}","admin":true}}"#,
                    random(ALNUM, 12)
                )),
                random(ALNUM, 43)
            ),
        ),
        (
            "private-key",
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                pem_body.join("\n")
            ),
        ),
        (
            "basic-auth-url",
            random(b"abcdefghjkmnpqrstuvwxyz23456789", 14),
        ),
        // No vowels, no `h`, `m`, `p`, `0`: no stopword of the generic rule (`html`, `md5`,
        // `vpn`, `000000`, ...) can be made of these; 30 symbols keep the entropy well above
        // the rule's 3.5 bits.
        (
            "generic-api-key",
            random(b"123456789BCDFGJKLNQRSTVWXZbcdfg", 32),
        ),
        ("payment-card-number", card()),
        ("iban", iban()),
        (
            "email-address",
            format!("{}@example.org", random(b"abcdefghijklmnopqrstuvwxyz", 10)),
        ),
    ]
}

/// How each secret is written into ordinary-looking output: the bare ones as they are, the
/// URL password in a URL, the generic key in an assignment.
fn line_of(rule: &str, secret: &str) -> String {
    match rule {
        "basic-auth-url" => format!("db = postgres://app:{secret}@db.internal:5432/prod"),
        "generic-api-key" => format!("api_key = '{secret}'"),
        _ => format!("{rule}: {secret}"),
    }
}

/// The text of every secret (the part a rule must hide: for a URL, the password).
fn texts(secrets: &[(&str, String)]) -> Vec<String> {
    secrets.iter().map(|(_, s)| s.clone()).collect()
}

/// Asserts that none of `texts` appears in `haystack` (nor a 12-byte piece of the longer ones).
fn assert_hidden(haystack: &str, texts: &[String], what: &str) {
    for t in texts {
        let piece = &t[..t.len().min(12)];
        assert!(
            !haystack.contains(t.as_str()) && !haystack.contains(piece),
            "{what} shows a secret ({piece}…): {haystack}"
        );
    }
}

/// A program that prints every line of `secrets.txt` to stdout, the first to stderr, puts
/// one in a raised exception, a text rich output and two files (text and binary).
const LEAKY: &str = r#"
import sys
from vivarium_display import display
lines = open('secrets.txt').read().split('\n=====\n')
for l in lines:
    print(l)
print(lines[0], file=sys.stderr)
display(lines[1])
open('copy.txt', 'w').write('\n'.join(lines))
open('blob.bin', 'wb').write(b'\xff\x00' + lines[0].encode() + b'\xfe')
raise RuntimeError('bad token ' + lines[0])
"#;

fn leaky_request(secrets: &[(&str, String)], extra: Value) -> Value {
    let file: Vec<String> = secrets.iter().map(|(r, s)| line_of(r, s)).collect();
    let mut req = json!({
        "code": LEAKY,
        "files": [{"path": "secrets.txt", "content": b64(file.join("\n=====\n").as_bytes())}],
    });
    for (k, v) in extra.as_object().unwrap() {
        req[k] = v.clone();
    }
    req
}

fn rules_found(v: &Value) -> Vec<String> {
    v["leaks"]
        .as_array()
        .unwrap_or_else(|| panic!("no leaks in {v}"))
        .iter()
        .map(|l| l["rule"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redact_hides_every_secret_everywhere_output_leaves() {
    let s = shared().await;
    let c = client();
    let secrets = secrets();
    let env_secret = random(ALNUM, 20);
    let req = leaky_request(
        &secrets,
        json!({"env": {"SERVICE_TOKEN": env_secret, "REGION_NAME": "eu-west-1-public"},
               "leakage_allow_env": ["REGION_NAME"]}),
    );
    let mut req = req;
    req["code"] = json!(format!(
        "import os\nprint('env', os.environ['SERVICE_TOKEN'], os.environ['REGION_NAME'])\n{LEAKY}"
    ));
    let (status, v) = post(&c, &s.url("/v1/execute"), &req).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "error", "{v}");
    let mut all = texts(&secrets);
    all.push(env_secret.clone());
    // Nowhere in the response: streams, the parsed error, outputs, and the files decoded.
    assert_hidden(&v.to_string(), &all, "the response");
    for f in v["files"].as_array().unwrap() {
        let bytes = unb64(f["content"].as_str().unwrap());
        if f["path"] == "copy.txt" {
            assert_hidden(&String::from_utf8(bytes).unwrap(), &all, "copy.txt");
        } else {
            // A binary file is reported, not altered.
            assert_eq!(f["path"], "blob.bin");
            let text = String::from_utf8_lossy(&bytes).into_owned();
            assert!(text.contains(&secrets[0].1), "binary file altered: {text}");
        }
    }
    let stdout = v["stdout"].as_str().unwrap();
    for (rule, _) in &secrets {
        assert!(
            stdout.contains(&format!("[REDACTED:{rule}]")),
            "{rule} not redacted in {stdout}"
        );
    }
    assert!(stdout.contains("[REDACTED:env:SERVICE_TOKEN]"), "{stdout}");
    assert!(
        stdout.contains("eu-west-1-public"),
        "an allowed variable was redacted"
    );
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:github-pat]")
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:github-pat]"),
        "{}",
        v["error"]
    );
    assert!(
        v["outputs"][0]["data"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:aws-access-token]")
    );
    let places: Vec<String> = v["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let place = ["stream", "output", "file"]
                .iter()
                .find_map(|k| l.get(*k).map(|p| format!("{k}={p}")))
                .unwrap();
            format!("{}@{place}", l["rule"].as_str().unwrap())
        })
        .collect();
    for want in [
        "github-pat@stream=\"stderr\"",
        "aws-access-token@output=0",
        "iban@file=\"copy.txt\"",
        "github-pat@file=\"blob.bin\"",
        "env:SERVICE_TOKEN@stream=\"stdout\"",
    ] {
        assert!(places.iter().any(|p| p == want), "no {want} in {places:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_leaves_output_alone_and_gives_exact_places_and_the_audit_no_secret() {
    let s = start("leak-report", |_| {}).await;
    let c = client();
    let secrets = secrets();
    let req = leaky_request(&secrets, json!({"leakage": "report"}));
    let (status, v) = post(&c, &s.url("/v1/execute"), &req).await;
    assert_eq!(status, 200, "{v}");
    let stdout = v["stdout"].as_str().unwrap();
    let mut found = rules_found(&v);
    found.sort();
    found.dedup();
    for (rule, secret) in &secrets {
        assert!(stdout.contains(secret.as_str()), "report altered {rule}");
        assert!(
            found.iter().any(|f| f == rule),
            "{rule} not found: {found:?}\nstdout: {stdout}\nleaks: {}",
            v["leaks"]
        );
        // Offsets index the unaltered stream. (A rule may also fire elsewhere: a random
        // IBAN's digits can hold a Luhn-valid run that looks like a card.)
        let places: Vec<&str> = v["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["rule"] == *rule && l["stream"] == "stdout")
            .map(|hit| {
                let o = hit["offset"].as_u64().unwrap() as usize;
                &stdout[o..o + hit["length"].as_u64().unwrap() as usize]
            })
            .collect();
        assert!(places.contains(&secret.as_str()), "{rule}: {places:?}");
    }
    // `off`: no scan, no `leaks` field, the output as printed.
    let (status, off) = post(
        &c,
        &s.url("/v1/execute"),
        &leaky_request(&secrets, json!({"leakage": "off"})),
    )
    .await;
    assert_eq!(status, 200, "{off}");
    assert!(off.get("leaks").is_none(), "{off}");
    assert!(off["stdout"].as_str().unwrap().contains(&secrets[0].1));
    let audit = std::fs::read_to_string(&s.audit_log).unwrap();
    s.stop().await;
    assert_hidden(&audit, &texts(&secrets), "the audit log");
    let line: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["action"] == "execute")
        .unwrap();
    let mut audited = rules_found(&line);
    audited.sort();
    audited.dedup();
    assert_eq!(audited, found, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_withholds_everything_and_a_session_survives_it() {
    let s = shared().await;
    let c = client();
    let secrets = secrets();
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &leaky_request(&secrets, json!({"leakage": "deny"})),
    )
    .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(error_code(&v), "output_leak");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("github-pat") && message.contains("iban"),
        "{message}"
    );
    assert_hidden(&v.to_string(), &texts(&secrets), "the 422");
    assert!(v.get("stdout").is_none() && v.get("files").is_none(), "{v}");
    // Clean output under deny is served as usual.
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "print(6 * 7)", "leakage": "deny"}),
    )
    .await;
    assert_eq!((status, v["stdout"].as_str()), (200, Some("42\n")), "{v}");

    // A session under deny: the leaking turn is a 422, its state stays, the next turn runs.
    let (status, opened) = post(&c, &s.url("/v1/sessions"), &json!({"leakage": "deny"})).await;
    assert_eq!(status, 201, "{opened}");
    let turn = s.url(&format!(
        "/v1/sessions/{}/execute",
        opened["id"].as_str().unwrap()
    ));
    let token = &secrets[0].1;
    let (status, v) = post(&c, &turn, &json!({"code": format!("t = '{token}'\nt")})).await;
    assert_eq!((status, error_code(&v)), (422, "output_leak"), "{v}");
    assert!(
        v["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["stream"] == "result"),
        "{v}"
    );
    let (status, v) = post(&c, &turn, &json!({"code": "len(t)"})).await;
    assert_eq!((status, v["result"].as_str()), (200, Some("40")), "{v}");
    // A turn may name a weaker policy of its own (the server's floor is `off`).
    let (status, v) = post(&c, &turn, &json!({"code": "t", "leakage": "redact"})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"], "'[REDACTED:github-pat]'");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_redact_their_result_and_file_reads() {
    let s = shared().await;
    let c = client();
    let secrets = secrets();
    let (status, opened) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    assert_eq!(status, 201, "{opened}");
    let id = opened["id"].as_str().unwrap();
    let file: Vec<String> = secrets.iter().map(|(r, s)| line_of(r, s)).collect();
    let (status, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({
            "code": "data = open('secrets.txt').read()\nprint(data.split('\\n')[0])\ndata",
            "files": [{"path": "secrets.txt", "content": b64(file.join("\n").as_bytes())}],
        }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_hidden(&v.to_string(), &texts(&secrets), "the turn");
    assert!(v["result"].as_str().unwrap().contains("[REDACTED:"), "{v}");
    assert!(
        v["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["stream"] == "result")
    );
    let resp = c
        .get(s.url(&format!("/v1/sessions/{id}/files/secrets.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    assert_hidden(&body, &texts(&secrets), "the file download");
    assert!(body.contains("[REDACTED:private-key]"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_chunks_are_redacted_even_across_a_chunk_boundary() {
    let s = shared().await;
    let c = client();
    let token = format!("ghp_{}", random(ALNUM, 36));
    // The token leaves the guest in two writes, flushed apart, so two chunks.
    let code = format!(
        "import sys, time\nprint('start')\nsys.stdout.write('token {}'); sys.stdout.flush()\n\
         time.sleep(0.2)\nsys.stdout.write('{}\\n'); sys.stdout.flush()\nprint('end', end='')\n",
        &token[..15],
        &token[15..]
    );
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    assert_hidden(&body, std::slice::from_ref(&token), "the event stream");
    let chunks: String = body
        .split("\n\n")
        .filter(|e| e.starts_with("event: stdout"))
        .filter_map(|e| e.split_once("data: "))
        .map(|(_, d)| {
            serde_json::from_str::<Value>(d).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(chunks, "start\ntoken [REDACTED:github-pat]\nend");
    // Under deny the leaking line never leaves, and the stream ends in the 422's body.
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code, "leakage": "deny"}))
        .send()
        .await
        .unwrap();
    let body = resp.text().await.unwrap();
    assert_hidden(
        &body,
        std::slice::from_ref(&token),
        "the denied event stream",
    );
    assert!(
        body.contains("event: error") && body.contains("output_leak"),
        "{body}"
    );
    assert!(body.contains("\"text\":\"start\\n\""), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_and_piston_apply_the_servers_policy() {
    let s = shared().await;
    let c = client();
    let token = format!("ghp_{}", random(ALNUM, 36));
    let code = format!("print('token {token}')");

    // Piston: stdout and the interleaved `output` alike.
    let (status, v) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "python", "version": "*", "files": [{"content": code}]}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_hidden(
        &v.to_string(),
        std::slice::from_ref(&token),
        "Piston's response",
    );
    assert_eq!(v["run"]["output"], "token [REDACTED:github-pat]\n", "{v}");

    // MCP over its streamable HTTP transport, as plain JSON-RPC.
    let (called, _) = McpClient::open(&s)
        .await
        .call("execute_python", json!({"code": code}))
        .await;
    assert_hidden(&called, std::slice::from_ref(&token), "the MCP result");
    assert!(called.contains("token [REDACTED:github-pat]"), "{called}");
    assert!(
        called.contains("output leakage: 1 finding (github-pat)"),
        "{called}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_output_has_no_findings() {
    let s = shared().await;
    let c = client();
    // Numbers, floats, big integers, hashes, ids, a traceback, a DataFrame, a NumPy array,
    // dates, paths and a base64 PNG: what programs print, none of it a secret.
    let code = r#"
import base64, hashlib, io, json, math, random, sys, traceback, uuid
import numpy as np, pandas as pd
import matplotlib.pyplot as plt
random.seed(7)
print([random.random() for _ in range(50)])
print(2**64, 10**15, 3.4999999999999999, math.pi, 1/3, -4111.25, 1e-300)
print(np.arange(40).reshape(5, 8) * 1234567)
print(np.random.default_rng(3).normal(size=(6, 4)))
df = pd.DataFrame({'id': range(1, 9), 'amount': np.linspace(0, 9999.99, 8),
                   'when': pd.date_range('2024-01-01', periods=8, freq='7D'),
                   'city': ['Oslo', 'Lima', 'Pune', 'Kyiv', 'Rome', 'Fez', 'Ulm', 'Ho']})
print(df)
print(df.describe())
print(df.to_csv(index=False))
print(json.dumps({'token_count': 1532, 'api_version': '2024-06-01', 'key': 'value'}))
print(hashlib.sha256(b'x').hexdigest(), hashlib.md5(b'y').hexdigest())
print(uuid.UUID(int=random.getrandbits(128)), uuid.UUID(int=random.getrandbits(128)))
print('/usr/local/lib/python3.15/site-packages/pandas/core/frame.py')
print('https://docs.python.org/3/library/stdtypes.html#str.split')
try:
    {}['missing_key']
except KeyError:
    traceback.print_exc()
fig, ax = plt.subplots()
ax.plot(np.sin(np.linspace(0, 6, 1000)))
buf = io.BytesIO()
fig.savefig(buf, format='png')
print(base64.b64encode(buf.getvalue()).decode())
"#;
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": code, "template": "scientific", "leakage": "report"}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "ok", "{}", v["stderr"]);
    assert!(
        v["stdout"].as_str().unwrap().len() > 20_000,
        "the PNG is missing"
    );
    assert_eq!(v["leaks"], json!([]), "false positives: {}", v["leaks"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_floor_and_the_operators_rules_file() {
    let dir = scratch_dir("leak-rules");
    let rules = dir.join("rules.toml");
    std::fs::write(
        &rules,
        r#"
literals = ["internal-project-codename-zebra"]
disabled_rules = ["email-address"]
[[rules]]
id = "acme-ticket-key"
regex = '''ACME-[0-9a-f]{24}'''
keywords = ["acme-"]
"#,
    )
    .unwrap();
    let s = start("leak-floor", |a| {
        a.leakage_floor = vivarium::LeakPolicy::Redact;
        a.leakage_rules = Some(rules.clone());
    })
    .await;
    let c = client();
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "leakage": "off"}),
    )
    .await;
    assert_eq!((status, error_code(&v)), (400, "invalid_request"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"redact\""),
        "{v}"
    );
    let (status, v) = post(&c, &s.url("/v1/sessions"), &json!({"leakage": "report"})).await;
    assert_eq!((status, error_code(&v)), (400, "invalid_request"), "{v}");
    let key = format!("ACME-{}", random(b"0123456789abcdef", 24));
    let code = format!("print('{key}', 'internal-project-codename-zebra', 'someone@example.org')");
    let (status, v) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["stdout"],
        "[REDACTED:acme-ticket-key] [REDACTED:operator-literal] someone@example.org\n"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
