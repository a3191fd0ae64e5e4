//! The result of one execution or one session turn, as every front door returns it, and the
//! parser that turns a Python traceback on stderr into a structured error.

use serde::{Deserialize, Serialize};

/// Which stream a chunk of a run's live output came from (vocabulary every door shares:
/// the SSE door's events, a kernel's `stream` messages, E2B's lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// The guest's fd 1.
    Stdout,
    /// The guest's fd 2.
    Stderr,
}

/// Called with every chunk the guest writes (up to the cap), while it runs: for the CLI's
/// pass-through and for streaming front doors.
pub type OutputObserver = std::sync::Arc<dyn Fn(StreamKind, &[u8]) + Send + Sync>;

/// How an execution ended. `ok` and `error` are the guest's own doing; every other status names
/// the host limit that stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Exit status 0.
    Ok,
    /// An uncaught exception or a non-zero exit status.
    Error,
    /// The wall-clock deadline passed.
    Timeout,
    /// The fuel budget ran out.
    FuelExhausted,
    /// Linear memory growth was refused at the cap and the program failed because of it.
    MemoryExceeded,
    /// Linear memory growth was refused below the cap, because the server's memory budget
    /// (shared by every sandbox and session) had no room, and the program failed because of
    /// it. Retrying later, when the server is less loaded, may succeed.
    HostMemoryExceeded,
    /// The wasm stack overflowed (deep C-level recursion in the interpreter).
    StackOverflow,
    /// Any other trap: the guest hit `unreachable`, a host function failed, and so on.
    Trap,
    /// The host stopped the run (shutdown, session closed) before it ended.
    Cancelled,
    /// Code mode: a round of tool calls went unanswered for `tool_timeout_ms`, or the waits
    /// added up to `total_wait_ms`.
    ToolTimeout,
    /// Code mode: more tool calls than `calls`, or arguments larger than `argument_bytes`.
    ToolLimit,
}

impl Status {
    /// The status as JSON spells it, e.g. `fuel_exhausted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::FuelExhausted => "fuel_exhausted",
            Status::MemoryExceeded => "memory_exceeded",
            Status::HostMemoryExceeded => "host_memory_exceeded",
            Status::StackOverflow => "stack_overflow",
            Status::Trap => "trap",
            Status::Cancelled => "cancelled",
            Status::ToolTimeout => "tool_timeout",
            Status::ToolLimit => "tool_limit",
        }
    }
}

/// Which output streams lost bytes to the output cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Truncated {
    /// Stdout was longer than `output_bytes` and was cut there.
    pub stdout: bool,
    /// Stderr was longer than `output_bytes` and was cut there.
    pub stderr: bool,
}

/// An uncaught Python exception, parsed from the traceback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PyError {
    /// The exception class, e.g. `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text after `Type: `, possibly several lines; empty when there is none.
    pub message: String,
    /// The line of the user's code where it was raised (the innermost frame in that code).
    pub line: Option<u32>,
    /// The whole traceback text as Python printed it.
    pub traceback: String,
    /// For a `ModuleNotFoundError`: what to do about it (the built-in package's import
    /// name, native code that cannot load here, or not built in; `GET /v1/packages` lists
    /// what is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// A file the run created or changed in its working directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOut {
    /// Relative to the working directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The bytes (base64 in JSON); `None` when the file was larger than what is returned.
    #[serde(with = "base64_opt")]
    pub content: Option<Vec<u8>>,
    /// Set instead of `content` for a file too large to carry in memory: where it waits on
    /// disk for the front door to stream it (see `worker::held`). Never in a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// A returned file left on disk by the worker for the supervisor: its name under the
/// worker's scratch root, and once the supervisor has claimed it (opened, then unlinked),
/// the open file, read by the scan and the response and closed (freed) with the last clone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Held {
    /// `held-<16 hex digits>`, in the worker's scratch root.
    pub name: String,
    /// The supervisor's handle on it (never on the wire).
    #[serde(skip)]
    pub file: Option<std::sync::Arc<std::fs::File>>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Held {}

/// What the execution consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    /// Wall-clock time the code ran, in milliseconds (sandbox set-up not included).
    pub wall_ms: f64,
    /// Fuel the code burned (about one unit per wasm operator).
    pub fuel: u64,
    /// The largest the guest's linear memory grew, in bytes (in a session: so far).
    pub memory_peak_bytes: u64,
    /// Bytes the working directory held at the end, counted as the disk limit counts them.
    pub disk_bytes: u64,
}

/// The result of one execution or one session turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// How the run ended.
    pub status: Status,
    /// The guest's exit status; `None` when a limit stopped it before it could have one.
    pub exit_code: Option<i32>,
    /// UTF-8, invalid bytes replaced.
    pub stdout: String,
    /// UTF-8, invalid bytes replaced.
    pub stderr: String,
    /// Which streams were cut at the output limit.
    pub truncated: Truncated,
    /// The uncaught exception, when the status is `error`, `memory_exceeded` or
    /// `host_memory_exceeded` and stderr
    /// holds its traceback.
    pub error: Option<PyError>,
    /// A sentence on what stopped the run when a host limit did (which limit, its value).
    pub detail: Option<String>,
    /// Files the program created or changed (executions only; empty for session turns).
    pub files: Vec<FileOut>,
    /// What the run consumed.
    pub usage: Usage,
    /// Rich outputs (`display()`, `plt.show()`), when the front door loaded the helpers.
    #[serde(default)]
    pub outputs: Vec<RichOutput>,
    /// What the output-leakage scan found (`None` when no scan ran: leakage policy `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaks: Option<Vec<Leak>>,
    /// What the run's outbound HTTP requests did (`None` when it was granted no network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkUsage>,
}

/// A run's outbound HTTP requests (network by exception), as its result reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NetworkUsage {
    /// Requests the program made, refused ones included.
    pub requests: u32,
    /// Of those, refused or not completed.
    pub refused: u32,
    /// Bytes of the requests that left (target, headers and body).
    pub bytes_sent: u64,
    /// Bytes of the response bodies the program got.
    pub bytes_received: u64,
    /// The first refusals (at most 16): where to, and why; each was raised in the program as
    /// an `OSError` naming the same reason.
    pub refusals: Vec<NetworkRefusal>,
}

/// One refused request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NetworkRefusal {
    /// The host asked for.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Why (`host_not_allowed`, `address_not_allowed`, `too_many_requests`, ...).
    #[schema(value_type = String, example = "host_not_allowed")]
    pub reason: crate::egress::Refused,
}

/// A secret or piece of personal data found in what a run returns; never the text itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Leak {
    /// The rule that found it: a gitleaks rule id (`aws-access-token`), a personal-data rule
    /// (`payment-card-number`, `iban`, `email-address`), `env:NAME` for the value of an
    /// environment variable the request passed, `operator-literal`, or an operator's rule.
    #[schema(example = "github-pat")]
    pub rule: String,
    /// Where it was.
    #[serde(flatten)]
    pub place: LeakPlace,
    /// Byte offset in that text or file, before any redaction.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// Where in a result a leak was found; on the wire one of `"stream": "stdout"`,
/// `"error": "message"` (a field of the parsed `error`), `"output": 0` (an index into
/// `outputs`), `"file": "path"` (in a file's content) or `"file_name": "path"` (in a file's
/// or folder's name). A path in a place is always shown with its own secrets redacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeakPlace {
    /// Standard output, standard error, or a session turn's `result`.
    Stream(LeakStream),
    /// A field of the parsed exception, listed when it holds what the streams returned do
    /// not (stderr was cut at the output limit before the traceback, or the hint).
    Error(ErrorField),
    /// A rich output, by its index in `outputs`.
    Output(usize),
    /// A returned file's content, by its path.
    File(String),
    /// A file's path (a name of it or of a folder above it): under `redact` the file is
    /// withheld, under `deny` the whole output.
    FileName(String),
    /// Code mode: the arguments of a tool call, by its `call_id` (guest output leaving for
    /// the caller: under `redact` they leave redacted, under `deny` the call never leaves).
    ToolArguments(String),
}

/// The text fields of a parsed exception ([`PyError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorField {
    /// `error.type` (a class the guest defined is named as it chose).
    Type,
    /// `error.message`.
    Message,
    /// `error.traceback`.
    Traceback,
    /// `error.hint`.
    Hint,
}

/// The text streams of a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeakStream {
    /// `stdout`.
    Stdout,
    /// `stderr`.
    Stderr,
    /// A session turn's `result` (the `repr` of its final expression).
    Result,
}

/// One rich output (`display(obj)`, `plt.show()`), as a notebook shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RichOutput {
    /// `image/png` (data base64), `image/svg+xml`, `text/html` or `text/plain`.
    #[schema(example = "image/png")]
    pub mime: String,
    /// Base64 for `image/png`; the text itself (UTF-8) for the other types.
    pub data: String,
}

mod base64_opt {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => s.serialize_str(&STANDARD.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| STANDARD.decode(s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

const TRACEBACK_HEADER: &str = "Traceback (most recent call last):";

/// Parses the last uncaught exception out of `stderr`.
///
/// `code_file` is the file name the user's code ran under (`<turn N>`): the reported line is
/// the innermost frame in that file, so an error raised inside a library still points at the
/// user's line that called it. Syntax errors have no frame in user code but name the line in
/// their `File "<turn N>", line L` header, which is the same pattern.
pub fn parse_python_error(stderr: &str, code_file: &str) -> Option<PyError> {
    let start = stderr.rfind(TRACEBACK_HEADER)?;
    let block = stderr[start..].trim_end();
    let frame_prefix = format!("File \"{code_file}\", line ");
    let mut line = None;
    for l in block.lines() {
        if let Some(rest) = l.trim_start().strip_prefix(&frame_prefix) {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            line = digits.parse().ok().or(line);
        }
    }
    // The exception line is the first line at column 0 after the last indented (frame or
    // source) line; a message may itself span lines, so take everything from there on.
    let lines: Vec<&str> = block.lines().collect();
    let last_indented = lines.iter().rposition(|l| l.starts_with(' '))?;
    let idx = last_indented + 1;
    if idx >= lines.len() || !is_exception_line(lines[idx]) {
        return None;
    }
    let exc_text = lines[idx..].join("\n");
    let (kind, message) = match exc_text.split_once(':') {
        Some((k, m)) if !k.contains(' ') => (k.to_string(), m.trim_start().to_string()),
        _ => (exc_text.clone(), String::new()),
    };
    Some(PyError {
        kind,
        message,
        line,
        traceback: block.to_string(),
        hint: None,
    })
}

/// `ValueError: x`, `pkg.mod.Error`, `KeyboardInterrupt`: a dotted identifier at column 0,
/// optionally followed by a colon.
fn is_exception_line(l: &str) -> bool {
    let head = l.split(':').next().unwrap_or("");
    !head.is_empty()
        && !l.starts_with(' ')
        && head
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Whether `file`'s bytes are memory (tmpfs): the front door charges them to the budget
/// while it holds them.
pub fn in_memory(file: &std::fs::File) -> bool {
    rustix::fs::fstatfs(file).is_ok_and(|st| is_memory_fs(&st))
}

/// Whether a file system is tmpfs or ramfs (its contents are memory), by its `statfs`.
pub fn is_memory_fs(st: &rustix::fs::StatFs) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    #[allow(clippy::unnecessary_cast, reason = "f_type's width varies by platform")]
    let kind = st.f_type as i64;
    kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
}

/// A session's file as the runner hands it to a front door.
pub enum FileBody {
    /// Small: its bytes.
    Bytes(Vec<u8>),
    /// Large: claimed on disk, to be streamed.
    Held {
        /// The open file.
        held: Held,
        /// Its size.
        size: u64,
    },
}

impl FileBody {
    /// Its size.
    pub fn size(&self) -> u64 {
        match self {
            FileBody::Bytes(b) => b.len() as u64,
            FileBody::Held { size, .. } => *size,
        }
    }

    /// Its bytes in memory (blocking).
    pub fn into_bytes(self) -> std::io::Result<Vec<u8>> {
        match self {
            FileBody::Bytes(b) => Ok(b),
            FileBody::Held { held, size } => read_all(&held, size),
        }
    }
}

/// The held file's content read into memory: for the front doors that build a whole
/// response (MCP, streaming events, Piston) rather than stream one.
pub fn read_all(held: &Held, size: u64) -> std::io::Result<Vec<u8>> {
    let file = held
        .file
        .as_ref()
        .ok_or_else(|| std::io::Error::other("a held file that was not claimed"))?;
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0u8; size as usize];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_division() {
        let tb = "Traceback (most recent call last):\n  File \"<turn 1>\", line 1, in <module>\n    a = 10 / 0\n        ~~~^~~\nZeroDivisionError: division by zero\n";
        let e = parse_python_error(tb, "<turn 1>").unwrap();
        assert_eq!(e.kind, "ZeroDivisionError");
        assert_eq!(e.message, "division by zero");
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn innermost_user_frame_wins_and_chains_take_the_last() {
        let tb = "Traceback (most recent call last):\n  File \"<turn 1>\", line 2, in <module>\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"<turn 1>\", line 4, in <module>\n  File \"<turn 1>\", line 7, in f\n  File \"/usr/local/lib/python315.zip/json/__init__.py\", line 3, in loads\nValueError: bad\nthings\n";
        let e = parse_python_error(tb, "<turn 1>").unwrap();
        assert_eq!(e.kind, "ValueError");
        assert_eq!(e.message, "bad\nthings");
        assert_eq!(e.line, Some(7));
    }

    #[test]
    fn no_traceback_no_error() {
        assert!(parse_python_error("just noise\n", "<turn 1>").is_none());
    }
}
