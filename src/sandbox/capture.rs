//! A session as data: [`Interpreter::capture`] reads an interpreter's whole state between
//! turns into a [`SessionImage`], and [`Interpreter::restore`] makes a new interpreter of
//! the same template from one.
//!
//! The state of this guest between turns is:
//! - its linear memory. Only what differs from the template's image is kept: the pages the
//!   kernel's page map shows as written (private, no longer the template's shared pages) are
//!   compared with a pristine instance of the template ([`Baseline`]), and those that differ
//!   are taken. Where the page map cannot be read every page is compared, with the same
//!   result, more slowly;
//! - its mutable globals, which the template exports for this (`template/exports.rs`);
//! - not its function table: the template build refuses a module whose code could write it
//!   (`template/exports.rs`), so it is the template's in every instance;
//! - the WASI state it depends on: the descriptor table is stdio plus the fixed preopens
//!   (`guest::PREOPENS`) in every sandbox, and wasi-libc's view of it lives in linear memory;
//!   plus the regular files of the working directory the guest holds open between turns
//!   (descriptor, file, mode, position: `open_files.rs`), reopened at the same numbers. A
//!   folder being listed, or a file outside the working directory or deleted, is not
//!   carried, so capturing refuses while one is open ([`CaptureError::OpenFiles`]);
//! - its working directory (every folder and regular file; symlinks are not kept);
//!
//! What is captured is checked against the snapshot format's bounds (`snapshot::
//! check_capturable`, the ones a snapshot is decoded under), so a capture that succeeds
//! always restores; one past them is refused with what is over ([`CaptureError::Bounds`]).
//! - the host's counters: limits, turns run, the monotonic clock, the memory peak.
//!
//! Restoring instantiates the template afresh, grows the memory to the image's size, writes
//! the pages and globals, and lays out the files: no guest code runs, so a restored
//! interpreter is at exactly the point the capture saw. Random generators in guest memory go
//! on from where they were (a fork and its original draw the same numbers unless reseeded);
//! `os.urandom` asks the host and is fresh.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use wasmtime::{Extern, InstancePre, Memory, Store};

use super::checkpoint::Checkpoint;
use super::image_io::{CaptureError, Tree, read_globals, read_tree, written_pages};
use super::interpreter::Interpreter;
use super::layer::{Unfit, write_globals, write_memory};
use super::live::{Instantiated, Live, instantiate};
use super::open_files::{read_open_files, reopen};
use super::store::GuestStore;
use super::workdir::{ScratchRoot, WorkdirError};
use super::{GuestLayout, HostShare, SandboxError, SandboxSpec};
use crate::engine::GuestEngine;
use crate::guest::{GuestSetup, guest_env};
use crate::hostcalls::fs_guard;
use crate::hostcalls::limiter::MemoryLimiter;
use crate::hostcalls::state::{FsGuard, GuestState, RunClock, far_future};
use crate::packages::{PackageEnv, PackageError};
use crate::snapshot::{PAGE_BYTES, SessionImage, check_capturable};
use crate::template::GLOBAL_EXPORT_PREFIX;

/// A pristine instance of one template, never run: what a session's memory is compared with.
/// Its pages are the template's shared image, so keeping it costs a pool slot and page
/// tables, not a copy.
pub struct Baseline {
    pub(super) store: Store<GuestState>,
    pub(super) memory: Memory,
    /// The template's mutable globals' export names, in export order.
    globals: Vec<String>,
}

impl Baseline {
    /// Instantiates the template in a store with no filesystem (instantiating runs no guest
    /// code).
    pub fn new(
        engine: &GuestEngine,
        python: &InstancePre<GuestState>,
    ) -> Result<Self, SandboxError> {
        let state = GuestState {
            wasi: wasmtime_wasi::WasiCtxBuilder::new().build_p1(),
            // The host's own instance: not charged to the budget (one per template).
            limiter: MemoryLimiter::new(u64::MAX, None),
            clock: RunClock {
                deadline: far_future(),
                cancel: Arc::default(),
                origin: Instant::now(),
                call_started: Instant::now(),
            },
            fs: FsGuard::new(Default::default(), 0, 0, 0, 0, None),
            last_result: None,
            figure_made: false,
            live_output: Default::default(),
            input: None,
            tools: None,
            egress: None,
        };
        let mut store = engine.store(state);
        // Never run: instantiating runs no guest code, and nothing calls into it.
        let Instantiated {
            instance, memory, ..
        } = instantiate(&mut store, python)?;
        let globals = instance
            .exports(&mut store)
            .filter(|e| matches!(e.clone().into_extern(), Extern::Global(_)))
            .map(|e| e.name().to_string())
            .filter(|name| name.starts_with(GLOBAL_EXPORT_PREFIX))
            .collect();
        Ok(Baseline {
            store,
            memory,
            globals,
        })
    }
}

/// Why an image could not become an interpreter.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// Making the store, the working directory or the instance failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The image does not fit the template (globals, memory).
    #[error("the snapshot does not fit its template: {0}")]
    Mismatch(&'static str),
    /// Laying out its files failed.
    #[error("restoring the working directory: {0}")]
    Workdir(#[from] WorkdirError),
    /// Its package environment cannot be had again.
    #[error("the session's packages: {0}")]
    Packages(#[from] PackageError),
}

impl Interpreter {
    /// Reads the interpreter's whole state (see the module documentation). Between turns
    /// only: the caller holds the interpreter, so no turn runs.
    pub fn capture(&mut self, baseline: &Baseline) -> Result<SessionImage, CaptureError> {
        self.capture_among(baseline, None)
    }

    /// Keeps a rollback checkpoint from now on, from a full capture against `baseline`: the
    /// tracking of the memory starts first, and its first walk of the page tables tells the
    /// capture which pages were written (one walk, not two).
    pub fn start_checkpoint(&mut self, baseline: &Baseline) -> Result<(), CaptureError> {
        let tracking = Checkpoint::start_tracking(&self.live);
        let written = tracking.as_ref().ok().map(|(_, w)| w.as_slice());
        let image = self.capture_among(baseline, written)?;
        let tracking = tracking.map(|(tracker, _)| tracker);
        self.keep(Checkpoint::with_tracking(&self.live, image, tracking));
        Ok(())
    }

    /// [`Interpreter::capture`] looking only at the pages `written` names as written since
    /// the template (all the others being the template's), when the caller knows them.
    fn capture_among(
        &mut self,
        baseline: &Baseline,
        written: Option<&[u32]>,
    ) -> Result<SessionImage, CaptureError> {
        let live = &mut self.live;
        if live.ended.is_some() {
            return Err(CaptureError::Ended);
        }
        let Tree { dirs, files, links } = read_tree(live.workdir.path(), true)?;
        let open_files = read_open_files(
            live,
            files.iter().map(|(p, c)| (p.as_str(), c.len() as u64)),
        )?;
        let globals = read_globals(live, baseline.globals.iter().map(String::as_str))?;
        let mem = live.memory.data(&live.store);
        let base = baseline.memory.data(&baseline.store);
        let (pages, page_data) = changed_pages(mem, base, written);
        let memory_bytes = mem.len() as u64;
        let image = SessionImage {
            memory_bytes,
            pages,
            page_data,
            globals,
            dirs,
            files,
            limits: live.limits,
            turns_run: live.turns_run,
            monotonic_ns: u64::try_from(live.store.data().clock.origin.elapsed().as_nanos())
                .unwrap_or(u64::MAX),
            memory_peak_bytes: (live.store.data().limiter.peak_bytes as u64).max(memory_bytes),
            packages: live.packages.pins.clone(),
            open_files,
            volumes: live.volumes.iter().filter_map(mount_of).collect(),
            links,
        };
        check_capturable(&image).map_err(CaptureError::Bounds)?;
        Ok(image)
    }

    /// A new interpreter from `image`, on a fresh instance of the template `baseline` was
    /// made from (`python`). The image is trusted to be well-formed (`snapshot::decode`
    /// checked it) but not to fit: its globals and memory are checked against the template.
    // What a sandbox is made of (engine, template, layout, scratch) plus what this one is
    // made from; a struct for one caller would only move the list.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        engine: &GuestEngine,
        python: &InstancePre<GuestState>,
        baseline: &Baseline,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        image: &SessionImage,
        cancel: Arc<AtomicBool>,
        host: HostShare,
        packages: Arc<PackageEnv>,
        volumes: Vec<crate::guest::Lent>,
    ) -> Result<Interpreter, RestoreError> {
        let names: Vec<&str> = image.globals.iter().map(|g| g.name.as_str()).collect();
        if names
            != baseline
                .globals
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        {
            return Err(RestoreError::Mismatch("globals"));
        }
        let base_bytes = baseline.memory.data_size(&baseline.store) as u64;
        if image.memory_bytes < base_bytes {
            return Err(RestoreError::Mismatch("memory size"));
        }
        let spec = SandboxSpec {
            limits: image.limits,
            env: Vec::new(),
            files: Vec::new(),
            stdin: Vec::new(),
            observer: None,
            cancel,
            setup: GuestSetup::default(),
            host,
            packages,
            seed: None,
            volumes,
            layer: None,
        };
        let env = guest_env(&[]).map_err(SandboxError::from)?;
        let origin = Instant::now()
            .checked_sub(Duration::from_nanos(image.monotonic_ns))
            .unwrap_or_else(Instant::now);
        let guest = GuestStore::with_env(engine, layout, scratch, spec, &env, origin, None)?;
        let mut live = Live::start(guest, python, image.limits, image.turns_run)?;
        for dir in &image.dirs {
            live.workdir.create_dir(dir)?;
        }
        for (path, content) in &image.files {
            live.workdir.write_file(path, content)?;
        }
        for (path, target) in &image.links {
            live.workdir.make_link(path, target)?;
        }
        reopen(&mut live, &image.open_files).map_err(RestoreError::Mismatch)?;
        write_memory(
            &mut live,
            image.memory_bytes,
            &image.pages,
            &image.page_data,
        )
        .and_then(|()| write_globals(&mut live, &image.globals))
        .map_err(|e| match e {
            Unfit::HostBudget => RestoreError::Sandbox(SandboxError::HostBudget),
            Unfit::Mismatch(what) => RestoreError::Mismatch(what),
        })?;
        let charged = fs_guard::measure_dir(live.workdir.path());
        let data = live.store.data_mut();
        data.limiter.peak_bytes = data
            .limiter
            .peak_bytes
            .max(usize::try_from(image.memory_peak_bytes).unwrap_or(usize::MAX));
        data.fs.charged_bytes = charged;
        Ok(Interpreter {
            line_buffered: false,
            checkpoint: None,
            live,
        })
    }
}

/// The [`PAGE_BYTES`] pages of `mem` that differ from `base` (zero past its end): the
/// candidates are `written` when given, else [`written_pages`].
fn changed_pages(mem: &[u8], base: &[u8], written: Option<&[u32]>) -> (Vec<u32>, Vec<u8>) {
    static ZERO: [u8; PAGE_BYTES] = [0; PAGE_BYTES];
    let found;
    let candidates = match written {
        Some(written) => written,
        None => {
            found = written_pages(mem);
            &found
        }
    };
    let mut pages = Vec::new();
    let mut data = Vec::new();
    for &i in candidates {
        let at = i as usize * PAGE_BYTES;
        let Some(page) = mem.get(at..at + PAGE_BYTES) else {
            continue;
        };
        let was = base.get(at..at + PAGE_BYTES).unwrap_or(&ZERO);
        if page != was {
            pages.push(i);
            data.extend_from_slice(page);
        }
    }
    (pages, data)
}

/// How an image keeps a volume lent to the interpreter: by name and place, never its files.
fn mount_of(lent: &crate::guest::Lent) -> Option<crate::volumes::VolumeMount> {
    Some(crate::volumes::VolumeMount {
        volume: crate::volumes::VolumeName::parse(&lent.name).ok()?,
        at: lent.at.clone(),
        read_only: !lent.writable(),
    })
}
