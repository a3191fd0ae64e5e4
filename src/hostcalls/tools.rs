//! Code mode's door: a round of tool calls from the guest (`vivarium_tools`, after
//! [`crate::guest::TOOLS_TAG`]), checked, handed to whoever answers them, and answered.
//!
//! The request is guest output: a JSON list of `{name, arguments}`, bounded, each call
//! counted against `calls` and sized against `argument_bytes` (a breach ends the run, named),
//! then checked against its tool's schema (a call that does not fit is answered at once with
//! the `TypeError` or `ValueError` the guest raises; it never leaves). The valid calls get
//! ids (`call_<n>`, counted over the execution, so a replay names them alike) and go to the
//! [`ToolAsker`] in one round; the guest thread waits for their answers, never past
//! `tool_timeout_ms` for the round or `total_wait_ms` in all, and stops at a cancel. The wait
//! burns no fuel and moves the run's wall-clock deadline by its length: `timeout_ms` counts
//! the program's own time.

use std::time::Duration;

use serde_json::{Value, json};
use wasmtime::Caller;

use super::reply::{HOST_FAULT, NO_HOST, write_reply};
use super::state::{GuestState, Interrupted};
pub use super::tool_door::{MAX_ROUND_BYTES, ToolAsker, ToolDoor};
use crate::guest::TOOLS_TAG;
use crate::tools::{Answer, Answered, ToolBreach, ToolCall};

/// One call as the guest sends it, its arguments left as the guest's text until their size
/// is checked (a round of small JSON values would take many times its size as `Value`s).
#[derive(serde::Deserialize)]
struct Asked<'a> {
    name: String,
    #[serde(borrow)]
    arguments: &'a serde_json::value::RawValue,
}

/// A round of calls: `request` is the guest's JSON after the tag.
pub fn round(
    caller: &mut Caller<'_, GuestState>,
    request: std::ops::Range<usize>,
    out_ptr: usize,
    out_len: usize,
) -> wasmtime::Result<i32> {
    let Some(mem) = super::guest_memory::memory(caller) else {
        return Ok(HOST_FAULT);
    };
    if request.len() > MAX_ROUND_BYTES {
        return Err(round_too_large());
    }
    let (data, state) = mem.data_and_store_mut(&mut *caller);
    let asked: Vec<Asked> = match serde_json::from_slice(&data[request]) {
        Ok(a) => a,
        Err(_) => return Ok(HOST_FAULT),
    };
    let Some(door) = state.tools.as_mut() else {
        return Ok(NO_HOST);
    };
    let limits = door.limits;
    if u64::from(door.calls) + asked.len() as u64 > u64::from(limits.calls) {
        return Err(Interrupted::Tool(ToolBreach::Calls(limits.calls)).into());
    }
    // What each call got, in the guest's order: refused here, or sent as `call_<n>`.
    let mut answers: Vec<Result<String, Value>> = Vec::with_capacity(asked.len());
    let mut round = Vec::new();
    for a in asked {
        if a.arguments.get().len() as u64 > limits.argument_bytes {
            return Err(Interrupted::Tool(ToolBreach::ArgumentBytes(limits.argument_bytes)).into());
        }
        let Ok(arguments) = serde_json::from_str::<Value>(a.arguments.get()) else {
            return Ok(HOST_FAULT);
        };
        door.calls += 1;
        match door.validators.check(&a.name, &arguments) {
            Err(e) => answers.push(Err(json!({
                "error": {"type": format!("{:?}", e.kind), "message": e.message}
            }))),
            Ok(()) => {
                let call_id = format!("call_{}", door.calls);
                answers.push(Ok(call_id.clone()));
                round.push(ToolCall {
                    call_id,
                    name: a.name,
                    arguments,
                });
            }
        }
    }
    let mut got: Vec<Answer> = Vec::new();
    if !round.is_empty() {
        let rx = (door.ask)(round);
        let per_round = Duration::from_millis(limits.tool_timeout_ms);
        let left = Duration::from_millis(limits.total_wait_ms).saturating_sub(door.waited);
        let (reply, waited) = state.clock.wait_for_host(&rx, per_round.min(left));
        door.waited += waited;
        let reply = reply?.ok_or(Interrupted::Tool(if left <= per_round {
            ToolBreach::TotalWait(limits.total_wait_ms)
        } else {
            ToolBreach::CallWait(limits.tool_timeout_ms)
        }))?;
        got = parse(&reply);
    }
    let reply: Vec<Value> = answers
        .into_iter()
        .map(|a| match a {
            Err(refused) => refused,
            Ok(id) => match got.iter().position(|g| g.call_id == id) {
                Some(i) => match &got.swap_remove(i).answered {
                    Answered::Result(v) => json!({ "result": v }),
                    Answered::Error(e) => json!({ "error": e }),
                },
                None => json!({"error": {"type": "RuntimeError", "message": format!("{id} was not answered")}}),
            },
        })
        .collect();
    let bytes = serde_json::to_vec(&reply).unwrap_or_default();
    Ok(write_reply(caller, &bytes, out_ptr, out_len))
}

/// A request longer than the door takes (`door::host_call`): a round of tool calls, in a run
/// given tools, past [`MAX_ROUND_BYTES`] ends the run as `tool_limit`, named (only its tag is
/// read); anything else has no host, as every request out of bounds.
pub fn beyond_bounds(
    mut caller: Caller<'_, GuestState>,
    req_ptr: i32,
    len: usize,
) -> wasmtime::Result<i32> {
    if caller.data().tools.is_none() || len <= TOOLS_TAG.len() + MAX_ROUND_BYTES {
        return Ok(NO_HOST);
    }
    let Some(mem) = super::guest_memory::memory(&mut caller) else {
        return Ok(HOST_FAULT);
    };
    let data = mem.data(&caller);
    let Some(whole) = super::guest_memory::range(data, req_ptr, len) else {
        return Ok(NO_HOST);
    };
    if data[whole].starts_with(TOOLS_TAG) {
        return Err(round_too_large());
    }
    Ok(NO_HOST)
}

/// The breach of a round past [`MAX_ROUND_BYTES`].
fn round_too_large() -> wasmtime::Error {
    Interrupted::Tool(ToolBreach::RoundBytes(MAX_ROUND_BYTES as u64)).into()
}

/// The answers as the supervisor sends them (it bounded and checked them); what does not
/// parse answers nothing, and each call left unanswered raises in the guest.
fn parse(reply: &str) -> Vec<Answer> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(reply) else {
        return Vec::new();
    };
    items
        .into_iter()
        .filter_map(|v| Answer::from_value(v, u64::MAX).ok())
        .collect()
}
