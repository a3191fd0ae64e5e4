//! What the disk quota and a volume's room count a write and an entry as.

/// What one directory entry (file, folder, link) costs against the quota, so that floods of
/// empty files or folders are bounded too.
pub const ENTRY_BYTES: u64 = 4096;

/// The unit a write is charged in (see [`charge_for`]).
const BLOCK_BYTES: u64 = 4096;

/// What a write of `bytes` may cost on the host's disk: whole filesystem blocks, since a write
/// into a hole (after a seek) allocates a block however few bytes it carries. The bound is
/// loose for small appends; the quota check then measures the directory for real.
pub fn charge_for(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK_BYTES).max(1) * BLOCK_BYTES
}
