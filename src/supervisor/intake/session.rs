//! A session's asks: [`open`] one (new, or restored from a snapshot), and a turn of it
//! ([`turn_of`] reads a turn ask without its session, [`turn`] runs it). Every door that
//! opens sessions or runs turns comes through here: `/v1/sessions`, MCP's `open_session`
//! and `run_in_session`, a Jupyter kernel, an E2B sandbox.

use std::sync::Arc;

use super::ask::{OpenSessionRequest, OpeningExtras, Query, TurnRequest};
use super::resolve::{
    decode_files, files_within, network_of, no_tools_in_shell, toolbox, volume_mounts,
};
use super::unclaimed::Unclaimed;
use crate::guest::Language;
use crate::snapshot::Labels;
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::runner::{Opening, SessionTurn, Turned};
use crate::supervisor::session::Session;
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};

/// Opens the session `ask` asks for, owned by the key `record` names: a new interpreter
/// (limits and template resolved, packages resolved, its network and secrets granted), or
/// one restored from `ask.snapshot` (then `record`'s action is `session_restore`).
pub async fn open(
    runner: &Runner,
    ask: OpenSessionRequest,
    record: &mut AuditRecord,
) -> SupervisorResult<Arc<Session>> {
    open_labelled(runner, ask, Labels::default(), record).await
}

/// [`open`] with what a door adds (`extras`): the session is labelled, given its end and
/// set up before it is answered; when the set-up fails it is closed and its error is the
/// answer, so nothing half-made is left.
/// A request dropped during the set-up (its client hung up) closes the session too.
pub async fn open_with(
    runner: &Arc<Runner>,
    ask: OpenSessionRequest,
    extras: OpeningExtras,
    record: &mut AuditRecord,
) -> SupervisorResult<Arc<Session>> {
    let OpeningExtras {
        labels,
        deadline,
        set_up,
    } = extras;
    let session = open_labelled(runner, ask, labels, record).await?;
    if let Some(after) = deadline {
        session.set_deadline(after);
    }
    let Some(set_up) = set_up else {
        return Ok(session);
    };
    let key = record.key_id.clone();
    let mut unclaimed = Unclaimed::new(runner, key.as_deref());
    unclaimed.push(&session.id);
    let ran = super::query::query(runner, &session.id, key.as_deref(), Query::SetUp(set_up)).await;
    match ran {
        Ok(_) => {
            unclaimed.claim();
            Ok(session)
        }
        Err(e) => {
            // Closed before the error is answered: no listing after it shows it.
            unclaimed.claim();
            let _ = runner.close_session(&session.id, key.as_deref()).await;
            Err(e)
        }
    }
}

async fn open_labelled(
    runner: &Runner,
    ask: OpenSessionRequest,
    labels: Labels,
    record: &mut AuditRecord,
) -> SupervisorResult<Arc<Session>> {
    let host = runner.host()?;
    let req = ask;
    let history = runner.turn_history(req.keep_turns)?;
    // A session, like a snapshot, is the key's that made it; restoring is the key's own.
    let owner = record.key_id.clone();
    if let Some(snapshot) = req.snapshot {
        if req.network.is_some() || !req.secrets.is_empty() {
            return Err(SupervisorError::InvalidRequest(
                "network: a restored session has no network (a snapshot carries none); \
                 open a new session to give one"
                    .into(),
            ));
        }
        if req.limits.is_some() || req.template.is_some() || !req.packages.is_empty() {
            return Err(SupervisorError::InvalidRequest(
                "a restored session keeps the snapshot's limits, template and packages: \
                 leave `limits`, `template` and `packages` out (add packages after)"
                    .into(),
            ));
        }
        record.action = Action::SessionRestore;
        return runner
            .restore_session(
                &snapshot,
                owner.as_deref(),
                req.leakage,
                req.durable,
                history,
                record,
            )
            .await;
    }
    let chosen = runner
        .template_for(owner.as_deref(), req.template.as_deref())
        .await?;
    let limits = host.resolve_limits(&req.limits.unwrap_or_default())?;
    record.limits = Some(limits);
    host.check_packages(&req.packages)
        .map_err(SupervisorError::Package)?;
    let (network, secrets) = network_of(runner, req.network, req.secrets, record)?;
    let packages = runner
        .template_packages(&chosen, req.packages, record)
        .await?;
    let volumes = volume_mounts(req.volumes, &[])?;
    let opening = Opening {
        limits,
        template: chosen.template,
        layer: chosen.layer,
        leakage: req.leakage,
        durable: req.durable,
        packages,
        owner,
        network: network.map(|network| crate::egress::Grant { network, secrets }),
        labels,
        volumes,
        history,
    };
    runner.open_session(opening, record).await
}

/// The turn `ask` asks for, read without its session (a malformed ask wakes or moves no
/// session): its files are held to the session's disk limit when [`turn`] runs it.
pub fn turn_of(ask: TurnRequest, record: &mut AuditRecord) -> SupervisorResult<SessionTurn> {
    let req = ask;
    record.set_code(&req.code);
    let tools = toolbox(req.tools, req.tool_limits)?;
    no_tools_in_shell(req.language, &tools)?;
    Ok(SessionTurn {
        files: decode_files(req.files, u64::MAX)?,
        code: req.code,
        stdin: req.stdin.map(String::into_bytes).unwrap_or_default(),
        limits: req.limits.unwrap_or_default(),
        policy: req.policy,
        leakage: req.leakage,
        live: None,
        input: None,
        tools,
        tool_asker: None,
        env: Vec::new(),
        language: req.language,
    })
}

/// Runs `turn` in session `id` for `key`: its files within the session's disk limit, the
/// packages its `pip install` lines name added to the session first (as `POST
/// /v1/sessions/{id}/packages` adds them, its state kept, so its pip finds them).
pub async fn turn(
    runner: &Runner,
    id: &str,
    key: Option<&str>,
    turn: SessionTurn,
    record: &mut AuditRecord,
) -> SupervisorResult<Turned> {
    turn_as(runner, id, key, None, turn, record).await
}

/// [`turn`] of a door that wraps what its caller sent (an E2B cell, a command line) in code
/// of its own: `caller` is what was sent and in which language, whose `pip install` lines
/// name the packages (the wrapper's would name none).
pub async fn turn_as(
    runner: &Runner,
    id: &str,
    key: Option<&str>,
    caller: Option<(&str, Language)>,
    turn: SessionTurn,
    record: &mut AuditRecord,
) -> SupervisorResult<Turned> {
    let session = runner.session(id, key).await?;
    files_within(&turn.files, session.limits.disk_bytes)?;
    let (code, language) = caller.unwrap_or((&turn.code, turn.language));
    let named = runner.host()?.packages_named_by(code, language);
    if !named.is_empty() {
        runner.add_packages(id, key, named, record).await?;
    }
    runner.turn(&session, turn, record).await
}

/// [`turn_of`] then [`turn`]: a turn ask of a door that builds it itself (MCP's
/// `run_in_session`).
pub async fn run_turn_ask(
    runner: &Runner,
    id: &str,
    key: Option<&str>,
    ask: TurnRequest,
    record: &mut AuditRecord,
) -> SupervisorResult<Turned> {
    runner.host()?;
    let parsed = turn_of(ask, record)?;
    turn(runner, id, key, parsed, record).await
}
