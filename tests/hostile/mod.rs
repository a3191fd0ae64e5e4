//! The hostile corpus: loading the `.py` cases of `tests/hostile/`, their headers, the host
//! fixture they attack (canary files, a loopback listener, placeholders), and the checks that
//! judge an outcome from the host side. Shared by `tests/exclusive/hostile_corpus.rs` and
//! `tests/sandbox/fuzz_regressions.rs`; see `tests/hostile/README.md` for the header format.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// The categories the corpus must cover (one folder each).
pub const CATEGORIES: [&str; 7] = ["fs", "net", "proc", "exhaustion", "interp", "leak", "door"];

/// Limits every case runs under unless its `# limits:` line says otherwise: small, so the whole
/// corpus runs in well under a minute per front door on two cores.
pub const BASE_LIMITS: [(&str, u64); 6] = [
    ("timeout_ms", 3_000),
    ("fuel", 5_000_000_000),
    ("memory_bytes", 128 << 20),
    ("output_bytes", 64 << 10),
    ("disk_bytes", 4 << 20),
    ("open_files", 64),
];

/// Statuses a header may name: the report's, plus `refused` (the front door refused the
/// request before any guest ran: CLI exit 70 without a report, HTTP 4xx).
pub const STATUSES: [&str; 9] = [
    "ok",
    "error",
    "timeout",
    "fuel_exhausted",
    "memory_exceeded",
    "stack_overflow",
    "trap",
    "cancelled",
    "refused",
];

/// What a guest prints when one of its attacks worked; never allowed in any output.
pub const ESCAPE_MARK: &str = "ESCAPED";

/// One hostile program and the containment it must show.
#[derive(Debug, Clone)]
pub struct Case {
    /// `category/name`, e.g. `fs/dotdot_traversal`.
    pub name: String,
    pub category: String,
    pub what: String,
    /// The file's text (placeholders not yet substituted).
    pub code: String,
    pub expect: Vec<String>,
    /// Every limit, resolved against [`BASE_LIMITS`].
    pub limits: BTreeMap<String, u64>,
    pub input: Inputs,
    pub stdout_has: Vec<String>,
    pub output_lacks: Vec<String>,
    pub max_wall_ms: u64,
    /// Front doors: `cli`, `http`, `session`.
    pub via: Vec<String>,
    /// A containment bug this case demonstrates that is not fixed yet (`# known-bug:`): its
    /// failure is reported but does not fail the run; its passing is reported too.
    pub known_bug: Option<String>,
}

/// Inputs the runner makes for a case (`# input:` line).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub stdin_bytes: usize,
    pub env_vars: usize,
    pub env_value_bytes: usize,
    pub upload_files: usize,
    pub upload_bytes: usize,
    pub code_pad_bytes: usize,
}

impl Inputs {
    /// The stdin bytes: printable lines, so they travel as JSON text too.
    pub fn stdin(&self) -> Vec<u8> {
        b"s\n".repeat(self.stdin_bytes / 2)
    }

    pub fn env(&self) -> Vec<(String, String)> {
        (0..self.env_vars)
            .map(|i| (format!("V{i}"), "v".repeat(self.env_value_bytes.max(1))))
            .collect()
    }

    /// `(guest path, content)` of each upload.
    pub fn uploads(&self) -> Vec<(String, Vec<u8>)> {
        (0..self.upload_files)
            .map(|i| (format!("up/u{i}"), vec![b'u'; self.upload_bytes]))
            .collect()
    }
}

impl Case {
    pub fn parse(name: &str, text: &str) -> Result<Case, String> {
        let category = name.split('/').next().unwrap_or_default().to_string();
        let mut case = Case {
            name: name.to_string(),
            category,
            what: String::new(),
            code: text.to_string(),
            expect: Vec::new(),
            limits: BASE_LIMITS
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            input: Inputs::default(),
            stdout_has: Vec::new(),
            output_lacks: Vec::new(),
            max_wall_ms: 0,
            via: vec!["cli".into(), "http".into()],
            known_bug: None,
        };
        let mut wall = None;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("# ") else {
                break;
            };
            let Some((key, value)) = rest.split_once(": ") else {
                return Err(format!(
                    "{name}: header line without 'key: value': {line:?}"
                ));
            };
            let value = value.trim();
            match key {
                "hostile" => case.what = value.to_string(),
                "expect" => {
                    for s in value.split_whitespace() {
                        if !STATUSES.contains(&s) {
                            return Err(format!("{name}: unknown status {s:?}"));
                        }
                        case.expect.push(s.to_string());
                    }
                }
                "limits" => {
                    for kv in value.split_whitespace() {
                        let (k, v) = kv
                            .split_once('=')
                            .ok_or_else(|| format!("{name}: bad limit {kv:?}"))?;
                        if !BASE_LIMITS.iter().any(|(b, _)| *b == k) {
                            return Err(format!("{name}: unknown limit {k:?}"));
                        }
                        let v: u64 = v.parse().map_err(|_| format!("{name}: bad number {v:?}"))?;
                        case.limits.insert(k.to_string(), v);
                    }
                }
                "input" => {
                    for kv in value.split_whitespace() {
                        let (k, v) = kv
                            .split_once('=')
                            .ok_or_else(|| format!("{name}: bad input {kv:?}"))?;
                        let v: usize =
                            v.parse().map_err(|_| format!("{name}: bad number {v:?}"))?;
                        let slot = match k {
                            "stdin_bytes" => &mut case.input.stdin_bytes,
                            "env_vars" => &mut case.input.env_vars,
                            "env_value_bytes" => &mut case.input.env_value_bytes,
                            "upload_files" => &mut case.input.upload_files,
                            "upload_bytes" => &mut case.input.upload_bytes,
                            "code_pad_bytes" => &mut case.input.code_pad_bytes,
                            _ => return Err(format!("{name}: unknown input {k:?}")),
                        };
                        *slot = v;
                    }
                }
                "known-bug" => case.known_bug = Some(value.to_string()),
                "stdout-has" => case.stdout_has.push(value.to_string()),
                "output-lacks" => case.output_lacks.push(value.to_string()),
                "max-wall-ms" => {
                    wall = Some(
                        value
                            .parse()
                            .map_err(|_| format!("{name}: bad wall {value:?}"))?,
                    )
                }
                "via" => {
                    case.via = value.split_whitespace().map(String::from).collect();
                    for v in &case.via {
                        if !["cli", "http", "session"].contains(&v.as_str()) {
                            return Err(format!("{name}: unknown front door {v:?}"));
                        }
                    }
                }
                _ => return Err(format!("{name}: unknown header {key:?}")),
            }
        }
        if case.what.is_empty() {
            return Err(format!("{name}: no '# hostile:' line"));
        }
        if case.expect.is_empty() {
            return Err(format!("{name}: no '# expect:' line"));
        }
        // Start-up, parallel batches and the output's way back, on top of the deadline.
        case.max_wall_ms = wall.unwrap_or(case.limits["timeout_ms"] + 4_000);
        Ok(case)
    }

    pub fn limit(&self, key: &str) -> u64 {
        self.limits[key]
    }

    /// The program with placeholders substituted and any padding added.
    pub fn program(&self, fx: &Fixture) -> String {
        let mut code = fx.substitute(&self.code);
        if self.input.code_pad_bytes > 0 {
            code.push('#');
            code.push_str(&"p".repeat(self.input.code_pad_bytes));
            code.push('\n');
        }
        code
    }
}

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile")
}

/// Every case of the corpus, sorted by name.
pub fn load_corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    let root = corpus_dir();
    for cat in std::fs::read_dir(&root)
        .expect("tests/hostile exists")
        .flatten()
    {
        if !cat.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(cat.path()).unwrap().flatten() {
            let p = f.path();
            if p.extension().and_then(|e| e.to_str()) != Some("py") {
                continue;
            }
            let name = format!(
                "{}/{}",
                cat.file_name().to_string_lossy(),
                p.file_stem().unwrap().to_string_lossy()
            );
            let text = std::fs::read_to_string(&p).unwrap();
            cases.push(Case::parse(&name, &text).unwrap_or_else(|e| panic!("{e}")));
        }
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

/// How one run ended, as a front door reported it.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub files: Vec<(String, Vec<u8>)>,
    pub disk_bytes: u64,
    pub wall_ms: u64,
    /// Why a request was refused, or what else the front door said.
    pub note: String,
}

impl Outcome {
    /// From a report as JSON (CLI `--json`, HTTP `/v1/execute`).
    pub fn from_report(v: &serde_json::Value, wall_ms: u64) -> Outcome {
        use base64::Engine as _;
        let files = v["files"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        let content = f["content"]
                            .as_str()
                            .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                            .unwrap_or_default();
                        (f["path"].as_str().unwrap_or_default().to_string(), content)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Outcome {
            status: v["status"].as_str().unwrap_or("<none>").to_string(),
            stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
            stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
            files,
            disk_bytes: v["usage"]["disk_bytes"].as_u64().unwrap_or(0),
            wall_ms,
            note: String::new(),
        }
    }

    pub fn refused(note: String, wall_ms: u64) -> Outcome {
        Outcome {
            status: "refused".into(),
            wall_ms,
            note,
            ..Default::default()
        }
    }
}

/// What the guests attack on the host: a canary file (and its folder) outside every sandbox,
/// a TCP listener and a UDP socket on one loopback port, and the values the placeholders
/// stand for.
pub struct Fixture {
    pub canary_dir: PathBuf,
    pub canary: PathBuf,
    pub secret: String,
    pub tcp: TcpListener,
    pub udp: Option<UdpSocket>,
    pub port: u16,
    pub stdlib_zip: PathBuf,
    zip_sha256: Vec<u8>,
    pub values: BTreeMap<&'static str, String>,
    /// Whether reading a file moves its atime on this filesystem (checked at set-up), so the
    /// "canary unread" check means something.
    pub atime_tracked: bool,
}

/// A fixed, old timestamp for the canary's atime and mtime: equal, so `relatime` updates the
/// atime on any read.
const CANARY_TIME: u64 = 1_000_000_000;

impl Fixture {
    /// `scratch` and `audit` are the front door's own (CLI scratch base or server scratch dir).
    pub fn new(tag: &str, scratch: &Path, audit: &Path, runtime: &RuntimeInfo) -> Fixture {
        let nonce = format!("{:016x}", rand::random::<u64>());
        let canary_dir = std::env::temp_dir().join(format!("vivarium-canary-{tag}-{nonce}"));
        std::fs::create_dir_all(&canary_dir).unwrap();
        let canary = canary_dir.join("secret.txt");
        let secret = format!("canary-secret-{nonce}");
        std::fs::write(&canary, &secret).unwrap();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let port = tcp.local_addr().unwrap().port();
        let udp = UdpSocket::bind(("127.0.0.1", port)).ok();
        if let Some(u) = &udp {
            u.set_nonblocking(true).unwrap();
        }
        let zip_sha256 = Sha256::digest(std::fs::read(&runtime.stdlib_zip).unwrap()).to_vec();
        let hostname = hostname();
        let mut values = BTreeMap::new();
        values.insert("{CANARY}", canary.display().to_string());
        values.insert("{CANARY_DIR}", canary_dir.display().to_string());
        values.insert("{PORT}", port.to_string());
        values.insert("{SCRATCH}", scratch.display().to_string());
        values.insert("{AUDIT}", audit.display().to_string());
        values.insert("{SECRET}", secret.clone());
        values.insert("{VIVARIUM_HOME}", runtime.home.display().to_string());
        values.insert("{HOST_PATH}", std::env::var("PATH").unwrap_or_default());
        values.insert(
            "{HOST_HOME}",
            std::env::var("HOME").unwrap_or_else(|_| "/nonexistent-home".into()),
        );
        values.insert(
            "{HOST_CWD}",
            std::env::current_dir().unwrap().display().to_string(),
        );
        // A short hostname ("vm") would match by chance; then nothing can be checked.
        values.insert(
            "{HOSTNAME}",
            if hostname.len() >= 6 {
                hostname
            } else {
                format!("unmatchable-hostname-{nonce}")
            },
        );
        values.insert("{HOST_ENV_SECRET}", host_env_secret());
        let mut fx = Fixture {
            canary_dir,
            canary,
            secret,
            tcp,
            udp,
            port,
            stdlib_zip: runtime.stdlib_zip.clone(),
            zip_sha256,
            values,
            atime_tracked: false,
        };
        fx.reset_canary_times();
        // Does a read move the atime here? (relatime: yes when atime <= mtime.)
        let mut buf = String::new();
        std::fs::File::open(&fx.canary)
            .unwrap()
            .read_to_string(&mut buf)
            .unwrap();
        fx.atime_tracked = fx.canary_atime() != CANARY_TIME;
        fx.reset_canary_times();
        fx
    }

    fn reset_canary_times(&self) {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(CANARY_TIME);
        let f = std::fs::File::options()
            .write(true)
            .open(&self.canary)
            .unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
            .unwrap();
    }

    fn canary_atime(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.canary).unwrap().atime() as u64
    }

    pub fn substitute(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (k, v) in &self.values {
            out = out.replace(k, v);
        }
        out
    }

    /// Host-side containment after runs: canary unchanged and unread, nothing new beside it,
    /// the listener got no connection and no datagram, the stdlib zip is byte-identical.
    pub fn host_problems(&self) -> Vec<String> {
        use std::os::unix::fs::MetadataExt;
        let mut p = Vec::new();
        match std::fs::read_to_string(&self.canary) {
            Ok(s) if s == self.secret => {}
            Ok(s) => p.push(format!(
                "canary changed: {:?}",
                s.chars().take(80).collect::<String>()
            )),
            Err(e) => p.push(format!("canary gone: {e}")),
        }
        // Reading it just now moved the atime (relatime); compare with what we saw before.
        let names: Vec<String> = std::fs::read_dir(&self.canary_dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if names != ["secret.txt"] {
            p.push(format!("canary folder changed: {names:?}"));
        }
        if let Ok(m) = std::fs::metadata(&self.canary)
            && m.mtime() as u64 != CANARY_TIME
        {
            p.push("canary mtime changed".into());
        }
        match self.tcp.accept() {
            Ok((_, peer)) => p.push(format!("listener accepted a connection from {peer}")),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => p.push(format!("listener error: {e}")),
        }
        if let Some(u) = &self.udp {
            let mut buf = [0u8; 64];
            if let Ok((n, peer)) = u.recv_from(&mut buf) {
                p.push(format!("UDP socket received {n} bytes from {peer}"));
            }
        }
        if Sha256::digest(std::fs::read(&self.stdlib_zip).unwrap()).as_slice() != self.zip_sha256 {
            p.push("the stdlib zip changed".into());
        }
        p
    }

    /// The canary's atime must not have moved since the last [`Fixture::arm_unread`].
    pub fn canary_read(&self) -> bool {
        self.atime_tracked && self.canary_atime() != CANARY_TIME
    }

    pub fn arm_unread(&self) {
        self.reset_canary_times();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.canary_dir);
    }
}

/// The host's name, from the kernel.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A value set in the environment of every host that runs guests: the CLI children get it
/// explicitly; the in-process server has cargo's `CARGO_PKG_DESCRIPTION` in its own.
pub const HOST_ENV_VAR: &str = "VIVARIUM_HOSTILE_HOST_SECRET";

pub fn host_env_secret() -> String {
    std::env::var(HOST_ENV_VAR)
        .or_else(|_| std::env::var("CARGO_PKG_DESCRIPTION"))
        .unwrap_or_else(|_| "unmatchable-host-env".into())
}

/// Where the runtime lives, as `vivarium runtime info` says.
pub struct RuntimeInfo {
    pub home: PathBuf,
    pub stdlib_zip: PathBuf,
}

pub fn runtime_info() -> RuntimeInfo {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args(["runtime", "info"])
        .output()
        .expect("running vivarium runtime info");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("runtime info is JSON");
    RuntimeInfo {
        home: PathBuf::from(v["home"].as_str().unwrap()),
        stdlib_zip: PathBuf::from(v["stdlib_dir"].as_str().unwrap()).join("python315.zip"),
    }
}

/// Everything wrong with one case's outcome, judged from what the front door returned.
pub fn judge(case: &Case, o: &Outcome, fx: &Fixture) -> Vec<String> {
    let mut p = Vec::new();
    if !case.expect.contains(&o.status) {
        p.push(format!(
            "status {} not in {:?} ({})",
            o.status,
            case.expect,
            o.note.chars().take(300).collect::<String>()
        ));
    }
    if o.stdout.contains(ESCAPE_MARK) {
        let line = o
            .stdout
            .lines()
            .find(|l| l.contains(ESCAPE_MARK))
            .unwrap_or("");
        p.push(format!("guest reports an escape: {line}"));
    }
    for h in &case.stdout_has {
        let h = fx.substitute(h);
        if !o.stdout.contains(&h) {
            p.push(format!("stdout lacks {h:?}"));
        }
    }
    let mut forbidden: Vec<String> = case.output_lacks.iter().map(|l| fx.substitute(l)).collect();
    forbidden.push(fx.secret.clone());
    for f in forbidden.iter().filter(|f| !f.is_empty()) {
        if o.stdout.contains(f.as_str()) || o.stderr.contains(f.as_str()) {
            p.push(format!("output contains forbidden {f:?}"));
        }
        for (path, content) in &o.files {
            if String::from_utf8_lossy(content).contains(f.as_str()) {
                p.push(format!("returned file {path} contains forbidden {f:?}"));
            }
        }
    }
    // The report's own measure of the working directory stays within the quota (plus one
    // entry of slack: the measure counts the entry that was refused).
    let disk = case.limit("disk_bytes") + 2 * 4096 + 20480;
    if o.disk_bytes > disk {
        p.push(format!(
            "disk_bytes {} over the quota {}",
            o.disk_bytes,
            case.limit("disk_bytes")
        ));
    }
    let out_cap = case.limit("output_bytes") as usize;
    if o.stdout.len() > out_cap * 3 + 16 || o.stderr.len() > out_cap * 3 + 16 {
        p.push(format!(
            "output over the cap: {} / {} bytes",
            o.stdout.len(),
            o.stderr.len()
        ));
    }
    if o.wall_ms > case.max_wall_ms {
        p.push(format!(
            "took {} ms (bound {} ms)",
            o.wall_ms, case.max_wall_ms
        ));
    }
    p
}

/// Descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Threads of this process.
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
