//! The Connect protocol as envd speaks it, with the JSON codec: a unary call is a POST of
//! the request message as JSON answered with the response message (or an error: an HTTP
//! status and `{"code", "message"}`); a server-streaming call sends and answers
//! enveloped messages (a flags byte, a 4-byte big-endian length, the JSON), the last one
//! flagged end-of-stream and holding the error, if any.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::server::error::{ApiError, OnWire, Wire};
use crate::supervisor::ErrorCode;

/// Content type of a streaming call's messages.
pub const STREAM_JSON: &str = "application/connect+json";
/// Flag of the last message of a stream.
const END_STREAM: u8 = 0x02;
/// The largest request envelope taken (a process' start request).
pub const MAX_ENVELOPE: usize = 1 << 20;

/// A Connect error code (the closed set the protocol names, those used here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Unimplemented,
    Internal,
    Unavailable,
    Unauthenticated,
}

impl Code {
    fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "invalid_argument",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a unary error, as the protocol maps it.
    fn status(self) -> StatusCode {
        match self {
            Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }

    /// The code a guest program's error names (`filesystem.rs`'s).
    pub fn named(name: &str) -> Code {
        match name {
            "not_found" => Code::NotFound,
            "already_exists" => Code::AlreadyExists,
            "permission_denied" => Code::PermissionDenied,
            "invalid_argument" => Code::InvalidArgument,
            "resource_exhausted" => Code::ResourceExhausted,
            _ => Code::Internal,
        }
    }

    /// Vivarium's code for an audit line of a call that failed with this one.
    fn vivarium_code(self) -> ErrorCode {
        match self {
            Code::InvalidArgument | Code::FailedPrecondition | Code::AlreadyExists => {
                ErrorCode::InvalidRequest
            }
            Code::NotFound => ErrorCode::NotFound,
            Code::PermissionDenied => ErrorCode::InvalidPath,
            Code::ResourceExhausted => ErrorCode::PayloadTooLarge,
            Code::Unimplemented => ErrorCode::NotFound,
            Code::Unauthenticated => ErrorCode::Unauthorized,
            Code::Internal => ErrorCode::Internal,
            Code::Unavailable => ErrorCode::NotReady,
        }
    }
}

/// A Connect error: its code and message.
#[derive(Debug)]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ConnectError {
            code,
            message: message.into(),
        }
    }

    fn body(&self) -> Value {
        json!({"code": self.code.as_str(), "message": self.message})
    }
}

/// A call's failure for its audit line: the status it is answered with, and Vivarium's
/// nearest code.
impl OnWire for ConnectError {
    fn wire(&self) -> Wire {
        Wire::new(self.code.status(), self.code.vivarium_code())
    }
}

/// A Vivarium error as Connect names it (the message led by Vivarium's stable code).
impl From<ApiError> for ConnectError {
    fn from(e: ApiError) -> Self {
        let code = match e.status() {
            StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => Code::InvalidArgument,
            StatusCode::NOT_FOUND | StatusCode::GONE => Code::NotFound,
            StatusCode::UNAUTHORIZED => Code::Unauthenticated,
            StatusCode::FORBIDDEN => Code::PermissionDenied,
            StatusCode::CONFLICT => Code::FailedPrecondition,
            StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
            StatusCode::UNPROCESSABLE_ENTITY => Code::PermissionDenied,
            _ => Code::Internal,
        };
        ConnectError::new(code, format!("{}: {}", e.code().as_str(), e))
    }
}

impl From<crate::supervisor::SupervisorError> for ConnectError {
    fn from(e: crate::supervisor::SupervisorError) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        (self.code.status(), axum::Json(self.body())).into_response()
    }
}

/// A unary call's answer.
pub type Unary = Result<axum::Json<Value>, ConnectError>;

/// One enveloped message.
pub fn envelope(message: &Value) -> Bytes {
    frame(0, message)
}

/// The end of a stream: `{}`, or the error.
pub fn end_stream(error: Option<&ConnectError>) -> Bytes {
    let body = match error {
        None => json!({}),
        Some(e) => json!({"error": e.body()}),
    };
    frame(END_STREAM, &body)
}

fn frame(flags: u8, message: &Value) -> Bytes {
    let payload = message.to_string();
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(flags);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload.as_bytes());
    Bytes::from(out)
}

/// The one message of a server-streaming call's request (an envelope, or, from a client
/// that sent it bare, the JSON itself).
pub fn unwrap_request(body: &[u8]) -> Result<Value, ConnectError> {
    let bad = |why: &str| ConnectError::new(Code::InvalidArgument, why.to_string());
    let payload = match body.first() {
        Some(0) if body.len() >= 5 => {
            let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
            if len > MAX_ENVELOPE || body.len() != 5 + len {
                return Err(bad("the request envelope's length does not match its body"));
            }
            &body[5..]
        }
        Some(1) => return Err(bad("compressed messages are not accepted")),
        _ => body,
    };
    serde_json::from_slice(payload).map_err(|e| bad(&format!("the request message: {e}")))
}

/// The headers of a streaming answer.
pub fn stream_headers() -> [(header::HeaderName, &'static str); 1] {
    [(header::CONTENT_TYPE, STREAM_JSON)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip() {
        let m = json!({"event": {"start": {"pid": 1}}});
        let framed = envelope(&m);
        assert_eq!(framed[0], 0);
        assert_eq!(unwrap_request(&framed).unwrap(), m);
        let end = end_stream(None);
        assert_eq!(end[0], END_STREAM);
        assert_eq!(&end[5..], b"{}");
    }

    #[test]
    fn a_bad_envelope_is_refused() {
        let mut framed = envelope(&json!({"a": 1})).to_vec();
        framed.push(b' ');
        assert_eq!(
            unwrap_request(&framed).unwrap_err().code,
            Code::InvalidArgument
        );
        assert_eq!(
            unwrap_request(&[1, 0, 0, 0, 0]).unwrap_err().code,
            Code::InvalidArgument
        );
    }
}
