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
