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
//!   (`guest::PREOPENS`) in every sandbox, and wasi-libc's view of it lives in linear memory.
//!   A file the guest holds open between turns has no such place, so capturing refuses while
//!   one is ([`CaptureError::OpenFiles`]);
//! - its working directory (every folder and regular file; symlinks are not kept);
//! - the host's counters: limits, turns run, the monotonic clock, the memory peak.
//!
//! Restoring instantiates the template afresh, grows the memory to the image's size, writes
//! the pages and globals, and lays out the files: no guest code runs, so a restored
//! interpreter is at exactly the point the capture saw. Random generators in guest memory go
//! on from where they were (a fork and its original draw the same numbers unless reseeded);
//! `os.urandom` asks the host and is fresh.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use wasmtime::{Extern, InstancePre, Memory, Store, Val};

use super::interpreter::Interpreter;
use super::live::Live;
use super::store::GuestStore;
use super::workdir::{ScratchRoot, WorkdirError};
use super::{GuestLayout, SandboxError, SandboxSpec};
use crate::engine::GuestEngine;
use crate::guest::{GuestSetup, INITIAL_FDS, guest_env};
use crate::hostcalls::fs_guard;
use crate::hostcalls::limiter::MemoryLimiter;
use crate::hostcalls::state::{FsGuard, GuestState, RunClock, far_future};
use crate::snapshot::{
    GlobalBits, GlobalValue, MAX_ENTRIES, PAGE_BYTES, SessionImage, WASM_PAGE_BYTES,
};
use crate::template::GLOBAL_EXPORT_PREFIX;

/// A pristine instance of one template, never run: what a session's memory is compared with.
/// Its pages are the template's shared image, so keeping it costs a pool slot and page
/// tables, not a copy.
pub struct Baseline {
    store: Store<GuestState>,
    memory: Memory,
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
            limiter: MemoryLimiter::new(u64::MAX),
            clock: RunClock {
                deadline: far_future(),
                cancel: Arc::default(),
                origin: Instant::now(),
            },
            fs: FsGuard {
                root: Default::default(),
                open_fds: 0,
                max_open_fds: 0,
                opens: 0,
                charged_bytes: 0,
                quota_bytes: 0,
                refused_disk: false,
                refused_fd: false,
            },
            last_result: None,
            figure_made: false,
        };
        let mut store = Store::new(engine.engine(), state);
        store.set_fuel(0).map_err(SandboxError::Instantiate)?;
        let instance = python
            .instantiate(&mut store)
            .map_err(SandboxError::Instantiate)?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or(SandboxError::MissingExport("memory"))?;
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

/// Why an interpreter's state could not be captured.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The interpreter ended: there is nothing to keep.
    #[error("the interpreter has ended")]
    Ended,
    /// The guest holds files open between turns; their offsets live in the host's
    /// descriptor table, which a snapshot does not carry.
    #[error(
        "the session holds {count} file(s) open between turns; close them (a `with` block does) and try again"
    )]
    OpenFiles {
        /// How many beyond stdio and the preopens.
        count: u32,
    },
    /// The working directory has more entries than a snapshot holds.
    #[error("the working directory has more than {MAX_ENTRIES} files and folders")]
    TooManyEntries,
    /// Reading the working directory failed.
    #[error("reading the working directory: {0}")]
    Workdir(#[from] WorkdirError),
    /// The template's pristine instance could not be made.
    #[error("preparing the comparison with the template: {0}")]
    Baseline(#[source] SandboxError),
    /// The instance is not shaped like its template (a missing global, one of another
    /// type): not a state this host can carry.
    #[error("the interpreter's {0} does not match its template")]
    Shape(&'static str),
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
}

impl Interpreter {
    /// Reads the interpreter's whole state (see the module documentation). Between turns
    /// only: the caller holds the interpreter, so no turn runs.
    pub fn capture(&mut self, baseline: &Baseline) -> Result<SessionImage, CaptureError> {
        let live = &mut self.live;
        if live.ended.is_some() {
            return Err(CaptureError::Ended);
        }
        let fs = &live.store.data().fs;
        if fs.open_fds > INITIAL_FDS {
            return Err(CaptureError::OpenFiles {
                count: fs.open_fds - INITIAL_FDS,
            });
        }
        let globals = read_globals(live, baseline.globals.iter().map(String::as_str))?;
        let mem = live.memory.data(&live.store);
        let base = baseline.memory.data(&baseline.store);
        let (pages, page_data) = changed_pages(mem, base);
        let (dirs, files) = read_tree(live.workdir.path(), true)?;
        let memory_bytes = mem.len() as u64;
        Ok(SessionImage {
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
        })
    }

    /// A new interpreter from `image`, on a fresh instance of the template `baseline` was
    /// made from (`python`). The image is trusted to be well-formed (`snapshot::decode`
    /// checked it) but not to fit: its globals and memory are checked against the template.
    pub fn restore(
        engine: &GuestEngine,
        python: &InstancePre<GuestState>,
        baseline: &Baseline,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        image: &SessionImage,
        cancel: Arc<AtomicBool>,
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
        if image.memory_bytes < base_bytes || !image.memory_bytes.is_multiple_of(WASM_PAGE_BYTES) {
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
        };
        let env = guest_env(&[]).map_err(SandboxError::from)?;
        let origin = Instant::now()
            .checked_sub(Duration::from_nanos(image.monotonic_ns))
            .unwrap_or_else(Instant::now);
        let GuestStore {
            mut store,
            mut workdir,
            stdout,
            stderr,
            stdin,
        } = GuestStore::with_env(engine, layout, scratch, spec, &env, origin)?;
        for dir in &image.dirs {
            workdir.create_dir(dir)?;
        }
        for (path, content) in &image.files {
            workdir.write_file(path, content)?;
        }
        store
            .set_fuel(u64::MAX)
            .map_err(SandboxError::Instantiate)?;
        let instance = python
            .instantiate(&mut store)
            .map_err(SandboxError::Instantiate)?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or(SandboxError::MissingExport("memory"))?;
        let grow = (image.memory_bytes - memory.data_size(&store) as u64) / WASM_PAGE_BYTES;
        if grow > 0 {
            memory
                .grow(&mut store, grow)
                .map_err(|_| RestoreError::Mismatch("memory size (over the limit)"))?;
        }
        let mem = memory.data_mut(&mut store);
        for (i, page) in image.pages.iter().enumerate() {
            let at = *page as usize * PAGE_BYTES;
            let src = &image.page_data[i * PAGE_BYTES..(i + 1) * PAGE_BYTES];
            mem.get_mut(at..at + PAGE_BYTES)
                .ok_or(RestoreError::Mismatch("page list"))?
                .copy_from_slice(src);
        }
        for g in &image.globals {
            let global = instance
                .get_global(&mut store, &g.name)
                .ok_or(RestoreError::Mismatch("globals"))?;
            let value = match g.value {
                GlobalBits::I32(v) => Val::I32(v as i32),
                GlobalBits::I64(v) => Val::I64(v as i64),
                GlobalBits::F32(v) => Val::F32(v),
                GlobalBits::F64(v) => Val::F64(v),
                GlobalBits::V128(v) => Val::V128(v.into()),
            };
            global
                .set(&mut store, value)
                .map_err(|_| RestoreError::Mismatch("globals"))?;
        }
        {
            let data = store.data_mut();
            data.limiter.peak_bytes = data
                .limiter
                .peak_bytes
                .max(usize::try_from(image.memory_peak_bytes).unwrap_or(usize::MAX));
            data.fs.charged_bytes = fs_guard::measure_dir(workdir.path());
        }
        let turn = instance
            .get_typed_func(&mut store, "turn")
            .map_err(|_| SandboxError::MissingExport("turn"))?;
        let host_alloc = instance
            .get_typed_func(&mut store, "host_alloc")
            .map_err(|_| SandboxError::MissingExport("host_alloc"))?;
        Ok(Interpreter {
            checkpoint: None,
            live: Live {
                store,
                memory,
                turn,
                host_alloc,
                stdout,
                stderr,
                stdin,
                workdir,
                limits: image.limits,
                turns_run: image.turns_run,
                ended: None,
                instance,
            },
        })
    }
}

/// The [`PAGE_BYTES`] pages of `mem` that differ from `base` (zero past its end): the
/// candidates are the pages the page map shows written, or all of them without it.
fn changed_pages(mem: &[u8], base: &[u8]) -> (Vec<u32>, Vec<u8>) {
    static ZERO: [u8; PAGE_BYTES] = [0; PAGE_BYTES];
    let written = written_pages(mem);
    let mut pages = Vec::new();
    let mut data = Vec::new();
    for (i, page) in mem.chunks_exact(PAGE_BYTES).enumerate() {
        if written.as_ref().is_some_and(|w| !w[i]) {
            continue;
        }
        let at = i * PAGE_BYTES;
        let was = base.get(at..at + PAGE_BYTES).unwrap_or(&ZERO);
        if page != was {
            pages.push(i as u32);
            data.extend_from_slice(page);
        }
    }
    (pages, data)
}

/// The values of the mutable globals `names` of `live`'s instance.
pub(super) fn read_globals<'a>(
    live: &mut Live,
    names: impl Iterator<Item = &'a str>,
) -> Result<Vec<GlobalValue>, CaptureError> {
    let mut globals = Vec::new();
    for name in names {
        let g = live
            .instance
            .get_global(&mut live.store, name)
            .ok_or(CaptureError::Shape("globals"))?;
        let value = match g.get(&mut live.store) {
            Val::I32(v) => GlobalBits::I32(v as u32),
            Val::I64(v) => GlobalBits::I64(v as u64),
            Val::F32(v) => GlobalBits::F32(v),
            Val::F64(v) => GlobalBits::F64(v),
            Val::V128(v) => GlobalBits::V128(v.as_u128()),
            _ => return Err(CaptureError::Shape("globals")),
        };
        globals.push(GlobalValue {
            name: name.to_string(),
            value,
        });
    }
    Ok(globals)
}

/// For each [`PAGE_BYTES`] page of `mem`, whether the kernel's page map shows its host page
/// as private and present, or swapped out: written since it was mapped (the template's
/// untouched pages are the image's shared file pages, or not present). `None` when the page
/// map cannot be read.
pub(super) fn written_pages(mem: &[u8]) -> Option<Vec<bool>> {
    use std::os::unix::fs::FileExt;
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE_OR_SHARED: u64 = 1 << 61;
    let host_page = rustix::param::page_size();
    if !host_page.is_multiple_of(PAGE_BYTES) || !(mem.as_ptr() as usize).is_multiple_of(host_page) {
        return None;
    }
    let per_host = host_page / PAGE_BYTES;
    let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
    let first = mem.as_ptr() as usize / host_page;
    let host_pages = mem.len().div_ceil(host_page);
    let mut out = Vec::with_capacity(mem.len() / PAGE_BYTES);
    let mut buf = vec![0u8; 8 * 4096];
    let mut done = 0;
    while done < host_pages {
        let n = (host_pages - done).min(4096);
        let bytes = &mut buf[..8 * n];
        pagemap
            .read_exact_at(bytes, ((first + done) * 8) as u64)
            .ok()?;
        for entry in bytes.chunks_exact(8) {
            let e = u64::from_le_bytes(entry.try_into().unwrap());
            let written = (e & PRESENT != 0 && e & FILE_OR_SHARED == 0) || e & SWAPPED != 0;
            out.extend(std::iter::repeat_n(written, per_host));
        }
        done += n;
    }
    out.truncate(mem.len() / PAGE_BYTES);
    Some(out)
}

/// Every folder (parents first) and regular file under `root`, with contents.
type Tree = (Vec<String>, Vec<(String, Vec<u8>)>);

/// Every folder (parents first) and regular file under `root`, with their contents when
/// `contents` (else empty).
pub(super) fn read_tree(root: &Path, contents: bool) -> Result<Tree, CaptureError> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(prefix) = stack.pop() {
        let here = root.join(&prefix);
        let entries = std::fs::read_dir(&here).map_err(|e| WorkdirError::Io {
            what: "listing",
            path: here.clone(),
            source: e,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if dirs.len() + files.len() >= MAX_ENTRIES {
                return Err(CaptureError::TooManyEntries);
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    dirs.push(rel.clone());
                    stack.push(rel);
                }
                Ok(t) if t.is_file() => {
                    let content = if contents {
                        std::fs::read(entry.path()).map_err(|e| WorkdirError::Io {
                            what: "reading",
                            path: entry.path(),
                            source: e,
                        })?
                    } else {
                        Vec::new()
                    };
                    files.push((rel, content));
                }
                _ => {}
            }
        }
    }
    // Parents before children, whatever order the walk found them in.
    dirs.sort();
    Ok((dirs, files))
}
