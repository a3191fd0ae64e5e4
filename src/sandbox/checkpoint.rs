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
//! is its memory cost, next to the session's own. It also keeps the states after the
//! session's last turns ([`KeptTurns`]): what each refresh replaced, so that it can be taken
//! back to any of them (a rollback or a fork to a kept turn).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::dirty::DirtyTracker;
use super::image_io::{CaptureError, Tree, read_globals, read_tree, written_pages};
use super::kept_turns::{FileBytes, KeptState, KeptTurns, Replaced};
use super::live::Live;
use super::open_files::read_open_files;
use crate::budget::Charge;
use crate::snapshot::{GlobalValue, PAGE_BYTES, SessionImage, check_capturable_parts};
use crate::vocabulary::TurnHistory;

/// When a file last changed, as far as deciding whether to read it again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
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
    /// Shared with the [`CheckpointView`]s taken of it: a refresh replaces a page, never
    /// writes into one, so a view stays the state it was taken at.
    pages: BTreeMap<u32, Arc<[u8]>>,
    files: BTreeMap<String, FileEntry>,
    rest: Rest,
    /// Its pages and files, held against the host's budget (`None` when the sandbox's
    /// memory is not charged).
    host: Option<Charge>,
    turns: KeptTurns<FileEntry, Rest>,
    /// Guest code ran since the last refresh (a query that is not kept): the instance may
    /// differ from the checkpoint.
    guest_ran: bool,
}

/// A file of the checkpoint: its stamp when read, and its contents.
pub(super) type FileEntry = (Option<Stamp>, Arc<[u8]>);

/// What taking the checkpoint back to a kept state changes: every page and file the turns
/// since changed, as that state has it (`None`: the template's page; no such file), and the
/// rest of that state.
pub(super) struct Plan {
    pub pages: BTreeMap<u32, Option<Arc<[u8]>>>,
    pub files: BTreeMap<String, Option<Arc<[u8]>>>,
    pub memory_bytes: u64,
    pub globals: Vec<GlobalValue>,
    pub turns_run: u32,
    /// Whether that state's folders, links, open files and carriability are the ones of the
    /// state it is in (else an instance cannot be taken back in place).
    pub same_shape: bool,
}

impl FileBytes for FileEntry {
    fn len(&self) -> u64 {
        self.1.len() as u64
    }
}

/// Everything of a state but its pages and files: small, cloned for each kept turn.
#[derive(Clone)]
struct Rest {
    memory_bytes: u64,
    globals: Vec<GlobalValue>,
    dirs: Vec<String>,
    /// Everything else (its open files included), with no pages or files.
    base: SessionImage,
    /// Why the state at the last refresh cannot be carried (a descriptor a snapshot does
    /// not hold, a bound of the snapshot format passed: see `capture.rs`), so that
    /// [`Checkpoint::carriable`] is false.
    uncarried: Option<String>,
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
            pages,
            files,
            rest: Rest {
                memory_bytes: image.memory_bytes,
                globals: image.globals.clone(),
                dirs: image.dirs.clone(),
                base: SessionImage {
                    pages: Vec::new(),
                    page_data: Vec::new(),
                    files: Vec::new(),
                    ..image
                },
                uncarried: None,
            },
            host: live.store.data().limiter.host_sibling(),
            turns: KeptTurns::new(),
            guest_ran: false,
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
        self.turns.abandon();
        self.guest_ran = false;
        self.watch(Self::start_tracking(live).map(|(tracker, _)| tracker));
    }

    /// Turn `number` (its `code`) is about to run, keeping `keep`: the refresh after it
    /// makes its state.
    pub fn begin_turn(&mut self, number: u64, code: &str, keep: TurnHistory) {
        self.turns.begin(number, code, keep);
    }

    /// Names the state it is in by the session's turn count `current`, unless a turn did.
    pub fn name_state(&mut self, current: u64) {
        self.turns.name(current);
    }

    /// The states it keeps, oldest first, the one it is in last.
    pub fn kept(&self) -> Vec<KeptState> {
        self.turns.list()
    }

    /// Whether the last turn alone was past the kept turns' byte budget.
    pub fn last_turn_unkept(&self) -> bool {
        self.turns.last_too_large()
    }

    /// State `turn` (a kept one) as a view, leaving the checkpoint as it is; `None` when it
    /// is not kept or cannot be carried.
    pub fn view_at(&self, turn: u64) -> Option<CheckpointView> {
        let to = self.changes_to(turn)?;
        let mut pages = self.pages.clone();
        let mut files = self.files.clone();
        undo(&mut pages, &mut files, &to);
        to.rest
            .uncarried
            .is_none()
            .then(|| view_of(&pages, &files, to.rest))
    }

    /// What taking the checkpoint back to kept state `turn` changes, its steps since folded
    /// into one (newest first, so the oldest step's copy of a page or file is the state's),
    /// with that state's rest; `None` when it is not kept.
    fn changes_to(&self, turn: u64) -> Option<Replaced<FileEntry, &Rest>> {
        let mut to = Replaced::new(&self.rest);
        for step in self.turns.path_to(turn)? {
            for (p, old) in &step.pages {
                to.pages.insert(*p, old.clone());
            }
            for (path, old) in &step.files {
                to.files.insert(path.clone(), old.clone());
            }
            to.rest = &step.rest;
        }
        Some(to)
    }

    /// What going back to kept state `turn` changes ([`Plan`]); `None` when it is not kept.
    pub(super) fn plan(&self, turn: u64) -> Option<Plan> {
        let Replaced { pages, files, rest } = self.changes_to(turn)?;
        let files = files
            .into_iter()
            .map(|(path, old)| (path, old.map(|(_, c)| c)))
            .collect();
        let now = &self.rest;
        Some(Plan {
            pages,
            files,
            memory_bytes: rest.memory_bytes,
            globals: rest.globals.clone(),
            turns_run: rest.base.turns_run,
            same_shape: rest.dirs == now.dirs
                && rest.base.links == now.base.links
                && rest.base.open_files == now.base.open_files
                && rest.uncarried.is_none()
                && now.uncarried.is_none(),
        })
    }

    /// Guest code is about to run (a turn, or a query that may not be kept).
    pub(super) fn note_guest_ran(&mut self) {
        self.guest_ran = true;
    }

    /// Whether guest code ran since the last refresh.
    pub(super) fn guest_ran(&self) -> bool {
        self.guest_ran
    }

    /// The pages written since the last refresh (what a query that only looked may have
    /// left), taking them: `None` without the kernel's tracking.
    pub(super) fn written_since_refresh(&self, len: usize) -> Option<Vec<u32>> {
        self.tracker.as_ref()?.take(len).ok()
    }

    /// Forgets that pages `first..=last` were written since the refresh (the host wrote
    /// them back with the checkpoint's own content).
    pub(super) fn forget_written(&self, first: u32, last: u32) {
        if let Some(t) = &self.tracker {
            let _ = t.forget(first, last);
        }
    }

    /// The checkpoint's copy of page `p` (`None`: the template's).
    pub(super) fn page(&self, p: u32) -> Option<&Arc<[u8]>> {
        self.pages.get(&p)
    }

    /// Whether the working directory under `root` still holds exactly the files the
    /// checkpoint has, as they were when read (no host or guest change since the refresh).
    pub(super) fn files_unchanged(&self, root: &Path) -> bool {
        match read_tree(root, false) {
            Ok(tree) => {
                tree.files.len() == self.files.len()
                    && tree.files.iter().all(|(path, _)| {
                        self.files
                            .get(path)
                            .is_some_and(|(st, _)| st.is_some() && *st == stamp(&root.join(path)))
                    })
            }
            Err(_) => false,
        }
    }

    /// Takes the stamps of `paths` afresh (the host wrote them back).
    pub(super) fn restamp<'a>(&mut self, root: &Path, paths: impl Iterator<Item = &'a String>) {
        for path in paths {
            if let Some((st, _)) = self.files.get_mut(path) {
                *st = stamp(&root.join(path));
            }
        }
    }

    /// Puts the checkpoint in state `turn` (a kept one), dropping the states after it;
    /// whether it was kept. The caller restores an instance from [`Checkpoint::image`] and
    /// tracks it ([`Checkpoint::track`]).
    pub fn rewind(&mut self, turn: u64) -> bool {
        let Some(steps) = self.turns.rewind(turn) else {
            return false;
        };
        for step in steps {
            undo(&mut self.pages, &mut self.files, &step);
            self.rest = step.rest;
        }
        // Gives back what the dropped states held.
        let _ = self.charge();
        true
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
        let globals = read_globals(live, self.rest.globals.iter().map(|g| g.name.as_str()))?;
        let mut replaced = self
            .turns
            .recording()
            .then(|| Replaced::new(self.rest.clone()));
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
                let old = self.pages.insert(p, Arc::from(page));
                if let Some(r) = &mut replaced {
                    r.page(p, old);
                }
            }
        }
        self.rest.memory_bytes = mem.len() as u64;
        self.rest.globals = globals;
        self.refresh_files(live.workdir.path(), replaced.as_mut())?;
        self.rest.uncarried = self.refresh_open_files(live).err();
        let base = &mut self.rest.base;
        base.turns_run = live.turns_run;
        base.monotonic_ns =
            u64::try_from(live.store.data().clock.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        base.memory_peak_bytes =
            (live.store.data().limiter.peak_bytes as u64).max(self.rest.memory_bytes);
        if let Some(r) = replaced {
            self.turns.record(r);
        }
        self.guest_ran = false;
        // Past the host's budget, the kept turns go before the checkpoint does.
        self.charge().or_else(|_| {
            self.turns.drop_records();
            self.charge()
        })
    }

    /// The files the guest holds open now, and whether the state is within the snapshot
    /// format's bounds (what a capture checks); `Err` with why not.
    fn refresh_open_files(&mut self, live: &mut Live) -> Result<(), String> {
        let sizes = || {
            self.files
                .iter()
                .map(|(p, (_, c))| (p.as_str(), c.len() as u64))
        };
        self.rest.base.open_files = read_open_files(live, sizes()).map_err(|e| e.to_string())?;
        check_capturable_parts(
            &self.rest.base.limits,
            &self.rest.dirs,
            sizes(),
            &self.rest.globals,
            &self.rest.base.packages,
            &self.rest.base.open_files,
        )
        .map_err(|e| e.to_string())
    }

    /// Whether the state at the last refresh can be carried: restored into a fresh
    /// instance (a rollback) or written as a snapshot.
    pub fn carriable(&self) -> bool {
        self.rest.uncarried.is_none()
    }

    /// Reads the working directory again, noting in `replaced` the entries it replaces.
    fn refresh_files(
        &mut self,
        root: &Path,
        mut replaced: Option<&mut Replaced<FileEntry, Rest>>,
    ) -> Result<(), CaptureError> {
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
                old => {
                    let at = root.join(&path);
                    let content = std::fs::read(&at).map_err(super::workdir::io("reading", &at))?;
                    if let Some(r) = replaced.as_deref_mut() {
                        r.file(&path, old);
                    }
                    (now, Arc::from(content))
                }
            };
            files.insert(path, entry);
        }
        // What is left was removed.
        if let Some(r) = replaced {
            for (path, old) in std::mem::take(&mut self.files) {
                r.file(&path, Some(old));
            }
        }
        self.files = files;
        self.rest.dirs = dirs;
        self.rest.base.links = links;
        Ok(())
    }

    /// The state as a [`SessionImage`], to restore from or to store.
    pub fn image(&self) -> SessionImage {
        self.view().into_image()
    }

    /// The state as it is now, sharing the checkpoint's pages and files (no copy): cheap
    /// to take on a turn's response path, made into an image later, elsewhere.
    pub fn view(&self) -> CheckpointView {
        view_of(&self.pages, &self.files, &self.rest)
    }

    /// Host bytes the checkpoint holds (pages and files, its kept turns' included).
    pub fn held_bytes(&self) -> u64 {
        (self.pages.len() * PAGE_BYTES) as u64
            + self
                .files
                .values()
                .map(|(_, c)| c.len() as u64)
                .sum::<u64>()
            + self.turns.bytes()
    }

    /// Bytes its kept turns hold (part of [`Checkpoint::held_bytes`]).
    pub fn kept_bytes(&self) -> u64 {
        self.turns.bytes()
    }
}

/// Takes `pages` and `files` one step back.
fn undo<R>(
    pages: &mut BTreeMap<u32, Arc<[u8]>>,
    files: &mut BTreeMap<String, FileEntry>,
    step: &Replaced<FileEntry, R>,
) {
    for (p, old) in &step.pages {
        match old {
            Some(page) => pages.insert(*p, page.clone()),
            None => pages.remove(p),
        };
    }
    for (path, old) in &step.files {
        match old {
            Some(entry) => files.insert(path.clone(), entry.clone()),
            None => files.remove(path),
        };
    }
}

fn view_of(
    pages: &BTreeMap<u32, Arc<[u8]>>,
    files: &BTreeMap<String, FileEntry>,
    rest: &Rest,
) -> CheckpointView {
    CheckpointView {
        pages: pages.iter().map(|(p, c)| (*p, c.clone())).collect(),
        files: files
            .iter()
            .map(|(p, (_, c))| (p.clone(), c.clone()))
            .collect(),
        rest: SessionImage {
            memory_bytes: rest.memory_bytes,
            globals: rest.globals.clone(),
            dirs: rest.dirs.clone(),
            ..rest.base.clone()
        },
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
