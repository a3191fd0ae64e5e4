//! A session's rollback checkpoint: its whole state as of the end of its last completed
//! turn, kept in host memory and brought up to date after every turn at a cost that follows
//! what the turn wrote. A turn that a limit or trap stops leaves the instance untrustworthy;
//! with a checkpoint the session comes back as a fresh instance restored from it (see
//! `Vivarium::session_turn`), at exactly its state before that turn.
//!
//! After each turn: the pages the turn wrote ([`DirtyTracker`], or every page written since
//! the template where the kernel cannot track) are copied; the working directory's files are
//! read again only where their size or times changed; globals and counters are read afresh.
//! The checkpoint holds a copy of every page the session has written and of its files: that
//! is its memory cost, next to the session's own.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::dirty::DirtyTracker;
use super::image_io::{CaptureError, Tree, read_globals, read_tree, written_pages};
use super::live::Live;
use super::open_files::read_open_files;
use crate::budget::Charge;
use crate::snapshot::{GlobalValue, PAGE_BYTES, SessionImage, check_capturable_parts};

/// When a file last changed, as far as deciding whether to read it again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    ino: u64,
    ctime_ns: i128,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Stamp {
        len: m.len(),
        modified: m.modified().ok(),
        ino: m.ino(),
        ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
    })
}

/// See the module documentation.
pub struct Checkpoint {
    /// Must go before the memory it watches does (a field of `Interpreter` declared before
    /// `live`, so it drops first).
    tracker: Option<DirtyTracker>,
    /// Why there is no tracker, for the logs.
    pub untracked_because: Option<String>,
    memory_bytes: u64,
    /// Shared with the [`CheckpointView`]s taken of it: a refresh replaces a page, never
    /// writes into one, so a view stays the state it was taken at.
    pages: BTreeMap<u32, Arc<[u8]>>,
    globals: Vec<GlobalValue>,
    dirs: Vec<String>,
    files: BTreeMap<String, (Option<Stamp>, Arc<[u8]>)>,
    /// Everything else (its open files included), with no pages or files.
    base: SessionImage,
    /// Why the state at the last refresh cannot be carried (a descriptor a snapshot does
    /// not hold, a bound of the snapshot format passed: see `capture.rs`), so that
    /// [`Checkpoint::carriable`] is false.
    uncarried: Option<String>,
    /// Its pages and files, held against the host's budget (`None` when the sandbox's
    /// memory is not charged).
    host: Option<Charge>,
}

impl Checkpoint {
    /// Starts tracking `live`'s memory for a checkpoint to come (see [`Checkpoint::track`]),
    /// with the pages written so far: a full capture needs to look at those alone
    /// (`Interpreter::capture_among`).
    pub fn start_tracking(live: &Live) -> Result<(DirtyTracker, Vec<u32>), String> {
        let base = live.memory.data_ptr(&live.store);
        // The whole range the memory may grow into, so pages it grows into are seen too; what
        // it holds now is walked once, protecting what was written so far.
        let cap = usize::try_from(live.store.data().limiter.cap_bytes()).unwrap_or(usize::MAX);
        let size = live.memory.data_size(&live.store);
        DirtyTracker::start(base, cap.max(size), size)
    }

    /// A checkpoint from a full capture of `live` (`image`), tracking its memory from now.
    pub fn new(live: &Live, image: SessionImage) -> Checkpoint {
        let tracking = Self::start_tracking(live).map(|(tracker, _)| tracker);
        Self::with_tracking(live, image, tracking)
    }

    /// [`Checkpoint::new`] with the tracking of `live`'s memory started before `image` was
    /// captured ([`Checkpoint::start_tracking`]; no guest code ran in between).
    pub fn with_tracking(
        live: &Live,
        image: SessionImage,
        tracking: Result<DirtyTracker, String>,
    ) -> Checkpoint {
        let root = live.workdir.path().to_path_buf();
        let mut pages = BTreeMap::new();
        for (i, p) in image.pages.iter().enumerate() {
            pages.insert(
                *p,
                image.page_data[i * PAGE_BYTES..(i + 1) * PAGE_BYTES].into(),
            );
        }
        let files = image
            .files
            .iter()
            .map(|(path, content)| {
                (
                    path.clone(),
                    (stamp(&root.join(path)), Arc::from(content.as_slice())),
                )
            })
            .collect();
        let mut cp = Checkpoint {
            tracker: None,
            untracked_because: None,
            memory_bytes: image.memory_bytes,
            pages,
            globals: image.globals.clone(),
            dirs: image.dirs.clone(),
            files,
            base: SessionImage {
                pages: Vec::new(),
                page_data: Vec::new(),
                files: Vec::new(),
                ..image
            },
            uncarried: None,
            host: live.store.data().limiter.host_sibling(),
        };
        cp.watch(tracking);
        cp
    }

    /// Charges what it holds now to the host's budget; `Err` when the budget has no room
    /// (the caller drops it: the session goes on without rollback).
    pub fn charge(&mut self) -> Result<(), CaptureError> {
        let held = self.held_bytes();
        match &mut self.host {
            Some(c) => c.set(held).then_some(()).ok_or(CaptureError::HostBudget),
            None => Ok(()),
        }
    }

    /// Watches `live`'s memory from now on (a new instance after a rollback), and takes
    /// its files' stamps afresh (a restored working directory's files are new files).
    pub fn track(&mut self, live: &Live) {
        let root = live.workdir.path();
        for (path, (st, _)) in self.files.iter_mut() {
            *st = stamp(&root.join(path));
        }
        self.tracker = None;
        self.watch(Self::start_tracking(live).map(|(tracker, _)| tracker));
    }

    fn watch(&mut self, tracking: Result<DirtyTracker, String>) {
        match tracking {
            Ok(t) => {
                self.tracker = Some(t);
                self.untracked_because = None;
            }
            Err(why) => self.untracked_because = Some(why),
        }
    }

    /// Brings the checkpoint up to `live`'s state after a completed turn.
    pub fn refresh(&mut self, live: &mut Live) -> Result<(), CaptureError> {
        let globals = read_globals(live, self.globals.iter().map(|g| g.name.as_str()))?;
        let mem = live.memory.data(&live.store);
        let written: Vec<u32> = match self.tracker.as_ref().map(|t| t.take(mem.len())) {
            Some(Ok(pages)) => pages,
            other => {
                if let Some(Err(why)) = other {
                    // Tracking broke mid-session: stop relying on it.
                    self.tracker = None;
                    self.untracked_because = Some(why);
                }
                written_pages(mem)
            }
        };
        for p in written {
            let at = p as usize * PAGE_BYTES;
            if let Some(page) = mem.get(at..at + PAGE_BYTES) {
                self.pages.insert(p, Arc::from(page));
            }
        }
        self.memory_bytes = mem.len() as u64;
        self.globals = globals;
        self.refresh_files(live.workdir.path())?;
        self.uncarried = self.refresh_open_files(live).err();
        self.base.turns_run = live.turns_run;
        self.base.monotonic_ns =
            u64::try_from(live.store.data().clock.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.base.memory_peak_bytes =
            (live.store.data().limiter.peak_bytes as u64).max(self.memory_bytes);
        self.charge()
    }

    /// The files the guest holds open now, and whether the state is within the snapshot
    /// format's bounds (what a capture checks); `Err` with why not.
    fn refresh_open_files(&mut self, live: &mut Live) -> Result<(), String> {
        let sizes = || {
            self.files
                .iter()
                .map(|(p, (_, c))| (p.as_str(), c.len() as u64))
        };
        self.base.open_files = read_open_files(live, sizes()).map_err(|e| e.to_string())?;
        check_capturable_parts(
            &self.base.limits,
            &self.dirs,
            sizes(),
            &self.globals,
            &self.base.packages,
            &self.base.open_files,
        )
        .map_err(|e| e.to_string())
    }

    /// Whether the state at the last refresh can be carried: restored into a fresh
    /// instance (a rollback) or written as a snapshot.
    pub fn carriable(&self) -> bool {
        self.uncarried.is_none()
    }

    fn refresh_files(&mut self, root: &Path) -> Result<(), CaptureError> {
        // Listing is cheap; contents are read again only for files whose stamp moved.
        let Tree {
            dirs,
            files: listed,
            links,
        } = read_tree(root, false)?;
        let mut files = BTreeMap::new();
        for (path, _) in listed {
            let now = stamp(&root.join(&path));
            let kept = self.files.remove(&path);
            let entry = match kept {
                Some((then, content)) if then.is_some() && then == now => (then, content),
                _ => {
                    let at = root.join(&path);
                    let content = std::fs::read(&at).map_err(super::workdir::io("reading", &at))?;
                    (now, Arc::from(content))
                }
            };
            files.insert(path, entry);
        }
        self.files = files;
        self.dirs = dirs;
        self.base.links = links;
        Ok(())
    }

    /// The state as a [`SessionImage`], to restore from or to store.
    pub fn image(&self) -> SessionImage {
        self.view().into_image()
    }

    /// The state as it is now, sharing the checkpoint's pages and files (no copy): cheap
    /// to take on a turn's response path, made into an image later, elsewhere.
    pub fn view(&self) -> CheckpointView {
        CheckpointView {
            pages: self.pages.iter().map(|(p, c)| (*p, c.clone())).collect(),
            files: self
                .files
                .iter()
                .map(|(p, (_, c))| (p.clone(), c.clone()))
                .collect(),
            rest: SessionImage {
                memory_bytes: self.memory_bytes,
                globals: self.globals.clone(),
                dirs: self.dirs.clone(),
                ..self.base.clone()
            },
        }
    }

    /// Host bytes the checkpoint holds (pages and files).
    pub fn held_bytes(&self) -> u64 {
        (self.pages.len() * PAGE_BYTES) as u64
            + self
                .files
                .values()
                .map(|(_, c)| c.len() as u64)
                .sum::<u64>()
    }
}

/// A checkpoint's state at one moment, sharing its pages and files (see
/// [`Checkpoint::view`]).
pub struct CheckpointView {
    pages: Vec<(u32, Arc<[u8]>)>,
    files: Vec<(String, Arc<[u8]>)>,
    /// Everything else, with no pages or files.
    rest: SessionImage,
}

impl CheckpointView {
    /// The state as a [`SessionImage`] (this copies the pages and files).
    pub fn into_image(self) -> SessionImage {
        let mut page_data = Vec::with_capacity(self.pages.len() * PAGE_BYTES);
        for (_, page) in &self.pages {
            page_data.extend_from_slice(page);
        }
        SessionImage {
            pages: self.pages.iter().map(|(p, _)| *p).collect(),
            page_data,
            files: self
                .files
                .into_iter()
                .map(|(p, c)| (p, c.to_vec()))
                .collect(),
            ..self.rest
        }
    }
}
