//! Network by exception, the door's side: one outbound HTTP request from the guest
//! (`vivarium_net`, after [`crate::guest::EGRESS_TAG`]), parsed, bounded, handed to whoever
//! performs it (the supervisor: a worker has no network), and answered with the raw
//! response or a refusal ([`crate::guest::REFUSED_TAG`] and its JSON), which the guest
//! raises as an `OSError`.
//!
//! The request is guest output: its size is checked against `request_bytes` before it is
//! parsed, and it leaves as an [`EgressRequest`]. Every policy check (the allow lists, the
//! addresses, the count and the times) is the supervisor's, which audits each request: this
//! side only bounds what it forwards and how long it waits. The wait burns no fuel and moves
//! the run's wall-clock deadline by its length, as a tool call's does.

use std::time::Duration;

use base64::Engine as _;
use wasmtime::Caller;

pub use super::egress_door::{EgressAsker, EgressDoor, MAX_META};
use super::reply::{HOST_FAULT, NO_HOST, write_reply};
use super::state::GuestState;
use crate::egress::{EgressAnswer, EgressRequest, Refusal, Refused, Scheme, raw};
use crate::guest::REFUSED_TAG;

/// How much longer than `request_timeout_ms` the door waits for the supervisor, which times
/// the request itself.
const SLACK: Duration = Duration::from_secs(2);

#[derive(serde::Deserialize)]
struct Meta {
    scheme: Scheme,
    host: String,
    port: u16,
}

/// One request: `request` is the guest's bytes after the tag.
pub fn request(
    caller: &mut Caller<'_, GuestState>,
    request: std::ops::Range<usize>,
    out_ptr: usize,
    out_len: usize,
) -> wasmtime::Result<i32> {
    let Some(mem) = super::guest_memory::memory(caller) else {
        return Ok(HOST_FAULT);
    };
    let (data, state) = mem.data_and_store_mut(&mut *caller);
    let Some(door) = state.egress.as_mut() else {
        return Ok(NO_HOST);
    };
    let bytes = &data[request];
    let limits = door.network.limits;
    let answer = match parse(bytes, limits.request_bytes) {
        Err(refusal) => EgressAnswer::Refused(refusal),
        Ok(req) => {
            let rx = (door.ask)(req);
            let per_request = Duration::from_millis(limits.request_timeout_ms) + SLACK;
            match state.clock.wait_for_host(&rx, per_request).0? {
                Some(line) => serde_json::from_str(&line).unwrap_or_else(|_| {
                    EgressAnswer::Refused(Refusal::new(
                        Refused::UpstreamError,
                        "the host could not answer",
                    ))
                }),
                None => EgressAnswer::Refused(Refusal::new(
                    Refused::RequestTimeout,
                    format!("no response within {} ms", limits.request_timeout_ms),
                )),
            }
        }
    };
    let reply = match answer {
        EgressAnswer::Raw(b64) => match base64::engine::general_purpose::STANDARD.decode(b64) {
            Ok(raw) => raw,
            Err(_) => return Ok(HOST_FAULT),
        },
        EgressAnswer::Refused(r) => {
            let mut out = REFUSED_TAG.to_vec();
            out.extend_from_slice(&serde_json::to_vec(&r).unwrap_or_default());
            out
        }
    };
    Ok(write_reply(caller, &reply, out_ptr, out_len))
}

/// The meta line and the raw request, bounded by `request_bytes`.
fn parse(bytes: &[u8], request_bytes: u64) -> Result<EgressRequest, Refusal> {
    let bad = |m: &str| Refusal::new(Refused::BadRequest, m);
    let nl = bytes
        .iter()
        .take(MAX_META)
        .position(|b| *b == b'\n')
        .ok_or_else(|| bad("the request's destination line is missing"))?;
    let meta: Meta = serde_json::from_slice(&bytes[..nl])
        .map_err(|_| bad("the request's destination line is not {scheme, host, port}"))?;
    let raw = &bytes[nl + 1..];
    if raw.len() as u64 > request_bytes {
        return Err(Refusal::new(
            Refused::RequestTooLarge,
            format!("the request is larger than {request_bytes} bytes"),
        ));
    }
    raw::parse_request(meta.scheme, &meta.host, meta.port, raw)
}
