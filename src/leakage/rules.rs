//! Rule files in gitleaks' configuration format, compiled once.
//!
//! The format is gitleaks' (`[[rules]]` with `id`, `regex`, `secretGroup`, `entropy`,
//! `keywords`, `path` and `[[rules.allowlists]]`; a global `[allowlist]`), so its maintained
//! rule set is used as published and an operator writes extra rules the way gitleaks users
//! already do. Vivarium adds three keys: `validate` on a rule (a checksum the secret must pass,
//! for the personal-data rules), and at the top level `literals` (strings redacted wherever
//! they appear) and `disabled_rules` (rule ids to leave out).
//!
//! Patterns are compiled on bytes with Unicode off, which is what Go's RE2 does with them:
//! `\w`, `\d`, `\s` and `\b` are ASCII, and output that is not UTF-8 is scanned as it is.

use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde::Deserialize;

/// A compiled pattern may take this much memory: gitleaks' rules fit the crate's default of
/// 10 MiB, an operator's long alternation of names may not.
const REGEX_SIZE_LIMIT: usize = 32 << 20;

/// A rule file that did not load.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// Not TOML, or not the shape of a gitleaks configuration.
    #[error("{file}: {source}")]
    Syntax {
        /// Which file.
        file: String,
        /// What the TOML parser said.
        source: toml::de::Error,
    },
    /// One of a rule's patterns does not compile.
    #[error("{file}: rule {rule}: {source}")]
    Pattern {
        /// Which file.
        file: String,
        /// The rule's id (or `allowlist` for the global one).
        rule: String,
        /// What the regex compiler said.
        source: Box<regex::Error>,
    },
    /// A rule with neither `regex` nor `path`, or an id used twice.
    #[error("{file}: rule {rule}: {why}")]
    Invalid {
        /// Which file.
        file: String,
        /// The rule's id.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A rule file as written.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RuleFile {
    /// gitleaks' global allowlist (older spelling).
    #[serde(default)]
    allowlist: Option<AllowlistDef>,
    /// gitleaks' global allowlists (newer spelling).
    #[serde(default)]
    allowlists: Vec<AllowlistDef>,
    #[serde(default)]
    rules: Vec<RuleDef>,
    /// Vivarium's: strings redacted wherever they appear.
    #[serde(default)]
    pub literals: Vec<String>,
    /// Vivarium's: ids of rules (from any file) to leave out.
    #[serde(default)]
    pub disabled_rules: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RuleDef {
    id: String,
    regex: Option<String>,
    #[serde(rename = "secretGroup", default)]
    secret_group: usize,
    #[serde(default)]
    entropy: f64,
    #[serde(default)]
    keywords: Vec<String>,
    path: Option<String>,
    #[serde(default)]
    allowlists: Vec<AllowlistDef>,
    #[serde(default)]
    validate: Option<Validator>,
}

#[derive(Debug, Deserialize)]
struct AllowlistDef {
    #[serde(rename = "regexTarget", default)]
    regex_target: Target,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
    #[serde(default)]
    condition: Condition,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Target {
    /// The secret (the rule's secret group), gitleaks' default.
    #[default]
    Secret,
    /// The whole match.
    Match,
    /// The line(s) the match is on.
    Line,
}

/// How an allowlist's criteria combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum Condition {
    /// Any regex or stopword allows the finding.
    #[default]
    Or,
    /// Every kind of criterion given must hold.
    And,
}

/// A checksum a secret must pass before it counts (Vivarium's extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Validator {
    /// Payment card numbers: 13 to 19 digits passing the Luhn check.
    Luhn,
    /// IBANs: a known country's length and ISO 13616's mod-97 check.
    Iban,
}

/// One compiled rule.
pub(super) struct Rule {
    /// Stable id, e.g. `aws-access-token`.
    pub id: String,
    /// `None` for a rule that flags files by path alone.
    pub regex: Option<Regex>,
    /// The capture group holding the secret; 0 takes the first non-empty group.
    pub secret_group: usize,
    /// A secret's Shannon entropy must be above this (0: no minimum).
    pub entropy: f64,
    /// Lowercase; the rule runs only where one of them occurs (none: always).
    pub keywords: Vec<String>,
    /// The rule applies only to files whose path matches (never to streams).
    pub path: Option<Regex>,
    pub allowlists: Vec<Allowlist>,
    pub validate: Option<Validator>,
    /// The pattern can match across many lines (its windows reach further).
    pub multiline: bool,
}

/// A compiled allowlist: what makes a finding not a finding.
pub(super) struct Allowlist {
    pub target: Target,
    regexes: Option<RegexSet>,
    /// Lowercase.
    stopwords: Vec<String>,
    /// Paths and commits make an `AND` allowlist need them; output has no commit, and a
    /// path allowlist is for repositories, so either one present means it never applies.
    needs_path_or_commit: bool,
    condition: Condition,
}

impl Allowlist {
    /// Whether this allowlist lets the finding go; `target` is the text its regexes see.
    pub fn allows(&self, target: &[u8], secret: &[u8]) -> bool {
        let regex = self.regexes.as_ref().is_some_and(|r| r.is_match(target));
        let stop = self.has_stopword(secret);
        match self.condition {
            Condition::Or => regex || stop,
            Condition::And => {
                !self.needs_path_or_commit
                    && (self.regexes.is_none() || regex)
                    && (self.stopwords.is_empty() || stop)
                    && (self.regexes.is_some() || !self.stopwords.is_empty())
            }
        }
    }

    fn has_stopword(&self, secret: &[u8]) -> bool {
        if self.stopwords.is_empty() || secret.is_empty() {
            return false;
        }
        let lower = secret.to_ascii_lowercase();
        self.stopwords
            .iter()
            .any(|w| memchr_find(&lower, w.as_bytes()))
    }
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// A rule file, compiled.
pub(super) struct Compiled {
    pub rules: Vec<Rule>,
    pub global: Vec<Allowlist>,
    pub literals: Vec<String>,
    pub disabled: Vec<String>,
}

/// Parses and compiles the rule file `text`, named `file` in errors.
pub(super) fn compile(file: &str, text: &str) -> Result<Compiled, RuleError> {
    let parsed: RuleFile = toml::from_str(text).map_err(|source| RuleError::Syntax {
        file: file.to_string(),
        source,
    })?;
    let pattern_error = |rule: &str, source: regex::Error| RuleError::Pattern {
        file: file.to_string(),
        rule: rule.to_string(),
        source: Box::new(source),
    };
    let mut global = Vec::new();
    for def in parsed.allowlist.iter().chain(&parsed.allowlists) {
        global.push(allowlist(def).map_err(|e| pattern_error("allowlist", e))?);
    }
    let mut rules = Vec::with_capacity(parsed.rules.len());
    for def in parsed.rules {
        if def.regex.is_none() && def.path.is_none() {
            return Err(RuleError::Invalid {
                file: file.to_string(),
                rule: def.id,
                why: "a rule needs a regex or a path".into(),
            });
        }
        let compiled = |p: &Option<String>| {
            p.as_deref()
                .map(pattern)
                .transpose()
                .map_err(|e| pattern_error(&def.id, e))
        };
        let (regex, path) = (compiled(&def.regex)?, compiled(&def.path)?);
        let allowlists = def
            .allowlists
            .iter()
            .map(allowlist)
            .collect::<Result<_, _>>()
            .map_err(|e| pattern_error(&def.id, e))?;
        rules.push(Rule {
            keywords: def
                .keywords
                .iter()
                .map(|k| k.to_ascii_lowercase())
                .collect(),
            id: def.id,
            regex,
            secret_group: def.secret_group,
            entropy: def.entropy,
            path,
            allowlists,
            validate: def.validate,
            multiline: def
                .regex
                .as_deref()
                .is_some_and(super::windows::spans_lines),
        });
    }
    Ok(Compiled {
        rules,
        global,
        literals: parsed.literals,
        disabled: parsed.disabled_rules,
    })
}

fn pattern(p: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&from_go(p))
        .unicode(false)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
}

fn allowlist(def: &AllowlistDef) -> Result<Allowlist, regex::Error> {
    let regexes = if def.regexes.is_empty() {
        None
    } else {
        Some(
            RegexSetBuilder::new(def.regexes.iter().map(|r| from_go(as_meant(r))))
                .unicode(false)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()?,
        )
    };
    Ok(Allowlist {
        target: def.regex_target,
        regexes,
        stopwords: def
            .stopwords
            .iter()
            .map(|w| w.to_ascii_lowercase())
            .collect(),
        needs_path_or_commit: !def.paths.is_empty() || !def.commits.is_empty(),
        condition: def.condition,
    })
}

/// Allowlist patterns the vendored rule file ships with a mistake, and what they mean. The
/// file stays byte for byte as upstream ships it (so it can be replaced by a newer one);
/// the correction is made here, where it is read.
///
/// - gitleaks' global `(?i)^true|false|null$` anchors only its first and last word (an
///   alternation binds looser than `^`), so it let go every secret *holding* `false` in
///   any case (`ghp_…False…`). It is meant to let go the words themselves.
const AS_MEANT: &[(&str, &str)] = &[(r"(?i)^true|false|null$", r"(?i)^(?:true|false|null)$")];

/// `p`, or what it is meant to be if it is one of the [`AS_MEANT`] mistakes.
fn as_meant(p: &str) -> &str {
    AS_MEANT
        .iter()
        .find(|(shipped, _)| *shipped == p)
        .map_or(p, |(_, meant)| meant)
}

/// `p` in Rust's regex syntax. The two dialects agree but for braces: Go's RE2 takes a `{`
/// that does not open a repetition (`{n}`, `{n,}`, `{n,m}`) and a lone `}` as literals, Rust
/// refuses them, so those are escaped.
fn from_go(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = String::with_capacity(p.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    let mut in_repetition = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' => {
                // An escape and what it escapes, as they are (a char may be multi-byte).
                let len = p[i + 1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&p[i..i + 1 + len]);
                i += 1 + len;
                continue;
            }
            b'[' if !in_class => in_class = true,
            b']' if in_class => in_class = false,
            b'{' if !in_class => {
                if is_repetition(&b[i + 1..]) {
                    in_repetition = true;
                } else {
                    out.push('\\');
                }
            }
            b'}' if !in_class => {
                if in_repetition {
                    in_repetition = false;
                } else {
                    out.push('\\');
                }
            }
            _ => {}
        }
        let len = p[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&p[i..i + len]);
        i += len;
    }
    out
}

/// Whether `rest` (what follows a `{`) is `n}`, `n,}` or `n,m}`.
fn is_repetition(rest: &[u8]) -> bool {
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let n = digits(rest);
    if n == 0 {
        return false;
    }
    match rest.get(n) {
        Some(b'}') => true,
        Some(b',') => {
            let m = digits(&rest[n + 1..]);
            rest.get(n + 1 + m) == Some(&b'}')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_braces_become_rust_escapes() {
        assert_eq!(from_go(r"^\$(?:\d+|{\d+})$"), r"^\$(?:\d+|\{\d+\})$");
        assert_eq!(from_go(r"a{2,}b{1,3}[{}]\{"), r"a{2,}b{1,3}[{}]\{");
        assert_eq!(
            from_go(r"^\{\{[ \t]*[\w ().|]+[ \t]*}}$"),
            r"^\{\{[ \t]*[\w ().|]+[ \t]*\}\}$"
        );
    }

    #[test]
    fn and_allowlists_need_every_kind_given() {
        let c = compile(
            "t",
            r#"
            [[rules]]
            id = "r"
            regex = 'x'
            [[rules.allowlists]]
            condition = "AND"
            regexes = ['^ab']
            stopwords = ["cd"]
            "#,
        )
        .unwrap();
        let a = &c.rules[0].allowlists[0];
        assert!(a.allows(b"abcd", b"abcd"));
        assert!(!a.allows(b"abxx", b"abxx"));
        assert!(!a.allows(b"xxcd", b"xxcd"));
    }

    #[test]
    fn the_global_allowlist_lets_go_the_words_true_false_null_not_secrets_holding_them() {
        let c = compile("gitleaks.toml", include_str!("gitleaks.toml")).unwrap();
        let allowed = |s: &str| {
            c.global
                .iter()
                .any(|a| a.allows(s.as_bytes(), s.as_bytes()))
        };
        for word in ["true", "False", "NULL"] {
            assert!(allowed(word), "{word}");
        }
        for secret in [
            "ghp_R2d4kPq8ZtW1xY7bFalseC5vL9sA0fH6jE2u",
            "trueR2d4kPq8ZtW1xY7bN3mC5vL9",
            "R2d4kPq8ZtW1xY7bN3mC5vL9null",
        ] {
            assert!(!allowed(secret), "{secret}");
        }
    }

    #[test]
    fn a_rule_without_regex_or_path_is_refused() {
        let e = compile("ops.toml", "[[rules]]\nid = \"r\"\n")
            .err()
            .unwrap();
        assert!(e.to_string().contains("ops.toml: rule r"), "{e}");
    }
}
