//! Volumes mounted in a sandbox (`guest::Lent`): the guest's paths below a mount point sent
//! to the volume, its writes held back until they are closed, and its room.
//!
//! wasi-libc resolves a path against the preopens it saw when the template was built, so
//! `/mnt/data/x.csv` reaches the host as `mnt/data/x.csv` on the working directory's
//! preopen (where a stub folder stands at the mount point). Each path call's shadow
//! ([`route`]) sends a path at or below a mount point, and any path on a descriptor opened
//! inside a volume, to the volume's own preopen (fd 7 on, `guest::preopen_mounts`), with
//! the path read lexically from the volume's top: a path that climbs above it is refused,
//! and since the guest can make no link in a volume (a volume holds only files and
//! folders), what is read lexically is what the host opens.
//!
//! What a concurrent writer sees: a file opened for writing in a volume is a private copy
//! (in the volume's `incoming/`: empty under `O_TRUNC`, else a copy of the file) until it
//! is closed; closing it renames it over the file in one step. So a reader sees a file
//! whole, as it was when the reader opened it; a sandbox that opens it after the writer's
//! close sees the new one; two writers of one file, the last to close wins. A sandbox that
//! ends (or a session that closes) with a file still open closes it then.
//!
//! What may not happen in a volume: a write to a read-only mount (EROFS); more bytes or
//! entries than the room lent (ENOSPC; a file a write was refused to is not put in place
//! when it is closed, and its close says ENOSPC too: the volume keeps what it had); a link, soft or hard (EPERM),
//! or a hard link or rename between a volume and anywhere else (EXDEV, as between file
//! systems); removing or renaming a mount point or a folder holding one (EBUSY).

use std::collections::HashMap;
use std::io::ErrorKind;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use wasmtime::Caller;
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as wasi, WasiSnapshotPreview1};
use wasmtime_wasi::runtime::in_tokio;
use wiggle::GuestMemory;

use super::errno;
use super::fs_guard::{ENTRY_BYTES, charge_for, is_root_preopen};
use super::guest_memory::{Scratch, memory, range};
use super::state::GuestState;
use crate::guest::Lent;

/// preview1's `rights::fd_write`.
const RIGHT_FD_WRITE: i64 = 1 << 6;
/// preview1's `oflags`.
const O_CREAT: i32 = 1;
const O_DIRECTORY: i32 = 2;
const O_EXCL: i32 = 4;
const O_TRUNC: i32 = 8;

/// One mounted volume.
struct Mounted {
    /// The mount point below `/` (`mnt/data`).
    below_root: String,
    /// Its files' preopen.
    files_fd: u32,
    /// The preopen its writes wait in (a writable mount).
    incoming_fd: Option<u32>,
    /// The same two folders, for the host's own work (copies, commits, sizes).
    files: Dir,
    incoming: Option<Dir>,
    room_bytes: u64,
    room_entries: u64,
    /// Bytes held by files open for writing (whole blocks, as written).
    pending_bytes: u64,
    /// What closed writes and removals changed, in bytes and entries (negative: freed).
    grown_bytes: i64,
    grown_entries: i64,
}

impl Mounted {
    /// Whether `bytes` more (and `entries` more) fit the room lent.
    fn fits(&self, bytes: u64, entries: i64) -> bool {
        let bytes_after =
            (self.pending_bytes.saturating_add(bytes)) as i128 + i128::from(self.grown_bytes);
        bytes_after <= i128::from(self.room_bytes)
            && self.grown_entries + entries <= self.room_entries as i64
    }
}

/// A descriptor the guest holds inside a volume.
struct InVolume {
    mount: usize,
    /// What it opened, relative to the volume's top (`""`: the top).
    rel: String,
    /// A file open for writing: its private copy, until it is closed.
    write: Option<Pending>,
}

struct Pending {
    /// Its name in the mount's `incoming/`.
    temp: String,
    /// Bytes charged for it so far.
    charged: u64,
    /// A write through it was refused for room: closing it puts nothing in place.
    refused: bool,
}

/// The volumes mounted in one sandbox, and the descriptors its guest holds in them.
#[derive(Default)]
pub struct Mounts {
    mounts: Vec<Mounted>,
    fds: HashMap<u32, InVolume>,
    /// Names this sandbox's private copies (with a counter).
    tag: u64,
    temps: u64,
}

impl Mounts {
    /// The mounts of `lent`, preopened at `fds` (`guest::preopen_mounts`).
    pub fn new(lent: &[Lent], fds: &[(u32, Option<u32>)]) -> std::io::Result<Mounts> {
        let mut mounts = Mounts {
            mounts: Vec::new(),
            fds: HashMap::new(),
            tag: rand::random(),
            temps: 0,
        };
        for (i, (m, &(files_fd, incoming_fd))) in lent.iter().zip(fds).enumerate() {
            let files = Dir::open_ambient_dir(&m.files, ambient_authority())?;
            let incoming = match &m.incoming {
                Some(dir) => Some(Dir::open_ambient_dir(dir, ambient_authority())?),
                None => None,
            };
            mounts.mounts.push(Mounted {
                below_root: m.at.below_root().to_string(),
                files_fd,
                incoming_fd,
                files,
                incoming,
                room_bytes: m.room_bytes,
                room_entries: m.room_entries,
                pending_bytes: 0,
                grown_bytes: 0,
                grown_entries: 0,
            });
            mounts.fds.insert(
                files_fd,
                InVolume {
                    mount: i,
                    rel: String::new(),
                    write: None,
                },
            );
        }
        Ok(mounts)
    }

    /// The descriptors the mounts' preopens take.
    pub fn preopens(&self) -> u32 {
        self.mounts
            .iter()
            .map(|m| 1 + u32::from(m.incoming_fd.is_some()))
            .sum()
    }

    /// Whether `fd` is one of the mounts' own preopens, which the guest may not close or
    /// renumber (a volume would be cut off, or a write could not be put in place).
    pub fn is_preopen(&self, fd: i32) -> bool {
        let fd = fd as u32;
        self.mounts
            .iter()
            .any(|m| m.files_fd == fd || m.incoming_fd == Some(fd))
    }

    /// Whether `fd` is a descriptor the guest holds inside a volume.
    pub fn holds(&self, fd: i32) -> bool {
        !self.mounts.is_empty() && self.fds.contains_key(&(fd as u32))
    }

    /// Charges a write of `bytes` ending at `end` through `fd`, a descriptor in a volume:
    /// false (ENOSPC) when the room lent has no space for it.
    pub fn charge_write(&mut self, fd: i32, bytes: u64, end: u64) -> bool {
        let Some(v) = self.fds.get_mut(&(fd as u32)) else {
            return false;
        };
        let m = &mut self.mounts[v.mount];
        let cost = charge_for(bytes);
        if end > m.room_bytes || !m.fits(cost, 0) {
            if let Some(p) = &mut v.write {
                p.refused = true;
            }
            return false;
        }
        if let Some(p) = &mut v.write {
            p.charged += cost;
            m.pending_bytes += cost;
        }
        true
    }

    /// `fd` was closed: a file written through it is put in place. Its errno.
    pub fn closed(&mut self, fd: i32) -> i32 {
        match self.fds.remove(&(fd as u32)) {
            Some(v) => self.commit(v),
            None => errno::SUCCESS,
        }
    }

    /// `from` was renumbered onto `to` (which was closed first).
    pub fn renumbered(&mut self, from: i32, to: i32) -> i32 {
        let rc = self.closed(to);
        if let Some(v) = self.fds.remove(&(from as u32)) {
            self.fds.insert(to as u32, v);
        }
        rc
    }

    /// Puts the private copy of `v` (if it wrote) over its file. Its errno.
    fn commit(&mut self, v: InVolume) -> i32 {
        let Some(p) = v.write else {
            return errno::SUCCESS;
        };
        let m = &mut self.mounts[v.mount];
        m.pending_bytes = m.pending_bytes.saturating_sub(p.charged);
        let incoming = m.incoming.as_ref().expect("a write has an incoming folder");
        if p.refused {
            let _ = incoming.remove_file(&p.temp);
            return errno::NOSPC;
        }
        let size = incoming.metadata(&p.temp).map(|s| s.len()).unwrap_or(0);
        let replaced = match m.files.symlink_metadata(&v.rel) {
            Ok(s) if s.is_file() => Some(s.len()),
            Ok(_) => {
                let _ = incoming.remove_file(&p.temp);
                return errno::ISDIR;
            }
            Err(_) => None,
        };
        if let Err(e) = incoming.rename(&p.temp, &m.files, &v.rel) {
            let _ = incoming.remove_file(&p.temp);
            return io_errno(&e);
        }
        m.grown_bytes += size as i64 - replaced.unwrap_or(0) as i64;
        m.grown_entries += i64::from(replaced.is_none());
        errno::SUCCESS
    }
}

impl Drop for Mounts {
    /// A sandbox ending with files open for writing closes them: what they hold is kept.
    fn drop(&mut self) {
        let open: Vec<u32> = self.fds.keys().copied().collect();
        for fd in open {
            self.closed(fd as i32);
        }
    }
}

/// Where a path call on `(fd, path)` goes.
pub enum Route {
    /// wasmtime-wasi's own call, as the guest made it.
    Stock,
    /// A path of the working directory at or above a mount point (`mnt`, `mnt/data`): the
    /// stock call, but it may not remove or rename it.
    HoldsMount,
    /// Into volume `.0`, at `.1` (relative to its top; `""` is the top).
    Volume(usize, String),
    /// Refused with this errno.
    Refuse(i32),
}

/// Where the guest's `(fd, path)` leads (see the module's docs). Free when nothing is
/// mounted.
pub fn route(caller: &mut Caller<'_, GuestState>, fd: i32, path: i32, len: i32) -> Route {
    let mounts = &caller.data().fs.mounts;
    if mounts.mounts.is_empty() {
        return Route::Stock;
    }
    let Some(text) = guest_text(caller, path, len) else {
        return Route::Stock;
    };
    let mounts = &caller.data().fs.mounts;
    if let Some(v) = mounts.fds.get(&(fd as u32)) {
        return match lexical(&v.rel, &text) {
            Some(rel) => Route::Volume(v.mount, rel),
            None => Route::Refuse(errno::PERM),
        };
    }
    if mounts
        .mounts
        .iter()
        .any(|m| m.incoming_fd == Some(fd as u32))
    {
        return Route::Refuse(errno::BADF);
    }
    let Some(below_root) = lexical("", &text) else {
        return Route::Stock;
    };
    let found = mounts.mounts.iter().enumerate().find_map(|(i, m)| {
        if below_root == m.below_root {
            Some(Route::Volume(i, String::new()))
        } else if let Some(rest) = below_root.strip_prefix(&format!("{}/", m.below_root)) {
            Some(Route::Volume(i, rest.to_string()))
        } else if below_root.is_empty() || m.below_root.starts_with(&format!("{below_root}/")) {
            Some(Route::HoldsMount)
        } else {
            None
        }
    });
    match found {
        Some(route) if is_root_preopen(caller, fd) => route,
        _ => Route::Stock,
    }
}

/// `path` read from the folder `base` (relative to a top, `""` the top itself): its plain
/// components joined by `/`, `None` when it is absolute or climbs above the top.
fn lexical(base: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn guest_text(caller: &mut Caller<'_, GuestState>, ptr: i32, len: i32) -> Option<String> {
    let mem = memory(caller)?;
    let data = mem.data(&*caller);
    let r = range(data, ptr, len as u32 as usize)?;
    std::str::from_utf8(&data[r]).ok().map(str::to_string)
}

/// Calls wasmtime-wasi's own preview1 function with a [`Scratch`] as the guest's memory.
macro_rules! on_host {
    ($caller:expr, $scratch:expr, $func:ident($($arg:expr),* $(,)?)) => {{
        let wasi_ctx = &mut $caller.data_mut().wasi;
        wasi_ctx.set_hostcall_fuel(usize::MAX);
        let mem = &mut GuestMemory::Unshared($scratch.bytes());
        in_tokio(wasi::$func(wasi_ctx, mem, $($arg),*))?
    }};
}

/// The volume's own spelling of `rel` for a call: its top is `.`.
fn at(rel: &str) -> &str {
    if rel.is_empty() { "." } else { rel }
}

/// Copies `bytes` (a call's result in a [`Scratch`]) to the guest's `ptr`; EFAULT when it
/// does not fit.
fn give(caller: &mut Caller<'_, GuestState>, ptr: i32, bytes: &[u8]) -> i32 {
    let Some(mem) = memory(caller) else {
        return errno::FAULT;
    };
    let data = mem.data_mut(&mut *caller);
    match range(data, ptr, bytes.len()) {
        Some(r) => {
            data[r].copy_from_slice(bytes);
            errno::SUCCESS
        }
        None => errno::FAULT,
    }
}

/// `path_open` into volume `ix` at `rel`. A file opened to write (or create, or truncate)
/// is a private copy until it is closed; anything else is opened as it is. Its errno; the
/// descriptor is written to the guest's `opened`.
#[allow(clippy::too_many_arguments)]
pub fn open(
    caller: &mut Caller<'_, GuestState>,
    ix: usize,
    rel: String,
    dirflags: i32,
    oflags: i32,
    rights_base: i64,
    rights_inheriting: i64,
    fdflags: i32,
    opened: i32,
) -> wasmtime::Result<i32> {
    let writes = rights_base & RIGHT_FD_WRITE != 0 || oflags & (O_CREAT | O_TRUNC) != 0;
    let (fd, write) = if writes {
        let (temp, charged) = match private_copy(&mut caller.data_mut().fs.mounts, ix, &rel, oflags)
        {
            Ok(made) => made,
            Err(rc) => return Ok(rc),
        };
        let incoming_fd = caller.data().fs.mounts.mounts[ix]
            .incoming_fd
            .expect("a writable mount");
        let mut s = Scratch::new(&[&temp]);
        let (p, n) = s.path(0);
        let rc = on_host!(
            caller,
            s,
            path_open(
                incoming_fd as i32,
                0,
                p,
                n,
                0,
                rights_base,
                rights_inheriting,
                fdflags,
                0
            )
        );
        let mounts = &mut caller.data_mut().fs.mounts;
        if rc != errno::SUCCESS {
            let m = &mut mounts.mounts[ix];
            m.pending_bytes = m.pending_bytes.saturating_sub(charged);
            if let Some(dir) = &m.incoming {
                let _ = dir.remove_file(&temp);
            }
            return Ok(rc);
        }
        (
            s.u64_at(0) as u32,
            Some(Pending {
                temp,
                charged,
                refused: false,
            }),
        )
    } else {
        let files_fd = caller.data().fs.mounts.mounts[ix].files_fd;
        let mut s = Scratch::new(&[at(&rel)]);
        let (p, n) = s.path(0);
        let rc = on_host!(
            caller,
            s,
            path_open(
                files_fd as i32,
                dirflags,
                p,
                n,
                oflags,
                rights_base,
                rights_inheriting,
                fdflags,
                0
            )
        );
        if rc != errno::SUCCESS {
            return Ok(rc);
        }
        (s.u64_at(0) as u32, None)
    };
    let mounts = &mut caller.data_mut().fs.mounts;
    mounts.fds.insert(
        fd,
        InVolume {
            mount: ix,
            rel,
            write,
        },
    );
    let rc = give(caller, opened, &fd.to_le_bytes());
    if rc != errno::SUCCESS {
        let mut s = Scratch::new(&[]);
        let _ = on_host!(caller, s, fd_close(fd as i32));
        caller.data_mut().fs.mounts.closed(fd as i32);
    }
    Ok(rc)
}

/// Makes the private copy a write to `rel` of mount `ix` goes to: its name and the bytes
/// charged for it, or the errno that refuses the open.
fn private_copy(
    mounts: &mut Mounts,
    ix: usize,
    rel: &str,
    oflags: i32,
) -> Result<(String, u64), i32> {
    let name = format!("{:016x}-{}", mounts.tag, mounts.temps);
    mounts.temps += 1;
    let m = &mut mounts.mounts[ix];
    let Some(incoming) = &m.incoming else {
        return Err(errno::ROFS);
    };
    if rel.is_empty() || oflags & O_DIRECTORY != 0 {
        return Err(errno::ISDIR);
    }
    let existing = match m.files.symlink_metadata(rel) {
        Ok(s) if s.is_file() => Some(s.len()),
        Ok(s) if s.is_dir() => return Err(errno::ISDIR),
        Ok(_) => return Err(errno::PERM),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(io_errno(&e)),
    };
    match existing {
        Some(_) if oflags & O_CREAT != 0 && oflags & O_EXCL != 0 => return Err(errno::EXIST),
        None if oflags & O_CREAT == 0 => return Err(errno::NOENT),
        None => {
            // Its folder must be there now, as for any create.
            if let Some((parent, _)) = rel.rsplit_once('/') {
                match m.files.metadata(parent) {
                    Ok(s) if s.is_dir() => {}
                    Ok(_) => return Err(errno::NOTDIR),
                    Err(e) => return Err(io_errno(&e)),
                }
            }
            if !m.fits(0, 1) {
                return Err(errno::NOSPC);
            }
        }
        Some(_) => {}
    }
    let copied = existing.filter(|_| oflags & O_TRUNC == 0).unwrap_or(0);
    let charged = charge_for(copied).max(ENTRY_BYTES);
    if !m.fits(charged, 0) {
        return Err(errno::NOSPC);
    }
    let made = (|| -> std::io::Result<()> {
        let mut out = incoming.open_with(&name, OpenOptions::new().write(true).create_new(true))?;
        if copied > 0 {
            copy_plain(&mut m.files.open(rel)?, &mut out)?;
        }
        Ok(())
    })();
    if let Err(e) = made {
        let _ = incoming.remove_file(&name);
        return Err(io_errno(&e));
    }
    m.pending_bytes += charged;
    Ok((name, charged))
}

/// Copies `from` into `to` with plain reads and writes: `std::io::copy` between two files
/// asks the kernel to copy (`copy_file_range`, `sendfile`), which a worker's seccomp
/// allowlist does not hold.
fn copy_plain(from: &mut impl std::io::Read, to: &mut impl std::io::Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf)? {
            0 => return Ok(()),
            n => to.write_all(&buf[..n])?,
        }
    }
}

/// `path_filestat_get` in a volume: the stat written to the guest's `buf`.
pub fn filestat(
    caller: &mut Caller<'_, GuestState>,
    ix: usize,
    rel: &str,
    flags: i32,
    buf: i32,
) -> wasmtime::Result<i32> {
    let files_fd = caller.data().fs.mounts.mounts[ix].files_fd as i32;
    let mut s = Scratch::new(&[at(rel)]);
    let (p, n) = s.path(0);
    let rc = on_host!(caller, s, path_filestat_get(files_fd, flags, p, n, 0));
    if rc != errno::SUCCESS {
        return Ok(rc);
    }
    Ok(give(caller, buf, s.result(64)))
}

/// What a call that changes a volume does there, as its own stock call on the volume's
/// preopen.
pub enum Change<'a> {
    MakeDir,
    RemoveDir,
    Unlink,
    SetTimes {
        flags: i32,
        atim: i64,
        mtim: i64,
        fst: i32,
    },
    Rename {
        to: &'a str,
    },
}

/// Makes `change` at `rel` in volume `ix`, where the mount is writable, the top is not
/// touched and the room allows. Its errno.
pub fn change(
    caller: &mut Caller<'_, GuestState>,
    ix: usize,
    rel: &str,
    change: Change<'_>,
) -> wasmtime::Result<i32> {
    let m = &caller.data().fs.mounts.mounts[ix];
    if m.incoming.is_none() {
        return Ok(errno::ROFS);
    }
    let touches_top = rel.is_empty() || matches!(change, Change::Rename { to } if to.is_empty());
    if touches_top && !matches!(change, Change::SetTimes { .. }) {
        return Ok(if matches!(change, Change::MakeDir) {
            errno::EXIST
        } else {
            errno::BUSY
        });
    }
    let freed = match change {
        Change::Unlink => m.files.symlink_metadata(rel).map(|s| s.len()).unwrap_or(0),
        _ => 0,
    };
    if matches!(change, Change::MakeDir) && !m.fits(0, 1) {
        caller.data_mut().fs.refused_disk = true;
        return Ok(errno::NOSPC);
    }
    let fd = m.files_fd as i32;
    let rc = match change {
        Change::MakeDir => {
            let mut s = Scratch::new(&[rel]);
            let (p, n) = s.path(0);
            on_host!(caller, s, path_create_directory(fd, p, n))
        }
        Change::RemoveDir => {
            let mut s = Scratch::new(&[rel]);
            let (p, n) = s.path(0);
            on_host!(caller, s, path_remove_directory(fd, p, n))
        }
        Change::Unlink => {
            let mut s = Scratch::new(&[rel]);
            let (p, n) = s.path(0);
            on_host!(caller, s, path_unlink_file(fd, p, n))
        }
        Change::SetTimes {
            flags,
            atim,
            mtim,
            fst,
        } => {
            let mut s = Scratch::new(&[at(rel)]);
            let (p, n) = s.path(0);
            on_host!(
                caller,
                s,
                path_filestat_set_times(fd, flags, p, n, atim, mtim, fst)
            )
        }
        Change::Rename { to } => {
            let mut s = Scratch::new(&[rel, to]);
            let ((p, n), (q, k)) = (s.path(0), s.path(1));
            on_host!(caller, s, path_rename(fd, p, n, fd, q, k))
        }
    };
    if rc == errno::SUCCESS {
        let m = &mut caller.data_mut().fs.mounts.mounts[ix];
        match change {
            Change::MakeDir => m.grown_entries += 1,
            Change::RemoveDir => m.grown_entries -= 1,
            Change::Unlink => {
                m.grown_entries -= 1;
                m.grown_bytes -= freed as i64;
            }
            _ => {}
        }
    }
    Ok(rc)
}

/// `path_readlink` in a volume, which holds no links: EINVAL for what is there, as for any
/// file that is not a link.
pub fn not_a_link(caller: &Caller<'_, GuestState>, ix: usize, rel: &str) -> i32 {
    match caller.data().fs.mounts.mounts[ix]
        .files
        .symlink_metadata(at(rel))
    {
        Ok(_) => errno::INVAL,
        Err(e) => io_errno(&e),
    }
}

/// preview1's errno for a host I/O error met in a volume.
fn io_errno(e: &std::io::Error) -> i32 {
    match e.raw_os_error() {
        Some(libc::ENOENT) => errno::NOENT,
        Some(libc::EEXIST) => errno::EXIST,
        Some(libc::ENOTDIR) => errno::NOTDIR,
        Some(libc::EISDIR) => errno::ISDIR,
        Some(libc::EACCES) => errno::ACCES,
        Some(libc::EPERM) => errno::PERM,
        Some(libc::ENOSPC) => errno::NOSPC,
        Some(libc::ENOTEMPTY) => errno::NOTEMPTY,
        Some(libc::ELOOP) => errno::LOOP,
        Some(libc::ENAMETOOLONG) => errno::NAMETOOLONG,
        Some(libc::EXDEV) => errno::XDEV,
        _ if e.kind() == ErrorKind::NotFound => errno::NOENT,
        _ => errno::IO,
    }
}

#[cfg(test)]
mod tests {
    use super::lexical;

    #[test]
    fn a_path_is_read_from_its_folder_and_may_not_climb_above_the_top() {
        assert_eq!(lexical("", "mnt/data/x").as_deref(), Some("mnt/data/x"));
        assert_eq!(lexical("", "./mnt//data/").as_deref(), Some("mnt/data"));
        assert_eq!(lexical("", "a/../mnt/data").as_deref(), Some("mnt/data"));
        assert_eq!(lexical("sub", "../x").as_deref(), Some("x"));
        assert_eq!(lexical("sub", ".").as_deref(), Some("sub"));
        assert_eq!(lexical("", ".").as_deref(), Some(""));
        assert_eq!(lexical("", ".."), None);
        assert_eq!(lexical("sub", "../../x"), None);
        assert_eq!(lexical("", "/etc"), None);
    }
}
