//! A plain run, as Piston's door asks for one: a file of the caller's run as `__main__` with
//! its arguments, the other files beside it, stdin, and limits from the door's request; no
//! rich outputs, streams line-buffered (so a door that interleaves them does so as a
//! terminal would), no check, no packages, no network, no tools; the server's leakage
//! policy. Its `Program` is built here, as `/v1`'s is in `execute.rs`.

use std::sync::Arc;

use super::resolve::files_within;
use crate::check::Policy;
use crate::leakage::{Guard, LeakPolicy};
use crate::limits::{FUEL_PER_CPU_SECOND, Limits, LimitsRequest};
use crate::report::{OutputObserver, Report};
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::metrics::RunKind;
use crate::supervisor::{Executed, Runner, SupervisorError, SupervisorResult};
use crate::vivarium::{InputFile, Program, RunSpec};

/// What a plain run is asked with (each file's path checked by the door).
pub struct PlainAsk {
    /// The files, the program first (by its path in the working directory).
    pub files: Vec<(String, Vec<u8>)>,
    /// `sys.argv[1:]`.
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
    pub limits: LimitsRequest,
    /// CPU milliseconds at most (fuel), when the door's request names them.
    pub cpu_ms: Option<u64>,
}

/// A plain run, resolved: its limits are known (a door sizes what it keeps of the output by
/// them) before [`PlainRun::run`].
pub struct PlainRun {
    spec: RunSpec,
    /// The limits it runs under.
    pub limits: Limits,
}

/// What a plain run answers: its report, and the policy and guard its output went through
/// (for what the door keeps besides: Piston's interleaved `output`).
pub struct PlainRan {
    pub report: Box<Report>,
    pub policy: LeakPolicy,
    pub guard: Arc<Guard>,
}

/// Resolves `ask` (the default template, the server's bounds; its files held to its disk
/// limit), its limits and code recorded in `record`.
pub fn plain(
    runner: &Runner,
    ask: PlainAsk,
    record: &mut AuditRecord,
) -> SupervisorResult<PlainRun> {
    let host = runner.host()?;
    let Some((main, main_content)) = ask.files.first() else {
        return Err(SupervisorError::InvalidRequest(
            "files must contain at least one file".into(),
        ));
    };
    record.set_code(&String::from_utf8_lossy(main_content));
    // The default template, as everywhere: `scientific` (the memory limit counts beyond it).
    let (template, mut limits) = host.resolve_for(None, &ask.limits)?;
    if let Some(ms) = ask.cpu_ms {
        let fuel = ms.saturating_mul(FUEL_PER_CPU_SECOND / 1000);
        limits.fuel = limits.fuel.min(fuel.max(1));
    }
    record.limits = Some(limits);
    let code = crate::guest::run_file_source(main, &ask.args);
    let files: Vec<InputFile> = ask
        .files
        .into_iter()
        .map(|(path, content)| InputFile { path, content })
        .collect();
    files_within(&files, limits.disk_bytes)?;
    let spec = RunSpec {
        program: Program {
            code,
            stdin: ask.stdin,
            files,
            limits,
            env: Vec::new(),
            template,
            rich: false,
            // Line-buffered streams, so a door interleaving them does so as a terminal would.
            line_buffered: true,
            policy: Policy::Off,
            tools: None,
            seed: None,
            network: None,
            language: Default::default(),
            volumes: Vec::new(),
            layer: None,
        },
        observer: None,
        packages: host.no_packages(),
        tools: None,
        egress: None,
        secrets: Default::default(),
        volumes: Vec::new(),
    };
    Ok(PlainRun { spec, limits })
}

impl PlainRun {
    /// Its streams go to `observer` as they are written, too.
    pub fn observe(&mut self, observer: OutputObserver) {
        self.spec.observer = Some(observer);
    }

    /// Runs it under the server's leakage policy, audited as `kind`.
    pub async fn run(
        self,
        runner: &Runner,
        kind: RunKind,
        record: &mut AuditRecord,
    ) -> SupervisorResult<PlainRan> {
        let policy = runner.leak_policy(None)?;
        let guard = runner.leak_guard(policy, &[], &[]);
        match runner
            .execute(self.spec, guard.clone(), kind, record)
            .await?
        {
            Executed::Ran { report, .. } => Ok(PlainRan {
                report,
                policy,
                guard,
            }),
            Executed::Denied(_) => Err(SupervisorError::Internal(
                "a run with policy off was refused by its check".into(),
            )),
        }
    }
}
