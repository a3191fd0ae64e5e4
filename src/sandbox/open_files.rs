//! Files the guest holds open between turns, carried through a capture: which regular file
//! of the working directory each descriptor is, how it was opened and where it is
//! ([`read_open_files`]); and, on a fresh instance, the same descriptors reopened at the same
//! numbers and positions ([`reopen`]).
//!
//! wasmtime-wasi keeps its preview1 descriptor table private, so both go through its own
//! preview1 calls (as the shadows of `hostcalls::fs_guard` do), with a host buffer standing
//! in for guest memory: `fd_fdstat_get`, `fd_filestat_get` and `fd_tell` read a descriptor;
//! `path_filestat_get` finds which file it is (by identity, so a file renamed since it was
//! opened is found under its new name); `path_open` and `fd_seek` make it again. Its table
//! hands out the lowest number past the last one used while nothing was closed, so opening
//! in increasing order, with placeholders (the root folder) in the gaps that are closed
//! afterwards, puts each file at its number. wasi-libc keeps no table of its own for these
//! descriptors: the numbers in the guest's file objects are all there is.

use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as wasi, WasiSnapshotPreview1};
use wasmtime_wasi::runtime::in_tokio;
use wiggle::GuestMemory;

use super::image_io::{CaptureError, Uncarried};
use super::live::Live;
use crate::guest::PREOPENS;
use crate::hostcalls::errno;
use crate::hostcalls::guest_memory::Scratch;
use crate::snapshot::OpenFile;

/// preview1's `filetype`s met here.
const FILETYPE_DIRECTORY: u8 = 3;
const FILETYPE_REGULAR_FILE: u8 = 4;
/// preview1's `rights` bits that decide how wasmtime-wasi opens a file.
const RIGHT_FD_READ: i64 = 1 << 1;
const RIGHT_FD_WRITE: i64 = 1 << 6;
/// `oflags`' `O_DIRECTORY`.
const OFLAGS_DIRECTORY: i32 = 2;
/// `whence`'s `SET`.
const WHENCE_SET: i32 = 0;

/// The descriptor of the working directory (`/`) in the fixed preopen table.
fn root_fd() -> i32 {
    let at = PREOPENS
        .iter()
        .position(|p| p.guest_path == "/")
        .expect("the preopen table has `/`");
    (crate::guest::STDIO_FDS as usize + at) as i32
}

/// Calls wasmtime-wasi's own preview1 function `$func` on `live`'s WASI context with `$buf`
/// as the guest's memory; its errno.
macro_rules! call {
    ($live:expr, $buf:expr, sync $func:ident($($arg:expr),* $(,)?)) => {{
        let wasi_ctx = &mut $live.store.data_mut().wasi;
        wasi_ctx.set_hostcall_fuel(usize::MAX);
        let mem = &mut GuestMemory::Unshared($buf.bytes());
        wasi::$func(wasi_ctx, mem, $($arg),*)
    }};
    ($live:expr, $buf:expr, $func:ident($($arg:expr),* $(,)?)) => {{
        let wasi_ctx = &mut $live.store.data_mut().wasi;
        wasi_ctx.set_hostcall_fuel(usize::MAX);
        let mem = &mut GuestMemory::Unshared($buf.bytes());
        in_tokio(wasi::$func(wasi_ctx, mem, $($arg),*))
    }};
}

/// The files `live`'s guest holds open, found among `files` (the working directory's
/// regular files, relative paths with their sizes). Refused, with why, for a descriptor
/// that is not a regular file of the working directory.
pub(super) fn read_open_files<'a>(
    live: &mut Live,
    files: impl Iterator<Item = (&'a str, u64)> + Clone,
) -> Result<Vec<OpenFile>, CaptureError> {
    let fs = &live.store.data().fs;
    // Past the preopens, the mounts' included (the restore mounts those again).
    let first = fs.first_fd;
    let held = fs.open_fds.saturating_sub(first);
    // Below the cap: its table reuses freed numbers before it takes a new one.
    let ceiling = fs.max_open_fds.max(first);
    let mut out = Vec::new();
    let mut buf = Scratch::new(&[]);
    for fd in first..ceiling {
        if out.len() as u32 == held {
            break;
        }
        let at = fd as i32;
        // fdstat: filetype u8 @0, fs_flags u16 @2, rights_base u64 @8.
        if call!(live, buf, fd_fdstat_get(at, 0)).map_err(wasi_failed)? != errno::SUCCESS {
            continue;
        }
        let stat = buf.bytes();
        let (filetype, fdflags) = (stat[0], u16::from_le_bytes([stat[2], stat[3]]));
        let rights = buf.u64_at(8) as i64;
        let refuse = |why| CaptureError::OpenFiles { fd, why };
        match filetype {
            FILETYPE_REGULAR_FILE => {}
            FILETYPE_DIRECTORY => return Err(refuse(Uncarried::Directory)),
            _ => return Err(refuse(Uncarried::NotAFile)),
        }
        // filestat: ino u64 @8, nlink u64 @24, size u64 @32.
        if call!(live, buf, fd_filestat_get(at, 0)).map_err(wasi_failed)? != errno::SUCCESS {
            return Err(refuse(Uncarried::NotAFile));
        }
        let (ino, nlink, size) = (buf.u64_at(8), buf.u64_at(24), buf.u64_at(32));
        if nlink == 0 {
            return Err(refuse(Uncarried::Deleted));
        }
        if call!(live, buf, sync fd_tell(at, 0)).map_err(wasi_failed)? != errno::SUCCESS {
            return Err(refuse(Uncarried::NotAFile));
        }
        let position = buf.u64_at(0);
        let mut path = None;
        for (candidate, len) in files.clone().filter(|(_, len)| *len == size) {
            let _ = len;
            let mut mem = Scratch::new(&[candidate]);
            let (at, len) = mem.path(0);
            let rc = call!(live, mem, path_filestat_get(root_fd(), 0, at, len, 0))
                .map_err(wasi_failed)?;
            if rc == errno::SUCCESS && mem.u64_at(8) == ino {
                path = Some(candidate.to_string());
                break;
            }
        }
        let Some(path) = path else {
            return Err(refuse(Uncarried::Elsewhere));
        };
        out.push(OpenFile {
            fd,
            path,
            read: rights & RIGHT_FD_READ != 0,
            write: rights & RIGHT_FD_WRITE != 0,
            fdflags: fdflags & OpenFile::FDFLAGS,
            position,
        });
    }
    if out.len() as u32 != held {
        return Err(CaptureError::Shape("descriptor table"));
    }
    Ok(out)
}

fn wasi_failed(e: wasmtime::Error) -> CaptureError {
    tracing::warn!(error = %e, "a WASI call on a captured descriptor failed");
    CaptureError::Shape("descriptor table")
}

/// Opens `files` in `live`'s fresh instance (its working directory laid out, no descriptor
/// opened yet) at their numbers and positions. `Err` names what did not fit.
pub(super) fn reopen(live: &mut Live, files: &[OpenFile]) -> Result<(), &'static str> {
    if files.is_empty() {
        return Ok(());
    }
    let mut placeholders = Vec::new();
    let mut next = live.store.data().fs.first_fd;
    let opened = (|| {
        for f in files {
            if f.fd < next {
                return Err("open files (descriptor order)");
            }
            while next < f.fd {
                let fd = open(live, ".", OFLAGS_DIRECTORY, 0, 0)?;
                placeholders.push(fd);
                next += 1;
            }
            let rights =
                if f.read { RIGHT_FD_READ } else { 0 } | if f.write { RIGHT_FD_WRITE } else { 0 };
            let fd = open(live, &f.path, 0, rights, f.fdflags)?;
            if fd != f.fd {
                return Err("open files (descriptor numbers)");
            }
            let mut out = Scratch::new(&[]);
            let rc = call!(
                live,
                out,
                fd_seek(fd as i32, f.position as i64, WHENCE_SET, 0)
            )
            .map_err(|_| "open files (position)")?;
            if rc != errno::SUCCESS {
                return Err("open files (position)");
            }
            next += 1;
        }
        Ok(())
    })();
    let mut none = Scratch::new(&[]);
    for fd in placeholders {
        let _ = call!(live, none, fd_close(fd as i32));
    }
    opened?;
    let fs = &mut live.store.data_mut().fs;
    fs.open_fds += files.len() as u32;
    fs.opens += files.len() as u64;
    Ok(())
}

/// `path_open` of `path` under the working directory; the descriptor.
fn open(
    live: &mut Live,
    path: &str,
    oflags: i32,
    rights: i64,
    fdflags: u16,
) -> Result<u32, &'static str> {
    let mut mem = Scratch::new(&[path]);
    let (at, len) = mem.path(0);
    let rc = call!(
        live,
        mem,
        path_open(
            root_fd(),
            0,
            at,
            len,
            oflags,
            rights,
            rights,
            i32::from(fdflags),
            0
        )
    )
    .map_err(|_| "open files (reopening)")?;
    if rc != errno::SUCCESS {
        return Err("open files (reopening)");
    }
    Ok(mem.u64_at(0) as u32)
}
