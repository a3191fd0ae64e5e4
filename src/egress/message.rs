//! A request as it crosses from the worker to the supervisor, and what comes back.

use serde::{Deserialize, Serialize};

/// `http` or `https`: which the guest's connection was (the host does the TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS, verified by the host.
    Https,
}

impl Scheme {
    /// Its name in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One request, parsed from the guest's raw HTTP/1.1 (`raw::parse_request`): hostile data
/// to whoever receives it, checked again there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRequest {
    /// Which the guest's connection was.
    pub scheme: Scheme,
    /// The host the guest's connection was made to (not its `Host` header).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The method, as written (upper case once checked).
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// Header lines as written, but `Host`, `Connection`, `Transfer-Encoding`, proxies' and
    /// hop-by-hop headers, which the host sets itself.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
}

impl EgressRequest {
    /// Bytes it carries (target, headers, body): what `request_bytes` bounds.
    pub fn size(&self) -> u64 {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum();
        (self.method.len() + self.target.len() + headers + self.body.len()) as u64
    }
}

/// Why a request was not performed, or did not complete: each a named reason the guest's
/// exception, the run's `network` summary and the audit line carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Refused {
    /// The host (and port) is not on the run's allow list.
    HostNotAllowed,
    /// The name resolved to an address the server does not connect to (private, loopback,
    /// link-local, metadata...), or did not resolve.
    AddressNotAllowed,
    /// A method other than GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS.
    MethodNotAllowed,
    /// The request is larger than `request_bytes`.
    RequestTooLarge,
    /// The response's body is larger than `response_bytes`.
    ResponseTooLarge,
    /// The run made `requests` requests already.
    TooManyRequests,
    /// The request took longer than `request_timeout_ms`.
    RequestTimeout,
    /// The run's requests took `total_ms` in all.
    TotalTime,
    /// The upstream could not be reached or broke off (connection refused, reset).
    UpstreamError,
    /// The upstream's certificate did not verify, or TLS failed.
    TlsError,
    /// The guest's request is not HTTP/1.1 the host can read.
    BadRequest,
    /// The server's memory budget has no room for the response now (it is held while it
    /// crosses to the guest).
    ServerBusy,
}

impl Refused {
    /// Its snake_case name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A refusal with what the guest is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Why.
    pub reason: Refused,
    /// A sentence for the program's exception: never a secret's value.
    pub message: String,
}

impl Refusal {
    /// `reason` with `message`.
    pub fn new(reason: Refused, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }
}

/// What the supervisor answers a request with: the raw HTTP/1.1 response the guest reads
/// (`raw::encode_response`), or a refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressAnswer {
    /// The response, base64 of its raw bytes.
    Raw(String),
    /// Not performed, or not completed.
    Refused(Refusal),
}
