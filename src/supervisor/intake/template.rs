//! A template's asks: [`build`] one (`POST /v1/templates`), and read or delete them. A
//! build's inputs are checked here, each fault naming its field; its id is a hash of all of
//! them with the tenant; the build itself runs in a task of its own
//! ([`Runner::run_build`]), which the request does not wait for.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::ask::FileIn;
use super::resolve::{decode_files, files_within};
use crate::guest::Language;
use crate::limits::LimitsRequest;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::runner::BuildPlan;
use crate::supervisor::templates::{
    Kept, TemplateInfo, TemplateStatus, UserTemplateError, check_name,
};
use crate::supervisor::time::now_secs;
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};
use crate::template::Template;
use crate::vivarium::BuildProgram;
pub use crate::vivarium::{BuildStep, InputFile};

/// At most this many shell steps, and imports.
pub const MAX_STEPS: usize = 64;
/// The longest shell step, and the longest set-up code.
pub const MAX_STEP_BYTES: usize = 256 << 10;

/// `POST /v1/templates`: a template to build. Steps run in this order: `files` laid down,
/// `workdir` made and entered, each of `commands` (the sandbox's shell), `setup` (Python),
/// then `imports`; then the interpreter's state is captured as the template.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateRequest {
    /// 1 to 63 of `A-Z a-z 0-9 . _ -`, starting with a letter or a digit; not `python` or
    /// `scientific`. Building a name again with other inputs makes a new version of it.
    #[schema(example = "reporting")]
    pub name: String,
    /// What it starts from: `scientific` (the default), `python`, or another of the
    /// caller's templates (its packages, files, variables and state included).
    #[serde(default)]
    pub from: Option<String>,
    /// Extra pure-Python packages, as for `POST /v1/execute`: installed once, on the path of
    /// every sandbox from the template.
    #[serde(default)]
    #[schema(example = json!(["humanize", "tabulate"]))]
    pub packages: Vec<String>,
    /// Files laid in the working directory, as for `POST /v1/execute`.
    #[serde(default)]
    pub files: Vec<FileIn>,
    /// Shell lines, each run by the sandbox's own shell (`docs/guides/shell.md`); `cd` and
    /// `export` carry over to the next ones and into the template. A non-zero exit fails
    /// the build.
    #[serde(default)]
    #[schema(example = json!(["mkdir -p reports", "echo ready > reports/README"]))]
    pub commands: Vec<String>,
    /// Python run after the commands (an uncaught exception fails the build): what it
    /// defines and imports is in every sandbox from the template.
    #[serde(default)]
    #[schema(example = "import humanize\nTITLE = 'Quarterly'")]
    pub setup: Option<String>,
    /// Modules imported last, so no run from the template pays for importing them.
    #[serde(default)]
    #[schema(example = json!(["humanize", "tabulate"]))]
    pub imports: Vec<String>,
    /// Environment variables of every sandbox from the template (a request's own are laid
    /// over them). Their values are not shown by `GET /v1/templates`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The folder sandboxes from it start in (made if missing): relative to the working
    /// directory, or absolute.
    #[serde(default)]
    pub workdir: Option<String>,
    /// The build's limits (each step's time, fuel and output; memory and disk for the
    /// whole build), as for `POST /v1/execute`.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
}

/// A build as the intake takes it from any door: its files decoded, its steps in order.
#[derive(Debug, Default)]
pub struct BuildAsk {
    pub name: String,
    /// As [`TemplateRequest::from`].
    pub from: Option<String>,
    pub packages: Vec<String>,
    pub files: Vec<InputFile>,
    /// Run in this order, after the files are laid.
    pub steps: Vec<BuildStep>,
    pub env: BTreeMap<String, String>,
    /// Where sandboxes from it start, when a door needs to know (E2B's WORKDIR): shown as
    /// the template's `workdir`.
    pub workdir: Option<String>,
    pub limits: Option<LimitsRequest>,
}

impl TemplateRequest {
    /// The ask, its files decoded and its steps in their order (a fault names its field).
    pub fn into_ask(self) -> SupervisorResult<BuildAsk> {
        let steps = steps_of(
            self.workdir.as_deref(),
            &self.commands,
            self.setup.as_deref(),
            &self.imports,
        )?;
        Ok(BuildAsk {
            name: self.name,
            from: self.from,
            packages: self.packages,
            files: decode_files(self.files, u64::MAX)?,
            steps,
            env: self.env,
            workdir: self.workdir,
            limits: self.limits,
        })
    }
}

/// Starts the build `ask` asks for (`POST /v1/templates`), for the tenant of the key
/// `record` names: [`build_ask`] of its parts.
pub async fn build(
    runner: &Arc<Runner>,
    ask: TemplateRequest,
    record: &mut AuditRecord,
) -> SupervisorResult<(bool, TemplateInfo)> {
    runner.host()?;
    build_ask(runner, ask.into_ask()?, record).await
}

/// Starts the build `ask` asks for, for the tenant of the key `record` names. Answers the
/// template as it stands: `building` (the build started, `true`), or, when the tenant
/// already has a ready template of identical inputs, `ready` at once (`false`).
pub async fn build_ask(
    runner: &Arc<Runner>,
    ask: BuildAsk,
    record: &mut AuditRecord,
) -> SupervisorResult<(bool, TemplateInfo)> {
    let host = runner.host()?;
    let store = runner.user_templates()?;
    check_name(&ask.name)?;
    let key = record.key_id.clone();
    let tenant = runner.tenant(key.as_deref());
    store.sync(tenant.id()).await?;
    let from = ask
        .from
        .clone()
        .unwrap_or_else(|| Template::default().to_string());
    let parent = runner.template_for(key.as_deref(), Some(&from)).await?;
    let limits = host.resolve_limits(&ask.limits.unwrap_or_default())?;
    record.limits = Some(limits);
    let files = ask.files;
    files_within(&files, limits.disk_bytes)?;
    let steps = ask.steps;
    let mut env: Vec<(String, String)> = parent
        .layer
        .as_ref()
        .map(|l| l.env.clone())
        .unwrap_or_default();
    env.retain(|(k, _)| !ask.env.contains_key(k));
    env.extend(ask.env);
    crate::vocabulary::check_env(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| SupervisorError::InvalidRequest(format!("env: {e}")))?;
    let mut packages = parent.packages.clone();
    packages.extend(ask.packages.iter().cloned());
    host.check_packages(&packages)
        .map_err(SupervisorError::Package)?;
    let base_key = host
        .binding(parent.template)
        .map_err(|e| SupervisorError::Internal(e.to_string()))?
        .template_key;

    // The id: every input, with the tenant and what it starts from.
    let mut h = Sha256::new();
    let mut part = |b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    part(b"vivarium-user-template-v1");
    part(tenant.id().as_bytes());
    part(base_key.as_bytes());
    part(
        parent
            .layer
            .as_ref()
            .map_or(from.as_str(), |l| l.id.as_str())
            .as_bytes(),
    );
    for p in &packages {
        part(p.as_bytes());
    }
    part(b"files");
    for f in &files {
        part(f.path.as_bytes());
        part(&Sha256::digest(&f.content));
    }
    part(b"steps");
    for s in &steps {
        part(s.name.as_bytes());
        part(s.code.as_bytes());
    }
    part(b"workdir");
    part(ask.workdir.as_deref().unwrap_or("").as_bytes());
    part(b"env");
    for (k, v) in &env {
        part(k.as_bytes());
        part(v.as_bytes());
    }
    part(&serde_json::to_vec(&limits).unwrap_or_default());
    let id = hex::encode(h.finalize());

    let old = store.get(tenant.id(), &ask.name);
    if let Some(old) = &old {
        if old.info.status == TemplateStatus::Building {
            return Err(UserTemplateError::Building(ask.name).into());
        }
        if old.info.id == id && old.info.status == TemplateStatus::Ready {
            return Ok((false, old.info.clone()));
        }
    }
    let version = old.as_ref().map_or(1, |o| o.info.version + 1);
    let (count, _) = store.usage(tenant.id(), &ask.name);
    if count >= store.limits.templates {
        return Err(UserTemplateError::TooMany(store.limits.templates).into());
    }
    // Identical inputs built before under another name: the same layer, at once.
    if let Some(same) = store.ready_with_id(tenant.id(), &id) {
        let mut kept = same;
        kept.info.name = ask.name.clone();
        kept.info.version = version;
        kept.info.created_at = now_secs();
        let info = kept.info.clone();
        if let Some(old) = store.put(tenant.id(), kept).await? {
            runner.forget_layer_later(old);
        }
        return Ok((false, info));
    }
    let place = store
        .begin_build(tenant.id())
        .ok_or(UserTemplateError::TooManyBuilds(store.limits.builds))?;
    let kept = Kept {
        info: TemplateInfo {
            name: ask.name.clone(),
            status: TemplateStatus::Building,
            builtin: false,
            id: id.clone(),
            version,
            from,
            base: parent.template,
            bytes: 0,
            created_at: now_secs(),
            build_ms: None,
            env: env.iter().map(|(k, _)| k.clone()).collect(),
            workdir: ask.workdir.clone(),
            packages: Vec::new(),
            error: None,
            log: Vec::new(),
        },
        log: Vec::new(),
        env: env.clone(),
        packages: packages.clone(),
        memory_bytes: 0,
    };
    store.put(tenant.id(), kept.clone()).await?;
    let starts_with = host
        .starting_bytes(parent.template, 0)
        .saturating_add(parent.layer.as_ref().map_or(0, |l| l.extra_bytes));
    let plan = BuildPlan {
        kept: kept.clone(),
        tenant,
        program: BuildProgram {
            template: parent.template,
            layer: parent.layer,
            limits,
            env,
            files,
            steps,
        },
        packages,
        place,
        starts_with,
        record: record.clone(),
    };
    tokio::spawn(runner.clone().run_build(plan));
    Ok((true, kept.info))
}

/// The caller's template `name` with its build's log, or a built-in one.
pub async fn get(runner: &Runner, key: Option<&str>, name: &str) -> SupervisorResult<TemplateInfo> {
    runner.sync_templates(key).await?;
    read(runner, key, name, |k| TemplateInfo {
        log: k.log.clone(),
        ..k.info.clone()
    })
}

/// The caller's template `name` without its build's log, or a built-in one.
pub async fn summary(
    runner: &Runner,
    key: Option<&str>,
    name: &str,
) -> SupervisorResult<TemplateInfo> {
    runner.sync_templates(key).await?;
    read(runner, key, name, |k| k.info.clone())
}

fn read(
    runner: &Runner,
    key: Option<&str>,
    name: &str,
    f: impl FnOnce(&Kept) -> TemplateInfo,
) -> SupervisorResult<TemplateInfo> {
    if let Ok(t) = name.parse::<Template>() {
        return Ok(builtin(t));
    }
    let store = runner.user_templates()?;
    store
        .read(runner.tenant(key).id(), name, f)
        .ok_or_else(|| UserTemplateError::NotFound(name.chars().take(80).collect()).into())
}

/// The built-in templates, then the caller's.
pub async fn list(runner: &Runner, key: Option<&str>) -> SupervisorResult<Vec<TemplateInfo>> {
    let store = runner.user_templates()?;
    runner.sync_templates(key).await?;
    let mut all: Vec<TemplateInfo> = Template::ALL.into_iter().map(builtin).collect();
    all.extend(store.list(runner.tenant(key).id()));
    Ok(all)
}

/// Deletes the caller's template `name` (sessions and runs started from it go on; its
/// layer goes once no run can still be given it). A build in flight is not deleted.
pub async fn delete(runner: &Arc<Runner>, key: Option<&str>, name: &str) -> SupervisorResult<()> {
    if name.parse::<Template>().is_ok() {
        return Err(SupervisorError::InvalidRequest(format!(
            "{name} is a built-in template: it cannot be deleted"
        )));
    }
    let store = runner.user_templates()?;
    let tenant = runner.tenant(key);
    store.sync(tenant.id()).await?;
    match store.get(tenant.id(), name) {
        None => Err(UserTemplateError::NotFound(name.chars().take(80).collect()).into()),
        Some(k) if k.info.status == TemplateStatus::Building => {
            Err(UserTemplateError::Building(name.to_string()).into())
        }
        Some(_) => {
            if let Some(old) = store.remove(tenant.id(), name).await? {
                runner.forget_layer_later(old);
            }
            Ok(())
        }
    }
}

fn builtin(t: Template) -> TemplateInfo {
    TemplateInfo {
        name: t.to_string(),
        status: TemplateStatus::Ready,
        builtin: true,
        id: String::new(),
        version: 1,
        from: String::new(),
        base: t,
        bytes: 0,
        created_at: 0,
        build_ms: None,
        env: Vec::new(),
        workdir: None,
        packages: Vec::new(),
        error: None,
        log: Vec::new(),
    }
}

/// The build's steps in order, each checked (a fault names its field).
fn steps_of(
    workdir: Option<&str>,
    commands: &[String],
    setup: Option<&str>,
    imports: &[String],
) -> SupervisorResult<Vec<BuildStep>> {
    let bad = |m: String| SupervisorError::InvalidRequest(m);
    let mut steps = Vec::new();
    if let Some(dir) = workdir {
        if dir.is_empty() || dir.len() > 1024 || dir.contains('\0') {
            return Err(bad("workdir: 1 to 1024 bytes, no NUL".into()));
        }
        let dir = serde_json::to_string(dir).expect("a string serialises");
        steps.push(BuildStep {
            name: "workdir".into(),
            language: Language::Python,
            code: format!(
                "import os as _o\n_o.makedirs({dir}, exist_ok=True)\n_o.chdir({dir})\ndel _o\n"
            ),
        });
    }
    if commands.len() > MAX_STEPS {
        return Err(bad(format!("commands: at most {MAX_STEPS}")));
    }
    for (i, c) in commands.iter().enumerate() {
        if c.len() > MAX_STEP_BYTES || c.contains('\0') {
            return Err(bad(format!(
                "commands[{i}]: at most {MAX_STEP_BYTES} bytes, no NUL"
            )));
        }
        steps.push(BuildStep {
            name: format!("commands[{i}]"),
            language: Language::Bash,
            code: c.clone(),
        });
    }
    if let Some(code) = setup {
        if code.len() > MAX_STEP_BYTES || code.contains('\0') {
            return Err(bad(format!(
                "setup: at most {MAX_STEP_BYTES} bytes, no NUL"
            )));
        }
        steps.push(BuildStep {
            name: "setup".into(),
            language: Language::Python,
            code: code.to_string(),
        });
    }
    if imports.len() > MAX_STEPS {
        return Err(bad(format!("imports: at most {MAX_STEPS}")));
    }
    for (i, m) in imports.iter().enumerate() {
        let ok = !m.is_empty()
            && m.len() <= 256
            && m.split('.').all(|p| {
                p.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_')
                    && p.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
        if !ok {
            return Err(bad(format!("imports[{i}]: {m:?} is not a module name")));
        }
    }
    if !imports.is_empty() {
        steps.push(BuildStep {
            name: "imports".into(),
            language: Language::Python,
            code: imports.iter().map(|m| format!("import {m}\n")).collect(),
        });
    }
    Ok(steps)
}
