//! Response bodies that carry held files (`worker::held`: returned files too large to carry
//! in memory, left on disk and claimed by the supervisor) without ever holding one whole in
//! memory: the body is streamed from the open file a piece at a time, base64-encoded inside
//! a JSON document (an execution's result) or raw (a session download). The JSON is the
//! same, byte for byte, as the in-memory response would be.
//!
//! What is in flight (a piece being read and encoded, a few queued toward the client) and the
//! held files' own bytes when they are memory (tmpfs) are charged to the host's memory
//! budget until the body is done or dropped; dropping it closes the files, which frees them.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

use crate::budget::{Charge, HostBudget};
use crate::report::FileOut;
use crate::server::error::{ApiError, ApiResult};
use crate::supervisor::SupervisorError;

/// Bytes of a held file in one piece of a body: a multiple of 3, so that pieces encode to
/// base64 independently and join into the encoding of the whole.
const PIECE_BYTES: usize = 3 << 18;
/// Pieces queued toward the client at most (besides the one being made).
const QUEUED_PIECES: usize = 2;
/// What one streamed body has in flight at most: its pieces raw and encoded, queued or being
/// made, and what the server below has taken of them.
const IN_FLIGHT_BYTES: u64 = (PIECE_BYTES as u64 * 4 / 3 + PIECE_BYTES as u64) * 4;
/// How long a body waits for room in the budget before the request is refused.
const BUDGET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The held files of a result, each standing in its JSON as a placeholder string.
#[derive(Default)]
pub struct HeldContents {
    /// Unguessable: no output of the guest's can spell a placeholder.
    nonce: String,
    files: Vec<(Arc<File>, u64)>,
}

impl HeldContents {
    /// The placeholder `f`'s content stands as in the JSON when it is a held file that was
    /// claimed (its file is taken here), else `None`.
    pub fn take(&mut self, f: &mut FileOut) -> Option<String> {
        let file = f.held.take()?.file?;
        if self.nonce.is_empty() {
            self.nonce = format!("vivarium-held-{:032x}", rand::random::<u128>());
        }
        self.files.push((file, f.size));
        Some(format!("{}-{}", self.nonce, self.files.len() - 1))
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// `value` as a JSON response (as `axum::Json` makes it), each placeholder of `held` in it
/// replaced by its file's content in base64, streamed.
pub fn json_with_held<T: Serialize>(
    value: &T,
    held: HeldContents,
    budget: Arc<HostBudget>,
) -> impl std::future::Future<Output = ApiResult<Response>> + Send + 'static {
    let json = serde_json::to_vec(value);
    async move {
        let json = json.map_err(|e| {
            ApiError::from(SupervisorError::Internal(format!(
                "encoding the result: {e}"
            )))
        })?;
        if held.is_empty() {
            return Ok(json_response(Body::from(json), None));
        }
        let mut pieces = Vec::new();
        let mut rest = &json[..];
        for (i, (file, size)) in held.files.into_iter().enumerate() {
            let mark = format!("\"{}-{i}\"", held.nonce);
            let Some(at) = find(rest, mark.as_bytes()) else {
                return Err(ApiError::from(SupervisorError::Internal(
                    "a held file's place in the result".into(),
                )));
            };
            pieces.push(Piece::Text(rest[..at + 1].to_vec()));
            pieces.push(Piece::File {
                file,
                size,
                base64: true,
            });
            rest = &rest[at + mark.len() - 1..];
        }
        pieces.push(Piece::Text(rest.to_vec()));
        let (body, len) = stream(pieces, &budget).await?;
        Ok(json_response(body, Some(len)))
    }
}

/// A held file's bytes as a response body of `media_type`, streamed.
pub async fn raw_held(
    file: Arc<File>,
    size: u64,
    media_type: &'static str,
    budget: Arc<HostBudget>,
) -> ApiResult<Response> {
    let (body, len) = stream(
        vec![Piece::File {
            file,
            size,
            base64: false,
        }],
        &budget,
    )
    .await?;
    let mut resp = (StatusCode::OK, body).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    Ok(resp)
}

fn json_response(body: Body, len: Option<u64>) -> Response {
    let mut resp = (StatusCode::OK, body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(len) = len {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    resp
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

enum Piece {
    Text(Vec<u8>),
    File {
        file: Arc<File>,
        size: u64,
        base64: bool,
    },
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Text(t) => t.len() as u64,
            Piece::File { size, base64, .. } if *base64 => size.div_ceil(3) * 4,
            Piece::File { size, .. } => *size,
        }
    }
}

/// The body that sends `pieces` in order, a file a piece at a time from a blocking thread,
/// and its length; the budget charge it holds meanwhile.
async fn stream(pieces: Vec<Piece>, budget: &Arc<HostBudget>) -> ApiResult<(Body, u64)> {
    let len = pieces.iter().map(Piece::len).sum();
    let resident: u64 = pieces
        .iter()
        .map(|p| match p {
            Piece::File { file, size, .. } if crate::report::in_memory(file) => *size,
            _ => 0,
        })
        .sum();
    let need = resident + IN_FLIGHT_BYTES;
    let until = tokio::time::Instant::now() + BUDGET_WAIT;
    let charge = budget
        .charge_with_room_until(need, need, until, || false)
        .await
        .ok_or_else(|| ApiError::from(SupervisorError::Overloaded {
            message: format!(
                "the server's memory budget has no room for the {need} bytes this response holds while it is sent"
            ),
            retry_after_secs: 1,
        }))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(QUEUED_PIECES);
    tokio::task::spawn_blocking(move || produce(pieces, &tx, charge));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| (piece, rx))
    });
    Ok((Body::from_stream(body), len))
}

/// Sends each piece, until done or the body is dropped (the client went away); the charge
/// and the files go with it.
fn produce(
    pieces: Vec<Piece>,
    tx: &tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    _charge: Charge,
) {
    let mut buf = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => {
                if tx.blocking_send(Ok(Bytes::from(t))).is_err() {
                    return;
                }
            }
            Piece::File { file, size, base64 } => {
                let mut at = 0u64;
                while at < size {
                    let n = (size - at).min(PIECE_BYTES as u64) as usize;
                    buf.resize(n, 0);
                    let out = match file.read_exact_at(&mut buf, at) {
                        Ok(()) if base64 => Ok(Bytes::from(STANDARD.encode(&buf))),
                        Ok(()) => Ok(Bytes::copy_from_slice(&buf)),
                        // Cut short under us: the body fails (the client sees a broken
                        // response, never a wrong one).
                        Err(e) => Err(e),
                    };
                    let failed = out.is_err();
                    if tx.blocking_send(out).is_err() || failed {
                        return;
                    }
                    at += n as u64;
                }
            }
        }
    }
}
