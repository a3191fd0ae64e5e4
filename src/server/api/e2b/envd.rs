//! envd (port 49983): `/health`, `/files` (a file read whole or streamed from disk; files
//! written as multipart parts or one raw body, gzip or not), and the Connect services
//! (`filesystem.rs`, `process.rs`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Multipart, Query, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::connect::ConnectError;
use super::filesystem::{self, relative};
use super::{DoorState, E2bError, HOME, SandboxHeader, process};
use crate::server::api::types::{download_file, upload_file};
use crate::server::error::ApiError;
use crate::server::request_context::Caller;
use crate::supervisor::SupervisorError;

/// Files one upload may carry.
const MAX_UPLOAD_FILES: usize = 256;

pub fn routes() -> axum::Router<DoorState> {
    axum::Router::new()
        .route("/health", get(health))
        .route("/files", get(read).post(write))
        .route("/filesystem.Filesystem/{method}", post(filesystem::call))
        .route("/process.Process/{method}", post(process::call))
        .fallback(|req: Request| async move {
            super::plain(
                StatusCode::NOT_FOUND,
                format!(
                    "{} {} is not part of envd as Vivarium serves it",
                    req.method(),
                    req.uri().path()
                ),
            )
        })
}

/// 204 while the sandbox's session lives; 502 once it is gone (the SDK's `isRunning()`).
async fn health(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
) -> Response {
    let id = match sandbox.id() {
        Ok(id) => id,
        Err(e) => return E2bError(e).into_response(),
    };
    match door
        .app
        .runner
        .session_info(&id, ctx.key_id.as_deref())
        .await
    {
        Ok(info) if info.ended.is_none() => StatusCode::NO_CONTENT.into_response(),
        _ => super::plain(
            StatusCode::BAD_GATEWAY,
            format!("The sandbox {id} was not found"),
        ),
    }
}

#[derive(Debug, Deserialize)]
struct FileQuery {
    #[serde(default)]
    path: Option<String>,
}

/// envd's answer for one written file.
fn written(path: &str) -> Value {
    let name = path.rsplit('/').next().unwrap_or(path);
    json!({"name": name, "type": "file", "path": path})
}

/// The guest path an envd path names (a relative one is under `/home/user`).
fn guest_path(path: &str) -> String {
    match path.starts_with('/') {
        true => path.to_string(),
        false => format!("{HOME}/{path}"),
    }
}

fn bad(e: ConnectError) -> E2bError {
    E2bError(SupervisorError::InvalidRequest(e.message).into())
}

async fn read(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Query(q): Query<FileQuery>,
) -> Result<Response, E2bError> {
    let id = sandbox.id()?;
    let path = q.path.ok_or_else(|| {
        bad(ConnectError::new(
            super::connect::Code::InvalidArgument,
            "path: required",
        ))
    })?;
    let rel = relative(&path).map_err(bad)?;
    match download_file(&door.app, &ctx, &id, rel).await {
        Ok(resp) => Ok(resp),
        Err(ApiError::Supervisor(SupervisorError::FileNotFound(_))) => Ok(super::plain(
            StatusCode::NOT_FOUND,
            format!("path '{path}' does not exist"),
        )),
        Err(e) => Err(E2bError(e)),
    }
}

async fn write(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Query(q): Query<FileQuery>,
    req: Request,
) -> Result<Response, E2bError> {
    let id = sandbox.id()?;
    let multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("multipart/form-data"));
    let mut files: Vec<(String, Bytes)> = Vec::new();
    if multipart {
        let mut parts = Multipart::from_request(req, &())
            .await
            .map_err(|e| E2bError(SupervisorError::InvalidRequest(e.body_text()).into()))?;
        while let Some(field) = parts
            .next_field()
            .await
            .map_err(|e| E2bError(SupervisorError::InvalidRequest(e.body_text()).into()))?
        {
            if files.len() >= MAX_UPLOAD_FILES {
                return Err(E2bError(
                    SupervisorError::InvalidRequest(format!(
                        "an upload carries at most {MAX_UPLOAD_FILES} files"
                    ))
                    .into(),
                ));
            }
            // One file: the query names it; several: each part's filename does.
            let name = field.file_name().map(str::to_string);
            let data = field
                .bytes()
                .await
                .map_err(|e| E2bError(SupervisorError::InvalidRequest(e.body_text()).into()))?;
            files.push((name.unwrap_or_default(), data));
        }
        if files.len() == 1
            && let Some(p) = &q.path
        {
            files[0].0 = p.clone();
        }
    } else {
        let path = q.path.clone().ok_or_else(|| {
            E2bError(SupervisorError::InvalidRequest("path: required".into()).into())
        })?;
        let gzip = req
            .headers()
            .get(header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let limit = door.app.config.max_body_bytes;
        let body: Result<Bytes, BytesRejection> = Bytes::from_request(req, &()).await;
        let body = body?;
        let data = match gzip {
            true => gunzip(&body, limit)?,
            false => body,
        };
        files.push((path, data));
    }
    if files.is_empty() {
        return Err(E2bError(
            SupervisorError::InvalidRequest("the upload carries no file".into()).into(),
        ));
    }
    let mut out = Vec::with_capacity(files.len());
    for (path, data) in files {
        if path.is_empty() {
            return Err(E2bError(
                SupervisorError::InvalidRequest(
                    "a file part names no path (its filename, or the path query)".into(),
                )
                .into(),
            ));
        }
        let rel = relative(&path).map_err(bad)?;
        upload_file(&door.app, &ctx, &id, rel, Ok(data)).await?;
        out.push(written(&guest_path(&path)));
    }
    Ok(Json(Value::Array(out)).into_response())
}

/// A gzip body decoded, up to `limit` bytes (a bomb is refused, not inflated).
fn gunzip(body: &[u8], limit: usize) -> Result<Bytes, E2bError> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            E2bError(SupervisorError::InvalidRequest(format!("the gzip body: {e}")).into())
        })?;
    if out.len() > limit {
        return Err(E2bError(ApiError::PayloadTooLarge(format!(
            "the file is over {limit} bytes decoded"
        ))));
    }
    Ok(Bytes::from(out))
}
