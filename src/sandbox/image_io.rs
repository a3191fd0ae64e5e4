//! Reading an instance's state between turns: its mutable globals, which pages of its memory
//! were written, its working directory's tree; and why that can fail. Shared by the full
//! capture (`capture.rs`) and the per-turn checkpoint (`checkpoint.rs`).

use std::path::Path;

use wasmtime::Val;

use super::SandboxError;
use super::live::Live;
use super::workdir::{WorkdirError, io};
use crate::snapshot::{FormatError, GlobalBits, GlobalValue, MAX_ENTRIES, PAGE_BYTES};

/// Why an interpreter's state could not be captured.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The interpreter ended: there is nothing to keep.
    #[error("the interpreter has ended")]
    Ended,
    /// The guest holds a descriptor open between turns that a snapshot cannot carry (files
    /// of the working directory are carried: see `open_files.rs`).
    #[error(
        "the session holds descriptor {fd} open between turns, and {why}; close it and try again"
    )]
    OpenFiles {
        /// The descriptor.
        fd: u32,
        /// Why it cannot be carried.
        why: Uncarried,
    },
    /// The host's memory budget has no room for the checkpoint's copy of the state.
    #[error("the server's memory budget has no room for the session's rollback checkpoint")]
    HostBudget,
    /// What the session holds is past a bound of the snapshot format (the same bounds a
    /// snapshot is decoded under), so a snapshot of it could not be restored.
    #[error("{0}")]
    Bounds(FormatError),
    /// Reading the working directory failed.
    #[error("reading the working directory: {0}")]
    Workdir(#[from] WorkdirError),
    /// The template's pristine instance could not be made.
    #[error("preparing the comparison with the template: {0}")]
    Baseline(#[source] SandboxError),
    /// The instance is not shaped like its template (a missing global, one of another
    /// type): not a state this host can carry.
    #[error("the interpreter's {0} does not match its template")]
    Shape(&'static str),
}

/// Why a descriptor the guest holds open cannot be carried by a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncarried {
    /// A folder being listed (`os.scandir`, `os.listdir` in progress).
    Directory,
    /// A file outside the working directory (the standard library, a package).
    Elsewhere,
    /// A file deleted since it was opened.
    Deleted,
    /// Not a regular file.
    NotAFile,
}

impl std::fmt::Display for Uncarried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Uncarried::Directory => {
                "it is a folder being listed (an os.scandir or os.listdir in progress), which a snapshot does not carry"
            }
            Uncarried::Elsewhere => {
                "it is a file outside the working directory, which a snapshot does not carry"
            }
            Uncarried::Deleted => "it is a file deleted since, which a snapshot cannot hold",
            Uncarried::NotAFile => "it is not a regular file, which a snapshot does not carry",
        })
    }
}

impl CaptureError {
    /// Whether this is the session's state refusing to be captured (the caller's to
    /// change: 409 `snapshot_refused`), rather than the host failing.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            CaptureError::OpenFiles { .. } | CaptureError::Bounds(_) | CaptureError::Ended
        )
    }
}

/// The values of the mutable globals `names` of `live`'s instance.
pub(super) fn read_globals<'a>(
    live: &mut Live,
    names: impl Iterator<Item = &'a str>,
) -> Result<Vec<GlobalValue>, CaptureError> {
    let mut globals = Vec::new();
    for name in names {
        let g = live
            .instance
            .get_global(&mut live.store, name)
            .ok_or(CaptureError::Shape("globals"))?;
        let value = match g.get(&mut live.store) {
            Val::I32(v) => GlobalBits::I32(v as u32),
            Val::I64(v) => GlobalBits::I64(v as u64),
            Val::F32(v) => GlobalBits::F32(v),
            Val::F64(v) => GlobalBits::F64(v),
            Val::V128(v) => GlobalBits::V128(v.as_u128()),
            _ => return Err(CaptureError::Shape("globals")),
        };
        globals.push(GlobalValue {
            name: name.to_string(),
            value,
        });
    }
    Ok(globals)
}

/// The [`PAGE_BYTES`] pages of `mem` (ascending indices) whose host pages the kernel's page
/// map shows as private and present, or swapped out: written since they were mapped (the
/// template's untouched pages are the image's file pages, or not present). Asked with
/// `PAGEMAP_SCAN`, which answers only the pages that match (`dirty::written_since_mapped`),
/// else read from the whole page map; every page when neither can be read.
pub(super) fn written_pages(mem: &[u8]) -> Vec<u32> {
    if let Ok(pages) = super::dirty::written_since_mapped(mem) {
        return pages;
    }
    match page_map_flags(mem) {
        Some(flags) => (0..flags.len() as u32)
            .filter(|&p| flags[p as usize])
            .collect(),
        None => (0..(mem.len() / PAGE_BYTES) as u32).collect(),
    }
}

/// For each [`PAGE_BYTES`] page of `mem`, whether the page map's own entry says it was
/// written (see [`written_pages`]), read entry by entry.
pub(super) fn page_map_flags(mem: &[u8]) -> Option<Vec<bool>> {
    use std::os::unix::fs::FileExt;
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE_OR_SHARED: u64 = 1 << 61;
    let host_page = rustix::param::page_size();
    if !host_page.is_multiple_of(PAGE_BYTES) || !(mem.as_ptr() as usize).is_multiple_of(host_page) {
        return None;
    }
    let per_host = host_page / PAGE_BYTES;
    let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
    let first = mem.as_ptr() as usize / host_page;
    let host_pages = mem.len().div_ceil(host_page);
    let mut out = Vec::with_capacity(mem.len() / PAGE_BYTES);
    let mut buf = vec![0u8; 8 * 4096];
    let mut done = 0;
    while done < host_pages {
        let n = (host_pages - done).min(4096);
        let bytes = &mut buf[..8 * n];
        pagemap
            .read_exact_at(bytes, ((first + done) * 8) as u64)
            .ok()?;
        for entry in bytes.chunks_exact(8) {
            let e = u64::from_le_bytes(entry.try_into().unwrap());
            let written = (e & PRESENT != 0 && e & FILE_OR_SHARED == 0) || e & SWAPPED != 0;
            out.extend(std::iter::repeat_n(written, per_host));
        }
        done += n;
    }
    out.truncate(mem.len() / PAGE_BYTES);
    Some(out)
}

/// Every folder (parents first), regular file (with contents) and symbolic link (with its
/// target) under a working directory.
pub(super) struct Tree {
    pub dirs: Vec<String>,
    pub files: Vec<(String, Vec<u8>)>,
    /// Those whose target leads inside (`vocabulary::link_stays_inside`); others are not
    /// kept.
    pub links: Vec<(String, String)>,
}

/// Every folder (parents first) and regular file under `root`, with their contents when
/// `contents` (else empty).
pub(super) fn read_tree(root: &Path, contents: bool) -> Result<Tree, CaptureError> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut links = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(prefix) = stack.pop() {
        let here = root.join(&prefix);
        let entries = std::fs::read_dir(&here).map_err(io("listing", &here))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if dirs.len() + files.len() + links.len() >= MAX_ENTRIES {
                return Err(CaptureError::Bounds(FormatError::OutOfBounds(format!(
                    "the working directory holds more than {MAX_ENTRIES} files and folders; a \
                     snapshot holds at most {MAX_ENTRIES}"
                ))));
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    dirs.push(rel.clone());
                    stack.push(rel);
                }
                Ok(t) if t.is_file() => {
                    let content = if contents {
                        std::fs::read(entry.path()).map_err(io("reading", &entry.path()))?
                    } else {
                        Vec::new()
                    };
                    files.push((rel, content));
                }
                Ok(t) if t.is_symlink() => {
                    if let Ok(target) = std::fs::read_link(entry.path())
                        && let Some(target) = target.to_str()
                        && crate::vocabulary::link_stays_inside(&rel, target)
                    {
                        links.push((rel, target.to_string()));
                    }
                }
                _ => {}
            }
        }
    }
    // Parents before children, whatever order the walk found them in.
    dirs.sort();
    links.sort();
    Ok(Tree { dirs, files, links })
}
