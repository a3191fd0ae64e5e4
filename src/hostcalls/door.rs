//! The `host::call` import: the guest's one door to the host.
//!
//! We offer the guest no tools: any request answers -1 ("no host bound"), which the guest
//! turns into `ConnectionRefusedError` without touching memory. The one exception is the
//! internal result channel of sessions: a request that starts with [`RESULT_TAG`] carries the
//! `repr` of a turn's final expression (sent by the displayhook that
//! `_session_hooks` in `python-wasi/guest/setup.py` installs), which the host keeps as the turn's `result`;
//! and a request that is exactly [`FIGURE_TAG`] (sent by Vivarium's matplotlib backend when
//! pyplot makes a figure) sets one flag, after which the host shows the figures still open at
//! the end of the turn. A guest can only set that flag for itself: it costs it one hidden turn.
//! A result, and a request that is exactly [`ERROR_TAG`] (sent by the session's excepthook),
//! also mute stdout or stderr for the rest of the turn in what is seen live (a kernel's
//! streams): the echo and the traceback that follow come back in the report instead. A
//! guest can only hide its own output from its own live view.
//!
//! A request that starts with [`TOOLS_TAG`] is a round of code mode's tool calls, answered
//! by [`super::tools`] when the run was given tools; one that starts with [`EGRESS_TAG`] is
//! an outbound HTTP request, answered by [`super::egress`] when the run was granted network.
//!
//! Everything the guest passes is untrusted: pointers are checked against memory, the size is
//! capped, and the bytes are only ever kept as lossy UTF-8 text.

use wasmtime::Caller;

use super::guest_memory::{memory, range};
use super::input;
use super::live_output::StreamKind;
use super::reply::write_reply;
use super::state::GuestState;
use crate::guest::{
    EGRESS_TAG, ERROR_TAG, FIGURE_TAG, INPUT_TAG, MAX_RESULT_BYTES, RESULT_TAG, TOOLS_TAG,
};

pub use super::reply::{ANSWERED, HOST_FAULT, NO_HOST};

/// `call(req_ptr, req_len, out_ptr_ptr, out_len_ptr) -> i32`; an error ends the run (a
/// tool limit's breach, or a cancel while it waited for answers).
pub fn host_call(
    caller: Caller<'_, GuestState>,
    req_ptr: i32,
    req_len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> wasmtime::Result<i32> {
    let len = req_len as u32 as usize;
    let shortest = [FIGURE_TAG, RESULT_TAG, ERROR_TAG, INPUT_TAG, TOOLS_TAG]
        .map(<[u8]>::len)
        .into_iter()
        .min()
        .unwrap_or(0);
    let mut longest = RESULT_TAG.len() + MAX_RESULT_BYTES;
    if caller.data().tools.is_some() {
        longest = longest.max(TOOLS_TAG.len() + super::tools::MAX_ROUND_BYTES);
    }
    if let Some(egress) = &caller.data().egress {
        longest = longest.max(egress.max_request());
    }
    if len < shortest || len > longest {
        return super::tools::beyond_bounds(caller, req_ptr, len);
    }
    door(caller, req_ptr, len, out_ptr_ptr, out_len_ptr)
}

fn door(
    mut caller: Caller<'_, GuestState>,
    req_ptr: i32,
    len: usize,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> wasmtime::Result<i32> {
    let Some(mem) = memory(&mut caller) else {
        return Ok(HOST_FAULT);
    };
    let data = mem.data(&caller);
    let (Some(req), Some(out_ptr), Some(out_len)) = (
        range(data, req_ptr, len),
        range(data, out_ptr_ptr, 4),
        range(data, out_len_ptr, 4),
    ) else {
        return Ok(HOST_FAULT);
    };
    let request = &data[req.clone()];
    if request.starts_with(TOOLS_TAG) {
        let calls = req.start + TOOLS_TAG.len()..req.end;
        return super::tools::round(&mut caller, calls, out_ptr.start, out_len.start);
    }
    if request.starts_with(EGRESS_TAG) {
        let asked = req.start + EGRESS_TAG.len()..req.end;
        return super::egress::request(&mut caller, asked, out_ptr.start, out_len.start);
    }
    if len > RESULT_TAG.len() + MAX_RESULT_BYTES {
        return Ok(NO_HOST);
    }
    if let Some(prompt) = request.strip_prefix(INPUT_TAG) {
        let prompt = String::from_utf8_lossy(prompt).into_owned();
        return Ok(ask_input(&mut caller, prompt, out_ptr.start, out_len.start));
    }
    let said = if request == FIGURE_TAG {
        Said::Figure
    } else if request == ERROR_TAG {
        Said::Error
    } else if let Some(text) = request.strip_prefix(RESULT_TAG) {
        Said::Result(String::from_utf8_lossy(text).into_owned())
    } else {
        return Ok(NO_HOST);
    };
    // An empty answer: null pointer, zero length.
    let data = mem.data_mut(&mut caller);
    data[out_ptr].fill(0);
    data[out_len].fill(0);
    let state = caller.data_mut();
    match said {
        Said::Result(text) => {
            state.last_result = Some(text);
            state.live_output.mute(StreamKind::Stdout);
        }
        Said::Error => state.live_output.mute(StreamKind::Stderr),
        Said::Figure => state.figure_made = true,
    }
    Ok(ANSWERED)
}

/// `input(prompt)` in a turn whose client can answer: the line, written into the guest's
/// memory where its `host_alloc` put room for it (the guest frees it). "No host" without an
/// asker, or when no answer came before the deadline, an interrupt, or the client left: the
/// guest then reads its stdin as any `input()` does.
fn ask_input(
    caller: &mut Caller<'_, GuestState>,
    prompt: String,
    out_ptr: usize,
    out_len: usize,
) -> i32 {
    let state = caller.data();
    let Some(asker) = state.input.clone() else {
        return NO_HOST;
    };
    let clock = state.clock.clone();
    let Some(line) = input::wait(&asker(prompt), || clock.check().is_ok()) else {
        return NO_HOST;
    };
    write_reply(caller, line.as_bytes(), out_ptr, out_len)
}

/// What a request to the door said.
enum Said {
    /// The `repr` of the turn's final value; its echo follows on stdout.
    Result(String),
    /// An uncaught exception's traceback follows on stderr.
    Error,
    /// pyplot made a figure.
    Figure,
}
