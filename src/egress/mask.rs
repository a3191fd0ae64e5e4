//! Every secret's value found in one pass, and a response rebuilt within bounds.
//!
//! A [`Masker`] holds one multi-pattern automaton over a run's values (leftmost-longest: at
//! each place the longest value that starts there wins, so a value that begins another is not
//! left half-masked), built once, on first use, off the request's thread: the time a body
//! takes is linear in its length whatever the number and length of the secrets. Header names
//! arrive lowercased, so they are searched case-insensitively by a second automaton, built
//! only when a name is long enough to hold a value.
//!
//! What masking writes goes through [`Bounds`]: the bytes the program may still receive
//! (a placeholder is ~40 bytes, a value may be 1), memory asked for before each allocation,
//! and the request's deadline. The rebuild stops at the first bound it passes.

use std::sync::OnceLock;
use std::time::Instant;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

/// Input bytes searched between two looks at the clock.
const CLOCK_EVERY: usize = 1 << 20;

/// Why rebuilding a response stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Past the bytes the program may receive.
    TooLarge,
    /// The memory budget has no room for more.
    NoRoom,
    /// Past the request's deadline.
    TimedOut,
    /// The automaton over the values could not be built.
    NoAutomaton,
}

/// What a response being rebuilt may still take: bytes the program receives, memory (asked
/// of `room` in bytes before each allocation), and time.
pub struct Bounds<'a> {
    left: u64,
    deadline: Instant,
    room: &'a mut dyn FnMut(u64) -> bool,
}

impl<'a> Bounds<'a> {
    /// At most `left` bytes more, each allocation's bytes granted by `room` first, until
    /// `deadline`.
    pub fn new(left: u64, deadline: Instant, room: &'a mut dyn FnMut(u64) -> bool) -> Self {
        Bounds {
            left,
            deadline,
            room,
        }
    }

    /// Bytes the program may still receive.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Counts `n` bytes the program receives that are not built here (a header line's
    /// `: ` and line break).
    pub fn count(&mut self, n: u64) -> Result<(), Overflow> {
        self.left = self.left.checked_sub(n).ok_or(Overflow::TooLarge)?;
        Ok(())
    }

    /// Whether the deadline has passed.
    pub fn check_time(&self) -> Result<(), Overflow> {
        if Instant::now() >= self.deadline {
            return Err(Overflow::TimedOut);
        }
        Ok(())
    }

    /// Appends `bytes` to `out`: refused past the bytes left, or when the memory for a larger
    /// buffer is not granted. The buffer grows geometrically, never past what may be left in
    /// it, so it holds at most the bound's bytes.
    pub fn push(&mut self, out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), Overflow> {
        let n = bytes.len() as u64;
        if n > self.left {
            return Err(Overflow::TooLarge);
        }
        if out.len() + bytes.len() > out.capacity() {
            self.check_time()?;
            let (len, cap) = (out.len() as u64, out.capacity() as u64);
            let want = (cap * 2).min(len + self.left).max(len + n);
            if !(self.room)(want - cap) {
                return Err(Overflow::NoRoom);
            }
            out.reserve_exact((want - len) as usize);
        }
        out.extend_from_slice(bytes);
        self.left -= n;
        Ok(())
    }
}

/// The values of a run's secrets and what replaces each, with their automata.
pub struct Masker {
    values: Vec<Vec<u8>>,
    placeholders: Vec<Vec<u8>>,
    shortest: usize,
    exact: OnceLock<Option<AhoCorasick>>,
    folded: OnceLock<Option<AhoCorasick>>,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Masker")
            .field("secrets", &self.values.len())
            .finish_non_exhaustive()
    }
}

impl Default for Masker {
    fn default() -> Self {
        Masker::new(Vec::new())
    }
}

impl Masker {
    /// A masker putting `placeholder` in place of each `value` of `pairs`. Nothing is built
    /// until it is first used.
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Masker {
        let shortest = pairs.iter().map(|(v, _)| v.len()).min().unwrap_or(0);
        let (values, placeholders) = pairs.into_iter().unzip();
        Masker {
            values,
            placeholders,
            shortest,
            exact: OnceLock::new(),
            folded: OnceLock::new(),
        }
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn automaton(&self, folded: bool) -> Result<&AhoCorasick, Overflow> {
        let cell = if folded { &self.folded } else { &self.exact };
        cell.get_or_init(|| {
            // A contiguous NFA: its size is linear in the values' bytes (a DFA's would be
            // 256 times that), its search still one pass.
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .ascii_case_insensitive(folded)
                .build(&self.values)
                .ok()
        })
        .as_ref()
        .ok_or(Overflow::NoAutomaton)
    }

    /// Appends `hay` to `out` with every value replaced by its placeholder, within `bounds`.
    pub fn mask(&self, hay: &[u8], out: &mut Vec<u8>, bounds: &mut Bounds) -> Result<(), Overflow> {
        self.mask_with(hay, out, bounds, false)
    }

    /// A header name masked: as [`Masker::mask`], but ASCII case-insensitively (names arrive
    /// lowercased). A placeholder is letters, digits and `_`, so a valid name stays valid.
    pub fn mask_name(
        &self,
        name: &[u8],
        out: &mut Vec<u8>,
        bounds: &mut Bounds,
    ) -> Result<(), Overflow> {
        self.mask_with(name, out, bounds, true)
    }

    fn mask_with(
        &self,
        hay: &[u8],
        out: &mut Vec<u8>,
        bounds: &mut Bounds,
        folded: bool,
    ) -> Result<(), Overflow> {
        if self.values.is_empty() || hay.len() < self.shortest {
            return bounds.push(out, hay);
        }
        let ac = self.automaton(folded)?;
        let (mut at, mut clock) = (0, 0);
        for m in ac.find_iter(hay) {
            bounds.push(out, &hay[at..m.start()])?;
            bounds.push(out, &self.placeholders[m.pattern().as_usize()])?;
            at = m.end();
            if at - clock >= CLOCK_EVERY {
                bounds.check_time()?;
                clock = at;
            }
        }
        bounds.push(out, &hay[at..])
    }
}

/// Every match of `ac` in `hay` replaced by what `with` gives for its pattern (`None`: left
/// as it is). Unbounded: the caller bounds the growth first.
pub(super) fn replace<'a>(
    ac: &AhoCorasick,
    hay: &[u8],
    mut with: impl FnMut(usize) -> Option<&'a [u8]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut at = 0;
    for m in ac.find_iter(hay) {
        if let Some(to) = with(m.pattern().as_usize()) {
            out.extend_from_slice(&hay[at..m.start()]);
            out.extend_from_slice(to);
            at = m.end();
        }
    }
    out.extend_from_slice(&hay[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn masker(pairs: &[(&str, &str)]) -> Masker {
        Masker::new(
            pairs
                .iter()
                .map(|(v, p)| (v.as_bytes().to_vec(), p.as_bytes().to_vec()))
                .collect(),
        )
    }

    fn run(m: &Masker, hay: &[u8], left: u64) -> (Result<(), Overflow>, Vec<u8>, u64) {
        let mut granted = 0;
        let mut room = |n| {
            granted += n;
            true
        };
        let mut b = Bounds::new(left, Instant::now() + Duration::from_secs(60), &mut room);
        let mut out = Vec::new();
        let r = m.mask(hay, &mut out, &mut b);
        (r, out, granted)
    }

    #[test]
    fn every_value_is_masked_the_longest_first() {
        let m = masker(&[
            ("abc", "<A>"),
            ("abcdef", "<B>"),
            ("x", "<X>"),
            ("cde", "<C>"),
        ]);
        let (r, out, _) = run(&m, b"abcdefg abcx cdex", 1 << 20);
        r.unwrap();
        assert_eq!(out, b"<B>g <A><X> <C><X>");
    }

    #[test]
    fn the_output_never_passes_its_bound_and_memory_is_asked_first() {
        // A 1-byte value: each byte of the body becomes 40.
        let p = "VIVARIUM_SECRET_0123456789abcdef01234567";
        let m = masker(&[("a", p)]);
        let body = vec![b'a'; 100_000];
        let (r, out, granted) = run(&m, &body, 1 << 20);
        assert_eq!(r, Err(Overflow::TooLarge));
        assert!(out.len() <= 1 << 20 && out.capacity() <= 1 << 20);
        assert!(granted >= out.capacity() as u64 && granted <= 1 << 20);
        // A budget with no room stops it before the buffer grows.
        let mut room = |_| false;
        let mut b = Bounds::new(
            u64::MAX,
            Instant::now() + Duration::from_secs(60),
            &mut room,
        );
        let mut out = Vec::new();
        assert_eq!(m.mask(&body, &mut out, &mut b), Err(Overflow::NoRoom));
        assert_eq!(out.capacity(), 0);
        // Within its bound: exact.
        let (r, out, _) = run(&m, b"xax", 1000);
        r.unwrap();
        assert_eq!(out, format!("x{p}x").as_bytes());
    }

    #[test]
    fn many_long_values_sharing_a_prefix_take_one_pass() {
        // 32 values of 8 KiB alike but for their last bytes, over a body made of the prefix:
        // a window-by-window search compares ~8 KiB at each of its bytes, per value.
        let prefix = "k".repeat((8 << 10) - 8);
        let pairs: Vec<_> = (0..32)
            .map(|i| {
                (
                    format!("{prefix}{i:08}").into_bytes(),
                    format!("<{i}>").into_bytes(),
                )
            })
            .collect();
        let m = Masker::new(pairs);
        let mut body = prefix.repeat(4 << 20 >> 13).into_bytes();
        body.extend_from_slice(format!("{prefix}00000007!").as_bytes());
        let started = Instant::now();
        let (r, out, _) = run(&m, &body, 8 << 20);
        r.unwrap();
        assert!(out.ends_with(b"<7>!"));
        assert_eq!(out.len(), body.len() - (8 << 10) + 3);
        // Generous: linear work over 4 MiB, even in a debug build on a loaded machine.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_header_name_is_masked_whatever_its_case() {
        let m = masker(&[("Tok-ABC", "VIVARIUM_SECRET_1")]);
        let mut room = |_| true;
        let mut b = Bounds::new(1000, Instant::now() + Duration::from_secs(5), &mut room);
        let mut out = Vec::new();
        m.mask_name(b"x-tok-abc-y", &mut out, &mut b).unwrap();
        assert_eq!(out, b"x-VIVARIUM_SECRET_1-y");
        // Values are exact.
        let mut out = Vec::new();
        m.mask(b"tok-abc", &mut out, &mut b).unwrap();
        assert_eq!(out, b"tok-abc");
    }

    #[test]
    fn a_passed_deadline_stops_it() {
        let m = masker(&[("a", "bb")]);
        let mut room = |_| true;
        let mut b = Bounds::new(u64::MAX, Instant::now(), &mut room);
        let mut out = Vec::new();
        assert_eq!(
            m.mask(&vec![b'a'; 3 << 20], &mut out, &mut b),
            Err(Overflow::TimedOut)
        );
    }
}
