//! `complete_request`, `inspect_request` and `is_complete_request`: the replies made of the
//! answers of the session's queries (`intake::Query`). An answer is the
//! guest's JSON, so it is parsed into a fixed shape and bounded before it leaves; anything
//! else is a reply with `status: error`. What leaves (completions, inspection text, and a
//! cell's `input()` prompt) goes through the session's leakage guard as a cell's output
//! does: under `redact` a secret is replaced (a completion holding one is dropped), under
//! `deny` it is withheld.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::leakage::{Guard, LeakPolicy};

use crate::vocabulary::MAX_COMPLETIONS;

/// The longest completion kept (longer ones are dropped).
const MAX_MATCH_CHARS: usize = 1_000;
/// The most text an inspection returns.
const MAX_INSPECTION_BYTES: usize = 100 << 10;

/// What the session answered; `Err` with why it could not.
type Answer = Result<Option<String>, String>;

fn parse<T: for<'de> Deserialize<'de>>(answer: Answer) -> Result<T, String> {
    let text = answer?.ok_or("the session gave no answer")?;
    serde_json::from_str(&text).map_err(|e| format!("the session's answer is malformed: {e}"))
}

/// A reply saying the query failed, and why.
pub fn error(evalue: String) -> Value {
    json!({"status": "error", "ename": "VivariumQueryFailed", "evalue": evalue, "traceback": []})
}

#[derive(Deserialize)]
struct Completions {
    matches: Vec<String>,
    cursor_start: usize,
    cursor_end: usize,
}

/// Whether `guard` lets `text` leave as it is (a policy that neither redacts nor withholds,
/// or no secret in it).
fn clean(guard: &Guard, text: &str) -> bool {
    !matches!(guard.policy(), LeakPolicy::Redact | LeakPolicy::Deny) || !guard.finds_any(text)
}

/// `complete_reply` for `code` with the cursor at `cursor` (code points); a completion that
/// holds a secret under `guard` is dropped.
pub fn completions(answer: Answer, code: &str, cursor: usize, guard: &Guard) -> Value {
    let c: Completions = match parse(answer) {
        Ok(c) => c,
        Err(e) => return error(e),
    };
    let cursor = cursor.min(code.chars().count());
    let end = c.cursor_end.min(cursor);
    let start = c.cursor_start.min(end);
    let matches: Vec<String> = c
        .matches
        .into_iter()
        .filter(|m| !m.is_empty() && m.chars().count() <= MAX_MATCH_CHARS)
        .take(MAX_COMPLETIONS)
        .filter(|m| clean(guard, m))
        .collect();
    json!({"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": end, "metadata": {}})
}

#[derive(Deserialize)]
struct Inspection {
    found: bool,
    text: String,
}

/// `inspect_reply`: the object's type, signature, documentation (and source), as text;
/// through `guard` (redacted, or under `deny` withheld with an error naming the policy).
pub fn inspection(answer: Answer, guard: &Guard) -> Value {
    let i: Inspection = match parse(answer) {
        Ok(i) => i,
        Err(e) => return error(e),
    };
    if !i.found {
        return json!({"status": "ok", "found": false, "data": {}, "metadata": {}});
    }
    let mut text = i.text;
    if text.len() > MAX_INSPECTION_BYTES {
        let mut cut = MAX_INSPECTION_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    if !clean(guard, &text) {
        if guard.policy() == LeakPolicy::Deny {
            return json!({"status": "error", "ename": "VivariumOutputLeak", "evalue": WITHHELD, "traceback": []});
        }
        text = guard.redacted(&text);
    }
    json!({"status": "ok", "found": true, "data": {"text/plain": text}, "metadata": {}})
}

/// Why an answer holding a secret was withheld.
const WITHHELD: &str =
    "withheld: it held a secret or personal data and the leakage policy is \"deny\"";

/// A cell's `input()` prompt as it may leave under `guard`: redacted, or under `deny`
/// replaced whole by a note that it was withheld.
pub fn prompt(prompt: String, guard: &Arc<Guard>) -> String {
    if clean(guard, &prompt) {
        return prompt;
    }
    match guard.policy() {
        LeakPolicy::Deny => format!("[prompt {WITHHELD}] "),
        _ => guard.redacted(&prompt),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Complete,
    Incomplete,
    Invalid,
}

#[derive(Deserialize)]
struct Completeness {
    status: Status,
    indent: String,
}

/// `is_complete_reply`: whether the code is a whole statement yet; for `incomplete`, the
/// indent of its next line. A kernel that cannot tell says `unknown`, as the protocol has it.
pub fn completeness(answer: Answer) -> Value {
    let c: Completeness = match parse(answer) {
        Ok(c) => c,
        Err(_) => return json!({"status": "unknown"}),
    };
    match c.status {
        Status::Complete => json!({"status": "complete"}),
        Status::Invalid => json!({"status": "invalid"}),
        Status::Incomplete => {
            let indent: String = c
                .indent
                .chars()
                .filter(|ch| *ch == ' ' || *ch == '\t')
                .take(64)
                .collect();
            json!({"status": "incomplete", "indent": indent})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leakage::Scanner;

    fn guard(policy: LeakPolicy) -> Arc<Guard> {
        Arc::new(Guard::new(
            Arc::new(Scanner::new(None).unwrap()),
            policy,
            &[],
            &[],
        ))
    }

    /// A token of GitHub's format (not a real one).
    const GH: &str = "ghp_R2d4kPq8ZtW1xY7bN3mC5vL9sA0fH6jE2uTo";

    #[test]
    fn what_leaves_goes_through_the_sessions_leakage_policy() {
        let answer =
            json!({"matches": ["ghp_ok", GH, "ghp_R2"], "cursor_start": 0, "cursor_end": 3});
        for policy in [LeakPolicy::Redact, LeakPolicy::Deny] {
            let r = completions(Ok(Some(answer.to_string())), "ghp", 3, &guard(policy));
            assert_eq!(r["matches"], json!(["ghp_ok", "ghp_R2"]), "{policy:?}");
        }
        let r = completions(
            Ok(Some(answer.to_string())),
            "ghp",
            3,
            &guard(LeakPolicy::Report),
        );
        assert_eq!(r["matches"].as_array().unwrap().len(), 3);
        let doc = json!({"found": true, "text": format!("Docstring: the token is {GH}")});
        let r = inspection(Ok(Some(doc.to_string())), &guard(LeakPolicy::Redact));
        let text = r["data"]["text/plain"].as_str().unwrap();
        assert!(!text.contains(GH) && text.contains("[REDACTED:"), "{text}");
        let r = inspection(Ok(Some(doc.to_string())), &guard(LeakPolicy::Deny));
        assert_eq!(r["status"], "error");
        assert!(!r.to_string().contains(GH), "{r}");
        let asked = format!("token {GH}? ");
        let p = prompt(asked.clone(), &guard(LeakPolicy::Redact));
        assert!(!p.contains(GH) && p.contains("[REDACTED:"), "{p}");
        let p = prompt(asked.clone(), &guard(LeakPolicy::Deny));
        assert!(!p.contains(GH) && p.contains("withheld"), "{p}");
        assert_eq!(prompt(asked.clone(), &guard(LeakPolicy::Off)), asked);
        assert_eq!(prompt("name? ".into(), &guard(LeakPolicy::Deny)), "name? ");
    }

    #[test]
    fn answers_are_bounded_and_malformed_ones_are_errors() {
        let long = "x".repeat(MAX_MATCH_CHARS + 1);
        let many: Vec<String> = (0..MAX_COMPLETIONS + 50).map(|i| format!("m{i}")).collect();
        let mut matches = many.clone();
        matches.push(long);
        let answer = json!({"matches": matches, "cursor_start": 999, "cursor_end": 999});
        let g = guard(LeakPolicy::Redact);
        let r = completions(Ok(Some(answer.to_string())), "abc", 3, &g);
        assert_eq!(r["matches"].as_array().unwrap().len(), MAX_COMPLETIONS);
        assert_eq!(
            (r["cursor_start"].clone(), r["cursor_end"].clone()),
            (json!(3), json!(3))
        );
        for bad in [
            Ok(None),
            Ok(Some("[1]".to_string())),
            Err("stopped".to_string()),
        ] {
            assert_eq!(completions(bad, "abc", 3, &g)["status"], "error");
        }
        let r = completeness(Ok(Some(
            r#"{"status":"incomplete","indent":"  \u001b[31m"}"#.into(),
        )));
        assert_eq!(r, json!({"status": "incomplete", "indent": "  "}));
        assert_eq!(completeness(Ok(Some("{}".into())))["status"], "unknown");
        let big = json!({"found": true, "text": "é".repeat(MAX_INSPECTION_BYTES)});
        let r = inspection(Ok(Some(big.to_string())), &g);
        assert!(r["data"]["text/plain"].as_str().unwrap().len() <= MAX_INSPECTION_BYTES);
    }
}
