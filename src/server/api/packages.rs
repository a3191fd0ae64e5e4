//! `GET /v1/packages`: what a sandbox can import besides the standard library.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::packages::{PackageSource, shown_url};
use crate::runtime::BuiltinPackage;
use crate::server::AppState;
use crate::server::error::{ApiResult, ErrorBody};

/// What `GET /v1/packages` says.
#[derive(Debug, Serialize, ToSchema)]
pub struct PackageList {
    /// The distributions built into the guest runtime, by name, with their versions and
    /// the top-level modules they provide.
    pub builtin: Vec<BuiltinPackage>,
    /// Whether requests may add packages beyond these.
    pub extra: ExtraPackages,
}

/// The policy for packages beyond the built-in set.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExtraPackages {
    /// Whether a request's `packages` may name any (`false`: `--packages off`).
    pub allowed: bool,
    /// Where they come from: the index's URL, or `null` for the one pip is configured with
    /// on the server.
    pub index: Option<String>,
    /// When set, only these distributions (dependencies included) may be added.
    pub allowlist: Option<Vec<String>>,
    /// The most specifiers one request may name.
    pub max_packages: usize,
    /// The largest wheel downloaded, in bytes.
    pub max_wheel_bytes: u64,
    /// The largest unpacked set, in bytes.
    pub max_env_bytes: u64,
    /// What can be added, in a sentence.
    pub note: String,
}

#[utoipa::path(
    get, path = "/v1/packages", tag = "execute",
    responses(
        (status = 200, description = "The built-in packages and the policy for others", body = PackageList),
        (status = 401, body = ErrorBody),
        (status = 503, description = "Not ready", body = ErrorBody),
    )
)]
pub async fn packages(State(state): State<AppState>) -> ApiResult<Json<PackageList>> {
    let host = state.runner.host()?;
    let opts = host.package_options();
    let allowed = opts.source != PackageSource::Off;
    Ok(Json(PackageList {
        builtin: host.builtin_packages().to_vec(),
        extra: ExtraPackages {
            allowed,
            index: match &opts.source {
                // Never its credentials: the host and path only.
                PackageSource::Index(url) => Some(shown_url(url)),
                PackageSource::PipDefault | PackageSource::Off => None,
            },
            allowlist: opts.allowlist.as_ref().map(|a| a.iter().cloned().collect()),
            max_packages: opts.max_requested,
            max_wheel_bytes: opts.max_wheel_bytes,
            max_env_bytes: opts.max_env_bytes,
            note: if allowed {
                "pure-Python wheels (py3-none-any) can be added with `packages`; the \
                 built-in ones stay at their versions, and nothing with native code can \
                 load (the guest has no dynamic linking)"
                    .into()
            } else {
                "only the built-in packages can be imported on this server".into()
            },
        },
    }))
}
