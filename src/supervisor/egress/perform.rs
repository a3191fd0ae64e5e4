//! One request, start to end: checked, secrets put in, performed, read within bounds,
//! decoded and secrets masked within the same bounds (off the executor), answered, audited.

use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::header::{HeaderName, HeaderValue};

use super::resolve::AddressRefused;
use super::{Egress, RunEgress};
use crate::budget::Charge;
use crate::egress::encoding::{self, Coding, DecodeError};
use crate::egress::mask::{Bounds, Masker, Overflow};
use crate::egress::{EgressAnswer, EgressRequest, Refusal, Refused, TooLargeWithValues, raw};
use crate::supervisor::audit::{Audit, EgressLine};
use crate::sync::lock;

/// The copies of a response the supervisor holds at once as it answers (the body, the raw
/// frame, its base64 and the JSON line around it): what is charged to the memory budget.
const COPIES: u64 = 4;

/// A response as read: status, reason, headers, body, and its charge.
struct Got {
    status: u16,
    reason: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    held: Charge,
}

impl Egress {
    /// Performs `req` for `run`: its answer for the guest, and the charge of its response,
    /// held until the answer is handed on; its audit line to `audit`.
    pub(super) async fn perform(
        &self,
        run: &RunEgress,
        mut req: EgressRequest,
        audit: &Audit,
    ) -> (EgressAnswer, Option<Charge>) {
        let started = Instant::now();
        let mut line = EgressLine {
            method: req.method.chars().take(16).collect(),
            // The program's word: shown with the run's secrets' values redacted.
            host: run.shown_host(&req.host),
            port: req.port,
            scheme: req.scheme.as_str(),
            ..EgressLine::default()
        };
        let outcome = match self.admit(run, &req) {
            Err(r) => Err(r),
            Ok(left) => match run
                .secrets
                .substitute(&mut req, run.network.limits.request_bytes)
            {
                Err(TooLargeWithValues) => Err(Refusal::new(
                    Refused::RequestTooLarge,
                    format!(
                        "the request is larger than {} bytes with the secrets' values in it",
                        run.network.limits.request_bytes
                    ),
                )),
                Ok(done) => {
                    line.secrets = done.used;
                    line.misdirected = done.misdirected;
                    line.bytes_sent = req.size();
                    let timeout = Duration::from_millis(run.network.limits.request_timeout_ms);
                    let total_binds = left < timeout;
                    let result = self.send(run, req, timeout.min(left)).await;
                    let spent = started.elapsed();
                    lock(&run.usage).spent += spent;
                    result.map_err(|r| match r.reason {
                        Refused::RequestTimeout if total_binds => Refusal::new(
                            Refused::TotalTime,
                            format!(
                                "the run's requests took {} ms in all",
                                run.network.limits.total_ms
                            ),
                        ),
                        _ => r,
                    })
                }
            },
        };
        line.ms = started.elapsed().as_secs_f64() * 1e3;
        let mut held = None;
        let answer = match outcome {
            Ok(got) => {
                line.status = Some(got.status);
                line.bytes_received = got.body.len() as u64;
                {
                    let mut u = lock(&run.usage);
                    u.report.bytes_sent += line.bytes_sent;
                    u.report.bytes_received += line.bytes_received;
                }
                let outcome = match got.status {
                    100..=199 => "1xx",
                    200..=299 => "2xx",
                    300..=399 => "3xx",
                    400..=499 => "4xx",
                    _ => "5xx",
                };
                self.count(run, &line.host, line.port, outcome);
                let bytes = raw::encode_response(got.status, &got.reason, &got.headers, &got.body);
                held = Some(got.held);
                EgressAnswer::Raw(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            Err(refusal) => {
                line.refused = Some(refusal.reason);
                run.refused(&line.host, line.port, refusal.reason);
                self.count(run, &line.host, line.port, refusal.reason.as_str());
                EgressAnswer::Refused(refusal)
            }
        };
        // Its span says where to (the host as shown: no secret's value) and how it went.
        let span = tracing::Span::current();
        span.record("server.address", line.host.as_str());
        match (line.status, line.refused) {
            (Some(status), _) => span.record("http.response.status_code", status),
            (None, Some(refused)) => span.record("vivarium.refused", refused.as_str()),
            _ => &span,
        };
        span.record("vivarium.bytes_sent", line.bytes_sent);
        span.record("vivarium.bytes_received", line.bytes_received);
        // A program past its count may knock on the door in a loop: its first refusal is
        // audited, the rest only counted (the result's `network.requests` has them all).
        let past_count = lock(&run.usage).report.requests > run.network.limits.requests + 1;
        if !(past_count && line.refused == Some(Refused::TooManyRequests)) {
            let mut record = run.record.clone();
            record.time = crate::supervisor::time::rfc3339_now();
            record.egress = Some(line);
            audit.write(record);
        }
        (answer, held)
    }

    /// Counts the request and checks it against the grant: the time the run has left for
    /// it, or the refusal.
    fn admit(&self, run: &RunEgress, req: &EgressRequest) -> Result<Duration, Refusal> {
        let limits = run.network.limits;
        {
            let mut u = lock(&run.usage);
            u.report.requests = u.report.requests.saturating_add(1);
            if u.report.requests > limits.requests {
                return Err(Refusal::new(
                    Refused::TooManyRequests,
                    format!("a run may make {} requests", limits.requests),
                ));
            }
            if u.spent >= Duration::from_millis(limits.total_ms) {
                return Err(Refusal::new(
                    Refused::TotalTime,
                    format!("the run's requests took {} ms in all", limits.total_ms),
                ));
            }
        }
        if !crate::egress::valid_host(&req.host) {
            return Err(Refusal::new(
                Refused::BadRequest,
                "the host is not a host name or an IP address",
            ));
        }
        if !raw::METHODS.contains(&req.method.as_str()) {
            return Err(Refusal::new(
                Refused::MethodNotAllowed,
                format!("method {:?} is not allowed", req.method),
            ));
        }
        if req.size() > limits.request_bytes {
            return Err(Refusal::new(
                Refused::RequestTooLarge,
                format!("the request is larger than {} bytes", limits.request_bytes),
            ));
        }
        if !run.network.permits(&req.host, req.port) {
            return Err(Refusal::new(
                Refused::HostNotAllowed,
                format!("{}:{} is not on this run's allow list", req.host, req.port),
            ));
        }
        // An IP literal is not resolved: its address is checked here.
        if let Ok(ip) = req.host.parse::<std::net::IpAddr>()
            && !self.addresses.permits(ip)
        {
            return Err(Refusal::new(
                Refused::AddressNotAllowed,
                format!("{ip} is an address this server does not connect to"),
            ));
        }
        let spent = lock(&run.usage).spent;
        Ok(Duration::from_millis(limits.total_ms).saturating_sub(spent))
    }

    /// Sends and reads the response within `timeout` and `response_bytes`.
    async fn send(
        &self,
        run: &RunEgress,
        req: EgressRequest,
        timeout: Duration,
    ) -> Result<Got, Refusal> {
        let bad = |m: String| Refusal::new(Refused::BadRequest, m);
        let host = if req.host.contains(':') {
            format!("[{}]", req.host)
        } else {
            req.host.clone()
        };
        let url = format!(
            "{}://{host}:{}{}",
            req.scheme.as_str(),
            req.port,
            req.target
        );
        let url = reqwest::Url::parse(&url).map_err(|e| bad(format!("the URL: {e}")))?;
        // The request goes to the host that was checked, or nowhere.
        // (A name the URL parser reads as an address, `127.1`, is not the name checked.)
        let shown = url.host_str().map(crate::egress::normalize_host);
        let same = match (shown, req.host.parse::<std::net::IpAddr>()) {
            (Some(s), Ok(ip)) => s.parse::<std::net::IpAddr>() == Ok(ip),
            (Some(s), Err(_)) => s == req.host,
            (None, _) => false,
        };
        if !same || url.port_or_known_default() != Some(req.port) {
            return Err(bad("the URL does not name the host that was checked".into()));
        }
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| bad("the method".into()))?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &req.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| bad(format!("header name {k:?}")))?;
            let value =
                HeaderValue::from_str(v).map_err(|_| bad(format!("the value of header {k}")))?;
            headers.append(name, value);
        }
        headers.insert(
            reqwest::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        let limit = run.network.limits.response_bytes;
        let deadline = Instant::now() + timeout;
        let request = self
            .client
            .request(method, url)
            .headers(headers)
            .body(req.body)
            .timeout(timeout);
        let work = async {
            let mut resp = request.send().await.map_err(|e| classify(&e, timeout))?;
            let status = resp.status();
            let headers: Vec<(String, Vec<u8>)> = resp
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec()))
                .collect();
            if resp.content_length().is_some_and(|n| n > limit) {
                return Err(too_large(limit));
            }
            let mut body = Vec::new();
            let mut held = run.budget.empty();
            while let Some(chunk) = resp.chunk().await.map_err(|e| classify(&e, timeout))? {
                if body.len() as u64 + chunk.len() as u64 > limit {
                    return Err(too_large(limit));
                }
                if !held.grow(chunk.len() as u64 * COPIES) {
                    return Err(no_room());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Got {
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_string(),
                headers,
                body,
                held,
            })
        };
        let got = tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| timed_out(timeout))??;
        if run.secrets.is_empty() {
            if head_bytes(&got.headers) + got.body.len() as u64 > limit {
                return Err(too_large(limit));
            }
            return Ok(got);
        }
        // Decoding and masking are CPU work on bytes already read: off the executor, by the
        // request's deadline (the work looks at the clock itself; the answer does not wait).
        let masker = run.secrets.masker();
        let job = tokio::task::spawn_blocking(move || rebuild(got, &masker, limit, deadline));
        match tokio::time::timeout_at(deadline.into(), job).await {
            Err(_) => Err(timed_out(timeout)),
            Ok(Err(_)) => Err(Refusal::new(
                Refused::UpstreamError,
                "the response could not be checked for secrets",
            )),
            Ok(Ok(rebuilt)) => rebuilt.map_err(|stop| match stop {
                Stop::Bound(o) => overflow(o, limit, timeout),
                Stop::Refused(r) => r,
            }),
        }
    }
}

/// Why a rebuild stopped: a bound, or a response that cannot be checked.
enum Stop {
    Bound(Overflow),
    Refused(Refusal),
}

impl From<Overflow> for Stop {
    fn from(o: Overflow) -> Self {
        Stop::Bound(o)
    }
}

/// The bytes of `headers` as the program reads them (`name: value` and a line break each).
fn head_bytes(headers: &[(String, Vec<u8>)]) -> u64 {
    headers
        .iter()
        .map(|(k, v)| (k.len() + v.len() + 4) as u64)
        .sum()
}

/// The response as the program reads it, for a run with secrets: every content coding
/// undone, last applied first (one the host cannot decode is refused: a value in it could
/// not be masked); then every value masked in header names, header values and the body.
/// Each step is bounded by `limit` (the last by headers and body together: what the program
/// receives, placeholders and all), charged to the memory budget before it allocates, and
/// stopped at `deadline`; the step's input and its charge are let go when it is done.
fn rebuild(got: Got, masker: &Masker, limit: u64, deadline: Instant) -> Result<Got, Stop> {
    let Got {
        status,
        reason,
        headers,
        mut body,
        mut held,
    } = got;
    let codings = encoding::codings(&headers);
    let decoded = codings.iter().any(|c| *c != Coding::Identity);
    for coding in codings.iter().rev().filter(|c| **c != Coding::Identity) {
        let mut step = held.sibling();
        let mut room = |n: u64| step.grow(n.saturating_mul(COPIES));
        let out = encoding::decode(coding, &body, &mut Bounds::new(limit, deadline, &mut room));
        body = out.map_err(|e| match e {
            DecodeError::Bound(o) => Stop::Bound(o),
            DecodeError::Unsupported(name) => Stop::Refused(Refusal::new(
                Refused::UpstreamError,
                format!("a response in {name:?} encoding cannot be checked for secrets"),
            )),
            DecodeError::Corrupt(why) => Stop::Refused(Refusal::new(
                Refused::UpstreamError,
                format!("the response did not decode: {why}"),
            )),
        })?;
        held = step;
    }
    let mut step = held.sibling();
    let mut room = |n: u64| step.grow(n.saturating_mul(COPIES));
    let mut bounds = Bounds::new(limit, deadline, &mut room);
    let mut masked = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        // The body is decoded: what said it was not goes.
        if decoded && encoding::is_content_encoding(&name) {
            continue;
        }
        let (mut n, mut v) = (Vec::new(), Vec::new());
        masker.mask_name(name.as_bytes(), &mut n, &mut bounds)?;
        masker.mask(&value, &mut v, &mut bounds)?;
        bounds.count(4)?;
        // A name is a token and a placeholder is letters, digits and `_`: still a token.
        masked.push((String::from_utf8_lossy(&n).into_owned(), v));
    }
    let mut out = Vec::new();
    masker.mask(&body, &mut out, &mut bounds)?;
    drop(body);
    Ok(Got {
        status,
        reason,
        headers: masked,
        body: out,
        held: step,
    })
}

fn overflow(o: Overflow, limit: u64, timeout: Duration) -> Refusal {
    match o {
        Overflow::TooLarge => too_large(limit),
        Overflow::NoRoom => no_room(),
        Overflow::TimedOut => timed_out(timeout),
        Overflow::NoAutomaton => Refusal::new(
            Refused::UpstreamError,
            "the response could not be checked for secrets",
        ),
    }
}

fn too_large(limit: u64) -> Refusal {
    Refusal::new(
        Refused::ResponseTooLarge,
        format!(
            "the response (headers and body, as the program reads them) is larger than {limit} bytes"
        ),
    )
}

fn no_room() -> Refusal {
    Refusal::new(
        Refused::ServerBusy,
        "the server's memory budget has no room for this response now",
    )
}

fn timed_out(timeout: Duration) -> Refusal {
    Refusal::new(
        Refused::RequestTimeout,
        format!("no complete response within {} ms", timeout.as_millis()),
    )
}

/// Names a client error: a refused address (found in its chain), a timeout, TLS, or the
/// upstream. The message is ours, never the error's text: that holds the URL, in which a
/// secret's value may have been put.
fn classify(e: &reqwest::Error, timeout: Duration) -> Refusal {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut chain = Vec::new();
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<AddressRefused>() {
            return Refusal::new(Refused::AddressNotAllowed, refused.to_string());
        }
        chain.push(s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        return timed_out(timeout);
    }
    let text = chain.join(": ").to_ascii_lowercase();
    if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
        return Refusal::new(
            Refused::TlsError,
            "the upstream's certificate did not verify, or TLS failed",
        );
    }
    let why = if e.is_connect() {
        "the upstream could not be reached"
    } else {
        "the upstream broke off the exchange"
    };
    Refusal::new(Refused::UpstreamError, why)
}
