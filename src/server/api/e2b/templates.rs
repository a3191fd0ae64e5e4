//! E2B's Template builder (`Template().from_template(...).pip_install(...).copy(...)
//! .run_cmd(...)`, then `Template.build(t, name)`), translated onto Vivarium's user
//! templates (`docs/guides/templates.md`): the SDK asks for a build (`POST /v3/templates`),
//! uploads each `COPY` step's files (a link from `GET /templates/{id}/files/{hash}`, then a
//! `PUT` of a tar, gzipped or not, to it: the link is the upload's only credential), starts
//! the build with its steps (`POST /v2/templates/{id}/builds/{build}`) and polls its status.
//! The template's id is its name, so `Sandbox.create(name)` finds it.
//!
//! Steps served: `ENV`, `WORKDIR`, `USER` (accepted; a sandbox has one user), `COPY` (files and
//! folders; not links), `RUN` (the sandbox's own shell; `pip install` lines become the
//! template's packages). Refused when the build is started, naming the step: `apt_install`
//! and other system package managers, `npm_install`/`bun_install`, `git_clone`, MCP servers,
//! dev containers, base images other than E2B's base and Python's, start and ready commands.

use std::collections::BTreeMap;
use std::io::Read;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::control::{invalid, name_of, template_of};
use super::{DoorState, E2bError, E2bJson, HOME};
use crate::server::bracket::Bracket;
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::intake;
use crate::supervisor::intake::template::{BuildAsk, BuildStep, InputFile};
use crate::supervisor::templates::{TemplateInfo, TemplateStatus};
use crate::vocabulary::{Language, MAX_INPUT_FILES};

/// Where a build's files are uploaded (no API key: the token is the credential).
pub const UPLOAD_PATH: &str = "/e2b/uploads/";
/// The most bytes a build's files may unpack to, all its `COPY` steps together.
const MAX_UNPACKED_BYTES: u64 = 256 << 20;

pub(super) fn routes() -> Router<DoorState> {
    Router::new()
        .route("/v3/templates", post(request_build))
        .route("/templates/{id}/files/{hash}", get(upload_link))
        .route("/uploads/{token}", put(upload))
        .route("/v2/templates/{id}/builds/{build}", post(start_build))
        .route("/templates/{id}/builds/{build}/status", get(build_status))
        .route("/templates/aliases/{alias}", get(alias))
}

/// `POST /v3/templates`.
#[derive(Default, Deserialize)]
struct BuildRequest {
    name: String,
}

async fn request_build(E2bJson(req): E2bJson<BuildRequest>) -> Result<Response, E2bError> {
    let name = name_of(&req.name).to_string();
    crate::supervisor::templates::check_name(&name).map_err(|e| invalid(e.to_string()))?;
    let build = hex::encode(rand::random::<[u8; 8]>());
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "templateID": name, "buildID": build, "public": false,
            "names": [name], "tags": ["default"], "aliases": [name],
        })),
    )
        .into_response())
}

async fn upload_link(
    Caller { state: door, ctx }: Caller<DoorState>,
    headers: HeaderMap,
    Path((_id, hash)): Path<(String, String)>,
) -> Result<Response, E2bError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid(format!("{hash:?} is not a files hash")));
    }
    let store = door.app.runner.user_templates()?;
    let tenant = door.app.runner.tenant(ctx.key_id.as_deref());
    if store.uploaded(tenant.id(), &hash).is_some() {
        return Ok((StatusCode::CREATED, Json(json!({"present": true}))).into_response());
    }
    let token = store.upload_token(tenant.id(), &hash);
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    let url = format!("http://{host}{UPLOAD_PATH}{token}");
    Ok((
        StatusCode::CREATED,
        Json(json!({"present": false, "url": url})),
    )
        .into_response())
}

async fn upload(
    State(door): State<DoorState>,
    Path(token): Path<String>,
    body: Bytes,
) -> Result<Response, E2bError> {
    door.app
        .runner
        .user_templates()?
        .put_upload(&token, body)
        .map_err(crate::supervisor::SupervisorError::from)?;
    Ok(StatusCode::OK.into_response())
}

/// `POST /v2/templates/{id}/builds/{build}`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartBuild {
    #[serde(default)]
    from_template: Option<String>,
    #[serde(default)]
    from_image: Option<String>,
    #[serde(default)]
    from_image_registry: Option<Value>,
    #[serde(default)]
    steps: Vec<Step>,
    #[serde(default)]
    start_cmd: Option<String>,
    #[serde(default)]
    ready_cmd: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Step {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    files_hash: Option<String>,
}

async fn start_build(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path((id, _build)): Path<(String, String)>,
    E2bJson(req): E2bJson<StartBuild>,
) -> Result<Response, E2bError> {
    let runner = &door.app.runner;
    let tenant = runner.tenant(ctx.key_id.as_deref());
    let store = runner.user_templates()?;
    let uploaded = |hash: &str| store.uploaded(tenant.id(), hash);
    let ask = translate(name_of(&id), req, &uploaded)?;
    Bracket::open(&door.app, &ctx, Action::TemplateBuild)
        .around(202, async |record| {
            record.set_path(&ask.name, 0);
            intake::template::build_ask(runner, ask, record).await
        })
        .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({}))).into_response())
}

/// The build E2B's request asks for, as a Vivarium template's; a step that cannot be served
/// is a 400 naming it (the SDK raises it as a `BuildException`).
fn translate(
    name: &str,
    req: StartBuild,
    uploaded: &dyn Fn(&str) -> Option<Bytes>,
) -> Result<BuildAsk, E2bError> {
    if req.start_cmd.is_some() || req.ready_cmd.is_some() {
        return Err(invalid(
            "set_start_cmd / set_ready_cmd: a Vivarium sandbox runs no processes of its own, \
             so a template has no start or ready command"
                .into(),
        ));
    }
    if req.from_image_registry.is_some() {
        return Err(invalid(
            "from_image with a registry: only E2B's base image and Python's are offered".into(),
        ));
    }
    let from = match (req.from_template.as_deref(), req.from_image.as_deref()) {
        (Some(t), _) => template_of(t),
        (None, None | Some("e2bdev/base")) => "python".to_string(),
        (None, Some(image)) if image == "python" || image.starts_with("python:3") => {
            "python".to_string()
        }
        (None, Some(image)) => {
            return Err(invalid(format!(
                "base image {image:?}: only E2B's base image (from_base_image) and Python's \
                 (from_python_image) are offered: a Vivarium sandbox is CPython on WASI, not a \
                 container image"
            )));
        }
    };
    let mut ask = BuildAsk {
        name: name.to_string(),
        from: Some(from),
        ..BuildAsk::default()
    };
    let mut cwd = HOME.to_string();
    let mut unpacked = 0u64;
    let mut env = BTreeMap::new();
    for (i, step) in req.steps.into_iter().enumerate() {
        let at = format!("steps[{i}]");
        match step.kind.as_str() {
            "ENV" => {
                for pair in step.args.chunks(2) {
                    if let [k, v] = pair {
                        env.insert(k.clone(), v.clone());
                    }
                }
            }
            "USER" => {}
            "WORKDIR" => {
                let dir = step.args.first().cloned().unwrap_or_default();
                cwd = absolute(&cwd, &dir);
                ask.steps
                    .push(shell(&at, format!("mkdir -p {0} && cd {0}", quote(&cwd))));
                ask.workdir = Some(cwd.clone());
            }
            "RUN" => {
                let cmd = step.args.first().cloned().unwrap_or_default();
                if let Some(what) = refused(&cmd) {
                    return Err(invalid(format!(
                        "{at} ({cmd:?}): {what} is not offered: a Vivarium sandbox is CPython on \
                         WASI with its own shell, without system packages, Node or git; pure-Python \
                         packages come with pip_install"
                    )));
                }
                let plain = cmd.replace(" --user ", " ");
                match intake::packages_to_install(&plain) {
                    Some(packages) if !packages.is_empty() => ask.packages.extend(packages),
                    _ => ask.steps.push(shell(
                        &at,
                        format!("mkdir -p {0} && cd {0} && {cmd}", quote(&cwd)),
                    )),
                }
            }
            "COPY" => {
                let (src, dest) = match step.args.as_slice() {
                    [src, dest, ..] => (src.clone(), dest.clone()),
                    _ => {
                        return Err(invalid(format!(
                            "{at}: COPY takes a source and a destination"
                        )));
                    }
                };
                let hash = step.files_hash.unwrap_or_default();
                let tar = uploaded(&hash).ok_or_else(|| {
                    invalid(format!("{at}: the files of COPY {src:?} were not uploaded"))
                })?;
                let dest = absolute(&cwd, &dest);
                for (path, content) in unpack(&at, &tar, &src, &dest, &mut unpacked)? {
                    ask.files.retain(|f: &InputFile| f.path != path);
                    ask.files.push(InputFile { path, content });
                }
                if ask.files.len() > MAX_INPUT_FILES {
                    return Err(invalid(format!(
                        "{at}: the template's files are more than {MAX_INPUT_FILES}"
                    )));
                }
            }
            other => {
                return Err(invalid(format!(
                    "{at}: a step of type {other:?} is not offered"
                )));
            }
        }
    }
    ask.env = env;
    Ok(ask)
}

/// A shell step named `at`.
fn shell(at: &str, code: String) -> BuildStep {
    BuildStep {
        name: at.to_string(),
        language: Language::Bash,
        code,
    }
}

fn quote(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| format!("'{s}'"), |q| q.into_owned())
}

/// `path` made absolute against `cwd` (as E2B's WORKDIR and COPY destinations are).
fn absolute(cwd: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", cwd.trim_end_matches('/'))
    }
}

/// What a RUN line asks for that a sandbox cannot have (its first command of any part).
fn refused(cmd: &str) -> Option<&'static str> {
    cmd.split(['&', '|', ';', '\n'])
        .filter_map(|part| part.split_whitespace().find(|w| !w.contains('=')))
        .find_map(|first| match first {
            "apt-get" | "apt" | "apk" | "yum" | "dnf" | "dpkg" => {
                Some("apt_install (a system package manager)")
            }
            "npm" | "npx" | "yarn" | "pnpm" | "node" => Some("npm_install (Node)"),
            "bun" => Some("bun_install (Bun)"),
            "git" => Some("git_clone (git)"),
            "mcp-gateway" => Some("add_mcp_server"),
            "devcontainer" => Some("a dev container"),
            "sudo" => Some("sudo"),
            _ => None,
        })
}

/// The files of an uploaded tar (gzipped or not) that `src` names, each at its place under
/// `dest` as E2B places them (a file at `dest`, or into it when it ends with `/`; a
/// folder's contents into `dest`), relative to the sandbox's root. Hostile bytes: every
/// path is checked, links are refused, and what is unpacked is bounded.
fn unpack(
    at: &str,
    tar: &[u8],
    src: &str,
    dest: &str,
    unpacked: &mut u64,
) -> Result<Vec<(String, Vec<u8>)>, E2bError> {
    let bad = |why: String| invalid(format!("{at} (COPY {src:?}): {why}"));
    let reader: Box<dyn Read + '_> = if tar.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(tar))
    } else {
        Box::new(tar)
    };
    let src = src.trim_start_matches("./").trim_end_matches('/');
    // A glob's fixed part: what the copied paths are taken relative to.
    let base: String = src
        .split('/')
        .take_while(|p| !p.contains(['*', '?', '[']))
        .collect::<Vec<_>>()
        .join("/");
    let glob = base != src;
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(reader.take(MAX_UNPACKED_BYTES + (1 << 20)));
    for entry in archive
        .entries()
        .map_err(|e| bad(format!("not a tar: {e}")))?
    {
        let mut entry = entry.map_err(|e| bad(format!("a damaged tar: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| bad(format!("a path: {e}")))?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_string();
        let kind = entry.header().entry_type();
        let target = if path == src && !glob {
            if dest.ends_with('/') {
                let file = path.rsplit('/').next().unwrap_or(&path);
                format!("{dest}{file}")
            } else {
                dest.to_string()
            }
        } else if let Some(rel) = path
            .strip_prefix(&format!("{base}/"))
            .filter(|_| !base.is_empty())
        {
            format!("{}/{rel}", dest.trim_end_matches('/'))
        } else if base.is_empty() {
            format!("{}/{path}", dest.trim_end_matches('/'))
        } else {
            continue;
        };
        if kind.is_dir() {
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(bad(format!(
                "{path} is a link: links are not copied (copy with resolve_symlinks=True)"
            )));
        }
        if !kind.is_file() {
            return Err(bad(format!("{path} is not a file or a folder")));
        }
        let size = entry.header().size().unwrap_or(u64::MAX);
        *unpacked = unpacked.saturating_add(size);
        if *unpacked > MAX_UNPACKED_BYTES {
            return Err(bad(format!(
                "the files unpack to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        let rel = target.trim_start_matches('/').to_string();
        crate::vocabulary::check_relative_path(&rel).map_err(|e| bad(format!("{target}: {e}")))?;
        let mut content = Vec::with_capacity(size as usize);
        entry
            .read_to_end(&mut content)
            .map_err(|e| bad(format!("{path}: {e}")))?;
        out.push((rel, content));
    }
    if out.is_empty() {
        return Err(bad("no file of the upload matches it".into()));
    }
    Ok(out)
}

/// Paging of a build's log (`logsOffset`, `limit`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogPage {
    #[serde(default)]
    logs_offset: usize,
    #[serde(default = "hundred")]
    limit: usize,
}

fn hundred() -> usize {
    100
}

async fn build_status(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path((id, build)): Path<(String, String)>,
    Query(page): Query<LogPage>,
) -> Result<Response, E2bError> {
    let info = intake::template::get(&door.app.runner, ctx.key_id.as_deref(), name_of(&id)).await?;
    Ok(Json(status_of(&info, &id, &build, &page)).into_response())
}

/// E2B's status of a build: `building`, `ready` or `error` (with its `reason`), and its log
/// entries from `page.logs_offset` on.
fn status_of(info: &TemplateInfo, id: &str, build: &str, page: &LogPage) -> Value {
    let at = chrono_like(info.created_at);
    let mut entries = Vec::new();
    for step in &info.log {
        for (level, text) in [("info", &step.stdout), ("warn", &step.stderr)] {
            for line in text.lines() {
                entries.push(json!({
                    "timestamp": at, "level": level,
                    "message": format!("{}: {line}", step.step), "step": e2b_step(&step.step),
                }));
            }
        }
    }
    let page_of: Vec<Value> = entries
        .into_iter()
        .skip(page.logs_offset)
        .take(page.limit.min(1000))
        .collect();
    let mut body = json!({
        "templateID": id, "buildID": build, "logs": [], "logEntries": page_of,
        "status": match info.status {
            TemplateStatus::Building => "building",
            TemplateStatus::Ready => "ready",
            TemplateStatus::Failed => "error",
        },
    });
    if let Some(e) = &info.error {
        body["reason"] = json!({
            "message": format!("{}: {}", e.step, e.reason),
            "step": e2b_step(&e.step),
            "logEntries": [],
        });
    }
    body
}

/// E2B's number of a step (`steps[2]` is its `"3"`); Vivarium's own name for the others.
fn e2b_step(step: &str) -> String {
    step.strip_prefix("steps[")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|n| n.parse::<usize>().ok())
        .map_or_else(|| step.to_string(), |n| (n + 1).to_string())
}

/// RFC 3339 of a time in seconds since the epoch (UTC).
fn chrono_like(secs: u64) -> String {
    crate::supervisor::time::rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// `GET /templates/aliases/{alias}`: whether the caller has a template of that name.
async fn alias(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(alias): Path<String>,
) -> Result<Response, E2bError> {
    let info =
        intake::template::summary(&door.app.runner, ctx.key_id.as_deref(), name_of(&alias)).await?;
    Ok(Json(json!({"templateID": info.name, "public": false})).into_response())
}
