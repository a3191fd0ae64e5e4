//! Returned files too large to carry in a message: the worker leaves each on disk in its
//! scratch root (`sandbox::workdir`, `held-<16 hex digits>`) and names it in its reply; the
//! supervisor claims it as the reply arrives (opens it, then unlinks the name), scans it a
//! chunk at a time, and the front door streams it into the response from the open file. Its
//! bytes are never in memory whole, in the worker or in the supervisor, and they are freed
//! when the last handle on it closes (the response done or dropped).
//!
//! A worker is hostile once compromised: a held name is checked to be one the working
//! directory gives (`held-` and 16 hex digits), opened beneath the worker's own scratch root
//! (never through a symlink) without blocking, and taken only when it is a regular file of
//! the size the reply says.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use super::job::Reply;
use crate::leakage::{Guard, LeakPolicy, MAX_LISTED_LEAKS};
use crate::report::{FileOut, Leak, LeakPlace, Report};
use crate::sandbox::workdir::is_held_name;
use crate::vivarium::Executed;

/// A held file is scanned this many bytes at a time.
const SCAN_CHUNK: usize = 8 << 20;
/// Consecutive chunks overlap by this much (less where a line starts inside it), so that a
/// secret shorter than this is whole in one chunk wherever it lies.
const SCAN_OVERLAP: usize = 64 << 10;

/// Claims every held file `reply` names, beneath `root` (the worker's scratch root): opens
/// it, unlinks its name, and keeps the open file in the reply. A file that cannot be had
/// (gone, not a regular file, not of its size) is dropped from what is returned (content
/// `null`); a name no working directory gives, or a file both held and inline, is a broken
/// protocol (the reason).
pub fn claim(root: &Path, reply: &mut Reply) -> Result<(), String> {
    match reply {
        Reply::Executed(Executed::Ran { report, .. }) => claim_files(root, &mut report.files),
        Reply::Turned(t) => claim_files(root, &mut t.report.files),
        Reply::HeldFile { size, held } => {
            check_name(&held.name)?;
            let dir = open_root(root).map_err(|e| format!("opening the scratch root: {e}"))?;
            match open_held(&dir, &held.name, *size) {
                Ok(file) => held.file = Some(Arc::new(file)),
                Err(e) => {
                    tracing::warn!(name = %held.name, error = %e, "a held file could not be claimed");
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn claim_files(root: &Path, files: &mut [FileOut]) -> Result<(), String> {
    if files.iter().all(|f| f.held.is_none()) {
        return Ok(());
    }
    for f in files.iter() {
        if let Some(h) = &f.held {
            check_name(&h.name)?;
            if f.content.is_some() {
                return Err(format!("file {:?} both held and inline", f.path));
            }
        }
    }
    let dir = open_root(root).map_err(|e| format!("opening the scratch root: {e}"))?;
    for f in files {
        let Some(h) = &mut f.held else { continue };
        match open_held(&dir, &h.name, f.size) {
            Ok(file) => h.file = Some(Arc::new(file)),
            Err(e) => {
                tracing::warn!(name = %h.name, error = %e, "a held file could not be claimed; its content is not returned");
                f.held = None;
            }
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    if is_held_name(name) {
        Ok(())
    } else {
        Err(format!(
            "a held file named {:?}",
            name.chars().take(64).collect::<String>()
        ))
    }
}

fn open_root(root: &Path) -> std::io::Result<Dir> {
    Dir::open_ambient_dir(root, ambient_authority())
}

/// Opens `name` beneath `dir` (no symlink followed, no blocking on a FIFO), checks it is a
/// regular file of `size` bytes, and unlinks the name.
fn open_held(dir: &Dir, name: &str, size: u64) -> std::io::Result<File> {
    let file = dir
        .open_with(
            name,
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC),
        )?
        .into_std();
    // Gone from the directory whatever follows: only the open file keeps its bytes.
    let _ = dir.remove_file(name);
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() != size {
        return Err(std::io::Error::other(format!(
            "not a regular file of {size} bytes"
        )));
    }
    Ok(file)
}

/// Scans the held files of `report` under `guard` (after [`Guard::apply`] scanned the rest)
/// and adds what it finds to `report.leaks`; the leaks found. Under `redact` a held text
/// file with a secret is withheld (content `null`, its leaks listed): a rewrite needs the
/// whole file in memory, which is what holding avoids. A binary file is returned as it is,
/// as `Guard::apply` does with one in memory.
pub fn scan_report(guard: &Guard, report: &mut Report) -> Vec<Leak> {
    if guard.policy() == LeakPolicy::Off {
        return Vec::new();
    }
    let redact = guard.policy() == LeakPolicy::Redact;
    let mut found = Vec::new();
    for f in &mut report.files {
        let Some(file) = f.held.as_ref().and_then(|h| h.file.clone()) else {
            continue;
        };
        match scan_file(guard, &f.path, &file, f.size) {
            Ok(scan) => {
                if redact && scan.text && !scan.leaks.is_empty() {
                    f.held = None;
                }
                found.extend(scan.leaks);
            }
            Err(e) => {
                tracing::warn!(path = %f.path, error = %e, "a held file could not be scanned; withheld");
                f.held = None;
            }
        }
    }
    if !found.is_empty() {
        let all = report.leaks.get_or_insert_with(Vec::new);
        all.extend(found.iter().cloned());
        all.truncate(MAX_LISTED_LEAKS);
    }
    found
}

/// What a scan of one held file found.
pub struct FileScan {
    /// Its leaks, at offsets in the whole file (at most [`MAX_LISTED_LEAKS`]).
    pub leaks: Vec<Leak>,
    /// It is UTF-8 text (what `redact` would rewrite).
    pub text: bool,
}

/// Scans `size` bytes of `file` (the returned file `path`) under `guard`, [`SCAN_CHUNK`]
/// bytes at a time, consecutive chunks overlapping by up to [`SCAN_OVERLAP`] (from the
/// first line start inside the overlap, when there is one): a secret shorter than the
/// overlap is whole in some chunk. A leak seen in two chunks is listed once.
pub fn scan_file(guard: &Guard, path: &str, file: &File, size: u64) -> std::io::Result<FileScan> {
    let mut leaks = Vec::new();
    let mut seen: HashSet<(String, u64, u64)> = HashSet::new();
    let mut utf8 = Utf8Check::default();
    let mut buf = Vec::new();
    let mut start = 0u64;
    let mut checked = 0u64;
    loop {
        let len = (size - start).min(SCAN_CHUNK as u64) as usize;
        buf.resize(len, 0);
        file.read_exact_at(&mut buf, start)?;
        let end = start + len as u64;
        utf8.push(&buf[(checked - start) as usize..]);
        checked = end;
        // Where the next chunk starts: within the overlap, at a line's start if one is there.
        let next = (end < size).then(|| {
            let from = len.saturating_sub(SCAN_OVERLAP);
            let at = buf[from..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(from, |i| from + i + 1);
            start + at.max(1) as u64
        });
        for mut leak in guard.apply_file(path, &mut buf) {
            if matches!(leak.place, LeakPlace::File(_)) {
                leak.offset += start;
            }
            if leaks.len() < MAX_LISTED_LEAKS
                && seen.insert((leak.rule.clone(), leak.offset, leak.length))
            {
                leaks.push(leak);
            }
        }
        match next {
            Some(n) => start = n,
            None => break,
        }
    }
    Ok(FileScan {
        leaks,
        text: utf8.finish(),
    })
}

/// UTF-8 validation of bytes that come a piece at a time.
#[derive(Default)]
struct Utf8Check {
    bad: bool,
    /// The start of a character the last piece cut.
    carry: Vec<u8>,
}

impl Utf8Check {
    fn push(&mut self, mut bytes: &[u8]) {
        if self.bad {
            return;
        }
        if !self.carry.is_empty() {
            let k = bytes.len().min(4);
            let mut joined = std::mem::take(&mut self.carry);
            let had = joined.len();
            joined.extend_from_slice(&bytes[..k]);
            match std::str::from_utf8(&joined) {
                Ok(_) => bytes = &bytes[k..],
                Err(e) if e.valid_up_to() >= had => bytes = &bytes[e.valid_up_to() - had..],
                Err(e) if e.error_len().is_none() => {
                    self.carry = joined;
                    return;
                }
                Err(_) => {
                    self.bad = true;
                    return;
                }
            }
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            match e.error_len() {
                None => self.carry = bytes[e.valid_up_to()..].to_vec(),
                Some(_) => self.bad = true,
            }
        }
    }

    fn finish(self) -> bool {
        !self.bad && self.carry.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_checked_across_pieces() {
        let text = "aé€😀z".repeat(1000);
        for cut in 1..9 {
            let mut c = Utf8Check::default();
            for piece in text.as_bytes().chunks(cut) {
                c.push(piece);
            }
            assert!(c.finish(), "cut {cut}");
        }
        let mut c = Utf8Check::default();
        c.push(&[b'a', 0xe2]);
        c.push(&[0x82]);
        assert!(!c.finish(), "a cut character at the end is not text");
        let mut c = Utf8Check::default();
        c.push(&[0xe2, 0x82]);
        c.push(b"a");
        assert!(!c.finish(), "a broken character is not text");
    }

    #[test]
    fn a_secret_across_a_chunk_boundary_is_found_once_at_its_place() {
        let scanner = Arc::new(crate::leakage::Scanner::new(None).unwrap());
        let env = [("TOKEN".to_string(), "s3cr3t-value-long".to_string())];
        let guard = Guard::new(scanner, LeakPolicy::Report, &env, &[]);
        let mut body = vec![b'x'; SCAN_CHUNK - 5];
        body.extend_from_slice(b" s3cr3t-value-long ");
        body.extend(std::iter::repeat_n(b'y', SCAN_CHUNK));
        let at = (SCAN_CHUNK - 4) as u64;
        let path = std::env::temp_dir().join(format!("vivarium-held-{}", rand::random::<u64>()));
        std::fs::write(&path, &body).unwrap();
        let file = File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let scan = scan_file(&guard, "out.txt", &file, body.len() as u64).unwrap();
        assert!(scan.text);
        let mine: Vec<&Leak> = scan
            .leaks
            .iter()
            .filter(|l| l.rule == "env:TOKEN")
            .collect();
        assert_eq!(mine.len(), 1, "{:?}", scan.leaks);
        assert_eq!(mine[0].offset, at);
    }
}
