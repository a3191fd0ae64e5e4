//! E2B's volumes (`e2b.Volume`), served from Vivarium's (`docs/guides/volumes.md`): the
//! control plane's `/volumes` (create, list, get, destroy) and the volume content API
//! `/volumecontent/{volumeID}/…` (files, folders, entries), which the SDK reaches at
//! `E2B_VOLUME_API_URL` (set it to the same `http://HOST:PORT/e2b`).
//!
//! A volume's `volumeID` is its name (unique in its tenant), and its token is the caller's
//! own API key, as a sandbox's access token is ([`AccessToken`]): the content API takes it as
//! `Authorization: Bearer`, and a volume is its tenant's alone. Entries carry E2B's fields;
//! owners and modes are fixed (the guest has one user): `uid`/`gid` 1000, files `0644`,
//! folders `0755`. Changing an entry's owner or mode (`update_metadata`) is refused.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::control::invalid;
use super::{AccessToken, DoorState, E2bError};
use crate::server::api::types::{media_type, raw_held};
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::time::rfc3339;
use crate::supervisor::volumes::{CreateVolume, VolumeEntry, VolumeEntryKind};

pub fn routes() -> axum::Router<DoorState> {
    axum::Router::new()
        .route("/volumes", post(create).get(list))
        .route("/volumes/{id}", get(info).delete(destroy))
        .route("/volumecontent/{id}/dir", get(list_dir).post(make_dir))
        .route("/volumecontent/{id}/file", get(read_file).put(write_file))
        .route(
            "/volumecontent/{id}/path",
            get(stat).delete(remove).patch(update_metadata),
        )
}

/// A volume as E2B's `VolumeAndToken`: the token is the caller's key (on a server without
/// keys, which checks none, a placeholder the SDK can send).
fn with_token(name: &str, token: &Option<String>) -> Value {
    let token = token.as_deref().unwrap_or("no-keys");
    json!({"volumeID": name, "name": name, "token": token})
}

/// E2B's `NewVolume`.
#[derive(Deserialize)]
struct NewVolume {
    name: String,
}

/// `POST /volumes {"name"}`.
async fn create(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), E2bError> {
    let new: NewVolume = serde_json::from_slice(&body?)
        .map_err(|e| invalid(format!("the body is not an E2B NewVolume: {e}")))?;
    let req = CreateVolume { name: new.name };
    let key = ctx.key_id.as_deref();
    let info = Bracket::open(&door.app, &ctx, Action::VolumeCreate)
        .around(201, async |record| {
            record.set_path(&req.name, 0);
            door.app.runner.create_volume(key, req).await
        })
        .await?;
    Ok((StatusCode::CREATED, Json(with_token(&info.name, &token))))
}

/// `GET /volumes`.
async fn list(Caller { state: door, ctx }: Caller<DoorState>) -> Result<Json<Value>, E2bError> {
    let volumes = door.app.runner.volumes(ctx.key_id.as_deref()).await?;
    Ok(Json(Value::Array(
        volumes
            .iter()
            .map(|v| json!({"volumeID": v.name, "name": v.name}))
            .collect(),
    )))
}

/// `GET /volumes/{id}`.
async fn info(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    Path(id): Path<String>,
) -> Result<Json<Value>, E2bError> {
    let v = door.app.runner.volume(ctx.key_id.as_deref(), &id).await?;
    Ok(Json(with_token(&v.name, &token)))
}

/// `DELETE /volumes/{id}`.
async fn destroy(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&door.app, &ctx, Action::VolumeDelete)
        .around(204, async |record| {
            record.set_path(&id, 0);
            door.app.runner.delete_volume(key, &id).await
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct At {
    path: String,
    #[serde(default)]
    depth: Option<u32>,
}

fn at(query: Result<Query<At>, QueryRejection>) -> Result<At, E2bError> {
    query.map(|Query(q)| q).map_err(|e| invalid(e.body_text()))
}

/// An entry as E2B's `VolumeEntryStat`.
fn stat_of(e: &VolumeEntry) -> Value {
    let path = format!("/{}", e.path);
    let name = e.path.rsplit('/').next().unwrap_or_default();
    let (kind, mode) = match e.kind {
        VolumeEntryKind::File => ("file", 0o644),
        VolumeEntryKind::Dir => ("directory", 0o755),
        VolumeEntryKind::Symlink => ("symlink", 0o777),
    };
    let t = rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(e.modified));
    json!({
        "name": name, "type": kind, "path": path, "size": e.size, "mode": mode,
        "uid": 1000, "gid": 1000, "atime": t, "mtime": t, "ctime": t,
    })
}

/// `GET /volumecontent/{id}/dir?path&depth`.
async fn list_dir(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
) -> Result<Json<Value>, E2bError> {
    let q = at(query)?;
    let entries = door
        .app
        .runner
        .volume_files(ctx.key_id.as_deref(), &id, &q.path, q.depth.unwrap_or(1))
        .await?;
    Ok(Json(Value::Array(entries.iter().map(stat_of).collect())))
}

/// `POST /volumecontent/{id}/dir?path`: made with the folders above it.
async fn make_dir(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
) -> Result<(StatusCode, Json<Value>), E2bError> {
    let q = at(query)?;
    let key = ctx.key_id.as_deref();
    let entry = Bracket::open(&door.app, &ctx, Action::VolumeFileOperation)
        .around(201, async |record| {
            record.set_path(&format!("{id}{}", q.path), 0);
            door.app.runner.make_volume_dir(key, &id, &q.path).await
        })
        .await?;
    Ok((StatusCode::CREATED, Json(stat_of(&entry))))
}

/// `GET /volumecontent/{id}/file?path`: streamed, after the leakage scan.
async fn read_file(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
) -> Result<Response, E2bError> {
    let q = at(query)?;
    let key = ctx.key_id.as_deref();
    let mut bracket = Bracket::open(&door.app, &ctx, Action::VolumeDownload);
    let result = door
        .app
        .runner
        .read_volume_file(key, &id, &q.path, bracket.record())
        .await;
    let size = result.as_ref().map_or(0, |(_, size)| *size);
    bracket.record().set_path(&format!("{id}{}", q.path), size);
    bracket.close(outcome_of(&result, 200));
    let (file, size) = result?;
    Ok(raw_held(file, size, media_type(&q.path), door.app.runner.budget()).await?)
}

/// `PUT /volumecontent/{id}/file?path`: the body streamed to disk (no body cap but the
/// volume's room), put in place whole.
async fn write_file(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
    body: Body,
) -> Result<(StatusCode, Json<Value>), E2bError> {
    let q = at(query)?;
    let key = ctx.key_id.as_deref();
    let mut bracket = Bracket::open(&door.app, &ctx, Action::VolumeUpload);
    let result = door
        .app
        .runner
        .put_volume_file(key, &id, &q.path, body.into_data_stream())
        .await;
    bracket
        .record()
        .set_path(&format!("{id}{}", q.path), *result.as_ref().unwrap_or(&0));
    bracket.close(outcome_of(&result, 201));
    result?;
    let entry = door.app.runner.volume_entry(key, &id, &q.path).await?;
    Ok((StatusCode::CREATED, Json(stat_of(&entry))))
}

/// `GET /volumecontent/{id}/path?path`: what is there (the SDK's `exists`, `get_info`).
async fn stat(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
) -> Result<Json<Value>, E2bError> {
    let q = at(query)?;
    let entry = door
        .app
        .runner
        .volume_entry(ctx.key_id.as_deref(), &id, &q.path)
        .await?;
    Ok(Json(stat_of(&entry)))
}

/// `DELETE /volumecontent/{id}/path?path`: a file, a link, or a folder with everything in it.
async fn remove(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<At>, QueryRejection>,
) -> Result<StatusCode, E2bError> {
    let q = at(query)?;
    let key = ctx.key_id.as_deref();
    Bracket::open(&door.app, &ctx, Action::VolumeFileOperation)
        .around(204, async |record| {
            record.set_path(&format!("{id}{}", q.path), 0);
            door.app.runner.remove_volume_path(key, &id, &q.path).await
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PATCH /volumecontent/{id}/path`: owners and modes are fixed in a Vivarium volume.
async fn update_metadata() -> Result<Json<Value>, E2bError> {
    Err(invalid(
        "a Vivarium volume's entries have fixed owners and modes (uid and gid 1000, files \
         0644, folders 0755): update_metadata is not served"
            .into(),
    ))
}
