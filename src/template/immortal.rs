//! The template build's door: it makes objects immortal.
//!
//! At the end of the last init turn the guest walks every object the template holds and sends
//! their addresses here ([`IMMORTAL_TAG`], `guest::SNAPSHOT_READY`). CPython 3.15 on wasm32
//! treats an object whose refcount is at least [`IMMORTAL_MINIMUM`] as immortal (PEP 683):
//! `Py_INCREF` and `Py_DECREF` skip it, so a run that only uses the template's objects writes
//! nothing to their pages, and the pages a run dirties (and its reset copies back, and a
//! session turn's checkpoint faults on) are only the ones it really changes. The refcount is
//! the first word of every object on a 32-bit build; the value written is the one CPython
//! itself gives objects it makes immortal at run time (`_Py_IMMORTAL_INITIAL_REFCNT`).
//!
//! Only a build answers this tag: it runs the template's own init code, no caller's. The
//! addresses are still checked against the memory, and a word that is not a plausible
//! mortal refcount (zero, or already immortal) is left alone.

use wasmtime::Caller;

use crate::guest::IMMORTAL_TAG;
use crate::hostcalls::door::{ANSWERED, HOST_FAULT, NO_HOST};
use crate::hostcalls::guest_memory::{memory, range, read_u32};

/// `_Py_IMMORTAL_MINIMUM_REFCNT` on 32-bit builds: `1 << 30`.
pub const IMMORTAL_MINIMUM: u32 = 1 << 30;
/// `_Py_IMMORTAL_INITIAL_REFCNT` on 32-bit builds: `5 << 28`, halfway between the minimum
/// and the static objects' `7 << 28`, so increments and decrements never leave the range.
pub const IMMORTAL_REFCOUNT: u32 = 5 << 28;

/// What the build's door did, for its log line.
#[derive(Debug, Default, Clone, Copy)]
pub struct Immortalized {
    /// Objects whose refcount was written.
    pub objects: u64,
    /// Addresses sent that were outside memory or held no mortal refcount.
    pub skipped: u64,
}

/// The build's `host::call(req_ptr, req_len, out_ptr_ptr, out_len_ptr) -> i32`: an
/// [`IMMORTAL_TAG`] request is answered empty after its objects are made immortal; anything
/// else is "no host", as in a sandbox without tools.
pub fn host_call<T>(
    mut caller: Caller<'_, T>,
    count: impl FnOnce(&mut T) -> &mut Immortalized,
    (req_ptr, req_len, out_ptr_ptr, out_len_ptr): (i32, i32, i32, i32),
) -> i32 {
    let Some(mem) = memory(&mut caller) else {
        return HOST_FAULT;
    };
    let (data, state) = mem.data_and_store_mut(&mut caller);
    let (Some(req), Some(out_ptr), Some(out_len)) = (
        range(data, req_ptr, req_len as u32 as usize),
        range(data, out_ptr_ptr, 4),
        range(data, out_len_ptr, 4),
    ) else {
        return HOST_FAULT;
    };
    let Some(addresses) = data[req].strip_prefix(IMMORTAL_TAG) else {
        return NO_HOST;
    };
    if addresses.len() % 4 != 0 {
        return HOST_FAULT;
    }
    let addresses: Vec<u32> = addresses
        .chunks_exact(4)
        .map(|a| u32::from_le_bytes(a.try_into().expect("4 bytes")))
        .collect();
    let done = count(state);
    for at in addresses {
        if immortalize(data, at) {
            done.objects += 1;
        } else {
            done.skipped += 1;
        }
    }
    data[out_ptr].fill(0);
    data[out_len].fill(0);
    ANSWERED
}

/// Writes the immortal refcount over the mortal one at guest address `at`; false when `at`
/// is outside memory or its word is not a mortal refcount.
fn immortalize(data: &mut [u8], at: u32) -> bool {
    let Some(word) = range(data, at as i32, 4) else {
        return false;
    };
    let refcount = read_u32(data, word.start);
    if refcount == 0 || refcount >= IMMORTAL_MINIMUM {
        return false;
    }
    data[word].copy_from_slice(&IMMORTAL_REFCOUNT.to_le_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mortal_refcounts_inside_memory_are_written() {
        let mut data = vec![0u8; 16];
        data[0..4].copy_from_slice(&3u32.to_le_bytes());
        data[4..8].copy_from_slice(&(7u32 << 28).to_le_bytes());
        assert!(immortalize(&mut data, 0));
        assert_eq!(read_u32(&data, 0), IMMORTAL_REFCOUNT);
        // Already immortal (here a static object's value), zero, or past the end: untouched.
        assert!(!immortalize(&mut data, 4));
        assert_eq!(read_u32(&data, 4), 7 << 28);
        assert!(!immortalize(&mut data, 8));
        assert!(!immortalize(&mut data, 14));
        assert!(!immortalize(&mut data, u32::MAX));
        // Writing twice leaves the value CPython gives runtime-immortal objects.
        assert!(!immortalize(&mut data, 0));
        assert_eq!(read_u32(&data, 0), 5 << 28);
    }
}
