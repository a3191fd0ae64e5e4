//! Optional API keys. With `--api-keys-file`, every `/v1` call must carry
//! `Authorization: Bearer KEY` for a key in the file, else 401. Keys are kept only as SHA-256
//! digests and never logged: logs and the audit trail name a key by its id (the `ID:` prefix
//! in the file, or `key-` and the first 8 hex digits of its digest).

use std::path::Path;

use anyhow::{Context, bail};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppState;
use super::audit::{Action, AuditRecord};
use super::error::ApiError;
use super::metrics::Rejection;
use super::request_context::RequestContext;

pub struct ApiKeys {
    keys: Vec<(String, [u8; 32])>,
}

impl ApiKeys {
    /// Reads `ID:KEY` or `KEY` lines; blank lines and `#` comments are skipped.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading API keys file {}", path.display()))?;
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, key) = match line.split_once(':') {
                Some((id, key)) => (id.trim().to_string(), key.trim()),
                None => (String::new(), line),
            };
            if key.len() < 16 {
                bail!(
                    "{} line {}: keys must be at least 16 characters",
                    path.display(),
                    n + 1
                );
            }
            let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
            let id = if id.is_empty() {
                format!("key-{}", &hex::encode(digest)[..8])
            } else {
                id
            };
            keys.push((id, digest));
        }
        if keys.is_empty() {
            bail!("{} holds no API keys", path.display());
        }
        Ok(ApiKeys { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The id of the key `presented`, comparing digests in constant time.
    pub fn check(&self, presented: &str) -> Option<&str> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (id, k) in &self.keys {
            let diff = k
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                found = Some(id.as_str());
            }
        }
        found
    }
}

/// The key a request presents: `Authorization: Bearer KEY`, or the forms Jupyter's clients
/// send on Jupyter's routes ([`jupyter_path`]: `Authorization: token KEY`, and `?token=KEY`,
/// the only way a browser's WebSocket can carry it).
fn presented_key(req: &Request) -> Option<String> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
                .or_else(|| {
                    jupyter_path(req.uri().path())
                        .then(|| {
                            v.strip_prefix("token ")
                                .or_else(|| v.strip_prefix("Token "))
                        })
                        .flatten()
                })
        })
        .map(|k| k.trim().to_string());
    header.or_else(|| {
        if !jupyter_path(req.uri().path()) {
            return None;
        }
        req.uri().query()?.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == "token").then(|| percent_decode(v))
        })
    })
}

/// Jupyter's routes (`/api/kernels…`, `/api/kernelspecs…`, `/kernelspecs/…`): where its
/// clients' forms of the key are taken.
fn jupyter_path(path: &str) -> bool {
    path.starts_with("/api/kernels") || path.starts_with("/kernelspecs/")
}

/// `%XX` escapes and `+` of a query value.
fn percent_decode(v: &str) -> String {
    percent_encoding::percent_decode_str(&v.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

/// Middleware on `/v1`: lets a request through with its key's id in its [`RequestContext`], or
/// answers 401.
pub async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(keys) = &state.keys else {
        return next.run(req).await;
    };
    let presented = presented_key(&req);
    match presented.as_deref().and_then(|k| keys.check(k)) {
        Some(id) => {
            if let Some(ctx) = req.extensions_mut().get_mut::<RequestContext>() {
                ctx.key_id = Some(id.to_string());
            }
            next.run(req).await
        }
        None => {
            let ctx = req.extensions().get::<RequestContext>().cloned();
            let err = ApiError::Unauthorized;
            match ctx {
                Some(ctx) => state.runner.refused(
                    AuditRecord::new(&ctx, Action::Rejection).detail(format!(
                        "{} {}",
                        req.method(),
                        req.uri().path()
                    )),
                    Rejection::Unauthorized,
                    &err,
                ),
                None => state.runner.metrics().rejected(Rejection::Unauthorized),
            }
            err.into_response()
        }
    }
}
