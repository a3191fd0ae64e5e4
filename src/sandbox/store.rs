//! The Store and WASI context of a sandbox, with every limit armed, before any module is
//! instantiated in it.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{CallHook, InstancePre, Store, UpdateDeadline};
use wasmtime_wasi::WasiCtxBuilder;

use super::output::{CappedPipe, LiveOutput, StreamKind};
use super::stdin::GuestStdin;
use super::workdir::{ScratchRoot, WorkDir};
use super::{GuestLayout, SandboxError, SandboxSpec};
use crate::engine::GuestEngine;
use crate::guest::{self, ARGV0, HostDirs, INITIAL_FDS, guest_env};
use crate::hostcalls::fs_guard;
use crate::hostcalls::limiter::MemoryLimiter;
use crate::hostcalls::mounts::Mounts;
use crate::hostcalls::state::{self, FsGuard, GuestMonotonicClock, GuestState, RunClock};
use crate::packages::PackageEnv;

/// A store with everything around it, before any module is instantiated in it: the same
/// WASI context, limits and working directory for the Python guest and for any other module
/// linked against the same linker (the adversarial modules in `wasm/`).
pub struct GuestStore {
    /// The store, with the memory limiter and the epoch callback (deadline, cancel) set; it
    /// has no fuel and no deadline until they are armed (see [`GuestStore::arm`]).
    pub store: Store<GuestState>,
    /// The guest's working directory (preopened as its `/`); dropping it removes it.
    pub workdir: WorkDir,
    /// The host's end of the guest's stdout, capped at `output_bytes`.
    pub stdout: CappedPipe,
    /// The host's end of the guest's stderr, capped at `output_bytes`.
    pub stderr: CappedPipe,
    /// The host's end of the guest's stdin, refillable between turns.
    pub stdin: GuestStdin,
    /// The package environment behind `guest::PACKAGES_DIR`, kept from eviction.
    pub packages: Arc<PackageEnv>,
    /// The volumes mounted in it.
    pub volumes: Vec<guest::Lent>,
}

impl GuestStore {
    /// Makes the working directory, the WASI context and the store, with every limit armed.
    pub fn new(
        engine: &GuestEngine,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        spec: SandboxSpec,
    ) -> Result<GuestStore, SandboxError> {
        let env = guest_env(&spec.env)?;
        Self::with_env(engine, layout, scratch, spec, &env, Instant::now(), None)
    }

    /// [`GuestStore::new`] with the guest's environment already resolved by [`guest_env`],
    /// its monotonic clock counting from `origin` (a restored session's goes on), and in
    /// `kept`, a template folder kept for it (`WorkDir::reuse`) or a fresh one.
    pub(super) fn with_env(
        engine: &GuestEngine,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        spec: SandboxSpec,
        env: &[(String, String)],
        origin: Instant,
        kept: Option<WorkDir>,
    ) -> Result<GuestStore, SandboxError> {
        let mut workdir = match kept {
            Some(kept) => kept,
            None => WorkDir::create(scratch, &spec.files, spec.limits.disk_bytes)?,
        };
        let output_cap = spec.limits.output_bytes as usize;
        let live_output = LiveOutput::new(spec.observer);
        let stdout = CappedPipe::new(StreamKind::Stdout, output_cap, live_output.clone());
        let stderr = CappedPipe::new(StreamKind::Stderr, output_cap, live_output.clone());
        let stdin = GuestStdin::new(spec.stdin);

        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&[ARGV0])
            .envs(env)
            .stdin(stdin.clone())
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .monotonic_clock(GuestMonotonicClock(origin))
            // File I/O runs inline on the guest thread instead of hopping to a blocking pool:
            // we are already on a thread of our own.
            .allow_blocking_current_thread(true)
            // No network: preview1 has no call that creates a socket, and none is preopened;
            // these make the intent explicit should that ever change.
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        if let Some(seed) = spec.seed {
            use rand_010::SeedableRng;
            wasi.secure_random(rand_010::rngs::StdRng::from_seed(seed))
                .insecure_random(rand_010::rngs::StdRng::from_seed(seed))
                .insecure_random_seed(u128::from_le_bytes(
                    seed[..16].try_into().unwrap_or_default(),
                ));
        }
        // The one fixed table (fd 3 to 6): templates snapshot it, so it must not vary.
        guest::preopen(
            &mut wasi,
            &HostDirs {
                stdlib: layout.stdlib_dir,
                mpl_data: layout.mpl_data_dir,
                root: workdir.path(),
                packages: &spec.packages.site,
                packages_writable: spec.packages.writable,
            },
        )
        .map_err(SandboxError::Preopen)?;
        let mount_fds =
            guest::preopen_mounts(&mut wasi, &spec.volumes).map_err(SandboxError::Preopen)?;
        let mounts = Mounts::new(&spec.volumes, &mount_fds)
            .map_err(|e| SandboxError::Preopen(wasmtime::Error::new(e)))?;
        for (m, files) in spec.volumes.iter().zip(mounts.files_dirs()) {
            let files = files.map_err(|e| SandboxError::Preopen(wasmtime::Error::new(e)))?;
            workdir.mount(m.at.below_root(), files)?;
        }

        // Without input files the directory holds its layout alone: no need to read it.
        let charged_bytes = if spec.files.is_empty() {
            workdir.layout_bytes()
        } else {
            fs_guard::measure_dir(workdir.path())
        };
        let mut state = GuestState {
            wasi: wasi.build_p1(),
            limiter: MemoryLimiter::new(spec.limits.memory_bytes, Some(spec.host.budget.empty())),
            clock: RunClock {
                deadline: state::far_future(),
                cancel: spec.cancel,
                origin,
                call_started: Instant::now(),
            },
            fs: FsGuard::new(
                workdir.path().to_path_buf(),
                charged_bytes,
                spec.limits.disk_bytes,
                spec.limits.open_files,
                INITIAL_FDS,
                spec.host.disk_in_memory.then(|| spec.host.budget.empty()),
            ),
            last_result: None,
            figure_made: false,
            live_output,
            input: None,
            tools: None,
            egress: None,
        };
        state.fs.mount(mounts);
        // Input files on tmpfs are memory from the start.
        if !state.fs.hold_on_host(charged_bytes, true) {
            return Err(SandboxError::HostBudget);
        }
        let mut store = engine.store(state);
        store.limiter(|s| &mut s.limiter);
        // Checked every tick: the deadline and the cancel flag, so a busy loop stops within
        // one tick of either. Wasm code reaches the check when its fuel is refilled
        // (`GuestEngine::store`); a loop of host calls burns little fuel, so a host call
        // returning to the guest in a tick not yet checked reaches it too.
        store.epoch_deadline_callback(|ctx| {
            at_tick(&ctx.data().clock)?;
            Ok(UpdateDeadline::Continue(1))
        });
        store.set_epoch_deadline(1);
        let mut checked = crate::engine::current_tick();
        store.call_hook(move |ctx, hook| {
            if matches!(hook, CallHook::ReturningFromHost) {
                let tick = crate::engine::current_tick();
                if tick != checked {
                    checked = tick;
                    at_tick(&ctx.data().clock)?;
                }
            }
            Ok(())
        });
        Ok(GuestStore {
            store,
            workdir,
            stdout,
            stderr,
            stdin,
            packages: spec.packages,
            volumes: spec.volumes,
        })
    }

    /// The linear memory an instance of `template` starts with: its snapshot's image. It is
    /// the server's cost (charged to the budget like the rest), not the caller's: the caller's
    /// `memory_bytes` counts beyond it (`MemoryLimiter::count_from`), and admission makes room
    /// for it (`Vivarium::starting_bytes`).
    pub fn template_memory_bytes(template: &InstancePre<GuestState>) -> u64 {
        template
            .module()
            .get_export("memory")
            .and_then(|e| {
                e.memory()
                    .map(|m| m.minimum().saturating_mul(m.page_size()))
            })
            .unwrap_or(0)
    }

    /// Arms the wall-clock deadline and the fuel for one call into the guest.
    pub fn arm(&mut self, timeout_ms: u64, fuel: u64) {
        let data = self.store.data_mut();
        data.clock.deadline = Instant::now() + std::time::Duration::from_millis(timeout_ms);
        data.clock.call_started = Instant::now();
        self.store.set_epoch_deadline(1);
        // Fuel cannot be refused on a store with fuel enabled.
        let _ = self.store.set_fuel(fuel);
    }
}

/// Once a tick: ends the run past its deadline or once cancelled, and lets a long call give
/// way to short ones (once per thread; see `LONG_CALL`).
fn at_tick(clock: &RunClock) -> wasmtime::Result<()> {
    clock.check().map_err(wasmtime::Error::new)?;
    if clock.is_long() {
        crate::sandbox::guest_threads::demote_current();
    }
    Ok(())
}
