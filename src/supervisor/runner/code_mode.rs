//! Code mode's executions as the runner keeps them (`supervisor::executions`): begun with a
//! run that has tools, found again by the requests that answer them, kept in the store while
//! suspended, brought back from there by a replay, forked, cancelled.
//!
//! The run itself goes through [`Runner::execute`] like any other (a session turn's through
//! `Runner::turn`): a task the intake spawns (`intake/code_mode.rs`), or a streamed
//! execution's stream task, calls it with the spec [`Runner::begin_execution`] (or the turn
//! [`Runner::begin_turn_execution`]) gave the execution's asker, and ends the execution
//! with its result.

use std::sync::Arc;

use super::Runner;
use crate::leakage::{Guard, LeakPolicy};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::executions::{Execution, Journal, shown};
use crate::tools::ToolCall;
use crate::vivarium::RunSpec;

/// What a code-mode execution was begun with, besides its spec.
pub struct CodeMode<'a> {
    /// Its id (`ex-…`).
    pub id: &'a str,
    /// The key's id that asks.
    pub key: Option<&'a str>,
    /// The extra packages asked for (resolved by the door; kept to resolve again).
    pub packages: &'a [String],
    /// Its leakage policy, and the `env` names whose values are not secrets.
    pub leakage: LeakPolicy,
    /// See [`CodeMode::leakage`].
    pub allow_env: &'a [String],
    /// Driven by an event stream.
    pub streaming: bool,
}

impl Runner {
    /// Begins a code-mode execution of `spec` (which has tools): counted against its
    /// tenant's `suspended_executions` and the server's cap, its randomness seeded (so a
    /// replay draws the same), and `spec.tools` set to its asker.
    pub fn begin_execution(
        &self,
        spec: &mut RunSpec,
        guard: Arc<Guard>,
        how: CodeMode<'_>,
    ) -> SupervisorResult<Arc<Execution>> {
        spec.program.seed = Some(rand::random());
        let journal = Journal {
            id: how.id.to_string(),
            owner: how.key.map(str::to_string),
            program: spec.program.clone(),
            packages: how.packages.to_vec(),
            leakage: how.leakage,
            allow_env: how.allow_env.to_vec(),
            rounds: Vec::new(),
            pending: Vec::new(),
            partial: Vec::new(),
            expires_at: self.executions.expiry(),
        };
        let exec = Execution::new(journal, guard, how.streaming, true);
        self.executions
            .admit(&self.tenant(how.key), exec.clone())
            .map_err(|e| self.quota_refusal(e))?;
        spec.tools = Some(exec.asker());
        Ok(exec)
    }

    /// Begins code mode for session turn `id` of `session` (its turn has tools): counted
    /// like an execution, never kept in the store (its state is the session's), and
    /// `turn.tool_asker` set to its asker.
    pub fn begin_turn_execution(
        &self,
        id: &str,
        key: Option<&str>,
        session: &crate::supervisor::session::Session,
        turn: &mut super::SessionTurn,
        guard: Arc<Guard>,
    ) -> SupervisorResult<Arc<Execution>> {
        let program = crate::vivarium::Program {
            code: turn.code.clone(),
            stdin: Vec::new(),
            files: Vec::new(),
            limits: session.limits,
            env: Vec::new(),
            template: session.template,
            rich: true,
            line_buffered: false,
            policy: turn.policy,
            tools: turn.tools.clone(),
            seed: None,
            network: None,
            language: turn.language,
            volumes: Vec::new(),
            layer: None,
        };
        let journal = Journal {
            id: id.to_string(),
            owner: key.map(str::to_string),
            program,
            packages: Vec::new(),
            leakage: guard.policy(),
            allow_env: Vec::new(),
            rounds: Vec::new(),
            pending: Vec::new(),
            partial: Vec::new(),
            expires_at: self.executions.expiry(),
        };
        let exec = Execution::new(journal, guard, false, false);
        self.executions
            .admit(&self.tenant(key), exec.clone())
            .map_err(|e| self.quota_refusal(e))?;
        turn.tool_asker = Some(exec.asker());
        Ok(exec)
    }

    /// Execution `id` if it is resident here and `key`'s.
    pub fn resident_execution(&self, id: &str, key: Option<&str>) -> Option<Arc<Execution>> {
        self.executions.resident(id, key)
    }

    /// The execution's program waits on a round: unless it is streamed, its journal is
    /// written to the store before anyone is told (so it survives the server's end).
    pub async fn execution_suspended(&self, exec: &Execution) -> SupervisorResult<()> {
        if !exec.kept {
            return Ok(());
        }
        let mut journal = exec.journal();
        journal.expires_at = self.executions.expiry();
        self.executions.keep(&journal).await
    }

    /// A bring-back of execution `id` could not start (its packages could not be had): its
    /// program is let go here, its journal kept, so a later resume tries again.
    pub fn release_execution(&self, id: &str) {
        self.executions.release(id);
    }

    /// The execution ended (its last stop was given): forgotten, its journal deleted.
    pub async fn end_execution(&self, id: &str) {
        self.executions.forget(id).await;
    }

    /// Brings back execution `id` from its journal (evicted, or left by a restart): the
    /// spec to run again, its guard, its extra packages (to resolve) and the execution, now
    /// resident and replaying. 404 when there is none of `key`'s.
    pub async fn bring_back_execution(
        &self,
        id: &str,
        key: Option<&str>,
    ) -> SupervisorResult<(RunSpec, Arc<Guard>, Vec<String>, Arc<Execution>)> {
        let journal = self.executions.load(id, key).await?;
        let host = self.host()?;
        let mut program = journal.program.clone();
        // The store's bytes are hostile: what they ask for is checked as a request's is.
        let l = program.limits;
        let asked = crate::limits::LimitsRequest {
            timeout_ms: Some(l.timeout_ms),
            fuel: Some(l.fuel),
            memory_bytes: Some(l.memory_bytes),
            output_bytes: Some(l.output_bytes),
            disk_bytes: Some(l.disk_bytes),
            open_files: Some(l.open_files),
        };
        program.limits = host.resolve_for(Some(program.template), &asked)?.1;
        let tools = program
            .tools
            .as_ref()
            .ok_or_else(|| SupervisorError::ExecutionNotFound(id.to_string()))?;
        tools
            .check()
            .map_err(|e| SupervisorError::InvalidRequest(e.to_string()))?;
        let guard = self.journal_guard(&journal)?;
        let packages = journal.packages.clone();
        let exec = Execution::new(journal, guard.clone(), false, true);
        self.executions
            .admit(&self.tenant(key), exec.clone())
            .map_err(|e| self.quota_refusal(e))?;
        let spec = RunSpec {
            program,
            observer: None,
            packages: host.no_packages(),
            tools: Some(exec.asker()),
            egress: None,
            secrets: Default::default(),
            volumes: Vec::new(),
        };
        Ok((spec, guard, packages, exec))
    }

    /// Forks suspended execution `id` into a new one, `new_id`, waiting on the same round
    /// (kept in the store: answering it brings it back down its own branch). The calls it
    /// waits on, as they may leave.
    pub async fn fork_execution(
        &self,
        id: &str,
        new_id: &str,
        key: Option<&str>,
    ) -> SupervisorResult<Vec<ToolCall>> {
        let mut journal = match self.executions.resident(id, key) {
            Some(exec) if !exec.kept => {
                return Err(SupervisorError::InvalidRequest(format!(
                    "{id} is a session turn or a streamed execution: only a suspended \
                     execution of POST /v1/execute forks (fork the session instead)"
                )));
            }
            Some(exec) => exec.journal(),
            None => self.executions.load(id, key).await?,
        };
        if journal.pending.is_empty() {
            return Err(SupervisorError::ExecutionBusy(id.to_string()));
        }
        journal.id = new_id.to_string();
        journal.expires_at = self.executions.expiry();
        let guard = self.journal_guard(&journal)?;
        self.executions
            .admit_stored(&self.tenant(key), &journal)
            .map_err(|e| self.quota_refusal(e))?;
        if let Err(e) = self.executions.keep(&journal).await {
            self.executions.forget(new_id).await;
            return Err(e);
        }
        Ok(journal.waiting().map(|c| shown(&guard, c).0).collect())
    }

    /// Cancels execution `id` (resident or kept): its run stops, its journal goes. 404 when
    /// there is none of `key`'s.
    pub async fn cancel_execution(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        if self.executions.resident(id, key).is_none() {
            self.executions.load(id, key).await?;
        }
        self.executions.forget(id).await;
        Ok(())
    }

    /// The sweeper's part: evicts long-suspended executions to their journals, forgets
    /// expired ones; given the store's ids that are no snapshots ([`Runner::sweep_snapshots`]),
    /// deletes the expired journals among them (left in the store by a restart).
    pub(in crate::supervisor) async fn sweep_executions(
        &self,
        not_snapshots: Option<Vec<crate::snapshot::SnapshotId>>,
    ) {
        let (evicted, expired) = self.executions.sweep(not_snapshots).await;
        if evicted + expired > 0 {
            tracing::info!(evicted, expired, "code-mode executions swept");
        }
    }

    /// The leakage guard a journal's execution ran under: its policy (no weaker than the
    /// server's floor now), its environment's values as secrets but those it allowed.
    fn journal_guard(&self, journal: &Journal) -> SupervisorResult<Arc<Guard>> {
        let policy = self.leak_policy(Some(journal.leakage))?;
        Ok(self.leak_guard(policy, &journal.program.env, &journal.allow_env))
    }

    /// A quota refusal, counted as admission's are.
    fn quota_refusal(&self, e: SupervisorError) -> SupervisorError {
        match e {
            SupervisorError::QuotaExceeded(q) => self.admission.refuse(q),
            e => e,
        }
    }
}
