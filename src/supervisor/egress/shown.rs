//! A request's host as it leaves the host: in the run's result (`network.refusals`), its
//! audit line and, when it is a label at all, `/metrics`. The host is the program's own
//! word, and a program that holds a secret's value (an upstream echoed it in a form the
//! host does not mask, or the caller put it in the code) can spell it into a name:
//! `<value>.example`. Each of the run's secrets' values is redacted from the host as the
//! leakage scan redacts a secret literal, `[REDACTED:secret:NAME]`, whatever the run's
//! `leakage` (as for everything else a run returns), and case aside: a host arrives in
//! lower case.

use crate::egress::Secrets;
use crate::leakage::MIN_LITERAL_BYTES;

/// Characters of a host an audit line or a refusal shows at most (a name is at most 253).
pub const SHOWN_HOST_CHARS: usize = 255;

/// A run's secrets' values, looked for in the hosts it names.
pub struct HostScrub {
    /// `(marker, value in lower case)` of each value long enough to be a literal secret.
    values: Vec<(String, String)>,
    /// The longest value's length in bytes.
    longest: usize,
}

impl HostScrub {
    /// The scrub of a run with `secrets`. Values shorter than [`MIN_LITERAL_BYTES`] are not
    /// looked for, as the leakage scan does not (a two-letter value would take every host
    /// apart). Nothing is built here: a run that makes no request pays nothing.
    pub fn new(secrets: &Secrets) -> HostScrub {
        let values: Vec<(String, String)> = secrets
            .literals()
            .into_iter()
            .filter(|(_, v)| v.len() >= MIN_LITERAL_BYTES)
            .map(|(rule, v)| (format!("[REDACTED:{rule}]"), v.to_ascii_lowercase()))
            .collect();
        let longest = values.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        HostScrub { values, longest }
    }

    /// `host` as it may be shown: each secret's value in it replaced by its marker, then cut
    /// to [`SHOWN_HOST_CHARS`] characters (the cut comes after the search, so no part of a
    /// value the search would have found is left at the end). Each value is a linear search
    /// (at most 32 of them) over at most `SHOWN_HOST_CHARS` and the longest value's length:
    /// no automaton to build for a text this short.
    pub fn shown(&self, host: &str) -> String {
        if self.values.is_empty() {
            return host.chars().take(SHOWN_HOST_CHARS).collect();
        }
        // A value that begins within what is shown ends within this many characters.
        let end = host
            .char_indices()
            .nth(SHOWN_HOST_CHARS + self.longest)
            .map_or(host.len(), |(i, _)| i);
        let head = &host[..end];
        // ASCII lower case keeps every byte where it was: offsets hold in `head`.
        let lower = head.to_ascii_lowercase();
        // Every occurrence of every value; where they overlap, the leftmost, then longest.
        let mut found: Vec<(usize, usize, usize)> = Vec::new();
        for (i, (_, value)) in self.values.iter().enumerate() {
            found.extend(
                lower
                    .match_indices(value.as_str())
                    .map(|(at, m)| (at, at + m.len(), i)),
            );
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = String::with_capacity(head.len());
        let mut at = 0;
        for (start, stop, i) in found {
            if start < at {
                continue;
            }
            out.push_str(&head[at..start]);
            out.push_str(&self.values[i].0);
            at = stop;
        }
        out.push_str(&head[at..]);
        out.chars().take(SHOWN_HOST_CHARS).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(items: &[(&str, &str)]) -> Secrets {
        Secrets::new(
            items
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string(), vec!["api.test".to_string()]))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn a_value_in_a_host_is_redacted_in_any_case_and_short_ones_are_no_secret() {
        let s = HostScrub::new(&secrets(&[("TOKEN", "Tok0A1b2C3d4"), ("PIN", "1234")]));
        assert_eq!(
            s.shown("tok0a1b2c3d4.evil.test"),
            "[REDACTED:secret:TOKEN].evil.test"
        );
        assert_eq!(
            s.shown("x-TOK0A1B2C3D4-tok0a1b2c3d4"),
            "x-[REDACTED:secret:TOKEN]-[REDACTED:secret:TOKEN]"
        );
        // Overlapping values: the leftmost, then the longest.
        let o = HostScrub::new(&secrets(&[("A", "abcdefgh"), ("B", "cdefghijkl")]));
        assert_eq!(o.shown("xxabcdefghijkl"), "xx[REDACTED:secret:A]ijkl");
        assert_eq!(o.shown("cdefghijklm"), "[REDACTED:secret:B]m");
        // Shorter than a literal secret: as the leakage scan, not looked for.
        assert_eq!(s.shown("1234.api.test"), "1234.api.test");
        assert_eq!(s.shown("api.test"), "api.test");
    }

    #[test]
    fn the_most_secrets_of_the_longest_values_cost_nothing_to_set_up_and_little_to_search() {
        // Values that repeat themselves, as a hostile caller may send them.
        let items: Vec<(String, String)> = (0..32)
            .map(|i| (format!("S{i}"), "ab".repeat(4096 - i)))
            .collect();
        let s = HostScrub::new(&secrets(
            &items
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
        ));
        let started = std::time::Instant::now();
        let shown = s.shown(&"AB".repeat(10_000));
        assert!(shown.starts_with("[REDACTED:secret:S0]"), "{shown}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_long_host_is_cut_after_the_search() {
        let value = "v".repeat(300);
        let s = HostScrub::new(&secrets(&[("LONG", &value)]));
        let host = format!("{}{value}.test", "a".repeat(250));
        let shown = s.shown(&host);
        assert_eq!(shown.chars().count(), SHOWN_HOST_CHARS);
        assert!(shown.starts_with(&"a".repeat(250)), "{shown}");
        assert!(!shown.ends_with('v'), "{shown}");
        // Without secrets, only the cut.
        let none = HostScrub::new(&Secrets::default());
        assert_eq!(none.shown(&host).chars().count(), SHOWN_HOST_CHARS);
        assert_eq!(none.shown("api.test"), "api.test");
    }
}
