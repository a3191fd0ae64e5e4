//! Optional API keys. With `--api-keys-file`, every route but the open ones (`/`,
//! `/healthz`, `/readyz`, `/metrics`, `/openapi.json`) needs a key in the file, else 401:
//! `/v1`, Piston's `/api/v2`, Jupyter's, `/mcp` and `/e2b`. A request presents it as
//! `Authorization: Bearer KEY`; under `/e2b` also as `X-API-Key` or `X-Access-Token`, and on
//! Jupyter's routes as `Authorization: token KEY` or `?token=KEY`. Keys are kept only as
//! SHA-256 digests and never logged: logs and the audit trail name a key by its id (the
//! `ID:` prefix in the file, or `key-` and the first 8 hex digits of its digest).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::{ApiError, OnWire};
use super::request_context::RequestContext;
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::metrics::Rejection;
use crate::supervisor::tenants::{Quotas, TenantDecl, Tenants, parse_tenant_line};

pub struct ApiKeys {
    /// Each key's id, its tenant's id and its digest.
    keys: Vec<(String, String, [u8; 32])>,
    /// The tenants declared with `tenant NAME ...` lines.
    tenants: HashMap<String, TenantDecl>,
}

impl std::fmt::Debug for ApiKeys {
    /// Ids and tenants only: a key's digest is not for logs either.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|(id, tenant, _)| (id, tenant)))
            .finish()
    }
}

impl ApiKeys {
    /// Reads the keys file: `ID:KEY` or `KEY` lines (a key of its own tenant, named after
    /// its id), `ID@TENANT:KEY` lines (a key of a tenant declared in the file), and
    /// `tenant NAME [QUOTA=VALUE ...]` lines; blank lines and `#` comments are skipped.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading API keys file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("API keys file {}", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let mut tenants = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if let Some(words) = line.trim().strip_prefix("tenant ") {
                let (name, decl) =
                    parse_tenant_line(words).map_err(|e| anyhow!("line {}: {e}", n + 1))?;
                if tenants.insert(name.clone(), decl).is_some() {
                    bail!("line {}: tenant {name:?} is declared twice", n + 1);
                }
            }
        }
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with("tenant ") {
                continue;
            }
            let (id, key) = match line.split_once(':') {
                Some((id, key)) => (id.trim().to_string(), key.trim()),
                None => (String::new(), line),
            };
            if key.len() < 16 {
                bail!("line {}: keys must be at least 16 characters", n + 1);
            }
            let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
            // `ID@TENANT` only when TENANT is declared: an id may hold an `@` of its own.
            let (id, tenant) = match id.rsplit_once('@') {
                Some((id, t)) if tenants.contains_key(t) => (id.to_string(), t.to_string()),
                _ => (id, String::new()),
            };
            let id = if id.is_empty() {
                format!("key-{}", &hex::encode(digest)[..8])
            } else {
                id
            };
            let tenant = if tenant.is_empty() {
                id.clone()
            } else {
                tenant
            };
            if keys.iter().any(|(other, _, _)| *other == id) {
                bail!("line {}: key id {id:?} is used twice", n + 1);
            }
            keys.push((id, tenant, digest));
        }
        if keys.is_empty() {
            bail!("it holds no API keys");
        }
        Ok(ApiKeys { keys, tenants })
    }

    /// The tenants of these keys: each key's, under `defaults` unless declared otherwise.
    pub fn tenants(&self, defaults: Quotas) -> Tenants {
        Tenants::of_keys(
            self.keys.iter().map(|(id, t, _)| (id.as_str(), t.as_str())),
            &self.tenants,
            defaults,
        )
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The id of the key `presented`, comparing digests in constant time.
    pub fn check(&self, presented: &str) -> Option<&str> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (id, _, k) in &self.keys {
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
    // E2B's SDKs send the key as `X-API-Key` (the control plane) and the sandbox's access
    // token, which is the same key, as `X-Access-Token` (the sandbox planes).
    let header = header.or_else(|| {
        if !req.uri().path().starts_with("/e2b/") {
            return None;
        }
        ["x-api-key", "x-access-token"].iter().find_map(|name| {
            let v = req.headers().get(*name)?.to_str().ok()?;
            Some(v.trim().to_string())
        })
    });
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

/// Middleware on every route but the open ones: lets a request through with its key's id in its
/// [`RequestContext`], or answers 401.
pub async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(keys) = &state.keys else {
        return next.run(req).await;
    };
    // E2B's Template builder uploads a build's files to a link it was given, without a key:
    // the link's token is the upload's credential (`api/e2b/templates.rs`).
    if req.method() == axum::http::Method::PUT
        && req.uri().path().starts_with(super::api::e2b::UPLOAD_PATH)
    {
        return next.run(req).await;
    }
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
                    err.outcome(),
                ),
                None => state.runner.metrics().rejected(Rejection::Unauthorized),
            }
            err.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::tenants::Quota;

    const K1: &str = "0123456789abcdef-one";
    const K2: &str = "0123456789abcdef-two";
    const K3: &str = "0123456789abcdef-three";

    #[test]
    fn keys_group_under_declared_tenants_with_their_quotas() {
        let keys = ApiKeys::parse(&format!(
            "# c\nalice:{K1}\ntenant acme runs=3 snapshot_bytes=1M\nci@acme:{K2}\nme@example.com:{K3}\n"
        ))
        .unwrap();
        let t = keys.tenants(Quotas::unlimited());
        assert_eq!(keys.check(K2), Some("ci"));
        assert_eq!(t.of(Some("ci")).id(), "acme");
        assert_eq!(t.of(Some("ci")).limit(Quota::Runs), 3);
        assert_eq!(t.of(Some("ci")).limit(Quota::SnapshotBytes), 1 << 20);
        assert_eq!(t.of(Some("alice")).id(), "alice");
        // An `@` before an undeclared name is part of the id.
        assert_eq!(keys.check(K3), Some("me@example.com"));
        assert_eq!(t.of(Some("me@example.com")).id(), "me@example.com");
    }

    #[test]
    fn bad_tenant_lines_and_reused_ids_are_refused_with_their_line() {
        let e = ApiKeys::parse(&format!("tenant acme cpus=2\nci@acme:{K1}\n")).unwrap_err();
        assert!(format!("{e:#}").contains("line 1"), "{e:#}");
        let e = ApiKeys::parse(&format!("a:{K1}\na:{K2}\n")).unwrap_err();
        assert!(format!("{e:#}").contains("used twice"), "{e:#}");
        let e = ApiKeys::parse(&format!("tenant acme\ntenant acme\nx:{K1}\n")).unwrap_err();
        assert!(format!("{e:#}").contains("declared twice"), "{e:#}");
    }
}
