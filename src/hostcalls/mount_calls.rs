//! The path calls' side of mounted volumes (`mounts.rs` holds their state): where a
//! guest's `(fd, path)` leads ([`route`]), and each call made in a volume on its own
//! preopen, with a [`Scratch`] standing in for the guest's memory.

use wasmtime::Caller;
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as wasi, WasiSnapshotPreview1};
use wasmtime_wasi::runtime::in_tokio;
use wiggle::GuestMemory;

use super::errno;
use super::guest_memory::{Scratch, memory, range, read_u32};
use super::mounts::{InVolume, Pending, io_errno, lexical, private_copy};
use super::state::GuestState;
use crate::guest::{HostDir, PREOPENS, below};

/// preview1's `rights::fd_write`.
const RIGHT_FD_WRITE: i64 = 1 << 6;
/// preview1's `oflags`.
const O_CREAT: i32 = 1;
const O_TRUNC: i32 = 8;

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
        if let Some(rest) = below(&m.below_root, &below_root) {
            Some(Route::Volume(i, rest.to_string()))
        } else if below_root.is_empty() || below(&below_root, &m.below_root).is_some() {
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

/// `path_open`'s arguments besides the place and where the descriptor goes.
#[derive(Debug, Clone, Copy)]
pub struct OpenArgs {
    pub dirflags: i32,
    pub oflags: i32,
    pub rights_base: i64,
    pub rights_inheriting: i64,
    pub fdflags: i32,
}

/// wasmtime-wasi's own `path_open` of `path` under its descriptor `dir`: the new
/// descriptor, or the errno.
fn stock_open(
    caller: &mut Caller<'_, GuestState>,
    dir: u32,
    path: &str,
    a: OpenArgs,
) -> wasmtime::Result<Result<u32, i32>> {
    let mut s = Scratch::new(&[path]);
    let (p, n) = s.path(0);
    let (base, inheriting) = (a.rights_base, a.rights_inheriting);
    let rc = on_host!(
        caller,
        s,
        path_open(
            dir as i32, a.dirflags, p, n, a.oflags, base, inheriting, a.fdflags, 0
        )
    );
    Ok(if rc == errno::SUCCESS {
        Ok(s.u64_at(0) as u32)
    } else {
        Err(rc)
    })
}

/// `path_open` into volume `ix` at `rel`. A file opened to write (or create, or truncate)
/// is a private copy until it is closed; anything else is opened as it is. Its errno; the
/// descriptor is written to the guest's `opened`.
pub fn open(
    caller: &mut Caller<'_, GuestState>,
    ix: usize,
    rel: String,
    args: OpenArgs,
    opened: i32,
) -> wasmtime::Result<i32> {
    let writes = args.rights_base & RIGHT_FD_WRITE != 0 || args.oflags & (O_CREAT | O_TRUNC) != 0;
    let (fd, write) = if writes {
        let mounts = &mut caller.data_mut().fs.mounts;
        let (temp, charged) = match private_copy(mounts, ix, &rel, args.oflags) {
            Ok(made) => made,
            Err(rc) => return Ok(rc),
        };
        let incoming_fd = mounts.mounts[ix].incoming_fd.expect("a writable mount");
        // The copy exists: opened as it is, with the rights asked for.
        let plain = OpenArgs {
            dirflags: 0,
            oflags: 0,
            ..args
        };
        match stock_open(caller, incoming_fd, &temp, plain)? {
            Ok(fd) => {
                let refused = false;
                (
                    fd,
                    Some(Pending {
                        temp,
                        charged,
                        refused,
                    }),
                )
            }
            Err(rc) => {
                let m = &mut caller.data_mut().fs.mounts.mounts[ix];
                m.pending_bytes = m.pending_bytes.saturating_sub(charged);
                if let Some(dir) = &m.incoming {
                    let _ = dir.remove_file(&temp);
                }
                return Ok(rc);
            }
        }
    } else {
        let files_fd = caller.data().fs.mounts.mounts[ix].files_fd;
        match stock_open(caller, files_fd, at(&rel), args)? {
            Ok(fd) => (fd, None),
            Err(rc) => return Ok(rc),
        }
    };
    let mount = ix;
    let mounts = &mut caller.data_mut().fs.mounts;
    mounts.fds.insert(fd, InVolume { mount, rel, write });
    let rc = give(caller, opened, &fd.to_le_bytes());
    if rc != errno::SUCCESS {
        let mut s = Scratch::new(&[]);
        let _ = on_host!(caller, s, fd_close(fd as i32));
        caller.data_mut().fs.mounts.closed(fd as i32);
    }
    Ok(rc)
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

/// Whether the guest's descriptor `fd` is the preopen of the working directory: a guest
/// may close that descriptor, or renumber another folder onto its number, so the number
/// alone does not say. Asked of wasmtime-wasi (`fd_prestat_get`, `fd_prestat_dir_name`),
/// with host bytes standing in for guest memory.
pub(super) fn is_root_preopen(caller: &mut Caller<'_, GuestState>, fd: i32) -> bool {
    let root = PREOPENS
        .iter()
        .find(|p| p.host == HostDir::Root)
        .expect("the preopen table has the working directory")
        .guest_path;
    // The prestat (8 bytes, 4-aligned), then the name: aligned as the calls check it.
    let mut buf = vec![0u8; 16 + 8 + root.len()];
    let at = buf.as_ptr().align_offset(8);
    let wasi = &mut caller.data_mut().wasi;
    wasi.set_hostcall_fuel(usize::MAX);
    let mem = &mut GuestMemory::Unshared(&mut buf);
    if wasi::fd_prestat_get(wasi, mem, fd, at as i32).ok() != Some(errno::SUCCESS) {
        return false;
    }
    if read_u32(&buf, at + 4) as usize != root.len() {
        return false;
    }
    let name_at = at + 8;
    let mem = &mut GuestMemory::Unshared(&mut buf);
    let rc = wasi::fd_prestat_dir_name(wasi, mem, fd, name_at as i32, root.len() as i32);
    rc.ok() == Some(errno::SUCCESS) && &buf[name_at..name_at + root.len()] == root.as_bytes()
}
