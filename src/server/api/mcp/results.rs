//! What a tool returns: the run as `structuredContent`, its text, images and file links.

use super::*;

/// What `execute_python` and `run_in_session` return as `structuredContent` (checked by
/// clients against the tools' `outputSchema`), beside the text and images that clients of
/// older revisions read. Images are in `content`; here, each output's type and size.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunResult {
    /// How the run ended: `ok`, `error` (uncaught exception or non-zero exit), or the host
    /// limit that stopped it (`timeout`, `fuel_exhausted`, `memory_exceeded`,
    /// `host_memory_exceeded`, `stack_overflow`, `trap`, `cancelled`).
    pub status: String,
    /// The program's exit status; null when a limit stopped it first.
    pub exit_code: Option<i32>,
    /// Its standard output (secrets redacted under the server's leakage policy).
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Whether stdout or stderr was cut at the output limit.
    pub truncated: bool,
    /// The uncaught exception, if any.
    pub error: Option<RunError>,
    /// Which host limit stopped the run, with its value.
    pub detail: Option<String>,
    /// Rich outputs in order (`display()`, `plt.show()`): type and size.
    pub outputs: Vec<RunOutput>,
    /// Files the run created or changed.
    pub files: Vec<RunFile>,
    /// Rules of the secrets found in the output (and redacted), if any.
    pub leak_rules: Vec<String>,
    /// For a session turn: which turn, its final value, and what became of the session.
    pub turn: Option<RunTurn>,
}

/// An uncaught Python exception.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunError {
    /// The exception class, e.g. `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its message.
    pub message: String,
    /// The line of the code where it was raised.
    pub line: Option<u32>,
    /// For a `ModuleNotFoundError`: what to do about it.
    pub hint: Option<String>,
}

/// One rich output's type and size.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunOutput {
    /// `image/png`, `text/html`, `image/svg+xml` or `text/plain`.
    pub mime: String,
    /// Bytes of its data (decoded, for images).
    pub bytes: u64,
}

/// A file the run left in its working directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunFile {
    /// Relative to the working directory.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Its media type, e.g. `image/png`.
    pub media_type: String,
}

/// What a session turn adds.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunTurn {
    /// 1 for the session's first turn.
    pub turn: u64,
    /// `repr` of the final expression's value, when there was one.
    pub result: Option<String>,
    /// A host limit stopped the turn and the session went back to its state before it.
    pub rolled_back: bool,
    /// Set when this turn ended the session, with why.
    pub ended: Option<String>,
}

impl RunResult {
    fn of(r: &ExecutionResult, turn: Option<RunTurn>) -> Self {
        RunResult {
            status: r.status.as_str().to_string(),
            exit_code: r.exit_code,
            stdout: r.stdout.clone(),
            stderr: r.stderr.clone(),
            truncated: r.truncated.stdout || r.truncated.stderr,
            error: r.error.as_ref().map(|e| RunError {
                kind: e.kind.clone(),
                message: e.message.clone(),
                line: e.line,
                hint: e.hint.clone(),
            }),
            detail: r.detail.clone(),
            outputs: r
                .outputs
                .iter()
                .map(|o| RunOutput {
                    mime: o.mime.clone(),
                    bytes: if o.mime == "image/png" {
                        (o.data.len() as u64 / 4) * 3
                    } else {
                        o.data.len() as u64
                    },
                })
                .collect(),
            files: r
                .files
                .iter()
                .map(|f| RunFile {
                    path: f.path.clone(),
                    size: f.size,
                    media_type: f.media_type.to_string(),
                })
                .collect(),
            leak_rules: r
                .leaks
                .as_deref()
                .map(|l| {
                    crate::leakage::rule_names(l)
                        .into_iter()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            turn,
        }
    }
}

/// Where a run's files are named from: `vivarium://executions/{id}/files/{path}` (gone with
/// the sandbox, so always embedded) or `vivarium://sessions/{id}/files/{path}` (kept with the
/// session: a file too large to embed is linked, and `GET /v1/sessions/{id}/files/{path}`
/// serves it).
pub enum FilesOf<'a> {
    Execution(&'a str),
    Session(&'a str),
}

/// What a path segment of a file's URI escapes: everything but RFC 3986's unreserved
/// characters.
const URI_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl FilesOf<'_> {
    fn uri(&self, path: &str) -> String {
        let path: String = path
            .split('/')
            .map(|seg| percent_encoding::utf8_percent_encode(seg, URI_SEGMENT).to_string())
            .collect::<Vec<_>>()
            .join("/");
        match self {
            FilesOf::Execution(id) => format!("vivarium://executions/{id}/files/{path}"),
            FilesOf::Session(id) => format!("vivarium://sessions/{id}/files/{path}"),
        }
    }
}

/// The files a run produced, as MCP resources: each one that came back embedded (as text
/// when it is UTF-8 text, else as a base64 blob), and, for a session, a `resource_link` for
/// each that was too large to return. PNGs are image content already.
fn file_resources(r: &ExecutionResult, of: &FilesOf<'_>) -> Vec<Content> {
    use rmcp::model::Resource;
    let mut out = Vec::new();
    for f in &r.files {
        let uri = of.uri(&f.path);
        match &f.content {
            Some(_) if f.media_type == "image/png" => {}
            Some(b64) => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap_or_default();
                out.push(Content::resource(file_contents(uri, &f.path, bytes)));
            }
            None => {
                if let FilesOf::Session(_) = of {
                    let mut link = Resource::new(uri, f.path.clone()).with_description(
                        "too large to return here; GET /v1/sessions/{id}/files/{path}",
                    );
                    link.mime_type = Some(f.media_type.to_string());
                    link.size = Some(f.size);
                    out.push(Content::resource_link(link));
                }
            }
        }
    }
    out
}

/// The most session files linked after a turn.
const MAX_FILE_LINKS: usize = 100;

/// A `resource_link` for each of a session's files (the first [`MAX_FILE_LINKS`]).
pub(super) fn session_file_links(id: &str, files: &[(String, u64)]) -> Vec<Content> {
    let of = FilesOf::Session(id);
    files
        .iter()
        .take(MAX_FILE_LINKS)
        .map(|(path, size)| {
            let mut link = rmcp::model::Resource::new(of.uri(path), path.clone());
            link.mime_type = Some(media_type(path).to_string());
            link.size = Some(*size);
            Content::resource_link(link)
        })
        .collect()
}

/// A session file's URI back to its session and path; `None` for any other URI.
pub(super) fn parse_file_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("vivarium://sessions/")?;
    let (id, path) = rest.split_once("/files/")?;
    let path = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?
        .into_owned();
    Some((id.to_string(), path))
}

/// A file's bytes as resource contents: text when it is UTF-8 of a textual type, else a
/// base64 blob.
pub(super) fn file_contents(
    uri: String,
    path: &str,
    bytes: Vec<u8>,
) -> rmcp::model::ResourceContents {
    use base64::Engine as _;
    use rmcp::model::ResourceContents;
    let mime = media_type(path);
    let textual = mime.starts_with("text/") || matches!(mime, "application/json" | "image/svg+xml");
    let bytes = match String::from_utf8(bytes) {
        Ok(text) if textual => {
            return ResourceContents::TextResourceContents {
                uri,
                mime_type: Some(mime.to_string()),
                text,
                meta: None,
            };
        }
        Ok(text) => text.into_bytes(),
        Err(e) => e.into_bytes(),
    };
    ResourceContents::BlobResourceContents {
        uri,
        mime_type: Some(mime.to_string()),
        blob: base64::engine::general_purpose::STANDARD.encode(bytes),
        meta: None,
    }
}

/// The text an assistant reads back, image content for every PNG produced, the other files
/// as resources, and the result as structured content (`turn` for a session turn).
pub fn render_result(
    r: &ExecutionResult,
    extra: &[String],
    turn: Option<RunTurn>,
    files: FilesOf<'_>,
) -> CallToolResult {
    let mut result = render_content(r, extra);
    result.content.extend(file_resources(r, &files));
    result.structured_content = serde_json::to_value(RunResult::of(r, turn)).ok();
    result
}

/// The text and images of [`render_result`].
fn render_content(r: &ExecutionResult, extra: &[String]) -> CallToolResult {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = write!(text, "status: {}", r.status.as_str());
    if let Some(code) = r.exit_code {
        let _ = write!(text, " (exit code {code})");
    }
    text.push('\n');
    for line in extra {
        let _ = writeln!(text, "{line}");
    }
    if let Some(detail) = &r.detail {
        let _ = writeln!(text, "stopped by: {detail}");
    }
    if !r.stdout.is_empty() {
        let _ = write!(text, "--- stdout ---\n{}", r.stdout);
        if !r.stdout.ends_with('\n') {
            text.push('\n');
        }
    }
    if !r.stderr.is_empty() {
        let _ = write!(text, "--- stderr ---\n{}", r.stderr);
        if !r.stderr.ends_with('\n') {
            text.push('\n');
        }
    }
    if r.truncated.stdout || r.truncated.stderr {
        let _ = writeln!(text, "(output truncated at the output limit)");
    }
    if let Some(e) = &r.error {
        let line = e.line.map(|l| format!(" at line {l}")).unwrap_or_default();
        let _ = writeln!(text, "error: {}: {}{line}", e.kind, e.message);
    }
    if let Some(leaks) = r.leaks.as_ref().filter(|l| !l.is_empty()) {
        let _ = writeln!(
            text,
            "output leakage: {} finding{} ({}), shown as [REDACTED:rule] unless the server's policy is report",
            leaks.len(),
            if leaks.len() == 1 { "" } else { "s" },
            crate::leakage::rule_names(leaks).join(", ")
        );
    }
    if let Some(findings) = &r.findings {
        for f in findings {
            let _ = writeln!(
                text,
                "check {} {} (line {}): {}",
                match f.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                },
                f.rule,
                f.line,
                f.message
            );
        }
    }
    for f in &r.files {
        let _ = writeln!(
            text,
            "file: {} ({}, {} bytes)",
            f.path, f.media_type, f.size
        );
    }
    let mut content = vec![Content::text(text)];
    for o in &r.outputs {
        match o.mime.as_str() {
            "image/png" => content.push(Content::image(o.data.clone(), "image/png")),
            mime => content.push(Content::text(format!("[{mime}]\n{}", o.data))),
        }
    }
    for f in &r.files {
        if f.media_type == "image/png"
            && let Some(data) = &f.content
        {
            content.push(Content::image(data.clone(), "image/png"));
        }
    }
    let ok = r.status == Status::Ok;
    if ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    }
}
