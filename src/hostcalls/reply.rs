//! What the `host::call` door answers: its return codes, and a reply written into the
//! guest's memory (the door's `input()` line, a round of tool calls' answers).

use wasmtime::{Caller, Extern};

use super::guest_memory::{memory, range};
use super::state::GuestState;

/// What `host::call` returns (every door that answers it: this one, a template build's).
/// No host is bound for this request: the guest raises `ConnectionRefusedError`.
pub const NO_HOST: i32 = -1;
/// The request pointed outside the guest's memory, or the host could not answer.
pub const HOST_FAULT: i32 = -2;
/// Answered: the reply's pointer and length are written where the guest asked.
pub const ANSWERED: i32 = 0;

/// Writes `bytes` into the guest's memory where its `host_alloc` put room for them (the
/// guest frees it), and their pointer and length at `out_ptr` and `out_len` (checked
/// before). What the door returns.
pub fn write_reply(
    caller: &mut Caller<'_, GuestState>,
    bytes: &[u8],
    out_ptr: usize,
    out_len: usize,
) -> i32 {
    let Some(Extern::Func(alloc)) = caller.get_export("host_alloc") else {
        return HOST_FAULT;
    };
    let Ok(alloc) = alloc.typed::<i32, i32>(&*caller) else {
        return HOST_FAULT;
    };
    let p = match alloc.call(&mut *caller, bytes.len() as i32) {
        Ok(p) => p,
        Err(_) => return HOST_FAULT,
    };
    let Some(mem) = memory(caller) else {
        return HOST_FAULT;
    };
    let data = mem.data_mut(&mut *caller);
    // The slots were checked before the call; the guest's memory can only have grown.
    let Some(at) = range(data, p, bytes.len()).filter(|_| p != 0 || bytes.is_empty()) else {
        return HOST_FAULT;
    };
    data[at].copy_from_slice(bytes);
    data[out_ptr..out_ptr + 4].copy_from_slice(&(p as u32).to_le_bytes());
    data[out_len..out_len + 4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    ANSWERED
}
