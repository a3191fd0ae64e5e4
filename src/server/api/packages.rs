//! `GET /v1/packages`: what a sandbox can import besides the standard library.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

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
    /// `false`: nothing can be added on this server.
    pub allowed: bool,
    /// Why, in a sentence.
    pub note: String,
}

#[utoipa::path(
    get,
    path = "/v1/packages",
    tag = "execute",
    responses(
        (status = 200, description = "The built-in packages and the policy for others", body = PackageList),
        (status = 401, body = ErrorBody),
        (status = 503, description = "Not ready", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn packages(State(state): State<AppState>) -> ApiResult<Json<PackageList>> {
    let host = state.runner.host()?;
    Ok(Json(PackageList {
        builtin: host.builtin_packages().to_vec(),
        extra: ExtraPackages {
            allowed: false,
            note: "only the built-in packages can be imported: the guest has no dynamic \
                   linking, and adding pure-Python ones is not offered yet"
                .into(),
        },
    }))
}
