//! Raw HTTP/1.1 both ways: the guest's request as its client wrote it on its (door) socket,
//! parsed into an [`EgressRequest`]; a response written back as one raw HTTP/1.1 message
//! with `Content-Length` and `Connection: close`, which every client reads the same way.

use super::message::{EgressRequest, Refusal, Refused, Scheme};

/// Header lines a request may carry at most.
const MAX_HEADERS: usize = 128;

/// Methods a request may use; CONNECT and TRACE never leave.
pub const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Request headers the host sets itself (or that make no sense through it): dropped from the
/// guest's. `Accept-Encoding` goes as `identity`, so a response is read (and a secret's value
/// masked) as the upstream wrote it.
const HOST_SET: [&str; 10] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "accept-encoding",
    "expect",
];

/// Response headers the raw message sets itself.
const FRAMING: [&str; 4] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
];

fn bad(message: impl Into<String>) -> Refusal {
    Refusal::new(Refused::BadRequest, message)
}

/// Parses the guest's `raw` request on a connection to `scheme://host:port`.
pub fn parse_request(
    scheme: Scheme,
    host: &str,
    port: u16,
    raw: &[u8],
) -> Result<EgressRequest, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(bad("the request's head is incomplete")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(bad(format!("more than {MAX_HEADERS} header lines")));
        }
        Err(e) => return Err(bad(format!("the request is not HTTP/1.1: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or_default().to_string();
    if !(target.starts_with('/') || (target == "*" && method == "OPTIONS")) {
        return Err(bad(
            "the request target is not a path (proxies are not supported)",
        ));
    }
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut kept = Vec::new();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = std::str::from_utf8(h.value)
            .map_err(|_| bad(format!("header {} is not UTF-8", h.name)))?;
        match name.as_str() {
            "content-length" => {
                let n = value
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| bad("Content-Length is not a number"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(bad("two different Content-Length headers"));
                }
                length = Some(n);
            }
            "transfer-encoding" => {
                if !value.trim().eq_ignore_ascii_case("chunked") {
                    return Err(bad(format!("Transfer-Encoding {value:?} is not supported")));
                }
                chunked = true;
            }
            n if HOST_SET.contains(&n) => {}
            _ => kept.push((h.name.to_string(), value.to_string())),
        }
    }
    let rest = &raw[head..];
    let body = match (chunked, length) {
        (true, Some(_)) => return Err(bad("both Content-Length and chunked")),
        (true, None) => dechunk(rest)?,
        (false, Some(n)) if rest.len() >= n => rest[..n].to_vec(),
        (false, Some(_)) => return Err(bad("the body is shorter than its Content-Length")),
        (false, None) => rest.to_vec(),
    };
    Ok(EgressRequest {
        scheme,
        host: super::rule::normalize_host(host),
        port,
        method,
        target,
        headers: kept,
        body,
    })
}

/// A chunked body's data (trailers ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::new();
    loop {
        let (start, size) = match httparse::parse_chunk_size(rest) {
            Ok(httparse::Status::Complete(v)) => v,
            _ => return Err(bad("the chunked body is malformed")),
        };
        let size = usize::try_from(size).map_err(|_| bad("a chunk is too large"))?;
        rest = &rest[start..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 || &rest[size..size + 2] != b"\r\n" {
            return Err(bad("the chunked body is cut short"));
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// The raw HTTP/1.1 message the guest reads: status line, the upstream's headers but its
/// framing, then `Content-Length` and `Connection: close`, then the body.
pub fn encode_response(
    status: u16,
    reason: &str,
    headers: &[(String, Vec<u8>)],
    body: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(format!("HTTP/1.1 {status} {reason}\r\n").as_bytes());
    for (name, value) in headers {
        if FRAMING.contains(&name.to_ascii_lowercase().as_str())
            || value.iter().any(|b| *b == b'\r' || *b == b'\n')
        {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_parsed_with_its_body_and_without_the_hosts_headers() {
        let raw = b"POST /x?y=1 HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 5\r\nX-A: b\r\nAccept-Encoding: gzip\r\n\r\nhelloEXTRA";
        let r = parse_request(Scheme::Https, "API.test.", 443, raw).unwrap();
        assert_eq!(r.host, "api.test");
        assert_eq!(r.method, "POST");
        assert_eq!(r.target, "/x?y=1");
        assert_eq!(r.headers, vec![("X-A".to_string(), "b".to_string())]);
        assert_eq!(r.body, b"hello");
    }

    #[test]
    fn a_chunked_body_is_joined_and_bad_framing_is_refused() {
        let raw =
            b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let r = parse_request(Scheme::Http, "a.test", 80, raw).unwrap();
        assert_eq!(r.body, b"abcde");
        for raw in [
            &b"GET http://a.test/ HTTP/1.1\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"GET /",
        ] {
            let e = parse_request(Scheme::Http, "a.test", 80, raw).unwrap_err();
            assert_eq!(e.reason, Refused::BadRequest, "{raw:?}");
        }
    }

    #[test]
    fn a_response_is_framed_by_the_host() {
        let out = encode_response(
            200,
            "OK",
            &[
                ("Transfer-Encoding".into(), b"chunked".to_vec()),
                ("X-Y".into(), b"z".to_vec()),
            ],
            b"body",
        );
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nX-Y: z\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody"
        );
    }
}
