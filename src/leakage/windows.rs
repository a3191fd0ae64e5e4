//! Where in a text a rule runs. A rule's pattern runs only on windows of whole lines around
//! its anchors — its keywords' occurrences, or for the checksum rules, which have no keyword,
//! the places a card number or an IBAN could start — rather than over the whole text: on
//! ordinary output this is what keeps ~230 rules at a few milliseconds a mebibyte.
//!
//! A window is the anchor's line and the next one (a secret may follow its keyword on the
//! next line: `token:\n  abc…`), or for a rule whose pattern spans lines (`[\s\S]`, `(?s)`:
//! a PEM block) the lines up to [`MULTILINE_BYTES`] on. Around an anchor in a line longer
//! than [`LONG_LINE_BYTES`], the window is a byte range instead.

/// How far past its anchor a multi-line rule's window reaches.
pub const MULTILINE_BYTES: usize = 16 << 10;
/// Lines longer than this are cut around the anchor rather than scanned whole.
pub const LONG_LINE_BYTES: usize = 8 << 10;
/// Reach before and after an anchor in a long line.
const REACH_BEFORE: usize = 1 << 10;
const REACH_AFTER: usize = 4 << 10;

/// The merged windows, sorted, for anchors (byte offsets, any order) in `text`.
pub fn around(text: &[u8], anchors: &mut [usize], multiline: bool) -> Vec<(usize, usize)> {
    anchors.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &a in anchors.iter() {
        // An anchor inside the last window adds nothing unless that window may grow.
        if let Some(&(_, e)) = out.last()
            && a < e
            && !multiline
        {
            continue;
        }
        let (mut s, mut e) = window(text, a, multiline);
        if let Some(last) = out.last_mut()
            && s <= last.1
        {
            s = last.0;
            e = e.max(last.1);
            *last = (s, e);
            continue;
        }
        out.push((s, e));
    }
    out
}

fn window(text: &[u8], a: usize, multiline: bool) -> (usize, usize) {
    let line_start = text[..a]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line_end = line_end(text, a);
    if line_end - line_start > LONG_LINE_BYTES {
        let s = a.saturating_sub(REACH_BEFORE).max(line_start);
        let reach = if multiline {
            MULTILINE_BYTES
        } else {
            REACH_AFTER
        };
        return (s, (a + reach).min(text.len()));
    }
    let end = if multiline {
        line_end_capped(text, (a + MULTILINE_BYTES).min(text.len()))
    } else {
        // The next line too.
        let next = (line_end + 1).min(text.len());
        line_end_capped(text, next)
    };
    (line_start, end.max(line_end))
}

/// The end of the line holding `at` (the offset of its newline, or the text's end).
fn line_end(text: &[u8], at: usize) -> usize {
    text[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| at + i)
}

/// The end of the line holding `at`, but no more than [`LONG_LINE_BYTES`] past it.
fn line_end_capped(text: &[u8], at: usize) -> usize {
    let cap = (at + LONG_LINE_BYTES).min(text.len());
    text[at..cap]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(cap, |i| at + i)
}

/// Whether a pattern (its source) can match across many lines: gitleaks writes that
/// `[\s\S]`; `(?s)` makes `.` do it.
pub fn spans_lines(pattern: &str) -> bool {
    pattern.contains(r"[\s\S") || pattern.contains("(?s") || pattern.contains("(?is")
}

/// Where a payment card number could start: a run of 13 or more digits, single spaces or
/// hyphens allowed between them. A run of 13 digits spans at least 13 bytes of digits,
/// spaces and hyphens, so the scan looks at every 13th byte and only walks a span where that
/// byte could belong to one.
pub fn digit_runs(text: &[u8], out: &mut Vec<usize>) {
    const MIN: usize = 13;
    let in_span = |b: u8| b.is_ascii_digit() || b == b' ' || b == b'-';
    let mut probe = MIN - 1;
    let mut done = 0; // everything before this has been walked
    while probe < text.len() {
        if !in_span(text[probe]) {
            probe += MIN;
            continue;
        }
        let mut start = probe;
        while start > done && in_span(text[start - 1]) {
            start -= 1;
        }
        let mut end = probe;
        while end < text.len() && in_span(text[end]) {
            end += 1;
        }
        if end - start >= MIN {
            runs_in(&text[start..end], start, out);
        }
        done = end;
        probe = end + MIN;
    }
}

/// The digit runs of 13 or more inside one span of digits, spaces and hyphens.
fn runs_in(span: &[u8], base: usize, out: &mut Vec<usize>) {
    let mut i = 0;
    while i < span.len() {
        if !span[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut digits = 0;
        while i < span.len() {
            if span[i].is_ascii_digit() {
                digits += 1;
                i += 1;
            } else if span.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1; // one separator between digits
            } else {
                break;
            }
        }
        if digits >= 13 {
            out.push(base + start);
        }
    }
}

/// Where an IBAN could start: two capital letters and two digits. One of the two digits is
/// at an even offset, so the scan probes every other byte for a digit and tests the two
/// starts that would put it there.
pub fn iban_starts(text: &[u8], out: &mut Vec<usize>) {
    let is_start = |s: usize| {
        s + 4 <= text.len()
            && text[s].is_ascii_uppercase()
            && text[s + 1].is_ascii_uppercase()
            && text[s + 2].is_ascii_digit()
            && text[s + 3].is_ascii_digit()
    };
    let mut i = 2;
    while i < text.len() {
        if text[i].is_ascii_digit() {
            // The digit is the start's third byte (s = i - 2) or its fourth (s = i - 3).
            for s in [i.checked_sub(3), Some(i - 2)].into_iter().flatten() {
                if is_start(s) && out.last() != Some(&s) {
                    out.push(s);
                }
            }
        }
        i += 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_the_anchors_line_and_the_next() {
        let t = b"aaa\nkey: x\nvalue\nzzz\n";
        assert_eq!(around(t, &mut [5], false), [(4, 16)]);
        assert_eq!(&t[4..16], b"key: x\nvalue");
    }

    #[test]
    fn windows_merge_and_long_lines_are_cut() {
        let t = b"k1\nk2\nk3\n";
        assert_eq!(around(t, &mut [6, 0], false), [(0, 5), (6, 9)]);
        let long = vec![b'x'; 100_000];
        let w = around(&long, &mut [50_000], false);
        assert_eq!(w, [(50_000 - REACH_BEFORE, 50_000 + REACH_AFTER)]);
    }

    #[test]
    fn checksum_rules_find_their_candidates() {
        let mut v = Vec::new();
        digit_runs(
            b"x 4111 1111 1111 1111 y 123456789012 z 5500-0000-0000-0004",
            &mut v,
        );
        assert_eq!(v, [2, 39]);
        let mut v = Vec::new();
        iban_starts(b"a DE89 37 GB82WEST", &mut v);
        assert_eq!(v, [2, 10]);
        let mut v = Vec::new();
        iban_starts(b"NO9386011117947 xFR76", &mut v);
        assert_eq!(v, [0, 17]);
    }
}
