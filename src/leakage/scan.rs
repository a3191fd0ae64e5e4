//! The scanning engine: every rule, compiled once, run over a text the way gitleaks runs it.
//!
//! 1. One Aho-Corasick pass finds every rule keyword (ASCII case-insensitive); a rule runs only
//!    where one of its keywords occurs, or always when it has none. Ordinary output holds few
//!    keywords, so most of the ~230 rules never run.
//! 2. Each rule that runs finds its matches; the secret is the rule's secret group (or the
//!    first non-empty group, or the match).
//! 3. A secret at or below the rule's entropy, allowed by the global or the rule's allowlists,
//!    or failing the rule's checksum is dropped.
//!
//! Literal secrets (values passed in `env`, the operator's literals) are found by a second
//! Aho-Corasick automaton, per request, in [`Literals`].

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use super::personal;
use super::rules::{self, Allowlist, Compiled, Rule, RuleError, Target, Validator};
use super::windows;

/// Rule sets compiled into the binary: gitleaks' default configuration, vendored, and
/// Vivarium's own (credentials in URLs, personal data).
const BUILTIN: [(&str, &str); 2] = [
    ("gitleaks.toml", include_str!("gitleaks.toml")),
    ("vivarium.toml", include_str!("vivarium.toml")),
];

/// Where a hit was found, as a byte range of the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Index into [`Scanner::rule_id`]'s table, or a literal's (see [`Literals`]).
    pub rule: RuleRef,
    /// Byte offset of the secret.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
}

/// Which rule a hit is of; ordered as the rules are (pattern rules in file order first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleRef {
    /// A pattern rule of the scanner.
    Pattern(usize),
    /// One of the request's or operator's literal secrets.
    Literal(usize),
}

/// Every pattern rule, compiled; shared by all requests of a server.
pub struct Scanner {
    rules: Vec<Rule>,
    global: Vec<Allowlist>,
    /// Every distinct keyword of every rule.
    keywords: AhoCorasick,
    /// For each keyword, the rules it triggers.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: they run on every text.
    always: Vec<usize>,
    /// The operator's literal secrets.
    operator_literals: Vec<String>,
}

impl Scanner {
    /// The built-in rules plus those of the operator's file `extra` (`(name, text)`), less
    /// any rule id the files disable.
    pub fn new(extra: Option<(&str, &str)>) -> Result<Scanner, RuleError> {
        let mut rules = Vec::new();
        let mut global = Vec::new();
        let mut literals = Vec::new();
        let mut disabled = Vec::new();
        for (file, text) in BUILTIN.into_iter().chain(extra) {
            let Compiled {
                rules: r,
                global: g,
                literals: l,
                disabled: d,
            } = rules::compile(file, text)?;
            for rule in r {
                if rules.iter().any(|x: &Rule| x.id == rule.id) {
                    return Err(RuleError::Invalid {
                        file: file.to_string(),
                        rule: rule.id,
                        why: "this id is already a rule; pick another or disable that one".into(),
                    });
                }
                rules.push(rule);
            }
            global.extend(g);
            literals.extend(l);
            disabled.extend(d);
        }
        rules.retain(|r| !disabled.contains(&r.id));
        let mut words: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            if rule.keywords.is_empty() {
                always.push(i);
            }
            for k in &rule.keywords {
                match words.iter().position(|w| w == k) {
                    Some(at) => keyword_rules[at].push(i),
                    None => {
                        words.push(k.clone());
                        keyword_rules.push(vec![i]);
                    }
                }
            }
        }
        // A DFA: twice the speed of the default NFA on output, for some memory once.
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .match_kind(MatchKind::Standard)
            .build(&words)
            .expect("keywords are plain strings");
        Ok(Scanner {
            rules,
            global,
            keywords,
            keyword_rules,
            always,
            operator_literals: literals,
        })
    }

    /// How many pattern rules there are.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// A pattern rule's id.
    pub fn rule_id(&self, rule: usize) -> &str {
        &self.rules[rule].id
    }

    /// The operator's literal secrets.
    pub fn operator_literals(&self) -> &[String] {
        &self.operator_literals
    }

    /// Appends every pattern hit in `text` to `out`. `path` is set for files: rules with a
    /// `path` apply only to files whose path matches it.
    pub fn scan(&self, text: &[u8], path: Option<&str>, out: &mut Vec<Hit>) {
        // Each rule's anchors: where its keywords occur, or its candidates.
        let mut anchors: Vec<Vec<usize>> = vec![Vec::new(); self.rules.len()];
        let mut whole = vec![false; self.rules.len()];
        for &i in &self.always {
            match self.rules[i].validate {
                Some(Validator::Luhn) => windows::digit_runs(text, &mut anchors[i]),
                Some(Validator::Iban) => windows::iban_starts(text, &mut anchors[i]),
                None => whole[i] = true,
            }
        }
        for m in self.keywords.find_overlapping_iter(text) {
            for &i in &self.keyword_rules[m.pattern().as_usize()] {
                anchors[i].push(m.start());
            }
        }
        for (i, rule) in self.rules.iter().enumerate() {
            // A rule on paths alone needs no window: its finding is the whole file.
            if whole[i] || (rule.regex.is_none() && !anchors[i].is_empty()) {
                self.scan_rule(i, rule, text, 0, path, out);
            } else if !anchors[i].is_empty() {
                for (s, e) in windows::around(text, &mut anchors[i], rule.multiline) {
                    self.scan_rule(i, rule, &text[s..e], s, path, out);
                }
            }
        }
    }

    /// Runs rule `i` on `text`, which starts at byte `base` of what is scanned.
    fn scan_rule(
        &self,
        i: usize,
        rule: &Rule,
        text: &[u8],
        base: usize,
        path: Option<&str>,
        out: &mut Vec<Hit>,
    ) {
        if let Some(p) = &rule.path {
            match path {
                Some(path) if p.is_match(path.as_bytes()) => {}
                _ => return,
            }
        }
        let Some(regex) = &rule.regex else {
            // A rule on paths alone: the whole file is the finding.
            out.push(Hit {
                rule: RuleRef::Pattern(i),
                start: base,
                end: base + text.len(),
            });
            return;
        };
        for caps in regex.captures_iter(text) {
            let whole = caps.get(0).expect("group 0 always matches");
            // gitleaks trims newlines off the match.
            let (mut ms, mut me) = (whole.start(), whole.end());
            while ms < me && text[ms] == b'\n' {
                ms += 1;
            }
            while me > ms && text[me - 1] == b'\n' {
                me -= 1;
            }
            let group = if rule.secret_group > 0 {
                caps.get(rule.secret_group)
            } else {
                caps.iter().skip(1).flatten().find(|g| !g.is_empty())
            };
            let (ss, se) = group.map_or((ms, me), |g| (g.start(), g.end()));
            let secret = &text[ss..se];
            if secret.is_empty() {
                continue;
            }
            if rule.entropy > 0.0 && shannon_entropy(secret) <= rule.entropy {
                continue;
            }
            if let Some(v) = rule.validate
                && !valid(v, secret)
            {
                continue;
            }
            let matched = &text[ms..me];
            let allowed = self.global.iter().chain(&rule.allowlists).any(|a| {
                let target = match a.target {
                    Target::Secret => secret,
                    Target::Match => matched,
                    // Only for the few allowlists that ask: a line can be long.
                    Target::Line => line_around(text, ms, me),
                };
                a.allows(target, secret)
            });
            if !allowed {
                out.push(Hit {
                    rule: RuleRef::Pattern(i),
                    start: base + ss,
                    end: base + se,
                });
            }
        }
    }
}

fn valid(v: Validator, secret: &[u8]) -> bool {
    match v {
        Validator::Luhn => personal::luhn(secret),
        Validator::Iban => personal::iban(secret),
    }
}

/// The whole line(s) from `start` to `end`.
fn line_around(text: &[u8], start: usize, end: usize) -> &[u8] {
    let s = text[..start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let e = text[end..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| end + i);
    &text[s..e]
}

/// Shannon entropy in bits per byte, as gitleaks computes it (per character over the length
/// in bytes, which is the same for the ASCII secrets its rules match).
pub fn shannon_entropy(data: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let n = data.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Literal secrets of one request: the values it passed in `env` and the operator's.
pub struct Literals {
    automaton: Option<AhoCorasick>,
    /// The rule id of each literal: `env:NAME` or `operator-literal`.
    ids: Vec<String>,
    /// The first [`MAX_CUT_BYTES`] bytes of each literal, for [`Literals::cut_at_end`].
    heads: Vec<Vec<u8>>,
}

/// A text cut short (at the output limit) is checked for a literal's first bytes at its end
/// within this many bytes.
const MAX_CUT_BYTES: usize = 1024;

/// The fewest of a literal's first bytes a cut text must end with to be redacted.
pub const MIN_CUT_BYTES: usize = MIN_LITERAL_BYTES / 2;

/// Values shorter than this are not treated as secrets: redacting every `1` or `true` an
/// environment holds would take ordinary output apart.
pub const MIN_LITERAL_BYTES: usize = 8;

impl Literals {
    /// The literals `(id, value)`; values shorter than [`MIN_LITERAL_BYTES`] are left out.
    pub fn new<'a>(literals: impl IntoIterator<Item = (String, &'a str)>) -> Literals {
        let (ids, values): (Vec<String>, Vec<&str>) = literals
            .into_iter()
            .filter(|(_, v)| v.len() >= MIN_LITERAL_BYTES)
            .unzip();
        let heads = values
            .iter()
            .map(|v| v.as_bytes()[..v.len().min(MAX_CUT_BYTES)].to_vec())
            .collect();
        // Past a few KiB of values (a run's secrets may be 32 of 8 KiB), the DFA the builder
        // would pick takes seconds to build; a contiguous NFA is built in milliseconds and
        // still searches in one pass.
        let large = values.iter().map(|v| v.len()).sum::<usize>() > 16 << 10;
        let automaton = (!values.is_empty()).then(|| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(large.then_some(AhoCorasickKind::ContiguousNFA))
                .build(&values)
                .expect("literals are plain strings")
        });
        Literals {
            automaton,
            ids,
            heads,
        }
    }

    /// The longest end of `text` (a text cut short) that is a literal's beginning, at least
    /// [`MIN_CUT_BYTES`] and short of the whole literal (a whole one is found by
    /// [`Literals::scan`]): the part of a secret the cut left.
    pub fn cut_at_end(&self, text: &[u8]) -> Option<Hit> {
        let mut best: Option<Hit> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let most = (head.len() - 1).min(text.len());
            for k in (MIN_CUT_BYTES..=most).rev() {
                if best.is_some_and(|b| b.end - b.start >= k) {
                    break;
                }
                if text.ends_with(&head[..k]) {
                    best = Some(Hit {
                        rule: RuleRef::Literal(i),
                        start: text.len() - k,
                        end: text.len(),
                    });
                    break;
                }
            }
        }
        best
    }

    /// A literal's rule id.
    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Appends every literal found in `text` to `out`.
    pub fn scan(&self, text: &[u8], out: &mut Vec<Hit>) {
        if let Some(ac) = &self.automaton {
            out.extend(ac.find_iter(text).map(|m| Hit {
                rule: RuleRef::Literal(m.pattern().as_usize()),
                start: m.start(),
                end: m.end(),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &Scanner, text: &str) -> Vec<String> {
        let mut hits = Vec::new();
        s.scan(text.as_bytes(), None, &mut hits);
        hits.iter()
            .map(|h| match h.rule {
                RuleRef::Pattern(i) => s.rule_id(i).to_string(),
                RuleRef::Literal(_) => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn every_builtin_rule_compiles() {
        let s = Scanner::new(None).unwrap();
        assert!(s.rule_count() > 200, "{} rules", s.rule_count());
    }

    #[test]
    fn secrets_and_their_ranges() {
        let s = Scanner::new(None).unwrap();
        let text = "aws = AKIAQYLPMN5HHHFPZAM2\n";
        let mut hits = Vec::new();
        s.scan(text.as_bytes(), None, &mut hits);
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(&text[hits[0].start..hits[0].end], "AKIAQYLPMN5HHHFPZAM2");
        assert_eq!(
            s.rule_id(match hits[0].rule {
                RuleRef::Pattern(i) => i,
                RuleRef::Literal(_) => unreachable!(),
            }),
            "aws-access-token"
        );
    }

    #[test]
    fn allowlists_and_entropy_drop_findings() {
        let s = Scanner::new(None).unwrap();
        // Low entropy, and gitleaks' allowlisted example key.
        assert!(ids(&s, "key = AKIAAAAAAAAAAAAAAAAA\n").is_empty());
        assert!(ids(&s, "AKIAIOSFODNN7EXAMPLE\n").is_empty());
        assert!(ids(&s, "password = 'aaaaaaaaaaaa'\n").is_empty());
    }

    #[test]
    fn operator_rules_add_and_disable() {
        let extra = r#"
            disabled_rules = ["email-address"]
            literals = ["correct horse battery staple"]
            [[rules]]
            id = "acme-token"
            regex = '''acme_[a-z0-9]{16}'''
            keywords = ["acme_"]
        "#;
        let s = Scanner::new(Some(("ops.toml", extra))).unwrap();
        assert_eq!(
            ids(&s, "t=acme_0123456789abcdef x@example.com"),
            ["acme-token"]
        );
        assert_eq!(s.operator_literals(), ["correct horse battery staple"]);
        let dup = "[[rules]]\nid = \"jwt\"\nregex = 'x'\n";
        assert!(Scanner::new(Some(("ops.toml", dup))).is_err());
    }

    #[test]
    fn literals_shorter_than_the_minimum_are_not_secrets() {
        let l = Literals::new([
            ("env:A".to_string(), "1"),
            ("env:B".to_string(), "s3cr3t-value"),
        ]);
        let mut hits = Vec::new();
        l.scan(b"1 and s3cr3t-value", &mut hits);
        assert_eq!(hits.len(), 1);
        assert_eq!(l.id(0), "env:B");
        assert_eq!((hits[0].start, hits[0].end), (6, 18));
    }

    /// `hir` with its assertions (`^`, `$`, `\\b`) taken out, which the generator cannot
    /// produce; a sample that then breaks one is simply not a hit, and another is drawn.
    fn without_looks(hir: regex_syntax::hir::Hir) -> regex_syntax::hir::Hir {
        use regex_syntax::hir::{Capture, Hir, HirKind, Repetition};
        match hir.into_kind() {
            HirKind::Look(_) => Hir::empty(),
            HirKind::Concat(v) => Hir::concat(v.into_iter().map(without_looks).collect()),
            HirKind::Alternation(v) => Hir::alternation(v.into_iter().map(without_looks).collect()),
            HirKind::Repetition(r) => Hir::repetition(Repetition {
                sub: Box::new(without_looks(*r.sub)),
                ..r
            }),
            HirKind::Capture(c) => Hir::capture(Capture {
                sub: Box::new(without_looks(*c.sub)),
                ..c
            }),
            HirKind::Empty => Hir::empty(),
            HirKind::Literal(l) => Hir::literal(l.0),
            HirKind::Class(c) => Hir::class(c),
        }
    }

    /// Every rule fires on text of its own format: a sample generated from its own pattern
    /// (and, for a rule on paths, a path from its path pattern), with the keyword prefilter,
    /// entropy, allowlists and checksums all in the way, as in a real scan.
    #[test]
    fn every_rule_fires_on_a_secret_of_its_own_format() {
        use rand_010::{RngExt, SeedableRng};
        let s = Scanner::new(None).unwrap();
        let mut rng = rand_010::rngs::StdRng::seed_from_u64(0x5eed);
        let generator = |re: &regex::bytes::Regex| {
            let hir = regex_syntax::ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .build()
                .parse(re.as_str())
                .unwrap();
            rand_regex::Regex::with_hir(without_looks(hir), 24).unwrap()
        };
        let mut silent = Vec::new();
        for (i, rule) in s.rules.iter().enumerate() {
            let text_gen = rule.regex.as_ref().map(generator);
            let path_gen = rule.path.as_ref().map(generator);
            // A checksum is not something a random sample passes: these get a known-good one.
            if let Some(v) = rule.validate {
                let sample: &[u8] = match v {
                    Validator::Luhn => b"card 4111 1111 1111 1111\n",
                    Validator::Iban => b"iban DE89370400440532013000\n",
                };
                let mut hits = Vec::new();
                s.scan(sample, None, &mut hits);
                if !hits.iter().any(|h| h.rule == RuleRef::Pattern(i)) {
                    silent.push(rule.id.clone());
                }
                continue;
            }
            // The keyword a scan looks for first, before the secret as a program prints it.
            let lead = rule.keywords.first().map_or("value", String::as_str);
            let fired = (0..500).any(|_| {
                let mut text = format!("{lead} ").into_bytes();
                let sample: Vec<u8> = text_gen.as_ref().map_or(b"x".to_vec(), |g| rng.sample(g));
                text.extend(sample);
                text.push(b'\n');
                let path: Option<Vec<u8>> = path_gen.as_ref().map(|g| rng.sample(g));
                let path = path.map(|p| String::from_utf8_lossy(&p).into_owned());
                let mut hits = Vec::new();
                s.scan(&text, path.as_deref(), &mut hits);
                hits.iter().any(|h| h.rule == RuleRef::Pattern(i))
            });
            if !fired {
                silent.push(rule.id.clone());
            }
        }
        assert!(
            silent.is_empty(),
            "{} rules never fired: {silent:?}",
            silent.len()
        );
    }
}
