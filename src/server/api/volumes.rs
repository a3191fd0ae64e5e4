//! `/v1/volumes`: a tenant's named volumes and their files over HTTP, without a sandbox
//! (`docs/guides/volumes.md`). An upload is streamed to disk (no body cap but the volume's
//! room: `ops::body_cap` leaves it alone); a download is streamed from disk after the
//! leakage scan. Each operation is one audit line.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::types::{media_type, parse_json, raw_held};
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::volumes::{CreateVolume, VolumeEntry, VolumeInfo};

/// `GET /v1/volumes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeList {
    pub volumes: Vec<VolumeInfo>,
}

/// `GET /v1/volumes/{name}/files`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeFiles {
    pub entries: Vec<VolumeEntry>,
}

/// `PUT /v1/volumes/{name}/files/{path}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VolumeUpload {
    pub path: String,
    pub size: u64,
}

/// Which folder a listing is of, and how deep.
#[derive(Debug, Deserialize, IntoParams)]
pub struct ListQuery {
    /// The folder, relative to the volume's top (default: the top).
    #[serde(default)]
    pub path: String,
    /// Levels down (default 1: the folder's own entries).
    #[serde(default = "one")]
    pub depth: u32,
}

fn one() -> u32 {
    1
}

/// What the audit line names: the volume and the path in it.
fn at(name: &str, path: &str) -> String {
    format!("{name}/{}", path.trim_start_matches('/'))
}

#[utoipa::path(
    post, path = "/v1/volumes", tag = "volumes", operation_id = "create_volume",
    request_body = CreateVolume,
    responses(
        (status = 201, description = "Made, empty", body = VolumeInfo),
        (status = 400, description = "A name out of shape (`field`: `name`)", body = ErrorBody),
        (status = 409, description = "`volume_exists`", body = ErrorBody),
        (status = 429, description = "`quota_exceeded`: the tenant has as many volumes as it may", body = ErrorBody),
    )
)]
pub async fn create(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<VolumeInfo>)> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::VolumeCreate)
        .around(201, async |record| {
            let req: CreateVolume = parse_json(body)?;
            record.set_path(&req.name, 0);
            Ok::<_, ApiError>(state.runner.create_volume(key, req).await?)
        })
        .await
        .map(|info| (StatusCode::CREATED, Json(info)))
}

#[utoipa::path(
    get, path = "/v1/volumes", tag = "volumes", operation_id = "list_volumes",
    responses((status = 200, description = "The tenant's volumes, with their usage", body = VolumeList))
)]
pub async fn list(Caller { state, ctx }: Caller) -> ApiResult<Json<VolumeList>> {
    let volumes = state.runner.volumes(ctx.key_id.as_deref()).await?;
    Ok(Json(VolumeList { volumes }))
}

#[utoipa::path(
    get, path = "/v1/volumes/{name}", tag = "volumes", operation_id = "volume_info",
    params(("name" = String, Path, description = "Volume name")),
    responses(
        (status = 200, body = VolumeInfo),
        (status = 404, description = "`volume_not_found` (never made, deleted, or another tenant's)", body = ErrorBody),
    )
)]
pub async fn info(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<VolumeInfo>> {
    Ok(Json(
        state.runner.volume(ctx.key_id.as_deref(), &name).await?,
    ))
}

#[utoipa::path(
    delete, path = "/v1/volumes/{name}", tag = "volumes", operation_id = "delete_volume",
    params(("name" = String, Path, description = "Volume name")),
    responses(
        (status = 204, description = "Deleted, with every file in it"),
        (status = 404, description = "`volume_not_found`", body = ErrorBody),
    )
)]
pub async fn delete(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::VolumeDelete)
        .around(204, async |record| {
            record.set_path(&name, 0);
            state.runner.delete_volume(key, &name).await
        })
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get, path = "/v1/volumes/{name}/files", tag = "volumes", operation_id = "list_volume_files",
    params(("name" = String, Path, description = "Volume name"), ListQuery),
    responses(
        (status = 200, description = "The folder's entries, `depth` levels down, sorted by path (at most the volume's file limit)", body = VolumeFiles),
        (status = 400, body = ErrorBody),
        (status = 404, description = "`volume_not_found`, or `not_found` for the folder", body = ErrorBody),
        (status = 409, description = "`invalid_path`: not a folder", body = ErrorBody),
    )
)]
pub async fn files(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<VolumeFiles>> {
    let entries = state
        .runner
        .volume_files(ctx.key_id.as_deref(), &name, &q.path, q.depth)
        .await?;
    Ok(Json(VolumeFiles { entries }))
}

#[utoipa::path(
    put, path = "/v1/volumes/{name}/files/{*path}", tag = "volumes", operation_id = "put_volume_file",
    params(
        ("name" = String, Path, description = "Volume name"),
        ("path" = String, Path, description = "File path in the volume; may contain `/`; its folders are made"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The raw bytes, streamed (no cap but the volume's room)"),
    responses(
        (status = 201, description = "Written whole, replacing a file there", body = VolumeUpload),
        (status = 400, description = "A path out of shape (`invalid_path`)", body = ErrorBody),
        (status = 404, description = "`volume_not_found`", body = ErrorBody),
        (status = 409, description = "`invalid_path`: a folder, a link or a file is in the way", body = ErrorBody),
        (status = 507, description = "`volume_full`: past the volume's or the tenant's bytes, or the volume's files; nothing written", body = ErrorBody),
    )
)]
pub async fn put_file(
    Caller { state, ctx }: Caller,
    Path((name, path)): Path<(String, String)>,
    body: Body,
) -> ApiResult<(StatusCode, Json<VolumeUpload>)> {
    let key = ctx.key_id.as_deref();
    let mut bracket = Bracket::open(&state, &ctx, Action::VolumeUpload);
    let result = state
        .runner
        .put_volume_file(key, &name, &path, body.into_data_stream())
        .await;
    bracket
        .record()
        .set_path(&at(&name, &path), *result.as_ref().unwrap_or(&0));
    bracket.close(crate::server::bracket::outcome_of(&result, 201));
    let size = result?;
    Ok((
        StatusCode::CREATED,
        Json(VolumeUpload {
            path: format!("/{}", path.trim_start_matches('/')),
            size,
        }),
    ))
}

#[utoipa::path(
    get, path = "/v1/volumes/{name}/files/{*path}", tag = "volumes", operation_id = "get_volume_file",
    params(
        ("name" = String, Path, description = "Volume name"),
        ("path" = String, Path, description = "File path in the volume"),
    ),
    responses(
        (status = 200, description = "The raw bytes, streamed from disk", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "`volume_not_found`, or `not_found` for the file", body = ErrorBody),
        (status = 409, description = "`invalid_path`: a folder, a link or a special file", body = ErrorBody),
        (status = 422, description = "`output_leak`: the file holds secrets and the server's leakage policy withholds it", body = ErrorBody),
    )
)]
pub async fn get_file(
    Caller { state, ctx }: Caller,
    Path((name, path)): Path<(String, String)>,
) -> ApiResult<Response> {
    let key = ctx.key_id.as_deref();
    let mut bracket = Bracket::open(&state, &ctx, Action::VolumeDownload);
    let result = state
        .runner
        .read_volume_file(key, &name, &path, bracket.record())
        .await;
    bracket.record().set_path(
        &at(&name, &path),
        result.as_ref().map_or(0, |(_, size)| *size),
    );
    bracket.close(crate::server::bracket::outcome_of(&result, 200));
    let (file, size) = result?;
    raw_held(file, size, media_type(&path), state.runner.budget()).await
}

#[utoipa::path(
    delete, path = "/v1/volumes/{name}/files/{*path}", tag = "volumes", operation_id = "delete_volume_file",
    params(
        ("name" = String, Path, description = "Volume name"),
        ("path" = String, Path, description = "A file, link or folder in the volume (a folder goes with everything in it)"),
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn delete_file(
    Caller { state, ctx }: Caller,
    Path((name, path)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::VolumeFileOperation)
        .around(204, async |record| {
            record.set_path(&at(&name, &path), 0);
            state.runner.remove_volume_path(key, &name, &path).await
        })
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/volumes/{name}/dirs/{*path}", tag = "volumes", operation_id = "make_volume_dir",
    params(
        ("name" = String, Path, description = "Volume name"),
        ("path" = String, Path, description = "The folder to make (with those above it)"),
    ),
    responses(
        (status = 201, description = "Made (or already there)", body = VolumeEntry),
        (status = 409, description = "`invalid_path`: a file is in the way", body = ErrorBody),
        (status = 507, description = "`volume_full`: past the volume's files", body = ErrorBody),
    )
)]
pub async fn make_dir(
    Caller { state, ctx }: Caller,
    Path((name, path)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<VolumeEntry>)> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::VolumeFileOperation)
        .around(201, async |record| {
            record.set_path(&at(&name, &path), 0);
            state.runner.make_volume_dir(key, &name, &path).await
        })
        .await
        .map_err(ApiError::from)
        .map(|e| (StatusCode::CREATED, Json(e)))
}
