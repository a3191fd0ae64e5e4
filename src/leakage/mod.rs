//! Output leakage controls: secrets and personal data found, reported and redacted in
//! everything a run returns (stdout, stderr, a session's result, text rich outputs, files).
//!
//! - [`Scanner`]: every pattern rule, compiled once per server: gitleaks' default rule set
//!   (vendored as `gitleaks.toml`, v8.30.0), Vivarium's own (`vivarium.toml`: passwords in
//!   URLs, after detect-secrets; card numbers with Luhn, IBANs with mod 97 and e-mail
//!   addresses, after Presidio) and the operator's file, all in gitleaks' format.
//! - [`Guard`]: one request's policy and literal secrets (its `env` values, the operator's
//!   literals); [`Guard::apply`] scans a [`Report`] and, under `redact`, rewrites it.
//! - [`StreamFilter`]: the same for output streamed while the code runs, holding back a line
//!   until it is complete so that a secret split across two writes is still caught.
//!
//! The server's runner applies a guard to every run, whichever front door it came through.

mod personal;
mod rules;
mod scan;
mod stream;
mod windows;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use rules::RuleError;
pub use scan::{MIN_LITERAL_BYTES, Scanner};
pub use stream::StreamFilter;

use crate::report::{ErrorField, Leak, LeakPlace, LeakStream, PyError, Report};
use scan::{Hit, Literals, RuleRef};

/// A result lists at most this many leaks (all of them are still redacted, or denied): a
/// guest printing a million secrets must not make a million-entry response and audit line.
pub const MAX_LISTED_LEAKS: usize = 1000;

/// Once a rewrite has grown its text by this much, further secrets become a bare
/// `[REDACTED]`, or as many `*` as they have bytes when shorter: markers longer than the
/// short secrets they replace must not multiply the size of an output already at its cap.
const MAX_MARKER_GROWTH: usize = 64 << 10;

/// The gitleaks release `gitleaks.toml` was taken from.
pub const GITLEAKS_VERSION: &str = "8.30.0";

/// What happens to output that holds a secret.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
#[derive(Serialize, Deserialize, ToSchema, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LeakPolicy {
    /// No scan.
    Off,
    /// The result lists each leak (rule and place, never the text) in `leaks`.
    Report,
    /// As `report`, and each secret is replaced by `[REDACTED:rule]`. The default.
    #[default]
    Redact,
    /// Any leak withholds the whole output: 422 `output_leak` naming the rules.
    Deny,
}

impl LeakPolicy {
    /// As JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LeakPolicy::Off => "off",
            LeakPolicy::Report => "report",
            LeakPolicy::Redact => "redact",
            LeakPolicy::Deny => "deny",
        }
    }
}

/// One request's leakage policy and literal secrets, over the server's rules.
pub struct Guard {
    scanner: Arc<Scanner>,
    policy: LeakPolicy,
    literals: Literals,
    /// The `env` names whose values are not secrets (kept to make the same guard again: a
    /// suspended execution brought back).
    allow_env: Vec<String>,
    /// Network secrets' placeholders: what the program sees instead of a value, which a
    /// pattern (an API key's shape) must not take for a secret.
    placeholders: Vec<String>,
}

impl Guard {
    /// A guard for `policy`. Each `env` value is a literal secret (rule `env:NAME`) unless its
    /// name is in `allow_env` or it is shorter than [`MIN_LITERAL_BYTES`]; so is each of the
    /// operator's literals.
    pub fn new(
        scanner: Arc<Scanner>,
        policy: LeakPolicy,
        env: &[(String, String)],
        allow_env: &[String],
    ) -> Guard {
        Guard::with_secrets(scanner, policy, env, allow_env, &[], &[])
    }

    /// A guard for a run that carries network secrets (`secrets`: `(secret:NAME, value)`):
    /// each value is a literal secret in everything the run returns, whatever the policy
    /// (`off` becomes `redact`), besides `env`'s values and the operator's literals; their
    /// `placeholders` are no secrets, whatever shape a rule sees in them.
    pub fn with_secrets(
        scanner: Arc<Scanner>,
        policy: LeakPolicy,
        env: &[(String, String)],
        allow_env: &[String],
        secrets: &[(String, String)],
        placeholders: &[String],
    ) -> Guard {
        let policy = match policy {
            LeakPolicy::Off if !secrets.is_empty() => LeakPolicy::Redact,
            p => p,
        };
        let literals = if policy == LeakPolicy::Off {
            Literals::new(std::iter::empty())
        } else {
            let secrets = secrets.iter().map(|(k, v)| (k.clone(), v.as_str()));
            let env = env
                .iter()
                .filter(|(k, _)| !allow_env.contains(k))
                .map(|(k, v)| (format!("env:{k}"), v.as_str()));
            let operator = scanner
                .operator_literals()
                .iter()
                .map(|v| ("operator-literal".to_string(), v.as_str()));
            Literals::new(secrets.chain(env).chain(operator))
        };
        Guard {
            scanner,
            policy,
            literals,
            allow_env: allow_env.to_vec(),
            placeholders: placeholders.to_vec(),
        }
    }

    /// The `env` names whose values this guard does not take for secrets.
    pub fn allowed_env(&self) -> &[String] {
        &self.allow_env
    }

    /// This guard's policy.
    pub fn policy(&self) -> LeakPolicy {
        self.policy
    }

    /// Scans everything `report` (and a turn's `result`) returns, records the leaks in
    /// `report.leaks` and, under `redact`, replaces each secret. Binary files and images are
    /// scanned (files) or skipped (images) but never altered; a file whose path holds a
    /// secret is withheld. Returns the leaks found; with policy `off` nothing is scanned and
    /// `report.leaks` stays `None`.
    pub fn apply(&self, report: &mut Report, result: Option<&mut String>) -> Vec<Leak> {
        if self.policy == LeakPolicy::Off {
            return Vec::new();
        }
        let redact = self.policy == LeakPolicy::Redact;
        let mut leaks = Vec::new();
        // Whether the parsed exception is a piece of stderr as returned (it is not when
        // stderr was cut at the output limit and the exception came from its tail).
        let error_in_stderr = report
            .error
            .as_ref()
            .map(|e| report.stderr.contains(&e.traceback));
        self.stream(
            &mut report.stderr,
            LeakPlace::Stream(LeakStream::Stderr),
            report.truncated.stderr,
            redact,
            &mut leaks,
        );
        self.stream(
            &mut report.stdout,
            LeakPlace::Stream(LeakStream::Stdout),
            report.truncated.stdout,
            redact,
            &mut leaks,
        );
        if let Some(result) = result {
            self.text(
                result,
                LeakPlace::Stream(LeakStream::Result),
                redact,
                &mut leaks,
            );
        }
        if let Some(e) = &mut report.error {
            self.error(e, error_in_stderr == Some(true), redact, &mut leaks);
        }
        for (i, out) in report.outputs.iter_mut().enumerate() {
            if is_text_mime(&out.mime) {
                self.text(&mut out.data, LeakPlace::Output(i), redact, &mut leaks);
            }
        }
        report.files.retain_mut(|f| {
            let (shown, named) = self.path(&f.path, &mut leaks);
            if named && redact {
                // Its name is a secret: the file is withheld, content and all.
                return false;
            }
            if let Some(content) = &mut f.content {
                let before = content.len();
                leaks.extend(self.file(&f.path, &shown, content, redact));
                if content.len() != before {
                    // Redacted: the size is what is returned.
                    f.size = content.len() as u64;
                }
            }
            true
        });
        leaks.truncate(MAX_LISTED_LEAKS);
        report.leaks = Some(leaks.clone());
        leaks
    }

    /// Scans one file (read from a session, or a piece of one); under `redact` a text file
    /// is rewritten. Its path is not judged here (a download's is the caller's own), but a
    /// leak shows it with its secrets redacted.
    pub fn apply_file(&self, path: &str, bytes: &mut Vec<u8>) -> Vec<Leak> {
        if self.policy == LeakPolicy::Off {
            return Vec::new();
        }
        let shown = self.redacted(path);
        self.file(path, &shown, bytes, self.policy == LeakPolicy::Redact)
    }

    /// Scans the paths of a listing of files (a session's `(path, size)`): under `redact`
    /// a file whose path holds a secret is left out, under `report` and `deny` kept (a
    /// `deny` caller refuses the listing on any leak). Returns the leaks, each placed at
    /// the path with its secrets redacted.
    pub fn apply_listing(&self, files: &mut Vec<(String, u64)>) -> Vec<Leak> {
        if self.policy == LeakPolicy::Off {
            return Vec::new();
        }
        let mut leaks = Vec::new();
        files.retain(|(path, _)| {
            let (_, named) = self.path(path, &mut leaks);
            !(named && self.policy == LeakPolicy::Redact)
        });
        leaks.truncate(MAX_LISTED_LEAKS);
        leaks
    }

    /// Code mode: a tool call's arguments (`json`, guest output leaving for the caller),
    /// scanned under the policy: the leaks, and under `redact` the arguments with each secret
    /// replaced (`None` when that no longer parses as JSON: the call must not leave).
    pub fn apply_arguments(
        &self,
        call_id: &str,
        json: &str,
    ) -> (Option<serde_json::Value>, Vec<Leak>) {
        let parsed = || serde_json::from_str(json).ok();
        if self.policy == LeakPolicy::Off {
            return (parsed(), Vec::new());
        }
        let hits = self.hits(json.as_bytes(), None);
        if hits.is_empty() {
            return (parsed(), Vec::new());
        }
        let leaks = self.leaks(&hits, LeakPlace::ToolArguments(call_id.to_string()));
        let shown = match self.policy {
            LeakPolicy::Redact => serde_json::from_str(&self.rewrite(json, &hits)).ok(),
            LeakPolicy::Deny => None,
            _ => parsed(),
        };
        (shown, leaks)
    }

    /// `text` with every secret replaced, and nothing reported.
    pub fn redacted(&self, text: &str) -> String {
        let hits = self.hits(text.as_bytes(), None);
        if hits.is_empty() {
            text.to_string()
        } else {
            self.rewrite(text, &hits)
        }
    }

    /// Whether `text` holds any secret.
    pub fn finds_any(&self, text: &str) -> bool {
        !self.hits(text.as_bytes(), None).is_empty()
    }

    /// A filter for output streamed live, or `None` when streamed chunks need none (`off`,
    /// `report`: the result carries the leaks).
    pub fn stream_filter(self: &Arc<Self>) -> Option<StreamFilter> {
        matches!(self.policy, LeakPolicy::Redact | LeakPolicy::Deny)
            .then(|| StreamFilter::new(self.clone()))
    }

    /// Scans `text` (found at `place`); under `redact` rewrites it. A stream `cut` at the
    /// output limit may end with the first part of a literal secret (an `env` value): that is
    /// a leak too.
    fn stream(
        &self,
        text: &mut String,
        place: LeakPlace,
        cut: bool,
        redact: bool,
        leaks: &mut Vec<Leak>,
    ) {
        let mut hits = self.hits(text.as_bytes(), None);
        if cut
            && let Some(h) = self.literals.cut_at_end(text.as_bytes())
            && hits.iter().all(|x| x.end <= h.start)
        {
            hits.push(h);
        }
        if hits.is_empty() {
            return;
        }
        leaks.extend(self.leaks(&hits, place));
        if redact {
            *text = self.rewrite(text, &hits);
        }
    }

    /// Scans `text` (found at `place`); under `redact` rewrites it.
    fn text(&self, text: &mut String, place: LeakPlace, redact: bool, leaks: &mut Vec<Leak>) {
        self.stream(text, place, false, redact, leaks);
    }

    /// The leaks of the file `path` holding `content`, placed at `shown` (its path as a
    /// leak may name it); with `redact`, a text (UTF-8) file is rewritten, a binary one left
    /// as it is.
    fn file(&self, path: &str, shown: &str, content: &mut Vec<u8>, redact: bool) -> Vec<Leak> {
        let hits = self.hits(content, Some(path));
        if hits.is_empty() {
            return Vec::new();
        }
        if redact && let Ok(text) = std::str::from_utf8(content) {
            *content = self.rewrite(text, &hits).into_bytes();
        }
        self.leaks(&hits, LeakPlace::File(shown.to_string()))
    }

    /// Scans a file's path (its name and its folders'): the path as a leak may show it
    /// (its secrets redacted), and whether it held any, each listed in `leaks`.
    fn path(&self, path: &str, leaks: &mut Vec<Leak>) -> (String, bool) {
        let hits = self.hits(path.as_bytes(), None);
        if hits.is_empty() {
            return (path.to_string(), false);
        }
        let shown = self.rewrite(path, &hits);
        leaks.extend(self.leaks(&hits, LeakPlace::FileName(shown.clone())));
        (shown, true)
    }

    /// Scans the parsed exception, each field on its own whatever stderr kept of it; under
    /// `redact` each is rewritten. A field's leaks are listed unless it is a piece of a text
    /// already listed: the traceback of stderr as returned (`in_stderr`), the type and the
    /// message of the traceback. The hint, built by the host from the message, is always
    /// listed.
    fn error(&self, e: &mut PyError, in_stderr: bool, redact: bool, leaks: &mut Vec<Leak>) {
        // Each field with whether it is a piece of a text whose leaks are listed already.
        let listed = [
            in_stderr,
            in_stderr || e.traceback.contains(e.kind.as_str()),
            in_stderr || e.traceback.contains(e.message.as_str()),
        ];
        let fields = [
            (&mut e.traceback, ErrorField::Traceback),
            (&mut e.kind, ErrorField::Type),
            (&mut e.message, ErrorField::Message),
        ];
        for ((text, field), listed) in fields.into_iter().zip(listed) {
            let mut found = Vec::new();
            self.text(text, LeakPlace::Error(field), redact, &mut found);
            if !listed {
                leaks.append(&mut found);
            }
        }
        if let Some(hint) = &mut e.hint {
            self.text(hint, LeakPlace::Error(ErrorField::Hint), redact, leaks);
        }
    }

    /// Every hit in `text`, by start.
    fn hits(&self, text: &[u8], path: Option<&str>) -> Vec<Hit> {
        let mut hits = Vec::new();
        self.scanner.scan(text, path, &mut hits);
        self.literals.scan(text, &mut hits);
        // By start, then by rule order: the first rule at a place names the span.
        hits.sort_by_key(|h| (h.start, h.rule, h.end));
        hits.dedup_by(|a, b| a.rule == b.rule && a.start == b.start && a.end == b.end);
        if !self.placeholders.is_empty() {
            hits.retain(|h| matches!(h.rule, RuleRef::Literal(_)) || !self.in_placeholder(text, h));
        }
        // As gitleaks does: a generic rule's hit inside a specific rule's says nothing more.
        // The specific hits' running maximum end, by start, answers "is it covered" in
        // O(log n) (a guest may print a million of them).
        let mut specific: Vec<(usize, usize)> = hits
            .iter()
            .filter(|h| !self.is_generic(h.rule))
            .map(|h| (h.start, h.end))
            .collect();
        if specific.len() < hits.len() && !specific.is_empty() {
            let mut max_end = 0;
            for s in &mut specific {
                max_end = max_end.max(s.1);
                s.1 = max_end;
            }
            hits.retain(|h| {
                if !self.is_generic(h.rule) {
                    return true;
                }
                let upto = specific.partition_point(|s| s.0 <= h.start);
                upto == 0 || specific[upto - 1].1 < h.end
            });
        }
        hits
    }

    /// Whether a placeholder overlaps `h`'s span.
    fn in_placeholder(&self, text: &[u8], h: &Hit) -> bool {
        self.placeholders.iter().any(|p| {
            let p = p.as_bytes();
            let from = h.start.saturating_sub(p.len());
            let to = (h.end + p.len()).min(text.len());
            text[from..to]
                .windows(p.len())
                .enumerate()
                .any(|(i, w)| w == p && from + i < h.end && from + i + p.len() > h.start)
        })
    }

    fn is_generic(&self, r: RuleRef) -> bool {
        matches!(r, RuleRef::Pattern(i) if self.scanner.rule_id(i).starts_with("generic"))
    }

    fn rule_id(&self, r: RuleRef) -> &str {
        match r {
            RuleRef::Pattern(i) => self.scanner.rule_id(i),
            RuleRef::Literal(i) => self.literals.id(i),
        }
    }

    fn leaks(&self, hits: &[Hit], place: LeakPlace) -> Vec<Leak> {
        hits.iter()
            .take(MAX_LISTED_LEAKS)
            .map(|h| Leak {
                rule: self.rule_id(h.rule).to_string(),
                place: place.clone(),
                offset: h.start as u64,
                length: (h.end - h.start) as u64,
            })
            .collect()
    }

    /// `text` with each hit (sorted by start) replaced by `[REDACTED:rule]`; overlapping hits
    /// become one span named after the first, widened to whole characters.
    fn rewrite(&self, text: &str, hits: &[Hit]) -> String {
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut i = 0;
        while i < hits.len() {
            let first = hits[i];
            let mut start = first.start.max(at);
            let mut end = first.end;
            i += 1;
            while i < hits.len() && hits[i].start < end {
                end = end.max(hits[i].end);
                i += 1;
            }
            if end <= at {
                continue;
            }
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&text[at..start]);
            if out.len() + text.len() - end <= text.len() + MAX_MARKER_GROWTH {
                out.push_str("[REDACTED:");
                out.push_str(self.rule_id(first.rule));
                out.push(']');
            } else if end - start >= "[REDACTED]".len() {
                out.push_str("[REDACTED]");
            } else {
                out.extend(std::iter::repeat_n('*', end - start));
            }
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }
}

/// Rich outputs that are text (scanned); images other than SVG are pixels (not scanned).
fn is_text_mime(mime: &str) -> bool {
    !mime.starts_with("image/") || mime == "image/svg+xml"
}

/// The rule ids of `leaks`, each once, in order: what a `deny` error names.
pub fn rule_names(leaks: &[Leak]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for l in leaks {
        if !names.contains(&l.rule.as_str()) {
            names.push(&l.rule);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FileOut, RichOutput, Status};

    fn guard(policy: LeakPolicy, env: &[(&str, &str)]) -> Guard {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Guard::new(Arc::new(Scanner::new(None).unwrap()), policy, &env, &[])
    }

    fn report(stdout: &str) -> Report {
        Report {
            status: Status::Ok,
            exit_code: Some(0),
            stdout: stdout.to_string(),
            stderr: String::new(),
            truncated: Default::default(),
            error: None,
            detail: None,
            files: Vec::new(),
            usage: Default::default(),
            outputs: Vec::new(),
            leaks: None,
            network: None,
        }
    }

    const GH: &str = "ghp_R2d4kPq8ZtW1xY7bN3mC5vL9sA0fH6jE2uTo";

    #[test]
    fn redact_replaces_and_reports_offsets_of_the_original() {
        let g = guard(LeakPolicy::Redact, &[("DB_PASSWORD", "hunter2-but-longer")]);
        let mut r = report(&format!("tok {GH}\npw hunter2-but-longer\n"));
        r.outputs.push(RichOutput {
            mime: "text/plain".into(),
            data: format!("x {GH}"),
        });
        r.files.push(FileOut {
            path: "blob.bin".into(),
            size: 3,
            content: Some(vec![0xff, 0xfe, 0]),
            held: None,
        });
        let leaks = g.apply(&mut r, None);
        assert_eq!(
            r.stdout,
            "tok [REDACTED:github-pat]\npw [REDACTED:env:DB_PASSWORD]\n"
        );
        assert_eq!(r.outputs[0].data, "x [REDACTED:github-pat]");
        assert_eq!(leaks.len(), 3, "{leaks:?}");
        assert_eq!(leaks[0].offset, 4);
        assert_eq!(leaks[0].length, GH.len() as u64);
        assert_eq!(r.leaks.as_ref().unwrap().len(), 3);
    }

    #[test]
    fn a_secret_holding_the_word_false_is_found() {
        // gitleaks' global allowlist, as shipped, let any secret holding `false` go.
        let token = "ghp_R2d4kPq8ZtW1xY7bFalseC5vL9sA0fH6jE2u";
        let mut r = report(&format!("tok {token}\n"));
        let leaks = guard(LeakPolicy::Redact, &[]).apply(&mut r, None);
        assert_eq!(rule_names(&leaks), ["github-pat"], "{leaks:?}");
        assert_eq!(r.stdout, "tok [REDACTED:github-pat]\n");
    }

    #[test]
    fn report_alters_nothing_and_off_scans_nothing() {
        let text = format!("{GH}\n");
        let mut r = report(&text);
        assert_eq!(guard(LeakPolicy::Report, &[]).apply(&mut r, None).len(), 1);
        assert_eq!(r.stdout, text);
        let mut r = report(&text);
        assert!(guard(LeakPolicy::Off, &[]).apply(&mut r, None).is_empty());
        assert_eq!(r.leaks, None);
    }

    #[test]
    fn overlapping_hits_become_one_span_on_char_boundaries() {
        let g = guard(LeakPolicy::Redact, &[("A", "aaaaaaaa"), ("B", "bbbbbbbb")]);
        // "<élan>": é is bytes 1..3; a span starting inside it widens to it.
        let hits = [
            Hit {
                rule: RuleRef::Literal(0),
                start: 2,
                end: 4,
            },
            Hit {
                rule: RuleRef::Literal(1),
                start: 3,
                end: 5,
            },
        ];
        assert_eq!(g.rewrite("<élan>", &hits), "<[REDACTED:env:A]n>");
    }

    #[test]
    fn a_flood_of_secrets_is_listed_up_to_the_cap_and_does_not_blow_up_the_text() {
        let g = guard(
            LeakPolicy::Redact,
            &[("A_RATHER_LONG_VARIABLE_NAME", "s3cr3t-v")],
        );
        let text = "s3cr3t-v ".repeat(200_000);
        let mut r = report(&text);
        let leaks = g.apply(&mut r, None);
        assert_eq!(leaks.len(), MAX_LISTED_LEAKS);
        assert!(!r.stdout.contains("s3cr3t-v"));
        assert!(
            r.stdout.len() <= text.len() + MAX_MARKER_GROWTH + 64,
            "{}",
            r.stdout.len()
        );
        assert!(
            r.stdout.ends_with(" ******** "),
            "{}",
            &r.stdout[r.stdout.len() - 40..]
        );
    }

    fn places(leaks: &[Leak]) -> Vec<String> {
        leaks
            .iter()
            .map(|l| serde_json::to_string(&l.place).unwrap())
            .collect()
    }

    #[test]
    fn an_error_parsed_past_the_cut_of_stderr_is_scanned_and_listed_on_its_own() {
        let tb = format!("Traceback (most recent call last):\nRuntimeError: bad {GH}");
        let error = || crate::report::PyError {
            kind: "ModuleNotFoundError".into(),
            message: format!("bad {GH}"),
            line: None,
            traceback: tb.clone(),
            hint: Some(format!("`{GH}` is not built into this sandbox")),
        };
        // stderr was cut before the traceback: the error's fields are the only places.
        for policy in [LeakPolicy::Redact, LeakPolicy::Report, LeakPolicy::Deny] {
            let mut r = report("");
            r.stderr = "x".repeat(100);
            r.error = Some(error());
            let leaks = g_apply(policy, &mut r);
            assert_eq!(
                places(&leaks),
                [r#"{"error":"traceback"}"#, r#"{"error":"hint"}"#],
                "{policy:?}"
            );
            let e = r.error.unwrap();
            let shown = format!("{}{}{}", e.message, e.traceback, e.hint.unwrap());
            assert_eq!(shown.contains(GH), policy != LeakPolicy::Redact, "{shown}");
        }
        // stderr holds the traceback: listed there once, the error redacted all the same.
        let mut r = report("");
        r.stderr = format!("noise\n{tb}\n");
        r.error = Some(error());
        let leaks = g_apply(LeakPolicy::Redact, &mut r);
        assert_eq!(
            places(&leaks),
            [r#"{"stream":"stderr"}"#, r#"{"error":"hint"}"#]
        );
        assert!(!format!("{:?}", r.error).contains(GH));
    }

    #[test]
    fn a_file_whose_path_holds_a_secret_is_withheld_and_named_redacted() {
        // From JSON, as a worker's reply brings them.
        let files = || -> Vec<FileOut> {
            serde_json::from_value(serde_json::json!([
                {"path": format!("out/{GH}/a.txt"), "size": 2, "content": "aGk="},
                {"path": "ok.txt", "size": 2, "content": "b2s="},
            ]))
            .unwrap()
        };
        let mut r = report("");
        r.files = files();
        let leaks = g_apply(LeakPolicy::Redact, &mut r);
        assert_eq!(
            places(&leaks),
            [r#"{"file_name":"out/[REDACTED:github-pat]/a.txt"}"#]
        );
        assert_eq!(leaks[0].offset, 4);
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[0].path, "ok.txt");
        // `report` keeps the file; the place still never shows the secret.
        let mut r = report("");
        r.files = files();
        let leaks = g_apply(LeakPolicy::Report, &mut r);
        assert_eq!(r.files.len(), 2);
        assert!(!places(&leaks).concat().contains(GH));
        // A listing: left out under `redact`, kept (and listed) under `deny`.
        let mut listing = vec![(format!("{GH}.csv"), 3), ("b.csv".to_string(), 4)];
        let leaks = guard(LeakPolicy::Redact, &[]).apply_listing(&mut listing);
        assert_eq!(listing, [("b.csv".to_string(), 4)]);
        assert_eq!(
            places(&leaks),
            [r#"{"file_name":"[REDACTED:github-pat].csv"}"#]
        );
        let mut listing = vec![(format!("{GH}.csv"), 3)];
        assert_eq!(
            guard(LeakPolicy::Deny, &[])
                .apply_listing(&mut listing)
                .len(),
            1
        );
    }

    #[test]
    fn a_stream_cut_in_the_middle_of_a_literal_secret_loses_its_first_part_too() {
        let g = guard(LeakPolicy::Redact, &[("DB_PASSWORD", "hunter2-but-longer")]);
        let mut r = report("x = hunter2-b");
        r.truncated.stdout = true;
        let leaks = g.apply(&mut r, None);
        assert_eq!(r.stdout, "x = [REDACTED:env:DB_PASSWORD]");
        assert_eq!((leaks[0].offset, leaks[0].length), (4, 9));
        // Uncut, the same text is not a secret's start; nor is an end too short to tell.
        let mut r = report("x = hunter2-b");
        assert!(g.apply(&mut r, None).is_empty());
        let mut r = report("x = hun");
        r.truncated.stdout = true;
        assert!(g.apply(&mut r, None).is_empty());
    }

    fn g_apply(policy: LeakPolicy, r: &mut Report) -> Vec<Leak> {
        guard(policy, &[]).apply(r, None)
    }

    #[test]
    fn generic_hits_covered_by_specific_ones_are_dropped() {
        let g = guard(LeakPolicy::Report, &[]);
        let mut r = report(&format!("token = {GH}\napi_key = 'Zq81vX0pLwTq93nBc7Rk'\n"));
        let rules: Vec<String> = g.apply(&mut r, None).into_iter().map(|l| l.rule).collect();
        assert_eq!(rules, ["github-pat", "generic-api-key"]);
    }
}
