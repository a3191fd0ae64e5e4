//! The snapshot file: a [`SessionImage`] with a header that binds it to a template, a runtime
//! and this format, compressed, behind an integrity hash.
//!
//! ```text
//! "VIVSNAP1"          8 bytes: magic, format 1
//! header length       u32 little-endian, at most MAX_HEADER_BYTES
//! header              JSON (SnapshotHeader), unknown fields refused
//! body                zstd of: page indices (u32 LE each), page contents, file contents
//! SHA-256             32 bytes, of everything before it
//! ```
//!
//! A snapshot is data the guest wrote (its memory and files) wrapped by the host, and it may
//! have sat in a store others can write. [`decode`] checks the hash before reading anything,
//! then every header field and size against the bounds of this format and the caller's
//! limits, and decompresses into exactly the sizes the header declares: a truncated,
//! tampered or oversized snapshot is refused and nothing of it is used.

use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::image::{GlobalValue, OpenFile, PAGE_BYTES, SessionImage, WASM_PAGE_BYTES};
use super::labels::{Labels, MAX_LABELS_BYTES};
use crate::limits::Limits;
use crate::packages::PackagePin;

/// The magic bytes, which also carry the format version.
const MAGIC: &[u8; 8] = b"VIVSNAP1";
/// The format version in headers.
pub const FORMAT_VERSION: u32 = 1;
// The bounds of what a snapshot holds: one set, checked when a session is captured
// (`check_capturable`) and when a snapshot is decoded (`check_header`), so that what is
// captured always decodes.
/// A header is small (names, sizes, limits, a session's labels); anything larger is not ours.
const MAX_HEADER_BYTES: usize = (1 << 20) + MAX_LABELS_BYTES;
/// Of [`MAX_HEADER_BYTES`], what the header's lists (folders, files, globals, packages, open
/// files) may take at capture: the rest is for its fixed fields (binding, owner, limits,
/// counters, session record) and the session's labels, which are the host's.
const MAX_HEADER_LISTS_BYTES: usize = MAX_HEADER_BYTES - MAX_LABELS_BYTES - (64 << 10);
/// Entries (files and folders) a snapshot may hold.
pub const MAX_ENTRIES: usize = 10_000;
/// The longest path (relative to the working directory) a snapshot holds, in bytes.
pub use crate::vocabulary::MAX_PATH_BYTES;
/// Mutable globals a snapshot may hold (the guest has one).
const MAX_GLOBALS: usize = 64;
/// The most package pins a snapshot may carry.
const MAX_PACKAGES: usize = 1000;
const HASH_BYTES: usize = 32;
/// zstd's fastest levels compress a Python heap about threefold at hundreds of MB/s.
const ZSTD_LEVEL: i32 = 1;

/// What a snapshot is bound to, besides its contents: it restores only where all of these
/// match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The template's name (`python`, `scientific`).
    pub template: String,
    /// The template's cache key (every input of its build).
    pub template_key: String,
    /// SHA-256 of the runtime's `python.wasm`.
    pub runtime_sha256: String,
}

/// The header: the binding, who made it, and the sizes of everything in the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotHeader {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    /// The Vivarium version that wrote it (informational).
    pub vivarium: String,
    /// What it restores on.
    pub binding: Binding,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    /// The API key's name that made it; `None` without keys.
    pub owner: Option<String>,
    /// The session's user turns when it was taken.
    pub turns: u64,
    /// The session's limits.
    pub limits: Limits,
    /// The interpreter's turn counter (hidden turns included).
    pub turns_run: u32,
    /// The guest's monotonic clock, in nanoseconds.
    pub monotonic_ns: u64,
    /// The linear memory's size and its peak, in bytes.
    pub memory_bytes: u64,
    /// The largest the memory has been, in bytes.
    pub memory_peak_bytes: u64,
    /// How many pages the body holds.
    pub pages: u32,
    /// The mutable globals.
    pub globals: Vec<GlobalValue>,
    /// Folders, parents first.
    pub dirs: Vec<String>,
    /// Files, with their sizes (the contents are in the body, in this order).
    pub files: Vec<FileEntry>,
    /// The body's length, compressed.
    pub body_bytes: u64,
    /// Set when the snapshot is a session's own (durable, or kept over a restart): which
    /// session it restores as. Such snapshots are not the caller's to list or restore by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionRecord>,
    /// The extra packages the session was made with: restored only from the package cache
    /// or an index serving exactly these wheels (never from a URL the file names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackagePin>,
    /// Files of `files` the guest held open between turns, by increasing descriptor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_files: Vec<OpenFile>,
    /// The volumes the session mounts, by name and place (checked: names and mount points
    /// as a request's are, at most `guest::MAX_MOUNTS`, none inside another).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// Symbolic links of the working directory: (path, target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<(String, String)>,
}

/// The session a session's own snapshot restores as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    /// Its id.
    pub id: String,
    /// Whether every completed turn is snapshotted.
    pub durable: bool,
    /// Its leakage policy, by name.
    pub leakage: String,
    /// How old it was when this was taken, in seconds (its lifetime goes on from there).
    pub age_secs: u64,
    /// How long it had been idle when this was taken, in seconds (its idle expiry goes on).
    #[serde(default)]
    pub idle_secs: u64,
    /// Its labels (what a door gave it: metadata, environment, contexts), none left out.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Its caller's own end (E2B's sandbox timeout), in seconds since the Unix epoch: it
    /// ends then, used or idle, rather than at its idle time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<u64>,
}

/// A file's path and size in the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Relative path.
    pub path: String,
    /// Bytes.
    pub size: u64,
}

/// Facts about a snapshot that are not part of the session: who made it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// What it restores on.
    pub binding: Binding,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    /// The API key's name that made it.
    pub owner: Option<String>,
    /// The session's user turns.
    pub turns: u64,
    /// For a session's own snapshot: which session.
    pub session: Option<SessionRecord>,
}

/// Why a snapshot was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Shorter than its fixed parts, or than its header says.
    #[error("the snapshot is truncated")]
    Truncated,
    /// The integrity hash does not match: changed since it was written.
    #[error("the snapshot's integrity hash does not match (changed or damaged)")]
    Tampered,
    /// Not a Vivarium snapshot, or of another format version.
    #[error("not a snapshot of format {FORMAT_VERSION}")]
    Foreign,
    /// A header field or size is out of bounds or inconsistent.
    #[error("the snapshot's {0} is invalid")]
    Invalid(&'static str),
    /// What the session holds is past a bound of the format (a path too long, too many
    /// entries, ...): refused when capturing such a session, and when decoding.
    #[error("{0}")]
    OutOfBounds(String),
    /// It is larger than the limits it would restore under allow.
    #[error("the snapshot's {what} ({size} bytes) is over the limit of {limit} bytes")]
    OverLimit {
        /// What is too large.
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

/// Encodes `image` with its provenance into a snapshot file's bytes.
pub fn encode(image: &SessionImage, p: &Provenance) -> Vec<u8> {
    let mut raw =
        Vec::with_capacity(image.pages.len() * (4 + PAGE_BYTES) + image.file_bytes() as usize);
    for page in &image.pages {
        raw.extend_from_slice(&page.to_le_bytes());
    }
    raw.extend_from_slice(&image.page_data);
    for (_, content) in &image.files {
        raw.extend_from_slice(content);
    }
    let body = zstd::bulk::compress(&raw, ZSTD_LEVEL).expect("compressing into memory");
    drop(raw);
    let header = SnapshotHeader {
        format: FORMAT_VERSION,
        vivarium: env!("CARGO_PKG_VERSION").to_string(),
        binding: p.binding.clone(),
        created_at: p.created_at,
        owner: p.owner.clone(),
        turns: p.turns,
        limits: image.limits,
        turns_run: image.turns_run,
        monotonic_ns: image.monotonic_ns,
        memory_bytes: image.memory_bytes,
        memory_peak_bytes: image.memory_peak_bytes,
        pages: image.pages.len() as u32,
        globals: image.globals.clone(),
        dirs: image.dirs.clone(),
        files: image
            .files
            .iter()
            .map(|(path, c)| FileEntry {
                path: path.clone(),
                size: c.len() as u64,
            })
            .collect(),
        body_bytes: body.len() as u64,
        session: p.session.clone(),
        packages: image.packages.clone(),
        open_files: image.open_files.clone(),
        volumes: image.volumes.clone(),
        links: image.links.clone(),
    };
    let header = serde_json::to_vec(&header).expect("a header serialises");
    let mut out = Vec::with_capacity(12 + header.len() + body.len() + HASH_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&body);
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    out
}

/// Reads only the header, from the snapshot's first bytes (at least [`header_span`] of
/// them): for listing. Nothing here is verified by the hash; use [`decode`] to restore.
pub fn peek_header(prefix: &[u8]) -> Result<SnapshotHeader, FormatError> {
    let len = header_span(prefix)?;
    let header = prefix.get(12..len).ok_or(FormatError::Truncated)?;
    let header: SnapshotHeader =
        serde_json::from_slice(header).map_err(|_| FormatError::Invalid("header"))?;
    if header.format != FORMAT_VERSION {
        return Err(FormatError::Foreign);
    }
    Ok(header)
}

/// How many leading bytes hold the magic, the length and the header, read from the first 12.
pub fn header_span(prefix: &[u8]) -> Result<usize, FormatError> {
    if prefix.len() < 12 {
        return Err(FormatError::Truncated);
    }
    if &prefix[..8] != MAGIC {
        return Err(FormatError::Foreign);
    }
    let len = u32::from_le_bytes(prefix[8..12].try_into().unwrap()) as usize;
    if len > MAX_HEADER_BYTES {
        return Err(FormatError::Invalid("header length"));
    }
    Ok(12 + len)
}

/// Decodes and checks a snapshot file: the hash over all of it, then the header, then the
/// body against the header and `max` (the largest limits it may restore under: a snapshot
/// asks for its own limits, which must be within them).
pub fn decode(bytes: &[u8], max: &Limits) -> Result<(SnapshotHeader, SessionImage), FormatError> {
    if bytes.len() < 12 + HASH_BYTES {
        return Err(FormatError::Truncated);
    }
    let (signed, hash) = bytes.split_at(bytes.len() - HASH_BYTES);
    if Sha256::digest(signed).as_slice() != hash {
        // A truncated file fails here too, unless its magic is wrong.
        return Err(if &bytes[..8] != MAGIC {
            FormatError::Foreign
        } else {
            FormatError::Tampered
        });
    }
    let span = header_span(signed)?;
    if span > signed.len() {
        return Err(FormatError::Truncated);
    }
    let header = peek_header(&signed[..span])?;
    let body = &signed[span..];
    if body.len() as u64 != header.body_bytes {
        return Err(FormatError::Invalid("body length"));
    }
    check_header(&header, max)?;
    let pages = header.pages as usize;
    let file_bytes: u64 = header.files.iter().map(|f| f.size).sum();
    let raw_len = pages * (4 + PAGE_BYTES) + file_bytes as usize;
    // Grown as bytes really arrive, not sized from the header: a header that claims
    // gigabytes over a short body costs nothing.
    let mut raw = Vec::new();
    // Exactly the declared bytes, and not one more: a zip bomb stops at the header's sizes.
    zstd::stream::read::Decoder::new(body)
        .map_err(|_| FormatError::Invalid("body"))?
        .take(raw_len as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|_| FormatError::Invalid("body"))?;
    if raw.len() != raw_len {
        return Err(FormatError::Invalid("body length"));
    }
    let (indices, rest) = raw.split_at(pages * 4);
    let (page_data, mut contents) = rest.split_at(pages * PAGE_BYTES);
    let indices: Vec<u32> = indices
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let memory_pages = header.memory_bytes / PAGE_BYTES as u64;
    if indices.windows(2).any(|w| w[0] >= w[1])
        || indices.last().is_some_and(|&p| p as u64 >= memory_pages)
    {
        return Err(FormatError::Invalid("page list"));
    }
    let mut files = Vec::with_capacity(header.files.len());
    for f in &header.files {
        let (content, rest) = contents.split_at(f.size as usize);
        files.push((f.path.clone(), content.to_vec()));
        contents = rest;
    }
    let image = SessionImage {
        memory_bytes: header.memory_bytes,
        pages: indices,
        page_data: page_data.to_vec(),
        globals: header.globals.clone(),
        dirs: header.dirs.clone(),
        files,
        limits: header.limits,
        turns_run: header.turns_run,
        monotonic_ns: header.monotonic_ns,
        memory_peak_bytes: header.memory_peak_bytes,
        packages: header.packages.clone(),
        open_files: header.open_files.clone(),
        volumes: header.volumes.clone(),
        links: header.links.clone(),
    };
    Ok((header, image))
}

/// Whether `image` is within this format's bounds (the ones [`decode`] checks of what the
/// session holds), so that a snapshot of it decodes: checked when a session is captured,
/// with a message that says what is over.
pub fn check_capturable(image: &SessionImage) -> Result<(), FormatError> {
    check_capturable_parts(
        &image.limits,
        &image.dirs,
        image
            .files
            .iter()
            .map(|(p, c)| (p.as_str(), c.len() as u64)),
        &image.globals,
        &image.packages,
        &image.open_files,
    )
}

/// [`check_capturable`] of an image's parts, its files by path and size (a checkpoint
/// checks these after each turn, without making an image).
pub fn check_capturable_parts<'a>(
    limits: &Limits,
    dirs: &[String],
    files: impl Iterator<Item = (&'a str, u64)>,
    globals: &[GlobalValue],
    packages: &[PackagePin],
    open_files: &[OpenFile],
) -> Result<(), FormatError> {
    let files: Vec<FileEntry> = files
        .map(|(path, size)| FileEntry {
            path: path.to_string(),
            size,
        })
        .collect();
    check_contents(limits, dirs, &files, globals, packages, open_files)?;
    // The header's lists must leave room for its fixed fields.
    let lists = serde_json::to_vec(&(dirs, &files, globals, packages, open_files))
        .map_or(usize::MAX, |v| v.len());
    if lists > MAX_HEADER_LISTS_BYTES {
        return Err(FormatError::OutOfBounds(format!(
            "the working directory's names take {lists} bytes; a snapshot holds at most \
             {MAX_HEADER_LISTS_BYTES}"
        )));
    }
    Ok(())
}

/// Every header field within this format's bounds and `max`.
fn check_header(h: &SnapshotHeader, max: &Limits) -> Result<(), FormatError> {
    let within = |what, size: u64, limit: u64| {
        if size > limit {
            Err(FormatError::OverLimit { what, size, limit })
        } else {
            Ok(())
        }
    };
    within("memory limit", h.limits.memory_bytes, max.memory_bytes)?;
    crate::guest::check_mount_points(h.volumes.iter().map(|v| &v.at))
        .map_err(|_| FormatError::Invalid("volumes"))?;
    within("disk limit", h.limits.disk_bytes, max.disk_bytes)?;
    // The template's image is not counted in `memory_bytes`: the restore checks the exact fit.
    within(
        "memory",
        h.memory_bytes,
        crate::limits::linear_memory_bound(h.limits.memory_bytes),
    )?;
    if h.limits.timeout_ms > max.timeout_ms
        || h.limits.fuel > max.fuel
        || h.limits.output_bytes > max.output_bytes
        || h.limits.open_files > max.open_files
    {
        return Err(FormatError::Invalid("limits"));
    }
    if h.memory_bytes == 0 || !h.memory_bytes.is_multiple_of(WASM_PAGE_BYTES) {
        return Err(FormatError::Invalid("memory size"));
    }
    if h.pages as u64 * PAGE_BYTES as u64 > h.memory_bytes {
        return Err(FormatError::Invalid("page count"));
    }
    if h.memory_peak_bytes < h.memory_bytes {
        return Err(FormatError::Invalid("memory peak"));
    }
    if let Some(r) = &h.session
        && (r.id.len() > 64 || !r.id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    {
        return Err(FormatError::Invalid("session id"));
    }
    if let Some(r) = &h.session
        && r.labels.check().is_err()
    {
        return Err(FormatError::Invalid("session labels"));
    }
    if h.links.len() > crate::vocabulary::MAX_INPUT_FILES
        || !h
            .links
            .iter()
            .all(|(link, target)| crate::vocabulary::link_stays_inside(link, target))
    {
        return Err(FormatError::Invalid("links"));
    }
    check_contents(
        &h.limits,
        &h.dirs,
        &h.files,
        &h.globals,
        &h.packages,
        &h.open_files,
    )
}

/// The bounds of what a session holds, the same for capture and decode.
fn check_contents(
    limits: &Limits,
    dirs: &[String],
    files: &[FileEntry],
    globals: &[GlobalValue],
    packages: &[PackagePin],
    open_files: &[OpenFile],
) -> Result<(), FormatError> {
    let out = |m: String| Err(FormatError::OutOfBounds(m));
    if globals.len() > MAX_GLOBALS {
        return Err(FormatError::Invalid("globals"));
    }
    // Read back through the package cache only (a pin is a name, a version and a hash; it
    // is never fetched from anything the file says), but bounded all the same.
    if packages.len() > MAX_PACKAGES
        || packages.iter().any(|p| {
            p.name.len() > 200
                || p.version.len() > 100
                || p.sha256.len() != 64
                || !p.sha256.bytes().all(|b| b.is_ascii_hexdigit())
        })
    {
        return Err(FormatError::Invalid("packages"));
    }
    if files.len() + dirs.len() > MAX_ENTRIES {
        return out(format!(
            "the working directory holds {} files and folders; a snapshot holds at most \
             {MAX_ENTRIES}",
            files.len() + dirs.len()
        ));
    }
    let file_bytes = files
        .iter()
        .try_fold(0u64, |sum, f| sum.checked_add(f.size))
        .ok_or(FormatError::Invalid("file sizes"))?;
    if file_bytes > limits.disk_bytes {
        return Err(FormatError::OverLimit {
            what: "files",
            size: file_bytes,
            limit: limits.disk_bytes,
        });
    }
    for path in files.iter().map(|f| &f.path).chain(dirs) {
        if path.len() > MAX_PATH_BYTES {
            let shown: String = path.chars().take(60).collect();
            return out(format!(
                "the working directory's path {shown:?}… is {} bytes long; a snapshot holds \
                 paths of at most {MAX_PATH_BYTES} bytes",
                path.len()
            ));
        }
        if !plain_relative(path) {
            return out(format!(
                "the working directory's path {path:?} cannot be kept in a snapshot (a name \
                 with a backslash or a NUL)"
            ));
        }
    }
    // Descriptors only grow past the open-file cap by reusing freed numbers, so each is
    // below it; increasing, each names a file of the snapshot.
    let mut last = None;
    for f in open_files {
        if f.fd < 3
            || f.fd >= limits.open_files
            || last.is_some_and(|l| f.fd <= l)
            || f.fdflags & !OpenFile::FDFLAGS != 0
            || f.position > i64::MAX as u64
            || !files.iter().any(|e| e.path == f.path)
        {
            return Err(FormatError::Invalid("open files"));
        }
        last = Some(f.fd);
    }
    Ok(())
}

/// Relative, `/`-separated, plain components (no `.`, `..`, empty, NUL or backslash). The
/// working directory checks again when it writes.
fn plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains(['\0', '\\'])
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::image::GlobalBits;

    fn image() -> SessionImage {
        let mut page_data = vec![0u8; 2 * PAGE_BYTES];
        page_data[5] = 7;
        page_data[PAGE_BYTES + 9] = 9;
        SessionImage {
            memory_bytes: 40 << 20,
            pages: vec![3, 4000],
            page_data,
            globals: vec![GlobalValue {
                name: "vivarium.global.0".into(),
                value: GlobalBits::I32(16 << 20),
            }],
            dirs: vec!["tmp".into(), "tmp/home".into()],
            files: vec![
                ("data.csv".into(), b"a,b\n1,2\n".to_vec()),
                ("tmp/x".into(), Vec::new()),
            ],
            limits: Limits::DEFAULT,
            turns_run: 5,
            monotonic_ns: 123,
            memory_peak_bytes: 48 << 20,
            packages: vec![PackagePin {
                name: "tabulate".into(),
                version: "0.9.0".into(),
                sha256: "ab".repeat(32),
            }],
            open_files: vec![OpenFile {
                fd: 9,
                path: "data.csv".into(),
                read: true,
                write: true,
                fdflags: 1,
                position: 4,
            }],
            links: vec![("tmp/link".into(), "../data.csv".into())],
            volumes: vec![crate::volumes::VolumeMount {
                volume: crate::volumes::VolumeName::parse("data").unwrap(),
                at: crate::guest::MountPoint::parse("/mnt/data").unwrap(),
                read_only: true,
            }],
        }
    }

    fn provenance() -> Provenance {
        Provenance {
            binding: Binding {
                template: "python".into(),
                template_key: "k".into(),
                runtime_sha256: "r".into(),
            },
            created_at: 1,
            owner: Some("alice".into()),
            turns: 2,
            session: None,
        }
    }

    #[test]
    fn round_trip() {
        let bytes = encode(&image(), &provenance());
        let (header, back) = decode(&bytes, &Limits::MAXIMUM).unwrap();
        assert_eq!(back, image());
        assert_eq!(header.owner.as_deref(), Some("alice"));
        assert_eq!(peek_header(&bytes).unwrap(), header);
    }

    #[test]
    fn any_flipped_byte_or_cut_is_refused() {
        let bytes = encode(&image(), &provenance());
        for i in (0..bytes.len()).step_by(7) {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(decode(&b, &Limits::MAXIMUM).is_err(), "flip at {i}");
        }
        for n in [0, 11, 12, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..n], &Limits::MAXIMUM).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn a_snapshot_over_the_limits_is_refused() {
        let small = Limits {
            memory_bytes: 32 << 20,
            ..Limits::MAXIMUM
        };
        let bytes = encode(&image(), &provenance());
        assert!(matches!(
            decode(&bytes, &small),
            Err(FormatError::OverLimit { .. })
        ));
    }

    #[test]
    fn a_well_signed_but_lying_header_is_refused() {
        // Whoever can write the store can also recompute the hash: the header is checked on
        // its own merits too.
        let resign = |mut img: SessionImage, edit: &dyn Fn(&mut SessionImage)| {
            edit(&mut img);
            encode(&img, &provenance())
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("path", resign(image(), &|i| i.files[0].0 = "../x".into())),
            ("abs", resign(image(), &|i| i.dirs[0] = "/etc".into())),
            ("order", resign(image(), &|i| i.pages = vec![9, 3])),
            ("range", resign(image(), &|i| i.pages = vec![3, u32::MAX])),
            ("size", resign(image(), &|i| i.memory_bytes = 4097)),
            (
                "open file",
                resign(image(), &|i| i.open_files[0].path = "nope".into()),
            ),
            (
                "open fd",
                resign(image(), &|i| i.open_files[0].fd = 1 << 20),
            ),
        ];
        for (what, bytes) in cases {
            assert!(decode(&bytes, &Limits::MAXIMUM).is_err(), "{what}");
        }
    }

    #[test]
    fn what_capture_accepts_decodes_and_what_decode_refuses_capture_refuses() {
        assert_eq!(check_capturable(&image()), Ok(()));
        let long = format!("tmp/{}", "a/".repeat(MAX_PATH_BYTES / 2));
        let too_long = |i: &mut SessionImage| i.dirs.push(long.clone());
        let mut img = image();
        too_long(&mut img);
        let e = check_capturable(&img).unwrap_err();
        assert!(e.to_string().contains("at most 1024 bytes"), "{e}");
        let bytes = encode(&img, &provenance());
        assert_eq!(decode(&bytes, &Limits::MAXIMUM).unwrap_err(), e);
        let mut img = image();
        img.dirs = (0..MAX_ENTRIES).map(|i| format!("d{i}")).collect();
        assert!(check_capturable(&img).is_err());
        assert!(decode(&encode(&img, &provenance()), &Limits::MAXIMUM).is_err());
    }
}
