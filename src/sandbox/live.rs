//! The instance and everything around it, shared by both lifecycle types: one turn of the
//! guest under the limits in force, and its report.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Instance, InstancePre, Memory, Store, TypedFunc};

use super::outcome::{EndReason, TurnOutcome, classify};
use super::output::CappedPipe;
use super::stdin::GuestStdin;
use super::workdir::WorkDir;
use super::{GuestStore, SandboxError};
use crate::hostcalls::fs_guard;
use crate::hostcalls::limiter::MemoryRefusal;
use crate::hostcalls::state::{self, GuestState};
use crate::limits::{Limits, TurnLimits};
use crate::packages::PackageEnv;
use crate::report::{self, Report, Status, Truncated, Usage};

/// A fresh instance of a template and the exports every turn uses.
pub(super) struct Instantiated {
    pub(super) instance: Instance,
    pub(super) memory: Memory,
    pub(super) turn: TypedFunc<(i32, i32), i32>,
    pub(super) host_alloc: TypedFunc<i32, i32>,
}

/// Instantiates the template `python` in `store` (a sandbox's, a restored session's, a
/// baseline's) and looks up its exports.
pub(super) fn instantiate(
    store: &mut Store<GuestState>,
    python: &InstancePre<GuestState>,
) -> Result<Instantiated, SandboxError> {
    // The template's own image is not the caller's: `memory_bytes` counts beyond it.
    let image = GuestStore::template_memory_bytes(python);
    store.data_mut().limiter.count_from(image);
    // The snapshot runs no code at instantiation; fuel is re-armed before every turn.
    store
        .set_fuel(u64::MAX)
        .map_err(SandboxError::Instantiate)?;
    let instance = python.instantiate(&mut *store).map_err(|e| {
        if store.data().limiter.refused == Some(MemoryRefusal::HostBudget) {
            SandboxError::HostBudget
        } else {
            SandboxError::Instantiate(e)
        }
    })?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or(SandboxError::MissingExport("memory"))?;
    let turn = instance
        .get_typed_func(&mut *store, "turn")
        .map_err(|_| SandboxError::MissingExport("turn"))?;
    let host_alloc = instance
        .get_typed_func(&mut *store, "host_alloc")
        .map_err(|_| SandboxError::MissingExport("host_alloc"))?;
    Ok(Instantiated {
        instance,
        memory,
        turn,
        host_alloc,
    })
}

/// The instance and everything around it; shared by both lifecycle types.
pub(super) struct Live {
    pub(super) store: Store<GuestState>,
    /// The template's instance: its exports (the mutable globals) are read by `capture`.
    pub(super) instance: Instance,
    pub(super) memory: Memory,
    pub(super) turn: TypedFunc<(i32, i32), i32>,
    pub(super) host_alloc: TypedFunc<i32, i32>,
    pub(super) stdout: CappedPipe,
    pub(super) stderr: CappedPipe,
    pub(super) stdin: GuestStdin,
    pub(super) workdir: WorkDir,
    /// The package environment behind `guest::PACKAGES_DIR`, kept from eviction.
    pub(super) packages: Arc<PackageEnv>,
    /// The volumes mounted in it.
    pub(super) volumes: Vec<crate::guest::Lent>,
    pub(super) limits: Limits,
    pub(super) turns_run: u32,
    /// A single program's instance (`GuestSetup::program`): its code is `<string>`.
    pub(super) program: bool,
    pub(super) ended: Option<EndReason>,
}

impl Live {
    /// Instantiates `python` in `guest`'s store and keeps it with the rest of `guest`: a
    /// live instance under `limits`, `turns_run` turns into its life.
    pub(super) fn start(
        guest: GuestStore,
        python: &InstancePre<GuestState>,
        limits: Limits,
        turns_run: u32,
    ) -> Result<Live, SandboxError> {
        let GuestStore {
            mut store,
            workdir,
            stdout,
            stderr,
            stdin,
            packages,
            volumes,
        } = guest;
        let Instantiated {
            instance,
            memory,
            turn,
            host_alloc,
        } = instantiate(&mut store, python)?;
        Ok(Live {
            store,
            instance,
            memory,
            turn,
            host_alloc,
            stdout,
            stderr,
            stdin,
            workdir,
            packages,
            volumes,
            limits,
            turns_run,
            program: false,
            ended: None,
        })
    }

    /// Whether pyplot made a figure since the last call (the door's figure message).
    pub(super) fn take_figure_made(&mut self) -> bool {
        std::mem::take(&mut self.store.data_mut().figure_made)
    }

    /// Runs the hidden `code` after the turn that produced `first`, within what is left of
    /// that turn's `limits` (the guest can reach this code, so it must not buy a fresh
    /// budget), and counts what it used in `first`. A limit it hits, or an end of the
    /// interpreter, is `first`'s: the figures were the program's work.
    pub(super) fn follow_up(&mut self, code: &str, limits: &TurnLimits, first: &mut TurnOutcome) {
        let used = first.report.usage;
        let rest = TurnLimits {
            timeout_ms: limits.timeout_ms.saturating_sub(used.wall_ms.ceil() as u64),
            fuel: limits.fuel.saturating_sub(used.fuel),
            output_bytes: 0,
        };
        if rest.timeout_ms == 0 || rest.fuel == 0 {
            return;
        }
        let after = self.turn(code, &rest, false);
        first.report.usage.fuel += after.report.usage.fuel;
        first.report.usage.wall_ms += after.report.usage.wall_ms;
        if !matches!(after.report.status, Status::Ok | Status::Error) {
            first.report.status = after.report.status;
            first.report.detail = after.report.detail;
        }
        if after.ended.is_some() {
            first.ended = after.ended;
        }
    }

    /// Runs one turn. `measure_disk` walks the working directory for the report's
    /// `usage.disk_bytes`; hidden turns, and a program whose files are measured after its
    /// flush, skip it.
    pub(super) fn turn(
        &mut self,
        code: &str,
        limits: &TurnLimits,
        measure_disk: bool,
    ) -> TurnOutcome {
        let started = Instant::now();
        let cap = limits.output_bytes as usize;
        self.stdout.take(cap);
        self.stderr.take(cap);
        {
            let data = self.store.data_mut();
            data.limiter.rearm();
            data.fs.rearm();
            data.clock.deadline = started + std::time::Duration::from_millis(limits.timeout_ms);
            data.clock.call_started = started;
        }
        self.store.data_mut().last_result = None;
        self.store.set_epoch_deadline(1);
        // Fuel cannot be refused on a store with fuel enabled.
        let _ = self.store.set_fuel(limits.fuel);
        self.turns_run += 1;
        let result = self.call_turn(code.as_bytes());
        let fuel_used = limits
            .fuel
            .saturating_sub(self.store.get_fuel().unwrap_or(0));
        self.store.data_mut().clock.deadline = state::far_future();

        // Measured for the report, and so the bound (and its charge to the host's budget, on
        // tmpfs) comes back down to what the directory really holds after deletes.
        let disk_bytes = measure_disk.then(|| {
            let bytes = fs_guard::measure_dir(self.workdir.path());
            let fs = &mut self.store.data_mut().fs;
            fs.charged_bytes = bytes;
            fs.hold_on_host(bytes, true);
            bytes
        });
        let data = self.store.data();
        let outcome = classify(&result, data.limiter.refused, data.fs.refused_host_disk);
        let detail = outcome
            .detail
            .map(|d| d.describe(limits, &self.limits))
            .or(outcome.trap_detail.clone());
        if self.ended.is_none() {
            self.ended = outcome.ended.clone();
        }
        let out = self.stdout.take(cap);
        let err = self.stderr.take(cap);
        let stderr = String::from_utf8_lossy(&err.head).into_owned();
        let error = if matches!(
            outcome.status,
            Status::Error | Status::MemoryExceeded | Status::HostMemoryExceeded
        ) {
            let code_file = match self.program {
                true => "<string>".to_string(),
                false => format!("<turn {}>", self.turns_run),
            };
            let tail = String::from_utf8_lossy(&err.tail);
            report::parse_python_error(&stderr, &code_file)
                .or_else(|| report::parse_python_error(&tail, &code_file))
        } else {
            None
        };
        let report = Report {
            status: outcome.status,
            exit_code: outcome.exit_code,
            stdout: String::from_utf8_lossy(&out.head).into_owned(),
            stderr,
            truncated: Truncated {
                stdout: out.truncated(),
                stderr: err.truncated(),
            },
            error,
            detail,
            files: Vec::new(),
            outputs: Vec::new(),
            leaks: None,
            network: None,
            usage: Usage {
                wall_ms: started.elapsed().as_secs_f64() * 1e3,
                fuel: fuel_used,
                memory_peak_bytes: data.limiter.peak_bytes as u64,
                disk_bytes: disk_bytes.unwrap_or(0),
            },
        };
        TurnOutcome {
            report,
            result: self.store.data_mut().last_result.take(),
            ended: outcome.ended,
            rolled_back: false,
        }
    }

    /// Copies the source into guest memory (the guest frees it) and calls `turn`.
    fn call_turn(&mut self, src: &[u8]) -> wasmtime::Result<i32> {
        let len = i32::try_from(src.len()).map_err(|_| wasmtime::format_err!("code too large"))?;
        let mut ptr = 0;
        if len > 0 {
            let p = self.host_alloc.call(&mut self.store, len)?;
            let start = p as u32 as usize;
            // 0 (malloc failed) or out of range: pass 0, which the guest reports as
            // "MemoryError: no memory for this turn's code".
            if p != 0 && start + src.len() <= self.memory.data_size(&self.store) {
                self.memory.data_mut(&mut self.store)[start..start + src.len()]
                    .copy_from_slice(src);
                ptr = p;
            }
        }
        self.turn.call(&mut self.store, (ptr, len))
    }
}
