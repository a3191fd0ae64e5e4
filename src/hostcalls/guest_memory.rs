//! Bounds-checked access to the guest's linear memory from host functions.
//!
//! Every pointer and length the guest passes is untrusted: they are read as unsigned and
//! checked against the memory's current size before any byte is touched.

use wasmtime::{Caller, Extern, Memory};

pub fn memory<T>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}

/// The guest range `[ptr, ptr + len)` as host indices, if it lies inside `data`.
pub fn range(data: &[u8], ptr: i32, len: usize) -> Option<std::ops::Range<usize>> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len)?;
    (end <= data.len()).then_some(start..end)
}

pub fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

pub fn read_u64(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"))
}

/// Host bytes standing in for guest memory, to call wasmtime-wasi's own preview1 functions
/// with arguments the host chose (a path rewritten, a descriptor's state read): 8-aligned
/// at its offset 0, as the calls check their results' pointers against the real address.
/// Results go at 0 (up to [`Scratch::PATH_AT`] bytes); the paths after, each at
/// [`Scratch::path`].
pub struct Scratch {
    buf: Vec<u8>,
    at: usize,
    len: usize,
    paths: Vec<(i32, i32)>,
}

impl Scratch {
    /// Where the first path starts: room for any preview1 result before it (a `filestat`
    /// is 64 bytes).
    pub const PATH_AT: usize = 64;

    /// Room for a result, and `paths` after it.
    pub fn new(paths: &[&str]) -> Scratch {
        let len = Self::PATH_AT + paths.iter().map(|p| p.len()).sum::<usize>();
        let mut buf = vec![0u8; len + 8];
        let at = buf.as_ptr().align_offset(8).min(8);
        let mut next = Self::PATH_AT;
        let mut spans = Vec::new();
        for p in paths {
            buf[at + next..at + next + p.len()].copy_from_slice(p.as_bytes());
            spans.push((next as i32, p.len() as i32));
            next += p.len();
        }
        Scratch {
            buf,
            at,
            len,
            paths: spans,
        }
    }

    /// The bytes to hand the call as its memory.
    pub fn bytes(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + self.len]
    }

    /// Path `i` as the call's `(pointer, length)`.
    pub fn path(&self, i: usize) -> (i32, i32) {
        self.paths[i]
    }

    /// The little-endian `u64` at `at` of the results.
    pub fn u64_at(&self, at: usize) -> u64 {
        read_u64(&self.buf[self.at..], at)
    }

    /// The first `n` bytes of the results.
    pub fn result(&self, n: usize) -> &[u8] {
        &self.buf[self.at..self.at + n]
    }
}
