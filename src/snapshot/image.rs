//! [`SessionImage`]: a session's whole state between turns, as plain data.

use crate::limits::Limits;
use crate::packages::PackagePin;

/// The granularity of a memory image: memory is compared with the template's and stored in
/// pages of this many bytes (the smallest host page; a wasm page is 16 of them).
pub const PAGE_BYTES: usize = 4096;

/// The size of a wasm page: linear memory grows in these.
pub const WASM_PAGE_BYTES: u64 = 64 << 10;

/// The value of one mutable global, by its bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", content = "bits", rename_all = "lowercase")]
pub enum GlobalBits {
    /// An `i32`.
    I32(u32),
    /// An `i64`.
    I64(u64),
    /// An `f32`, by its bits.
    F32(u32),
    /// An `f64`, by its bits.
    F64(u64),
    /// A `v128`, as a decimal string in JSON (it does not fit a JSON number).
    V128(#[serde(with = "u128_string")] u128),
}

/// One mutable global: its export name in the template and its value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalValue {
    /// The template's export name (`vivarium.global.<index>`).
    pub name: String,
    /// Its value.
    pub value: GlobalBits,
}

/// A session's state between turns: what differs in its linear memory from the template's
/// image, its mutable globals, its working directory, and the host's counters of it. With
/// the template it came from, this is the whole session (see `crate::sandbox::capture`).
/// Serde is for the worker channel (`crate::worker`), byte fields as byte strings; the
/// snapshot file has its own format (`snapshot::format`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionImage {
    /// The linear memory's size in bytes (a multiple of [`WASM_PAGE_BYTES`]).
    pub memory_bytes: u64,
    /// Indices of the [`PAGE_BYTES`] pages that differ from the template's, increasing.
    pub pages: Vec<u32>,
    /// Their contents, `pages.len() * PAGE_BYTES` bytes, in the same order.
    #[serde(with = "serde_bytes")]
    pub page_data: Vec<u8>,
    /// Every mutable global of the template.
    pub globals: Vec<GlobalValue>,
    /// Folders of the working directory, parents first (relative paths).
    pub dirs: Vec<String>,
    /// Regular files of the working directory (relative paths) with their contents.
    #[serde(with = "file_bytes")]
    pub files: Vec<(String, Vec<u8>)>,
    /// The limits the session was opened with.
    pub limits: Limits,
    /// Turns the interpreter has run (hidden ones included), so tracebacks keep numbering.
    pub turns_run: u32,
    /// The guest's monotonic clock at the capture, in nanoseconds: it goes on from there.
    pub monotonic_ns: u64,
    /// The largest the linear memory has been, in bytes.
    pub memory_peak_bytes: u64,
    /// The extra packages it was made with (behind `guest::PACKAGES_DIR`); empty for none.
    pub packages: Vec<PackagePin>,
    /// The regular files of its working directory the guest holds open between turns, by
    /// increasing descriptor: reopened at the same descriptors and positions on restore.
    #[serde(default)]
    pub open_files: Vec<OpenFile>,
    /// The volumes its interpreter mounts, by name and place (never their files): a
    /// restore lends them again, or fails naming the one that is gone.
    #[serde(default)]
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// Symbolic links of the working directory: (path, target), each leading inside it
    /// (`vocabulary::link_stays_inside`).
    #[serde(default)]
    pub links: Vec<(String, String)>,
}

/// A regular file the guest holds open between turns: which descriptor, which file of the
/// working directory, how it was opened, and where it is. (wasi-libc keeps no table of its
/// own for such descriptors: the number in the guest's file objects is all there is.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenFile {
    /// The WASI descriptor number.
    pub fd: u32,
    /// One of the image's files (relative path).
    pub path: String,
    /// Opened for reading.
    pub read: bool,
    /// Opened for writing.
    pub write: bool,
    /// preview1's `fdflags` (append, dsync, nonblock, rsync, sync), as the descriptor has
    /// them; at most [`OpenFile::FDFLAGS`].
    pub fdflags: u16,
    /// The file position (what `fd_tell` says).
    pub position: u64,
}

impl OpenFile {
    /// Every preview1 `fdflags` bit.
    pub const FDFLAGS: u16 = 0x1f;
}

impl SessionImage {
    /// The bytes its working directory's files hold.
    pub fn file_bytes(&self) -> u64 {
        self.files.iter().map(|(_, c)| c.len() as u64).sum()
    }
}

mod u128_string {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `(path, contents)` pairs with the contents as byte strings, not arrays of numbers.
mod file_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub fn serialize<S: Serializer>(files: &[(String, Vec<u8>)], s: S) -> Result<S::Ok, S::Error> {
        let borrowed: Vec<(&str, &Bytes)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), Bytes::new(c)))
            .collect();
        borrowed.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, Vec<u8>)>, D::Error> {
        let owned: Vec<(String, ByteBuf)> = Vec::deserialize(d)?;
        Ok(owned.into_iter().map(|(p, c)| (p, c.into_vec())).collect())
    }
}
