//! Session runs: opening an interpreter, a turn in it, its files, closing it.
//!
//! Each is one use of the session ([`Busy`], `supervisor/session/`): it has the interpreter
//! for the length of the turn or file operation (which run in its worker) and puts it back
//! after, unless the turn ended it or the session was closed meanwhile.

use std::sync::Arc;

use super::{
    LiveText, Runner, TextSink, failure, job_error, out_of_turn, withhold_if_denied,
    withhold_unredactable,
};
use crate::check::Policy;
use crate::guest::Language;
use crate::hostcalls::input::InputAsker;
use crate::leakage::LeakPolicy;
use crate::limits::{Limits, TurnLimits, TurnLimitsRequest};
use crate::packages::{PackageEnv, PackagePin};
use crate::report::FileBody;
use crate::snapshot::{Labels, LabelsError, SessionImage};
use crate::supervisor::admission::{MemoryNeed, RESERVE_BYTES};
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::{CloseReason, RunKind, SessionEvent};
use crate::supervisor::registry::Removed;
use crate::supervisor::session::{
    Busy, EndInfo, PutBack, Session, SessionInfo, SessionSettings, SessionState, is_session_id,
    may_use,
};
use crate::supervisor::session::{SessionMetrics, TurnDone, Turned};
use crate::supervisor::time::rfc3339;
use crate::template::Template;
use crate::vivarium::{InputFile, TurnProgram};
use crate::worker::{Failure, Job, JobError, PackageRef, Placed, Reply, Sinks, Target, TurnJob};

/// One turn as a front door asks for it.
pub struct SessionTurn {
    /// Python source; a final expression's value is the turn's result.
    pub code: String,
    /// What the turn reads on stdin.
    pub stdin: Vec<u8>,
    /// Written into the working directory before the code runs.
    pub files: Vec<InputFile>,
    /// Per-turn limits; each left out is the session's.
    pub limits: TurnLimitsRequest,
    /// The pre-execution check, by a checker of the worker's (the session is not touched).
    pub policy: Policy,
    /// The leakage policy of this turn; `None` is the session's.
    pub leakage: Option<LeakPolicy>,
    /// Sees the turn's output as it is written, under the same leakage policy (a kernel's
    /// `stream` messages). A final value's echo and an uncaught exception's traceback are
    /// not shown live: they are the result's `result` and `error`.
    pub live: Option<TextSink>,
    /// Answers the turn's `input()` calls (a kernel's `input_request`); without it `input()`
    /// reads `stdin`.
    pub input: Option<InputAsker>,
    /// Code mode: the tools the turn's code may call.
    pub tools: Option<crate::tools::Toolbox>,
    /// Answers their calls (`Runner::begin_turn_execution`).
    pub tool_asker: Option<crate::hostcalls::tools::ToolAsker>,
    /// Variables of this turn alone (an E2B cell's `env_vars`, checked by
    /// `guest::check_env`): set before its code and undone after it, in the same use of the
    /// session, so no other turn sees them.
    pub env: Vec<(String, String)>,
    /// What `code` is written in: Python (notebook syntax translated) or a shell script,
    /// whose `cd` and `export` stay for the session's next turns.
    pub language: Language,
}

impl SessionTurn {
    /// A turn of `code` alone, its output to `live`: no stdin, files, tools or `input()`
    /// asker, the session's limits and leakage policy, and no pre-execution check (a
    /// notebook's cell: the doors that speak one have nowhere to show findings; the sandbox
    /// is the boundary).
    pub fn cell(code: String, live: Option<TextSink>) -> SessionTurn {
        SessionTurn {
            code,
            stdin: Vec::new(),
            files: Vec::new(),
            limits: TurnLimitsRequest::default(),
            policy: Policy::Off,
            leakage: None,
            live,
            input: None,
            tools: None,
            tool_asker: None,
            env: Vec::new(),
            language: Language::Python,
        }
    }

    /// A command line as E2B's `commands.run` runs it: a [`SessionTurn::cell`] of the
    /// guest's shell, in `cwd`, as a new process would run it (nothing of its `cd` or
    /// `export` kept), its exit status the turn's result (`guest::command_source`).
    pub fn command(line: &str, cwd: &str, live: Option<TextSink>) -> SessionTurn {
        SessionTurn::cell(crate::guest::command_source(line, cwd), live)
    }
}

/// A new session as a front door asks for it.
pub struct Opening {
    /// Resolved.
    pub limits: Limits,
    /// Resolved.
    pub template: Template,
    /// As asked (the server's default when `None`).
    pub leakage: Option<LeakPolicy>,
    /// Every completed turn snapshotted.
    pub durable: bool,
    /// Its extra packages, resolved.
    pub packages: Arc<PackageEnv>,
    /// The key that opens it.
    pub owner: Option<String>,
    /// Its network and secrets ([`Runner::network_grant`]).
    pub network: Option<crate::egress::Grant>,
    /// What its door gives it besides its state (checked before it opens).
    pub labels: Labels,
    /// Volumes mounted for its life.
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// A user template's layer over `template`.
    pub layer: Option<crate::template::LayerRef>,
    /// What it keeps of its last turns ([`Runner::turn_history`]).
    pub history: crate::vocabulary::TurnHistory,
}

impl Runner {
    /// Opens a session from `template` under `limits` (already resolved): a place under the
    /// resident cap, its reserve in the memory budget for its whole life, then the interpreter
    /// in the worker with the least work.
    /// `leakage` is its turns' and file reads' policy unless a turn names its own.
    /// A durable session (`durable`) snapshots every completed turn to the store. It is
    /// `owner`'s (the API key's id) alone.
    pub async fn open_session(
        &self,
        opening: Opening,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let Opening {
            limits,
            template,
            leakage,
            durable,
            packages,
            owner,
            network,
            labels,
            volumes,
            layer,
            history,
        } = opening;
        labels
            .check()
            .map_err(|e| SupervisorError::InvalidRequest(e.to_string()))?;
        let leakage = self.leak_policy(leakage)?;
        let settings = SessionSettings {
            limits,
            template,
            leakage,
            turns: 0,
            durable,
            resumed: None,
            owner,
            network: network.map(Arc::new),
            labels,
            volumes,
            history,
        };
        let starts_with = layer.as_ref().map(|l| {
            self.host()
                .map_or(0, |h| h.starting_bytes(template, 0))
                .saturating_add(l.extra_bytes)
        });
        let job = Job::Open {
            limits,
            template,
            packages: PackageRef::of(&packages),
            want_image: durable,
            volumes: Vec::new(),
            layer: layer.map(Box::new),
        };
        let (session, first) = self
            .admit_session(
                settings,
                record,
                starts_with,
                Placing::Anywhere(job),
                packages,
            )
            .await?;
        if let Some(image) = first {
            self.keep_own_snapshot(&session, *image).await?;
        }
        Ok(session)
    }

    /// Admits a new session under `settings` (a place under the cap, its memory reserve
    /// for its whole life, a concurrency slot while it is made), makes its interpreter with
    /// `job` (an open or a restore) in the worker with the least work, and registers it.
    /// `starts_with` is the memory its interpreter starts with (a restored image's), `None`
    /// for its template's. Returns the first state too when the job asked for it.
    pub(super) async fn admit_session(
        &self,
        settings: SessionSettings,
        record: &mut AuditRecord,
        starts_with: Option<u64>,
        placing: Placing,
        packages: Arc<PackageEnv>,
    ) -> SupervisorResult<(Arc<Session>, Option<Box<SessionImage>>)> {
        let host = self.host()?;
        let need = MemoryNeed {
            reserve: RESERVE_BYTES,
            starts_with: starts_with.unwrap_or_else(|| host.starting_bytes(settings.template, 0)),
            counted: true,
        };
        let tenant = self.tenant(settings.owner.as_deref());
        // Full (resident sessions, or the budget): the coldest idle sessions hibernate.
        self.make_room(need.reserve + need.starts_with, true).await;
        let slot = self.resident_place(&tenant).await?;
        let memory = self.session_memory(&tenant, need).await?;
        // Its volumes, lent for its life (the job mounts them).
        let (leases, lent) = self
            .lend_volumes(tenant.id(), &settings.volumes, settings.limits.disk_bytes)
            .await?;
        let placing = placing.lending(lent);
        let ticket = self.admission.admit(&tenant, None).await?;
        // What a job's failure names: the session forked, or none yet.
        let about = match &placing {
            Placing::Beside(busy, _) => busy.session().id.clone(),
            Placing::Anywhere(_) => String::new(),
        };
        let (target, reply) = match placing {
            Placing::Anywhere(job) => {
                let target =
                    self.workers()?.pick_live().await.ok_or_else(|| {
                        SupervisorError::WorkerLost("no worker is running".into())
                    })?;
                let reply = target.call(job, Sinks::default()).await;
                (target, reply)
            }
            Placing::Beside(busy, job) => fork_held(busy, job).await?,
        };
        drop(ticket);
        let (handle, image) = match reply.map_err(|f| failure(f, &about))? {
            Reply::Opened { handle, image } => (handle, image),
            _ => return Err(out_of_turn()),
        };
        let (durable, resumed) = (settings.durable, settings.resumed.is_some());
        let session = Session::new(
            Placed::new(target, handle, packages).holding(leases),
            settings,
            need.starts_with,
            memory,
            slot,
            self.sessions.idle,
            self.sessions.lifetime,
        );
        // A new session's lease (one brought back took its lease before it was loaded).
        if let Some(c) = &self.cluster
            && !resumed
            && let Err(e) = c
                .create(&session.id, durable, session.owner.as_deref())
                .await
        {
            session.close().release();
            return Err(e);
        }
        self.sessions.insert(session.clone());
        self.note_pressure();
        self.metrics.session_opened();
        record.session_id = Some(session.id.clone());
        Ok((session, image))
    }

    /// Runs one turn in `session`: the check first (policy), then the turn's own limits, the
    /// files, and the code in the kept interpreter, in its worker.
    pub async fn turn(
        &self,
        session: &Arc<Session>,
        t: SessionTurn,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Turned> {
        let policy = self.leak_policy(t.leakage.or(Some(session.leakage)))?;
        let guard = self.session_guard(session, policy);
        let limits = t.limits.resolve(
            &session.limits,
            &self.maximum,
            session.lifetime_left().as_millis() as u64,
        )?;
        let mut shown = session.limits;
        shown.timeout_ms = limits.timeout_ms;
        shown.fuel = limits.fuel;
        shown.output_bytes = limits.output_bytes;
        record.limits = Some(shown);
        let busy = self.begin(session).await?;
        let session = &busy.session().clone();
        // A checked turn's check runs in the turn's own job, in a sandbox of its worker's:
        // admitted here with the turn.
        // A shell script is not checked (nothing of Python to check).
        let need = match (t.policy, t.language) {
            (Policy::Off, _) | (_, Language::Bash) => None,
            _ => Some(self.checker_need().await?),
        };
        let ticket = self.admission.admit(&session.tenant, need).await?;
        let SessionTurn {
            code,
            stdin,
            files,
            live,
            input,
            policy: check,
            tools,
            tool_asker,
            env,
            language,
            ..
        } = t;
        let live = live.map(|sink| LiveText::new(&guard, sink));
        // Network by exception: this turn's requests, performed here with the session's
        // secrets (a program with tools has none, as an execution with tools has none).
        let egress = match (&session.network, &tools) {
            (Some(grant), None) => self
                .run_egress(
                    Some(&grant.network),
                    grant.secrets.clone(),
                    session.tenant.id(),
                    record,
                )
                .map(|(asker, run)| (asker, run, grant)),
            _ => None,
        };
        let job = Job::Turn(Box::new(TurnJob {
            handle: busy.placed().handle,
            interrupts_seen: busy.interrupts_seen(),
            turn: TurnProgram {
                code,
                stdin,
                files,
                limits,
                policy: check,
                tools,
                network: egress.as_ref().map(|(_, _, g)| g.network.clone()),
                // The secrets' placeholders are the turn's own variables, as an execution's.
                env: match &egress {
                    Some((_, _, g)) => g.secrets.lay_over(env),
                    None => env,
                },
                language,
                number: session.turns() + 1,
                history: session.history,
            },
            observe: live.is_some(),
            ask_input: input.is_some(),
            want_image: session.durable,
        }));
        let sinks = Sinks {
            observer: live.as_ref().map(LiveText::observer),
            asker: input,
            parking: tool_asker
                .is_some()
                .then(|| ticket.slot() as Arc<dyn crate::worker::Parking>),
            tools: tool_asker,
            egress: egress.as_ref().map(|(asker, _, _)| asker.clone()),
        };
        let (busy, ran) = call_held(busy, job, sinks).await?;
        drop(ticket);
        self.push_mounted(session).await;
        // What the leakage filter still held (a last line without its newline); under
        // `deny`, nothing once a finding stopped the stream.
        if let Some(live) = &live {
            for (kind, text) in live.finish() {
                (live.sink())(kind, text);
            }
        }
        let turned = match ran {
            Ok(Reply::Turned(t)) => t,
            Ok(Reply::TurnDenied(findings)) if check == Policy::Deny => {
                busy.finish(PutBack::Same);
                // Nothing ran, under no limits: its audit line has none.
                record.limits = None;
                return Ok(Turned::Denied(findings));
            }
            Ok(_) => {
                busy.finish(PutBack::Same);
                return Err(out_of_turn());
            }
            Err(Failure::Lost) => {
                busy.finish(PutBack::Ended {
                    end: EndInfo::worker_lost("it died during a turn"),
                    turn: true,
                });
                return Err(failure(Failure::Lost, &session.id));
            }
            Err(Failure::Job(JobError::Ended(reason))) => {
                busy.finish(PutBack::Gone);
                return Err(job_error(JobError::Ended(reason), &session.id));
            }
            Err(Failure::Job(e)) => {
                busy.finish(PutBack::Same);
                return Err(job_error(e, &session.id));
            }
        };
        // Scanned before anything leaves (off the executor when it is large).
        let crate::worker::TurnReply {
            mut report,
            result,
            ended,
            rolled_back,
            image,
            findings,
            unkept,
        } = turned;
        self.hint_missing_module(&mut report);
        report.network = egress.map(|(_, run, _)| run.usage());
        let (report, result, leaks) = super::scan_output(guard, *report, result).await?;
        let ended = ended.as_ref().map(EndInfo::from_reason);
        session.note_footprint(
            report
                .usage
                .memory_peak_bytes
                .saturating_add(report.usage.disk_bytes),
        );
        session.note_usage(&report.usage, report.network.as_ref());
        match &ended {
            Some(end) => {
                self.metrics.session_closed(CloseReason::Ended);
                let end = end.clone();
                busy.finish(PutBack::Ended { end, turn: true });
            }
            None => busy.finish(PutBack::Turned),
        }
        if let Some(image) = image {
            self.keep_own_snapshot(session, *image).await?;
        }
        if ended.is_some() {
            self.forget_own_snapshot(&session.id);
        }
        self.metrics.executed(RunKind::SessionTurn, &report);
        if rolled_back {
            self.metrics.session_event(SessionEvent::Rollback);
        }
        record.set_report(&report);
        // The turn ran and the session keeps its state; under `deny` only what it returned
        // is held.
        withhold_if_denied(policy, leaks, record)?;
        Ok(Turned::Ran(Box::new(TurnDone {
            report,
            result,
            ended,
            rolled_back,
            turn: session.turns(),
            findings,
            unkept,
        })))
    }

    /// Adds the packages `raw` names to session `id` (its own keep their versions: they are
    /// pinned in the resolution); returns every wheel it then has. Its state moves to a
    /// fresh instance that sees the new environment ([`Vivarium::add_packages`], in its
    /// worker); when that fails the session goes on as it was.
    pub async fn add_packages(
        &self,
        id: &str,
        key: Option<&str>,
        raw: Vec<String>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Vec<PackagePin>> {
        let host = self.host()?;
        host.check_packages(&raw)
            .map_err(SupervisorError::Package)?;
        let session = self.session(id, key).await?;
        let busy = self.begin(&session).await?;
        let session = busy.session().clone();
        let current = busy.placed().packages.pins.clone();
        busy.finish(PutBack::Same);
        let mut all: Vec<String> = current
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect();
        all.extend(raw);
        let env = self.packages(all, record).await?;
        if env.pins == current {
            return Ok(current);
        }
        let busy = self.begin(&session).await?;
        let job = Job::AddPackages {
            handle: busy.placed().handle,
            packages: PackageRef::of(&env),
        };
        let (mut busy, done) = call_held(busy, job, Sinks::default()).await?;
        match done {
            Ok(_) => {
                busy.placed_mut().packages = env.clone();
                busy.finish(PutBack::Same);
                Ok(env.pins.clone())
            }
            Err(f) => Err(failed(busy, f)),
        }
    }

    /// Runs a query of [`crate::guest::queries`] in session `id` between its turns (409
    /// while one runs) and returns the guest's answer, unparsed. It is not a turn: not
    /// numbered, counted or audited. Its limits are the session's per-turn ones, at most
    /// five seconds and the set-up turn's fuel; one they stop rolls the session back. What a
    /// query that `Changes` the session did is kept through a later turn's rollback.
    pub(in crate::supervisor) async fn query_session(
        &self,
        id: &str,
        key: Option<&str>,
        code: String,
        effect: crate::guest::queries::QueryEffect,
    ) -> SupervisorResult<Option<String>> {
        let session = self.session(id, key).await?;
        let limits = TurnLimits {
            timeout_ms: session.limits.timeout_ms.min(5_000),
            fuel: session.limits.fuel.min(crate::guest::SETUP_LIMITS.fuel),
            output_bytes: 64 << 10,
        };
        let answer = match self
            .use_session(&session, move |handle| Job::Query {
                handle,
                code,
                limits,
                effect,
            })
            .await?
        {
            Reply::Answer(a) => a,
            _ => return Err(out_of_turn()),
        };
        // What changes a durable session is in the store before the answer, as a turn is.
        if effect == crate::guest::queries::QueryEffect::Changes && session.durable {
            self.keep_state_now(&session).await?;
        }
        Ok(answer)
    }

    /// Changes session `id`'s labels with `change` (kept only within their bounds); a
    /// durable session's own snapshot takes them before the answer (or, while a turn runs,
    /// with that turn's). What `change` answered.
    pub async fn relabel<R>(
        &self,
        id: &str,
        key: Option<&str>,
        change: impl FnOnce(&mut Labels) -> Result<R, LabelsError>,
    ) -> SupervisorResult<R> {
        let session = self.session(id, key).await?;
        let answer = session
            .relabel(change)
            .map_err(|e| SupervisorError::InvalidRequest(e.to_string()))?;
        if session.durable {
            match self.keep_state_now(&session).await {
                // A turn runs: its own snapshot, written as it ends, carries the labels.
                Err(SupervisorError::SessionBusy(_)) => {}
                other => other?,
            }
        }
        Ok(answer)
    }

    /// Writes durable `session`'s own snapshot of its state now (after a change that was no
    /// turn: a set-up, a file operation, its labels).
    async fn keep_state_now(&self, session: &Arc<Session>) -> SupervisorResult<()> {
        let image = self.session_image(session).await?;
        self.keep_own_snapshot(session, image).await
    }

    /// Interrupts session `id`'s running turn (it is rolled back, the session goes on);
    /// whether one was running. Only its owner `key` can, and only where it runs.
    pub fn interrupt_session(&self, id: &str, key: Option<&str>) -> SupervisorResult<bool> {
        if self
            .sessions
            .owner_of(id)
            .is_some_and(|owner| !may_use(owner.as_deref(), key))
        {
            return Err(SupervisorError::SessionNotFound(id.to_string()));
        }
        Ok(self.sessions.get(id)?.interrupt())
    }

    /// Every session of `key` here, resident or hibernated.
    pub fn sessions(&self, key: Option<&str>) -> Vec<SessionInfo> {
        self.sessions.infos(key)
    }

    /// Every session of `key` with its labels: those here ([`Runner::sessions`]) and those
    /// the store keeps that no request brought here yet (after a restart, or a failover
    /// from a node that went away; in a cluster, a durable one another node holds), these
    /// as not resident. Reads the header of every snapshot in the store.
    pub async fn sessions_labelled(
        &self,
        key: Option<&str>,
    ) -> SupervisorResult<Vec<(SessionInfo, Labels)>> {
        let mut out = self.sessions.labelled(key);
        let now = crate::supervisor::time::now_secs();
        for (header, record, template) in self.snapshots.own_sessions(key).await? {
            // Known here (live, hibernated or expired): listed above, or not at all.
            if self.sessions.owner_of(&record.id).is_some() {
                continue;
            }
            let (age, idle, left) = self.sessions.stored_ages(&record, header.created_at, now);
            if left.is_zero() {
                continue;
            }
            let wall = std::time::SystemTime::now();
            let info = SessionInfo {
                id: record.id.clone(),
                created_at: rfc3339(wall - age),
                expires_at: rfc3339(wall + left),
                last_used_at: rfc3339(wall - idle),
                state: SessionState::Idle,
                turns: header.turns,
                limits: header.limits,
                template,
                ended: None,
                resident: false,
                volumes: header.volumes.clone(),
            };
            out.push((info, record.labels));
        }
        out.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        Ok(out)
    }

    /// Gives session `id` a fresh interpreter of its template, limits and packages (a
    /// notebook's restart): variables, imports and files are gone; the id stays.
    pub async fn restart_session(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        self.with_session(id, key, move |handle| Job::Restart { handle })
            .await
            .map(drop)
    }

    /// One file of session `id`'s working directory, up to its disk limit, through the
    /// session's leakage policy (a text file is redacted; under `deny` a leak is a 422), in
    /// memory (see [`Runner::read_file_body`]).
    pub async fn read_file(
        &self,
        id: &str,
        key: Option<&str>,
        path: String,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Vec<u8>> {
        let body = self.read_file_body(id, key, path, record).await?;
        tokio::task::spawn_blocking(move || body.into_bytes())
            .await
            .map_err(|e| SupervisorError::Internal(format!("reading the file: {e}")))?
            .map_err(|e| SupervisorError::Internal(format!("reading the file: {e}")))
    }

    /// [`Runner::read_file`], a large file left on disk to be streamed (`worker::held`):
    /// scanned there a chunk at a time; under `redact` one that is text and holds a secret
    /// cannot be rewritten in place and is a 422 `output_leak` as under `deny`.
    pub async fn read_file_body(
        &self,
        id: &str,
        key: Option<&str>,
        path: String,
        record: &mut AuditRecord,
    ) -> SupervisorResult<FileBody> {
        let session = self.session(id, key).await?;
        let guard = self.session_guard(&session, session.leakage);
        let policy = guard.policy();
        let max = session.limits.disk_bytes;
        let asked = path.clone();
        let reply = self
            .use_session(&session, move |handle| Job::ReadFile {
                handle,
                path: asked,
            })
            .await?;
        let body = match reply {
            Reply::File(Some(bytes)) => FileBody::Bytes(bytes.into_vec()),
            Reply::HeldFile { size, held } if held.file.is_some() => FileBody::Held { held, size },
            Reply::File(None) | Reply::HeldFile { .. } => {
                return Err(SupervisorError::FileNotFound(path));
            }
            _ => return Err(out_of_turn()),
        };
        if body.size() > max {
            return Err(SupervisorError::Internal(
                "a worker sent more than the disk limit".into(),
            ));
        }
        let (body, leaks, held_text) = tokio::task::spawn_blocking(move || match body {
            FileBody::Bytes(mut bytes) => {
                let leaks = guard.apply_file(&path, &mut bytes);
                Ok((FileBody::Bytes(bytes), leaks, false))
            }
            FileBody::Held { held, size } => {
                let file = held.file.clone().expect("claimed");
                let scan = crate::worker::held::scan_file(&guard, &path, &file, size)?;
                Ok::<_, std::io::Error>((FileBody::Held { held, size }, scan.leaks, scan.text))
            }
        })
        .await
        .map_err(|e| SupervisorError::Internal(format!("scanning the file: {e}")))?
        .map_err(|e| SupervisorError::Internal(format!("scanning the file: {e}")))?;
        withhold_unredactable(policy, leaks, held_text, record)?;
        Ok(body)
    }

    /// Writes one file into session `id`'s working directory, within its disk limit; returns
    /// the bytes written.
    pub async fn write_file(
        &self,
        id: &str,
        key: Option<&str>,
        path: String,
        bytes: bytes::Bytes,
    ) -> SupervisorResult<u64> {
        let reply = self
            .with_session(id, key, move |handle| Job::WriteFile {
                handle,
                path,
                bytes: serde_bytes::ByteBuf::from(bytes.to_vec()),
            })
            .await?;
        match reply {
            Reply::Wrote(n) => Ok(n),
            _ => Err(out_of_turn()),
        }
    }

    /// Begins a use of `session` (a turn, a file operation, a query). When it hibernated
    /// since the caller looked it up, it is brought back first, and the use is of that one
    /// ([`Busy::session`]).
    pub(super) async fn begin(&self, session: &Arc<Session>) -> SupervisorResult<Busy> {
        match session.begin() {
            Err(SupervisorError::SessionNotFound(_))
                if self.sessions.is_hibernated(&session.id) =>
            {
                let woken = self.session(&session.id, session.owner.as_deref()).await?;
                woken.begin()
            }
            other => other,
        }
    }

    /// The info of session `id` (for `key`, its owner); a hibernated one's without waking
    /// it.
    pub async fn session_info(&self, id: &str, key: Option<&str>) -> SupervisorResult<SessionInfo> {
        self.session_labelled(id, key).await.map(|(info, _)| info)
    }

    /// What session `id` has used (`GET /v1/sessions/{id}/metrics`): a hibernated one
    /// answers from what it left, unwoken.
    pub async fn session_metrics(
        &self,
        id: &str,
        key: Option<&str>,
    ) -> SupervisorResult<SessionMetrics> {
        self.check_owner(id, key).await?;
        if let Ok(s) = self.sessions.get(id)
            && self.cluster.is_none()
        {
            return Ok(s.metrics());
        }
        if let Some(found) = self.sessions.hibernated_metrics(id) {
            return Ok(found);
        }
        Ok(self.session(id, key).await?.metrics())
    }

    /// [`Runner::session_info`] with session `id`'s labels: a hibernated one is not woken
    /// for them.
    pub async fn session_labelled(
        &self,
        id: &str,
        key: Option<&str>,
    ) -> SupervisorResult<(SessionInfo, Labels)> {
        self.check_owner(id, key).await?;
        // With `--cluster` a copy live here answers only while its lease names this node
        // (another may have taken it over, or closed it): `Runner::session` reads the lease.
        if let Ok(s) = self.sessions.get(id)
            && self.cluster.is_none()
        {
            return Ok((s.info(), s.labels()));
        }
        if let Some(found) = self.sessions.hibernated_labelled(id) {
            return Ok(found);
        }
        let s = self.session(id, key).await?;
        Ok((s.info(), s.labels()))
    }

    /// Does the job `job_of` makes for session `id`'s interpreter in its worker, holding
    /// the session busy (409 while a turn runs); a worker lost meanwhile ends the session.
    pub(super) async fn with_session(
        &self,
        id: &str,
        key: Option<&str>,
        job_of: impl FnOnce(crate::worker::Handle) -> Job,
    ) -> SupervisorResult<Reply> {
        let session = self.session(id, key).await?;
        self.use_session(&session, job_of).await
    }

    /// [`Runner::with_session`] for a session the caller has already looked up.
    pub(super) async fn use_session(
        &self,
        session: &Arc<Session>,
        job_of: impl FnOnce(crate::worker::Handle) -> Job,
    ) -> SupervisorResult<Reply> {
        let busy = self.begin(session).await?;
        let job = job_of(busy.placed().handle);
        let (busy, done) = call_held(busy, job, Sinks::default()).await?;
        match done {
            Ok(reply) => {
                busy.finish(PutBack::Same);
                Ok(reply)
            }
            Err(f) => Err(failed(busy, f)),
        }
    }

    /// Closes session `id` (DELETE, MCP's `close_session`): cancels a running turn and
    /// removes its files.
    /// A session this process does not hold but the store keeps (see [`Runner::session`])
    /// is deleted from the store. Only its owner `key` can.
    ///
    /// With `--cluster`, the session is first found as for a turn ([`Runner::session`]): a
    /// copy here that another node took over is given up, and a session another node holds
    /// is taken over when the rule allows (else its error, `session_elsewhere`), so a close
    /// answered 204 is the session's end on every node, its snapshot and lease gone.
    ///
    /// Its contexts ([`Labels::contexts`]) are closed with it: they are its.
    pub async fn close_session(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        self.check_owner(id, key).await?;
        let contexts = self.contexts_of(id, key).await;
        let closed = self.close_one(id, key).await;
        for context in contexts {
            let _ = self.close_one(&context, key).await;
        }
        closed
    }

    /// Session `id`'s contexts: from its labels here, or its own snapshot's header in the
    /// store; with `--cluster`, the session is found as its close finds it (brought here
    /// from the object its lease names), since no object is named after it there.
    async fn contexts_of(&self, id: &str, key: Option<&str>) -> Vec<String> {
        if self.cluster.is_some() {
            return match self.session(id, key).await {
                Ok(s) => s.labels().contexts.into_iter().map(|c| c.id).collect(),
                Err(_) => Vec::new(),
            };
        }
        let labels = match self.sessions.get(id) {
            Ok(s) => Some(s.labels()),
            Err(_) => match self.sessions.hibernated_labelled(id) {
                Some((_, labels)) => Some(labels),
                None if is_session_id(id) => self
                    .snapshots
                    .own_record(&crate::snapshot::SnapshotId::for_session(id))
                    .await
                    .map(|r| r.labels),
                None => None,
            },
        };
        labels
            .map(|l| l.contexts.into_iter().map(|c| c.id).collect())
            .unwrap_or_default()
    }

    async fn close_one(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        self.check_owner(id, key).await?;
        if self.cluster.is_some() {
            let s = self.session(id, key).await?;
            if let Ok(s) = self.sessions.remove(&s.id) {
                s.close().release();
            }
            self.metrics.session_closed(CloseReason::Deleted);
            self.forget_own_snapshot_before_answering(id).await;
            return Ok(());
        }
        match self.sessions.take_out(id) {
            Ok(Removed::Live(s)) => {
                s.close().release();
                self.metrics.session_closed(CloseReason::Deleted);
            }
            Ok(Removed::Hibernated) => self.metrics.session_closed(CloseReason::Deleted),
            Err(SupervisorError::SessionNotFound(_)) if self.has_own_snapshot(id, None).await => {}
            Err(e) => return Err(e),
        }
        self.forget_own_snapshot_before_answering(id).await;
        Ok(())
    }
}

/// Ends `busy` after a job that failed with `f`, and says so: a lost worker ends the session,
/// a refusal leaves it as it was.
pub(super) fn failed(busy: Busy, f: Failure) -> SupervisorError {
    let back = put_back_after(&f);
    let error = failure(f, &busy.session().id);
    busy.finish(back);
    error
}

/// What a use's interpreter becomes after its job failed with `f`: gone with its worker, or
/// as it was (the worker refused the job).
fn put_back_after(f: &Failure) -> PutBack {
    match f {
        Failure::Lost => PutBack::Ended {
            end: EndInfo::worker_lost("it died during a job"),
            turn: false,
        },
        Failure::Job(_) => PutBack::Same,
    }
}

/// Where a new session's interpreter is made ([`Runner::admit_session`]).
pub(super) enum Placing {
    /// By this job, on the worker with the least work.
    Anywhere(Job),
    /// By this job (a [`Job::Fork`]), in the worker of the use, which the job holds.
    Beside(Busy, Job),
}

impl Placing {
    /// Its job, given the volumes lent to the interpreter it makes.
    fn lending(mut self, lent: Vec<crate::guest::Lent>) -> Self {
        match &mut self {
            Placing::Anywhere(job) | Placing::Beside(_, job) => job.lend(lent),
        }
        self
    }
}

/// Does `job` (a [`Job::Fork`] of the use `busy`'s interpreter) in `busy`'s worker, on a task
/// of its own, as [`call_held`] does: the source stays in use until its worker is done with
/// it, whoever waits. A fork made after its caller went away is closed again.
async fn fork_held(busy: Busy, job: Job) -> SupervisorResult<(Target, Result<Reply, Failure>)> {
    let target = busy.placed().target.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let reply = target.call(job, Sinks::default()).await;
        busy.finish(reply.as_ref().err().map_or(PutBack::Same, put_back_after));
        if let Err((target, Ok(Reply::Opened { handle, .. }))) = tx.send((target, reply)) {
            let _ = target.call(Job::Close { handle }, Sinks::default()).await;
        }
    });
    rx.await
        .map_err(|e| SupervisorError::Internal(format!("the fork's job failed: {e}")))
}

/// Does `job` for the use `busy` on a task of its own, which keeps the use until the worker
/// is done with the interpreter: a client hanging up neither stops the job (shutdown, close
/// and an interrupt do, through the worker) nor frees the interpreter for another use while
/// its worker still has it. When the caller has gone, the task's end puts it back.
pub(super) async fn call_held(
    busy: Busy,
    job: Job,
    sinks: Sinks,
) -> SupervisorResult<(Busy, Result<Reply, Failure>)> {
    let target = busy.placed().target.clone();
    tokio::spawn(async move {
        let reply = target.call(job, sinks).await;
        (busy, reply)
    })
    .await
    .map_err(|e| SupervisorError::Internal(format!("the session's job failed: {e}")))
}
