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
use super::audit::AuditRecord;
use super::error::ApiError;
use super::request_context::RequestContext;

/// Which key a request authenticated with (a request extension).
#[derive(Debug, Clone)]
pub struct KeyId(pub String);

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

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
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

/// Middleware on `/v1`: lets a request through with its [`KeyId`], or answers 401.
pub async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(keys) = &state.keys else {
        return next.run(req).await;
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match presented.and_then(|k| keys.check(k)) {
        Some(id) => {
            let id = KeyId(id.to_string());
            if let Some(ctx) = req.extensions_mut().get_mut::<RequestContext>() {
                ctx.key_id = Some(id.0.clone());
            }
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None => {
            let ctx = req.extensions().get::<RequestContext>().cloned();
            let err = ApiError::Unauthorized;
            state.metrics.rejected("unauthorized");
            if let Some(ctx) = ctx {
                state.audit.write(
                    AuditRecord::new(&ctx, "rejection")
                        .http(err.status().as_u16())
                        .error(err.code())
                        .detail(format!("{} {}", req.method(), req.uri().path())),
                );
            }
            err.into_response()
        }
    }
}
