//! Sessions as data: a session's state as a plain [`SessionImage`], the snapshot file that
//! holds one ([`format`]: header, compression, integrity hash, and every check made before a
//! byte of it is used), and the stores snapshots live in ([`store`]). A leaf: capturing and
//! restoring an interpreter is `crate::sandbox::capture`'s; deciding who may is the server's.

mod format;
mod image;
mod labels;
mod object_store;
mod open;
mod records;
mod store;
mod store_error;

pub use format::{
    Binding, FormatError, MAX_ENTRIES, Provenance, SessionRecord, SnapshotHeader, check_capturable,
    check_capturable_parts, decode, encode, header_span, peek_header,
};
pub use image::{GlobalBits, GlobalValue, OpenFile, PAGE_BYTES, SessionImage, WASM_PAGE_BYTES};
pub use labels::{Labels, LabelsError, MAX_CONTEXTS};
pub use open::{open_objects, open_store};
pub use records::{Expect, RecordName, Version, is_node_id};
pub use store::{SnapshotId, SnapshotStore};
pub use store_error::StoreError;
