//! The `host::call` import: the guest's one door to the host.
//!
//! We offer the guest no tools: any request answers -1 ("no host bound"), which the guest
//! turns into `ConnectionRefusedError` without touching memory. The one exception is the
//! internal result channel of sessions: a request that starts with [`RESULT_TAG`] carries the
//! `repr` of a turn's final expression (sent by the displayhook that
//! [`crate::guest::SESSION_SETUP`] installs), which the host keeps as the turn's `result`;
//! and a request that is exactly [`FIGURE_TAG`] (sent by Vivarium's matplotlib backend when
//! pyplot makes a figure) sets one flag, after which the host shows the figures still open at
//! the end of the turn. A guest can only set that flag for itself: it costs it one hidden turn.
//! A result, and a request that is exactly [`ERROR_TAG`] (sent by the session's excepthook),
//! also mute stdout or stderr for the rest of the turn in what is seen live (a kernel's
//! streams): the echo and the traceback that follow come back in the report instead. A
//! guest can only hide its own output from its own live view.
//!
//! Everything the guest passes is untrusted: pointers are checked against memory, the size is
//! capped, and the bytes are only ever kept as lossy UTF-8 text.

use wasmtime::Caller;

use super::guest_memory::{memory, range};
use super::live_output::StreamKind;
use super::state::GuestState;
use crate::guest::{ERROR_TAG, FIGURE_TAG, MAX_RESULT_BYTES, RESULT_TAG};

const NO_HOST: i32 = -1;
const HOST_FAULT: i32 = -2;
const ANSWERED: i32 = 0;

/// `call(req_ptr, req_len, out_ptr_ptr, out_len_ptr) -> i32`.
pub fn host_call(
    mut caller: Caller<'_, GuestState>,
    req_ptr: i32,
    req_len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> i32 {
    let len = req_len as u32 as usize;
    let shortest = FIGURE_TAG.len().min(RESULT_TAG.len()).min(ERROR_TAG.len());
    if len < shortest || len > RESULT_TAG.len() + MAX_RESULT_BYTES {
        return NO_HOST;
    }
    let Some(mem) = memory(&mut caller) else {
        return HOST_FAULT;
    };
    let data = mem.data(&caller);
    let (Some(req), Some(out_ptr), Some(out_len)) = (
        range(data, req_ptr, len),
        range(data, out_ptr_ptr, 4),
        range(data, out_len_ptr, 4),
    ) else {
        return HOST_FAULT;
    };
    let request = &data[req];
    let said = if request == FIGURE_TAG {
        Said::Figure
    } else if request == ERROR_TAG {
        Said::Error
    } else if let Some(text) = request.strip_prefix(RESULT_TAG) {
        Said::Result(String::from_utf8_lossy(text).into_owned())
    } else {
        return NO_HOST;
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
    ANSWERED
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
