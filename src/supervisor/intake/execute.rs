//! An execution: a program in a fresh sandbox. [`prepare`] turns an [`ExecuteRequest`] into
//! the run it asks for, complete (limits and template resolved, files decoded, packages
//! resolved, the leakage guard with the secrets', tools, the network grant); [`execute`]
//! prepares and runs it. The doors that run a program from an [`ExecuteRequest`] come
//! through here: `POST /v1/execute` plain and streamed, MCP's `execute_python` and a
//! sessionless `run_command`; Piston's door asks for a plain run instead (`plain.rs`).

use std::sync::Arc;

use super::ask::ExecuteRequest;
use super::resolve::{decode_files, network_of, no_tools_in_shell, toolbox, volume_mounts};
use crate::leakage::Guard;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::metrics::RunKind;
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};
use crate::vivarium::{Executed, Program, RunSpec};

/// A run ready to go: what [`Runner::execute`] takes, and for code mode (whose journal
/// replays the run after a restart) the package specifiers it was resolved from.
pub struct Prepared {
    pub spec: RunSpec,
    /// The leakage guard its output and its tool calls go through.
    pub guard: Arc<Guard>,
    /// The package specifiers as asked, with those its `pip install` lines name.
    pub packages: Vec<String>,
}

/// Runs what `ask` asks for (it has no tools: code mode starts at [`prepare`]), recording
/// what it learns in `record`.
pub async fn execute(
    runner: &Runner,
    ask: ExecuteRequest,
    record: &mut AuditRecord,
) -> SupervisorResult<Executed> {
    let Prepared { spec, guard, .. } = prepare(runner, ask, record).await?;
    runner.execute(spec, guard, RunKind::Execute, record).await
}

/// The run `ask` asks for, every part checked and resolved (a fault is a
/// [`SupervisorError`] naming its field), its limits and code recorded in `record`.
pub async fn prepare(
    runner: &Runner,
    ask: ExecuteRequest,
    record: &mut AuditRecord,
) -> SupervisorResult<Prepared> {
    let host = runner.host()?;
    let req = ask;
    record.set_code(&req.code);
    let chosen = runner
        .template_for(record.key_id.as_deref(), req.template.as_deref())
        .await?;
    let limits = host.resolve_limits(&req.limits.unwrap_or_default())?;
    record.limits = Some(limits);
    let files = decode_files(req.files, limits.disk_bytes)?;
    let volumes = volume_mounts(req.volumes, &files)?;
    // Its own packages (its template's come with it); those its `pip install` lines name
    // are given to it as if named in `packages`.
    let mut packages = req.packages;
    for named in host.packages_named_by(&req.code, req.language) {
        if !packages.contains(&named) {
            packages.push(named);
        }
    }
    host.check_packages(&packages)
        .map_err(SupervisorError::Package)?;
    let env: Vec<(String, String)> = req.env.into_iter().collect();
    let policy = runner.leak_policy(req.leakage)?;
    let tools = toolbox(req.tools, req.tool_limits)?;
    no_tools_in_shell(req.language, &tools)?;
    // A program with tools is replayed after a restart, and its requests would not be:
    // it gets no network unless it asks, and then a clear refusal.
    if tools.is_some() && (req.network.is_some() || !req.secrets.is_empty()) {
        return Err(SupervisorError::InvalidRequest(
            "network: a program with tools cannot have network yet (a suspended execution is replayed, and its requests would not be)"
                .into(),
        ));
    }
    let (network, secrets) = match tools {
        Some(_) => (None, Default::default()),
        None => network_of(runner, req.network, req.secrets, record)?,
    };
    let guard = runner.leak_guard_with_secrets(policy, &env, &req.leakage_allow_env, &secrets);
    let env = secrets.lay_over(env);
    let resolved = runner
        .template_packages(&chosen, packages.clone(), record)
        .await?;
    // What code mode's journal replays: every specifier the run was resolved from.
    let packages = [chosen.packages.clone(), packages].concat();
    let spec = RunSpec {
        program: Program {
            code: req.code,
            stdin: req.stdin.map(String::into_bytes).unwrap_or_default(),
            files,
            limits,
            env,
            template: chosen.template,
            rich: true,
            line_buffered: false,
            policy: req.policy,
            tools,
            seed: None,
            network,
            language: req.language,
            volumes,
            layer: chosen.layer,
        },
        observer: None,
        packages: resolved,
        tools: None,
        egress: None,
        secrets,
        volumes: Vec::new(),
    };
    Ok(Prepared {
        spec,
        guard,
        packages,
    })
}
