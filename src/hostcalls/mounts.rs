//! Volumes mounted in a sandbox (`guest::Lent`): the guest's paths below a mount point sent
//! to the volume, its writes held back until they are closed, and its room.
//!
//! wasi-libc resolves a path against the preopens it saw when the template was built, so
//! `/mnt/data/x.csv` reaches the host as `mnt/data/x.csv` on the working directory's
//! preopen (where a stub folder stands at the mount point). Each path call's shadow
//! (`mount_calls::route`) sends a path at or below a mount point, and any path on a descriptor opened
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

use super::charge::{ENTRY_BYTES, charge_for};
use super::errno;
use crate::guest::{Lent, below};

/// preview1's `oflags`.
const O_CREAT: i32 = 1;
const O_DIRECTORY: i32 = 2;
const O_EXCL: i32 = 4;
const O_TRUNC: i32 = 8;

/// One mounted volume.
pub(super) struct Mounted {
    /// The mount point below `/` (`mnt/data`).
    pub(super) below_root: String,
    /// Its files' preopen.
    pub(super) files_fd: u32,
    /// The preopen its writes wait in (a writable mount).
    pub(super) incoming_fd: Option<u32>,
    /// The same two folders, for the host's own work (copies, commits, sizes).
    pub(super) files: Dir,
    pub(super) incoming: Option<Dir>,
    pub(super) room_bytes: u64,
    pub(super) room_entries: u64,
    /// Bytes held by files open for writing (whole blocks, as written).
    pub(super) pending_bytes: u64,
    /// What closed writes and removals changed, in bytes and entries (negative: freed).
    pub(super) grown_bytes: i64,
    pub(super) grown_entries: i64,
}

impl Mounted {
    /// Whether `bytes` more (and `entries` more) fit the room lent.
    pub(super) fn fits(&self, bytes: u64, entries: i64) -> bool {
        let bytes_after =
            (self.pending_bytes.saturating_add(bytes)) as i128 + i128::from(self.grown_bytes);
        bytes_after <= i128::from(self.room_bytes)
            && self.grown_entries + entries <= self.room_entries as i64
    }
}

/// A descriptor the guest holds inside a volume.
pub(super) struct InVolume {
    pub(super) mount: usize,
    /// What it opened, relative to the volume's top (`""`: the top).
    pub(super) rel: String,
    /// A file open for writing: its private copy, until it is closed.
    pub(super) write: Option<Pending>,
}

pub(super) struct Pending {
    /// Its name in the mount's `incoming/`.
    pub(super) temp: String,
    /// Bytes charged for it so far.
    pub(super) charged: u64,
    /// A write through it was refused for room: closing it puts nothing in place.
    pub(super) refused: bool,
}

/// The volumes mounted in one sandbox, and the descriptors its guest holds in them.
#[derive(Default)]
pub struct Mounts {
    pub(super) mounts: Vec<Mounted>,
    pub(super) fds: HashMap<u32, InVolume>,
    /// Names this sandbox's private copies (with a counter).
    pub(super) tag: u64,
    pub(super) temps: u64,
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

    /// A new name for a private copy in a mount's `incoming/`: this sandbox's tag and a
    /// counter, so sandboxes writing one volume never meet.
    fn temp_name(&mut self) -> String {
        self.temps += 1;
        format!("{:016x}-{}", self.tag, self.temps - 1)
    }

    /// Each mount's files folder, opened again (a duplicate of the handle) for the host's own
    /// reads of them (`WorkDir::mount`).
    pub fn files_dirs(&self) -> impl Iterator<Item = std::io::Result<Dir>> + '_ {
        self.mounts.iter().map(|m| m.files.try_clone())
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
        self.close_all();
    }
}

impl Mounts {
    /// Puts in place every file still open for writing, as its close would (a run's end,
    /// before its answer: no guest code writes through them after this).
    pub fn close_all(&mut self) {
        let open: Vec<u32> = self.fds.keys().copied().collect();
        for fd in open {
            self.closed(fd as i32);
        }
    }

    /// The mount holding `rel` (a checked path below `/`, as a session's file API names
    /// it) and the path in the volume.
    pub fn place(&self, rel: &str) -> Option<(usize, String)> {
        let rel = lexical("", rel)?;
        self.mounts
            .iter()
            .enumerate()
            .find_map(|(i, m)| Some((i, below(&m.below_root, &rel)?.to_string())))
    }

    /// Puts `content` as file `rel` of mount `ix` whole (the host's own write: a session's
    /// file API), within the room the mount was lent; why not, when it cannot.
    pub fn put(&mut self, ix: usize, rel: &str, content: &[u8]) -> Result<(), &'static str> {
        let name = self.temp_name();
        let m = &mut self.mounts[ix];
        let Some(incoming) = &m.incoming else {
            return Err("the volume is mounted read-only");
        };
        if rel.is_empty() {
            return Err("the path is the volume's top");
        }
        let old = match m.files.symlink_metadata(rel) {
            Ok(s) if s.is_file() => Some(s.len()),
            Ok(_) => return Err("the path is a folder"),
            Err(_) => None,
        };
        let grow = content.len() as i64 - old.unwrap_or(0) as i64;
        if !m.fits(grow.max(0) as u64, i64::from(old.is_none())) {
            return Err("the volume has no room for it");
        }
        let put = (|| -> std::io::Result<()> {
            if let Some((parent, _)) = rel.rsplit_once('/') {
                m.files.create_dir_all(parent)?;
            }
            incoming.write(&name, content)?;
            incoming.rename(&name, &m.files, rel)
        })();
        if put.is_err() {
            let _ = incoming.remove_file(&name);
            return Err("writing into the volume failed");
        }
        m.grown_bytes += grow;
        m.grown_entries += i64::from(old.is_none());
        Ok(())
    }
}

/// `path` read from the folder `base` (relative to a top, `""` the top itself): its plain
/// components joined by `/`, `None` when it is absolute or climbs above the top.
pub(super) fn lexical(base: &str, path: &str) -> Option<String> {
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

/// Makes the private copy a write to `rel` of mount `ix` goes to: its name and the bytes
/// charged for it, or the errno that refuses the open.
pub(super) fn private_copy(
    mounts: &mut Mounts,
    ix: usize,
    rel: &str,
    oflags: i32,
) -> Result<(String, u64), i32> {
    let name = mounts.temp_name();
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
            std::io::copy(&mut m.files.open(rel)?, &mut out)?;
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

/// preview1's errno for a host I/O error met in a volume.
pub(super) fn io_errno(e: &std::io::Error) -> i32 {
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
