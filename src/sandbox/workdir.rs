//! The guest's only writable filesystem: a fresh directory per sandbox under a scratch root
//! this process owns, removed when the sandbox is dropped, whatever way the run ended.
//!
//! The scratch root is `<base>/<pid>`, with a `.lock` file this process holds locked while it
//! lives. At start every sibling whose lock can be taken belonged to a process that died
//! without cleaning up (SIGKILL, OOM kill, power loss), and is removed.
//!
//! Input files are written, and output files read, through a `cap_std::fs::Dir` for the
//! sandbox directory, so a path or a symlink the guest planted cannot lead the host outside.

use crate::path_io::PathIoError;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

use super::kept_dirs::{KeptDir, KeptDirs, Laid};
use crate::budget::Charge;
use crate::guest::{HOST_LAYOUT_DIRS, STUB_DIRS};
use crate::report::{FileOut, Held};

use crate::vocabulary::BadPath;
pub use crate::vocabulary::MAX_INPUT_FILES;

/// Under a scratch root that holds returned files, a returned file larger than this is not
/// read into memory: it is moved (a rename, no copy) to the root itself as
/// `held-<16 hex digits>` for the supervisor, which streams it into the response from there
/// (`worker::held`).
pub const HOLD_ABOVE_BYTES: u64 = 1 << 20;
/// At most this many files of one run are held (each costs the supervisor a descriptor);
/// the others are returned as before, within what is left of the disk limit.
pub const MAX_HELD_FILES: usize = 64;
/// A held file's name in the scratch root: this, then 16 lowercase hex digits.
pub const HELD_PREFIX: &str = "held-";

/// Scratch roots whose sandboxes hold large returned files (a worker's: its supervisor
/// claims them); any other (`vivarium run`, library use) reads them into the report.
static HOLDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// From now on, sandboxes under `root` hold their large returned files in `root` rather
/// than read them; whoever gets their reports must claim each (open, then unlink it), or
/// it stays until the root is removed.
pub fn hold_returned_files(root: &Path) {
    let mut holding = crate::sync::lock(&HOLDING);
    if !holding.iter().any(|p| p == root) {
        holding.push(root.to_path_buf());
    }
}

/// Whether `name` is one [`WorkDir`] gives a held file: [`HELD_PREFIX`] and 16 lowercase
/// hex digits.
pub fn is_held_name(name: &str) -> bool {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    name.strip_prefix(HELD_PREFIX)
        .is_some_and(|h| h.len() == 16 && h.bytes().all(hex))
}

fn held_name() -> String {
    format!("{HELD_PREFIX}{:016x}", rand::random::<u64>())
}

#[derive(Debug, thiserror::Error)]
pub enum WorkdirError {
    #[error("file path {path:?} is not allowed: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("too many input files ({count}; at most {MAX_INPUT_FILES})")]
    TooManyFiles { count: usize },
    #[error("input files total {total} bytes, above the disk limit of {limit}")]
    InputsTooLarge { total: u64, limit: u64 },
    #[error(transparent)]
    Io(#[from] PathIoError),
}

pub(crate) fn io(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> WorkdirError + use<> {
    PathIoError::at(what, path)
}

/// This process's scratch root. Dropping it removes it.
pub struct ScratchRoot {
    path: PathBuf,
    _lock: File,
    /// Template folders kept for the next run of their template.
    kept: Arc<KeptDirs>,
}

impl ScratchRoot {
    /// Creates `<base>/<pid>` and removes what dead predecessors left under `base`.
    ///
    /// Processes sharing a base (every `vivarium run` uses the default one) serialise this on
    /// `<base>/.create.lock`: otherwise one could see another's root between its creation and
    /// the locking of its `.lock`, take it for abandoned, and remove it.
    pub fn create(base: &Path) -> Result<Self, WorkdirError> {
        std::fs::create_dir_all(base).map_err(io("creating scratch base", base))?;
        let create_lock_path = base.join(".create.lock");
        let create_lock =
            File::create(&create_lock_path).map_err(io("creating", &create_lock_path))?;
        create_lock
            .lock()
            .map_err(io("locking", &create_lock_path))?;
        Self::remove_abandoned(base);
        let path = base.join(std::process::id().to_string());
        // A previous process with our pid (pid reuse after a crash) is dead by definition.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(io("creating scratch root", &path))?;
        set_private(&path);
        let lock_path = path.join(".lock");
        let lock = File::create(&lock_path).map_err(io("creating", &lock_path))?;
        lock.lock().map_err(io("locking", &lock_path))?;
        drop(create_lock);
        Ok(ScratchRoot {
            path,
            _lock: lock,
            kept: Arc::default(),
        })
    }

    fn remove_abandoned(base: &Path) {
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if !dir.is_dir() {
                continue;
            }
            let Ok(lock) = File::open(dir.join(".lock")) else {
                // No lock file: a root that died while being created, or not ours at all.
                if entry.file_name().to_string_lossy().parse::<u32>().is_ok() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                continue;
            };
            if lock.try_lock().is_ok() {
                tracing::info!(dir = %dir.display(), "removing scratch left by a dead process");
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sandbox directories currently present (for tests and metrics): the host's own folders
    /// (their names begin with a dot, as [`CHECKER_PREFIX`]) are not sandboxes'.
    pub fn live_dirs(&self) -> usize {
        sandbox_dirs_in(&self.path)
    }
}

impl Drop for ScratchRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The scratch root, opened, when its sandboxes hold large returned files.
fn held_in(root: &ScratchRoot) -> Result<Option<Dir>, WorkdirError> {
    let holds = crate::sync::lock(&HOLDING).iter().any(|p| p == root.path());
    if !holds {
        return Ok(None);
    }
    let held = root.path();
    Dir::open_ambient_dir(held, ambient_authority())
        .map(Some)
        .map_err(io("opening", held))
}

fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
}

/// The sandbox directories in the scratch root `root` (this process's or a worker's): every
/// folder but the host's own, whose names begin with a dot ([`CHECKER_PREFIX`]).
pub fn sandbox_dirs_in(root: &Path) -> usize {
    std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

/// How a kept checker's directory is named in its scratch root: a checker is an interpreter
/// of the host's that never runs a caller's code, so its directory is not a sandbox's.
pub const CHECKER_PREFIX: &str = ".checker-";

/// How a template folder kept for a next run (`kept_dirs`) is named while no sandbox has it.
const KEPT_PREFIX: &str = ".kept-";

/// A caller's file to place in the working directory (and, as data, in a job to a worker).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InputFile {
    /// Relative, `/`-separated, no `..` (checked by the front door, and again here).
    pub path: String,
    /// The file's bytes.
    #[serde(with = "serde_bytes")]
    pub content: Vec<u8>,
}

/// One sandbox's directory. Dropping it removes it.
pub struct WorkDir {
    path: PathBuf,
    dir: Dir,
    /// SHA-256 of each input file, to tell changed files from untouched ones.
    inputs: HashMap<String, [u8; 32]>,
    /// A user template's files, laid with a modification time of the template's making:
    /// their size and that time, so an untouched one is known without reading it (a write
    /// sets the time to now).
    laid: Laid,
    /// Its scratch root's kept folders, and, once its run left it as laid, the template it
    /// is kept for (with its bytes' hold on the host's budget): see `kept_dirs`.
    kept: Arc<KeptDirs>,
    keep_for: Option<(String, Option<Charge>)>,
    /// It was a kept folder: the template's files are in place already.
    reused: bool,
    /// The scratch root, opened, when it holds large returned files.
    held: Option<Dir>,
    /// The volumes mounted in the sandbox, by their mount points below `/` (`mnt/data`):
    /// a file read by the host's own calls (a session's file API) at or below one is read
    /// from the volume, as the guest would read it.
    volumes: Vec<(String, Dir)>,
}

impl WorkDir {
    /// Makes a fresh directory under `root` with the guest's layout and the input files.
    pub fn create(
        root: &ScratchRoot,
        files: &[InputFile],
        disk_limit: u64,
    ) -> Result<Self, WorkdirError> {
        if files.len() > MAX_INPUT_FILES {
            return Err(WorkdirError::TooManyFiles { count: files.len() });
        }
        let total: u64 = files.iter().map(|f| f.content.len() as u64).sum();
        if total > disk_limit {
            return Err(WorkdirError::InputsTooLarge {
                total,
                limit: disk_limit,
            });
        }
        for f in files {
            validate_relative_path(&f.path)?;
        }
        let path = root
            .path()
            .join(format!("sbx-{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&path).map_err(io("creating sandbox dir", &path))?;
        set_private(&path);
        // From here on, Drop removes the directory on every path out.
        let dir = Dir::open_ambient_dir(&path, ambient_authority())
            .map_err(io("opening sandbox dir", &path))?;
        let mut workdir = WorkDir {
            path,
            dir,
            inputs: HashMap::new(),
            laid: HashMap::new(),
            kept: root.kept.clone(),
            keep_for: None,
            reused: false,
            held: held_in(root)?,
            volumes: Vec::new(),
        };
        for stub in STUB_DIRS {
            workdir
                .dir
                .create_dir_all(stub)
                .map_err(io("creating", Path::new(stub)))?;
        }
        for f in files {
            workdir.write_file(&f.path, &f.content)?;
        }
        Ok(workdir)
    }

    /// The folder the last run of `layer`'s template left as laid, if this process kept one
    /// (see `kept_dirs`): its layout and the template's files are in place.
    pub fn reuse(root: &ScratchRoot, layer: &str) -> Option<Self> {
        // Until the rename succeeds, any way out drops `kept`, which removes the folder.
        let kept = root.kept.take(layer)?;
        let name = kept.path.file_name()?.to_str()?.strip_prefix(KEPT_PREFIX)?;
        let dir = Dir::open_ambient_dir(&kept.path, ambient_authority()).ok()?;
        let held = held_in(root).ok()?;
        let path = kept.path.with_file_name(name);
        std::fs::rename(&kept.path, &path).ok()?;
        Some(WorkDir {
            path,
            dir,
            inputs: HashMap::new(),
            laid: kept.into_laid(),
            kept: root.kept.clone(),
            keep_for: None,
            reused: true,
            held,
            volumes: Vec::new(),
        })
    }

    /// Whether it was a kept folder, the template's files in place already.
    pub fn is_reused(&self) -> bool {
        self.reused
    }

    /// Keeps the folder for the next run of `layer`'s template instead of removing it when
    /// dropped (`charge` holds its bytes on the host's budget): only for a folder its run
    /// left exactly as laid, with no input file and no volume.
    pub fn keep_for(&mut self, layer: String, charge: Option<Charge>) {
        self.keep_for = Some((layer, charge));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the directory, in the same folder, as a kept checker's ([`CHECKER_PREFIX`]):
    /// the guest's view, through the open directory, does not change. (A rename within one
    /// folder: a worker's Landlock rules let it rename there, not move across folders.)
    pub fn name_as_checker(&mut self) -> std::io::Result<()> {
        let name = self
            .path
            .file_name()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        let to = self
            .path
            .with_file_name(format!("{CHECKER_PREFIX}{}", name.to_string_lossy()));
        std::fs::rename(&self.path, &to)?;
        self.path = to;
        Ok(())
    }

    /// Writes one file (creating parent folders), remembering it as an input.
    pub fn write_file(&mut self, rel: &str, content: &[u8]) -> Result<(), WorkdirError> {
        validate_relative_path(rel)?;
        self.make_parents(rel)?;
        self.dir
            .write(rel, content)
            .map_err(io("writing", Path::new(rel)))?;
        self.inputs
            .insert(rel.to_string(), Sha256::digest(content).into());
        Ok(())
    }

    /// Writes one of a user template's files (creating parent folders), modified at `made`:
    /// unless the guest changes it, it is not among the run's changed files, and telling so
    /// reads only its metadata.
    pub fn lay_file(
        &mut self,
        rel: &str,
        content: &[u8],
        made: std::time::SystemTime,
    ) -> Result<(), WorkdirError> {
        validate_relative_path(rel)?;
        self.make_parents(rel)?;
        let laid = (|| -> std::io::Result<std::time::SystemTime> {
            let mut f = self.dir.create(rel)?.into_std();
            std::io::Write::write_all(&mut f, content)?;
            f.set_modified(made)?;
            f.metadata()?.modified()
        })()
        .map_err(io("writing", Path::new(rel)))?;
        self.laid
            .insert(rel.to_string(), (content.len() as u64, laid));
        Ok(())
    }

    /// Whether `rel`, a template's file, is as it was laid (its size and time).
    fn laid_unchanged(&self, rel: &str, size: u64) -> bool {
        let Some((len, at)) = self.laid.get(rel) else {
            return false;
        };
        *len == size
            && self
                .dir
                .symlink_metadata(rel)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m.into_std() == *at)
    }

    /// Makes a symbolic link at `rel` to `target` (an image's: it must lead inside, as the
    /// guest's own links must).
    pub fn make_link(&mut self, rel: &str, target: &str) -> Result<(), WorkdirError> {
        if !crate::vocabulary::link_stays_inside(rel, target) {
            return Err(WorkdirError::BadPath {
                path: rel.chars().take(200).collect(),
                reason: "a link whose target leads outside the working directory",
            });
        }
        self.make_parents(rel)?;
        self.dir
            .symlink(target, rel)
            .map_err(io("linking", Path::new(rel)))
    }

    /// Makes the folders above `rel` (a checked relative path).
    fn make_parents(&self, rel: &str) -> Result<(), WorkdirError> {
        match Path::new(rel).parent() {
            Some(parent) if !parent.as_os_str().is_empty() => self
                .dir
                .create_dir_all(parent)
                .map_err(io("creating", parent)),
            _ => Ok(()),
        }
    }

    /// Makes one folder (and its parents) inside the directory.
    pub fn create_dir(&mut self, rel: &str) -> Result<(), WorkdirError> {
        validate_relative_path(rel)?;
        self.dir
            .create_dir_all(rel)
            .map_err(io("creating", Path::new(rel)))
    }

    /// Shows the volume whose files are at `files` at `below_root` (its mount point, whose
    /// stub folder it makes) to the host's own reads.
    pub fn mount(&mut self, below_root: &str, files: Dir) -> Result<(), WorkdirError> {
        self.create_dir(below_root)?;
        self.volumes.push((below_root.to_string(), files));
        Ok(())
    }

    /// What the directory holds by the quota's measure (`fs_guard::measure_dir`) when it
    /// holds only its layout (no input file): its folders, counted without reading them.
    pub fn layout_bytes(&self) -> u64 {
        let mut folders = std::collections::BTreeSet::new();
        let made = STUB_DIRS
            .iter()
            .copied()
            .chain(self.volumes.iter().map(|(at, _)| at.as_str()));
        for path in made {
            let mut end = 0;
            for part in path.split('/') {
                end += part.len();
                folders.insert(&path[..end]);
                end += 1;
            }
        }
        folders.len() as u64 * crate::hostcalls::charge::ENTRY_BYTES
    }

    /// Where the file `rel` (checked) is read from: a mounted volume's folder and the path
    /// in it, or the directory itself.
    fn place<'a>(&'a self, rel: &'a str) -> (&'a Dir, &'a str) {
        for (at, dir) in &self.volumes {
            match crate::guest::below(at, rel) {
                Some("") => return (dir, "."),
                Some(rest) => return (dir, rest),
                None => {}
            }
        }
        (&self.dir, rel)
    }

    /// Reads one file, refusing anything that is not a regular file inside the directory (or
    /// a volume mounted in it) or is larger than `max_bytes`.
    pub fn read_file(&self, rel: &str, max_bytes: u64) -> Result<Option<Vec<u8>>, WorkdirError> {
        let Some(len) = self.readable_len(rel, max_bytes)? else {
            return Ok(None);
        };
        let mut buf = Vec::with_capacity(len as usize);
        let (dir, at) = self.place(rel);
        dir.open(at)
            .and_then(|f| f.take(max_bytes).read_to_end(&mut buf))
            .map_err(io("reading", Path::new(rel)))?;
        Ok(Some(buf))
    }

    /// The size of `rel` when it is a regular file inside the directory (a link is not
    /// followed) of at most `max_bytes`; `None` otherwise, or when there is no such file.
    fn readable_len(&self, rel: &str, max_bytes: u64) -> Result<Option<u64>, WorkdirError> {
        validate_relative_path(rel)?;
        let (dir, at) = self.place(rel);
        let meta = match dir.symlink_metadata(at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("reading", Path::new(rel))(e)),
        };
        Ok((meta.is_file() && meta.len() <= max_bytes).then(|| meta.len()))
    }

    /// Every regular file the guest can see as its own (host layout dirs excluded), with size.
    pub fn list_files(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(prefix) = stack.pop() {
            let listing = if prefix.is_empty() {
                self.dir.entries()
            } else {
                self.dir.read_dir(&prefix)
            };
            let Ok(entries) = listing else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if prefix.is_empty() && HOST_LAYOUT_DIRS.contains(&name.as_str()) {
                    continue;
                }
                let rel = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                // `file_type` does not follow links: a symlink is neither file nor folder here.
                match entry.file_type() {
                    Ok(t) if t.is_dir() => stack.push(rel),
                    Ok(t) if t.is_file() => {
                        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                        out.push((rel, size));
                    }
                    _ => {}
                }
            }
        }
        out.sort();
        out
    }

    /// Whether large files leave this directory held rather than read.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The size of `rel` when it is a regular file (a symlink is not followed).
    pub fn file_len(&self, rel: &str) -> Option<u64> {
        validate_relative_path(rel).ok()?;
        let (dir, at) = self.place(rel);
        let meta = dir.symlink_metadata(at).ok()?;
        meta.is_file().then(|| meta.len())
    }

    /// Copies one file (as [`WorkDir::read_file`] would read it) into the root's held
    /// folder, by the kernel (no buffer here): its held name and size, `None` when there is
    /// no such file. Only under a root that holds returned files.
    pub fn hold_copy(
        &self,
        rel: &str,
        max_bytes: u64,
    ) -> Result<Option<(String, u64)>, WorkdirError> {
        validate_relative_path(rel)?;
        let Some(held) = &self.held else {
            return Ok(None);
        };
        if self.readable_len(rel, max_bytes)?.is_none() {
            return Ok(None);
        }
        let name = held_name();
        let copied = (|| {
            let (dir, at) = self.place(rel);
            let mut from = dir.open(at)?.into_std();
            let mut to = held
                .open_with(
                    &name,
                    cap_std::fs::OpenOptions::new().write(true).create_new(true),
                )?
                .into_std();
            std::io::copy(&mut (&mut from).take(max_bytes), &mut to)
        })();
        match copied {
            Ok(size) => Ok(Some((name, size))),
            Err(e) => {
                let _ = held.remove_file(&name);
                Err(io("copying", Path::new(rel))(e))
            }
        }
    }

    /// Whether `rel`, an input file, still holds what the caller gave (hashed as it is read,
    /// a buffer at a time).
    fn unchanged_input(&self, rel: &str) -> bool {
        let Some(input) = self.inputs.get(rel) else {
            return false;
        };
        let Ok(mut f) = self.dir.open(rel) else {
            return false;
        };
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => hash.update(&buf[..n]),
                Err(_) => return false,
            }
        }
        *input == <[u8; 32]>::from(hash.finalize())
    }

    /// Moves `rel` to the scratch root as a held file; its held name.
    fn hold(&self, held: &Dir, rel: &str) -> std::io::Result<String> {
        let name = held_name();
        self.dir.rename(rel, held, &name)?;
        Ok(name)
    }

    /// The files the run created or changed, their content included while the total stays
    /// within `max_total_bytes` (larger ones are listed without content). Under a root that
    /// holds returned files, one over [`HOLD_ABOVE_BYTES`] is moved out to be held instead
    /// (up to [`MAX_HELD_FILES`] of them): call this once, at the end of a run.
    pub fn changed_files(&self, max_total_bytes: u64) -> Vec<FileOut> {
        let mut budget = max_total_bytes;
        let mut out = Vec::new();
        let mut held_count = 0;
        for (rel, size) in self.list_files() {
            if self.laid_unchanged(&rel, size) {
                continue;
            }
            if let Some(held) = &self.held
                && size > HOLD_ABOVE_BYTES
                && held_count < MAX_HELD_FILES
            {
                if self.unchanged_input(&rel) {
                    continue;
                }
                match self.hold(held, &rel) {
                    Ok(name) => {
                        held_count += 1;
                        out.push(FileOut {
                            path: rel,
                            size,
                            content: None,
                            held: Some(Held { name, file: None }),
                        });
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(path = %rel, error = %e, "could not hold a returned file; reading it");
                    }
                }
            }
            let content = if size <= budget {
                self.read_file(&rel, size).ok().flatten()
            } else {
                None
            };
            if let (Some(input), Some(bytes)) = (self.inputs.get(&rel), &content)
                && *input == <[u8; 32]>::from(Sha256::digest(bytes))
            {
                continue;
            }
            if let Some(bytes) = &content {
                budget -= bytes.len() as u64;
            }
            out.push(FileOut {
                path: rel,
                size,
                content,
                held: None,
            });
        }
        out
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Some((layer, charge)) = self.keep_for.take()
            && let Some(name) = self.path.file_name()
        {
            let kept = self
                .path
                .with_file_name(format!("{KEPT_PREFIX}{}", name.to_string_lossy()));
            if std::fs::rename(&self.path, &kept).is_ok() {
                self.kept.put(KeptDir {
                    layer,
                    path: kept,
                    laid: std::mem::take(&mut self.laid),
                    _charge: charge,
                });
                return;
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove sandbox dir");
        }
    }
}

/// [`crate::vocabulary::check_relative_path`], as this module's error.
pub fn validate_relative_path(path: &str) -> Result<(), WorkdirError> {
    crate::vocabulary::check_relative_path(path)
        .map_err(|BadPath { path, reason }| WorkdirError::BadPath { path, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_validated() {
        assert!(validate_relative_path("data.csv").is_ok());
        assert!(validate_relative_path("a/b/c.txt").is_ok());
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a\0b",
            "./a",
            "a\\b",
        ] {
            assert!(validate_relative_path(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_layout_alone_is_counted_as_measuring_it_would() {
        let base = std::env::temp_dir().join(format!("vivarium-test-{}", rand::random::<u32>()));
        let root = ScratchRoot::create(&base).unwrap();
        let volume = base.join("volume");
        std::fs::create_dir_all(&volume).unwrap();
        let open = || Dir::open_ambient_dir(&volume, ambient_authority()).unwrap();
        let mut w = WorkDir::create(&root, &[], 1 << 20).unwrap();
        let measured = || crate::hostcalls::fs_guard::measure_dir(w.path());
        assert_eq!(w.layout_bytes(), measured());
        w.mount("mnt/data", open()).unwrap();
        w.mount("mnt/more", open()).unwrap();
        w.mount("tmp/shared", open()).unwrap();
        w.mount("srv/a/b/c", open()).unwrap();
        assert_eq!(
            w.layout_bytes(),
            crate::hostcalls::fs_guard::measure_dir(w.path())
        );
        drop(w);
        drop(root);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn workdir_is_removed_and_reports_changes() {
        let base = std::env::temp_dir().join(format!("vivarium-test-{}", rand::random::<u32>()));
        let root = ScratchRoot::create(&base).unwrap();
        let inputs = vec![InputFile {
            path: "in/data.csv".into(),
            content: b"a,b\n1,2\n".to_vec(),
        }];
        let wd = WorkDir::create(&root, &inputs, 1 << 20).unwrap();
        let p = wd.path().to_path_buf();
        std::fs::write(p.join("out.txt"), b"hi").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", p.join("link")).unwrap();
        let changed = wd.changed_files(1 << 20);
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].path, "out.txt");
        assert_eq!(changed[0].content.as_deref(), Some(&b"hi"[..]));
        drop(wd);
        assert!(!p.exists());
        assert_eq!(root.live_dirs(), 0);
        drop(root);
        let _ = std::fs::remove_dir_all(base);
    }
}
