//! The descriptor cap and the disk quota, as shadows over wasmtime-wasi's own calls.
//!
//! wasmtime-wasi has neither: every guest `open` holds a host descriptor, so a loop of opens
//! exhausts the server's, and writes go straight to the host disk. Each shadow checks its
//! budget, calls the stock implementation (see [`with_wasi`]), and accounts
//! for what it did.
//!
//! * Descriptors: counted on `path_open` success, released on `fd_close` and `fd_renumber`
//!   success; past the cap `path_open` answers EMFILE and the guest runs on.
//! * Disk: a running upper bound of the bytes the working directory holds (bytes written, in
//!   whole blocks, plus [`ENTRY_BYTES`] for each entry created); no write may end past the
//!   quota, which bounds sparse files. When a write would pass the quota, the
//!   directory is measured for real (deletes and overwrites make the bound loose) and only if
//!   it is still over does the write fail with ENOSPC. Measuring costs the guest's own time.
//!   On tmpfs the same bound is held against the host's memory budget ([`crate::budget`]),
//!   and a write the budget has no room for fails with ENOSPC too.
//! * `fd_close` of stdio, and `fd_renumber` onto or from it, are refused: a file renumbered onto fd 1 would write to
//!   disk unaccounted, and stdout renumbered elsewhere would escape the output cap's stream.
//! * `path_symlink` refuses (EPERM: Python's `PermissionError`) a link whose target is absolute
//!   or climbs out of the sandbox: see [`symlink_leaves`].
//! * Every call that may change an entry, a file's content or its times sets
//!   `FsGuard::changed` when it is tried (`fd_filestat_set_times` is shadowed for that
//!   alone): a user template's folder is kept for the next run only when it stayed false
//!   and nothing was opened (`sandbox/kept_dirs.rs`).

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

use cap_std::fs::Dir;

use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as wasi, WasiSnapshotPreview1};
use wasmtime_wasi::runtime::in_tokio;
use wiggle::GuestMemory;

use super::charge::{ENTRY_BYTES, charge_for};
use super::errno;
use super::guest_memory::{memory, range, read_u32};
use super::mount_calls::{self as mounts, Change, OpenArgs, Route, is_root_preopen};
use super::state::GuestState;
use crate::guest::STDIO_FDS;

/// `O_CREAT` and `O_TRUNC` in preview1's `oflags`.
const OFLAGS_CREAT: i32 = 1;
const OFLAGS_TRUNC: i32 = 8;
/// The rights that make a `path_open` a writer's (`fd_datasync`, `fd_write`, `fd_allocate`,
/// `fd_filestat_set_size`): wasi-libc asks for none of them when it opens for reading.
const WRITING_RIGHTS: i64 = 1 | 1 << 6 | 1 << 8 | 1 << 22;

/// Calls wasmtime-wasi's own implementation of a preview1 function from inside our shadow,
/// exactly as its generated linker glue does (the guest's memory plus the WASI context).
/// Calling the stock `Func` instead would lose the calling instance, and with it the memory.
macro_rules! stock {
    ($caller:expr, $func:ident($($arg:expr),* $(,)?)) => {
        stock!(@call $caller, |state, mem| in_tokio(wasi::$func(&mut state.wasi, mem, $($arg),*)))
    };
    // The few calls wasmtime-wasi implements synchronously (`fd_tell`).
    (sync $caller:expr, $func:ident($($arg:expr),* $(,)?)) => {
        stock!(@call $caller, |state, mem| wasi::$func(&mut state.wasi, mem, $($arg),*))
    };
    (@call $caller:expr, |$state:ident, $mem:ident| $call:expr) => {{
        let caller: &mut Caller<'_, GuestState> = $caller;
        let fuel = caller.as_context_mut().hostcall_fuel();
        let Some(Extern::Memory(m)) = caller.get_export("memory") else {
            wasmtime::bail!("missing required memory export");
        };
        let (mem, $state) = m.data_and_store_mut(caller);
        $state.wasi.set_hostcall_fuel(fuel);
        let $mem = &mut GuestMemory::Unshared(mem);
        $call?
    }};
}

/// Replaces the calls named above in `linker`, which must allow shadowing.
pub fn add_shadows(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    const M: &str = "wasi_snapshot_preview1";

    linker.func_wrap(
        M,
        "path_open",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         dirflags: i32,
         path: i32,
         path_len: i32,
         oflags: i32,
         rights_base: i64,
         rights_inheriting: i64,
         fdflags: i32,
         opened: i32|
         -> wasmtime::Result<i32> {
            let fs = &mut caller.data_mut().fs;
            if oflags & (OFLAGS_CREAT | OFLAGS_TRUNC) != 0 || rights_base & WRITING_RIGHTS != 0 {
                fs.changed = true;
            }
            if fs.open_fds >= fs.max_open_fds {
                fs.refused_fd = true;
                return Ok(errno::MFILE);
            }
            match mounts::route(&mut caller, fd, path, path_len) {
                Route::Stock | Route::HoldsMount => {}
                Route::Refuse(rc) => return Ok(rc),
                Route::Volume(ix, rel) => {
                    let args = OpenArgs {
                        dirflags,
                        oflags,
                        rights_base,
                        rights_inheriting,
                        fdflags,
                    };
                    let rc = mounts::open(&mut caller, ix, rel, args, opened)?;
                    if rc == errno::SUCCESS {
                        let fs = &mut caller.data_mut().fs;
                        fs.open_fds += 1;
                        fs.opens += 1;
                    } else if rc == errno::NOSPC {
                        caller.data_mut().fs.refused_disk = true;
                    }
                    return Ok(rc);
                }
            }
            let creates = oflags & OFLAGS_CREAT != 0;
            if creates && !reserve(&mut caller, ENTRY_BYTES) {
                return Ok(errno::NOSPC);
            }
            let rc = stock!(
                &mut caller,
                path_open(
                    fd,
                    dirflags,
                    path,
                    path_len,
                    oflags,
                    rights_base,
                    rights_inheriting,
                    fdflags,
                    opened,
                )
            );
            if rc == errno::SUCCESS {
                let fs = &mut caller.data_mut().fs;
                fs.open_fds += 1;
                fs.opens += 1;
                if creates {
                    fs.charged_bytes += ENTRY_BYTES;
                }
            }
            Ok(rc)
        },
    )?;

    linker.func_wrap(
        M,
        "fd_close",
        |mut caller: Caller<'_, GuestState>, fd: i32| -> wasmtime::Result<i32> {
            // Closing stdio would let a file take descriptor 0, 1 or 2 and write to disk past
            // the quota, which only counts descriptors from 3 on.
            if (fd as u32) < STDIO_FDS || caller.data().fs.mounts.is_preopen(fd) {
                return Ok(errno::PERM);
            }
            let rc = stock!(&mut caller, fd_close(fd));
            if rc == errno::SUCCESS && caller.data().fs.mounts.holds(fd) {
                closed_one(&mut caller, rc);
                return Ok(caller.data_mut().fs.mounts.closed(fd));
            }
            Ok(closed_one(&mut caller, rc))
        },
    )?;

    linker.func_wrap(
        M,
        "fd_renumber",
        |mut caller: Caller<'_, GuestState>, from: i32, to: i32| -> wasmtime::Result<i32> {
            let mounts = &caller.data().fs.mounts;
            if (from as u32) < STDIO_FDS
                || (to as u32) < STDIO_FDS
                || mounts.is_preopen(from)
                || mounts.is_preopen(to)
            {
                return Ok(errno::PERM);
            }
            let rc = stock!(&mut caller, fd_renumber(from, to));
            if rc == errno::SUCCESS && from != to {
                let committed = caller.data_mut().fs.mounts.renumbered(from, to);
                closed_one(&mut caller, rc);
                return Ok(committed);
            }
            // `to` was closed first (unless it is `from`).
            Ok(if from != to {
                closed_one(&mut caller, rc)
            } else {
                rc
            })
        },
    )?;

    linker.func_wrap(
        M,
        "fd_write",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         iovs: i32,
         iovs_len: i32,
         nwritten: i32|
         -> wasmtime::Result<i32> {
            // stdout and stderr have their own cap; only files count against the quota.
            let counted = (fd as u32) >= STDIO_FDS;
            if counted {
                caller.data_mut().fs.changed = true;
                let wanted = iovec_total(&mut caller, iovs, iovs_len);
                // A write after a seek far past the end makes a sparse file: check where it
                // lands, as for `fd_pwrite`.
                let position = file_position(&mut caller, fd, iovs, iovs_len)?.unwrap_or(0);
                let end = position.saturating_add(wanted);
                if caller.data().fs.mounts.holds(fd) {
                    return in_volume(&mut caller, fd, wanted, end, |c| {
                        Ok(stock!(c, fd_write(fd, iovs, iovs_len, nwritten)))
                    });
                }
                if end > caller.data().fs.quota_bytes || !reserve(&mut caller, charge_for(wanted)) {
                    caller.data_mut().fs.refused_disk = true;
                    return Ok(errno::NOSPC);
                }
            }
            let rc = stock!(&mut caller, fd_write(fd, iovs, iovs_len, nwritten));
            if counted && rc == errno::SUCCESS {
                charge_written(&mut caller, nwritten);
            }
            Ok(rc)
        },
    )?;

    linker.func_wrap(
        M,
        "fd_pwrite",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         iovs: i32,
         iovs_len: i32,
         offset: i64,
         nwritten: i32|
         -> wasmtime::Result<i32> {
            caller.data_mut().fs.changed = true;
            let wanted = iovec_total(&mut caller, iovs, iovs_len);
            // A write far past the end makes a sparse file whose size alone breaks the quota.
            let end = (offset as u64).saturating_add(wanted);
            if caller.data().fs.mounts.holds(fd) {
                return in_volume(&mut caller, fd, wanted, end, |c| {
                    Ok(stock!(c, fd_pwrite(fd, iovs, iovs_len, offset, nwritten)))
                });
            }
            if end > caller.data().fs.quota_bytes || !reserve(&mut caller, charge_for(wanted)) {
                caller.data_mut().fs.refused_disk = true;
                return Ok(errno::NOSPC);
            }
            let rc = stock!(&mut caller, fd_pwrite(fd, iovs, iovs_len, offset, nwritten));
            if rc == errno::SUCCESS {
                charge_written(&mut caller, nwritten);
            }
            Ok(rc)
        },
    )?;

    linker.func_wrap(
        M,
        "fd_filestat_set_size",
        |mut caller: Caller<'_, GuestState>, fd: i32, size: i64| -> wasmtime::Result<i32> {
            caller.data_mut().fs.changed = true;
            let size = size as u64;
            if caller.data().fs.mounts.holds(fd) {
                return in_volume(&mut caller, fd, size, size, |c| {
                    Ok(stock!(c, fd_filestat_set_size(fd, size as i64)))
                });
            }
            if size > caller.data().fs.quota_bytes || !reserve(&mut caller, size) {
                caller.data_mut().fs.refused_disk = true;
                return Ok(errno::NOSPC);
            }
            let rc = stock!(&mut caller, fd_filestat_set_size(fd, size as i64));
            if rc == errno::SUCCESS {
                caller.data_mut().fs.charged_bytes += size;
            }
            Ok(rc)
        },
    )?;

    linker.func_wrap(
        M,
        "path_create_directory",
        |mut caller: Caller<'_, GuestState>, fd: i32, path: i32, len: i32| match mounts::route(
            &mut caller,
            fd,
            path,
            len,
        ) {
            Route::Volume(ix, rel) => mounts::change(&mut caller, ix, &rel, Change::MakeDir),
            Route::Refuse(rc) => Ok(rc),
            Route::Stock | Route::HoldsMount => entry_creating(&mut caller, |c| {
                Ok(stock!(c, path_create_directory(fd, path, len)))
            }),
        },
    )?;

    linker.func_wrap(
        M,
        "path_symlink",
        |mut caller: Caller<'_, GuestState>,
         old: i32,
         old_len: i32,
         fd: i32,
         new: i32,
         new_len: i32| {
            // A volume holds only files and folders.
            match mounts::route(&mut caller, fd, new, new_len) {
                Route::Volume(..) => return Ok(errno::PERM),
                Route::Refuse(rc) => return Ok(rc),
                Route::Stock | Route::HoldsMount => {}
            }
            if symlink_leaves(&mut caller, (old, old_len), fd, (new, new_len)) {
                return Ok(errno::PERM);
            }
            entry_creating(&mut caller, |c| {
                Ok(stock!(c, path_symlink(old, old_len, fd, new, new_len)))
            })
        },
    )?;

    linker.func_wrap(
        M,
        "path_link",
        |mut caller: Caller<'_, GuestState>,
         old_fd: i32,
         flags: i32,
         old: i32,
         old_len: i32,
         new_fd: i32,
         new: i32,
         new_len: i32| {
            let from = mounts::route(&mut caller, old_fd, old, old_len);
            let to = mounts::route(&mut caller, new_fd, new, new_len);
            match (from, to) {
                (Route::Refuse(rc), _) | (_, Route::Refuse(rc)) => return Ok(rc),
                // A volume holds no links; between a volume and elsewhere, as between two
                // file systems.
                (Route::Volume(..), Route::Volume(..)) => return Ok(errno::PERM),
                (Route::Volume(..), _) | (_, Route::Volume(..)) => return Ok(errno::XDEV),
                _ => {}
            }
            entry_creating(&mut caller, |c| {
                Ok(stock!(
                    c,
                    path_link(old_fd, flags, old, old_len, new_fd, new, new_len)
                ))
            })
        },
    )?;
    linker.func_wrap(
        M,
        "fd_filestat_set_times",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         atim: i64,
         mtim: i64,
         fst: i32|
         -> wasmtime::Result<i32> {
            // Shadowed only to be seen: a folder's descriptor may set its times.
            caller.data_mut().fs.changed = true;
            Ok(stock!(
                &mut caller,
                fd_filestat_set_times(fd, atim, mtim, fst)
            ))
        },
    )?;
    add_volume_shadows(linker)
}

/// The path calls only a mount changes: each goes to its volume ([`mounts::route`]) or is
/// the stock call.
fn add_volume_shadows(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    const M: &str = "wasi_snapshot_preview1";

    linker.func_wrap(
        M,
        "path_filestat_get",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         flags: i32,
         path: i32,
         len: i32,
         buf: i32|
         -> wasmtime::Result<i32> {
            match mounts::route(&mut caller, fd, path, len) {
                Route::Volume(ix, rel) => mounts::filestat(&mut caller, ix, &rel, flags, buf),
                Route::Refuse(rc) => Ok(rc),
                Route::Stock | Route::HoldsMount => Ok(stock!(
                    &mut caller,
                    path_filestat_get(fd, flags, path, len, buf)
                )),
            }
        },
    )?;

    linker.func_wrap(
        M,
        "path_filestat_set_times",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         flags: i32,
         path: i32,
         len: i32,
         atim: i64,
         mtim: i64,
         fst: i32|
         -> wasmtime::Result<i32> {
            caller.data_mut().fs.changed = true;
            match mounts::route(&mut caller, fd, path, len) {
                Route::Volume(ix, rel) => {
                    let times = Change::SetTimes {
                        flags,
                        atim,
                        mtim,
                        fst,
                    };
                    mounts::change(&mut caller, ix, &rel, times)
                }
                Route::Refuse(rc) => Ok(rc),
                Route::Stock | Route::HoldsMount => Ok(stock!(
                    &mut caller,
                    path_filestat_set_times(fd, flags, path, len, atim, mtim, fst)
                )),
            }
        },
    )?;

    linker.func_wrap(
        M,
        "path_remove_directory",
        |mut caller: Caller<'_, GuestState>, fd: i32, path: i32, len: i32| {
            caller.data_mut().fs.changed = true;
            match mounts::route(&mut caller, fd, path, len) {
                Route::Volume(ix, rel) => mounts::change(&mut caller, ix, &rel, Change::RemoveDir),
                Route::Refuse(rc) => Ok(rc),
                Route::HoldsMount => Ok(errno::BUSY),
                Route::Stock => Ok(stock!(&mut caller, path_remove_directory(fd, path, len))),
            }
        },
    )?;

    linker.func_wrap(
        M,
        "path_unlink_file",
        |mut caller: Caller<'_, GuestState>, fd: i32, path: i32, len: i32| {
            caller.data_mut().fs.changed = true;
            match mounts::route(&mut caller, fd, path, len) {
                Route::Volume(ix, rel) => mounts::change(&mut caller, ix, &rel, Change::Unlink),
                Route::Refuse(rc) => Ok(rc),
                Route::HoldsMount => Ok(errno::BUSY),
                Route::Stock => Ok(stock!(&mut caller, path_unlink_file(fd, path, len))),
            }
        },
    )?;

    linker.func_wrap(
        M,
        "path_readlink",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         path: i32,
         len: i32,
         buf: i32,
         buf_len: i32,
         used: i32|
         -> wasmtime::Result<i32> {
            // Reading a link sets its access time.
            caller.data_mut().fs.changed = true;
            match mounts::route(&mut caller, fd, path, len) {
                // A volume holds no links: what is there is not one.
                Route::Volume(ix, rel) => Ok(mounts::not_a_link(&caller, ix, &rel)),
                Route::Refuse(rc) => Ok(rc),
                Route::Stock | Route::HoldsMount => Ok(stock!(
                    &mut caller,
                    path_readlink(fd, path, len, buf, buf_len, used)
                )),
            }
        },
    )?;

    linker.func_wrap(
        M,
        "path_rename",
        |mut caller: Caller<'_, GuestState>,
         fd: i32,
         path: i32,
         len: i32,
         new_fd: i32,
         new: i32,
         new_len: i32|
         -> wasmtime::Result<i32> {
            caller.data_mut().fs.changed = true;
            let from = mounts::route(&mut caller, fd, path, len);
            let to = mounts::route(&mut caller, new_fd, new, new_len);
            let top = |r: &Route| matches!(r, Route::Volume(_, rel) if rel.is_empty());
            match (from, to) {
                (Route::Refuse(rc), _) | (_, Route::Refuse(rc)) => Ok(rc),
                // A mount point stays where it is.
                (a, b) if top(&a) || top(&b) => Ok(errno::BUSY),
                (Route::Volume(a, rel), Route::Volume(b, to)) if a == b => {
                    mounts::change(&mut caller, a, &rel, Change::Rename { to: &to })
                }
                (Route::Volume(..), _) | (_, Route::Volume(..)) => Ok(errno::XDEV),
                (Route::HoldsMount, _) | (_, Route::HoldsMount) => Ok(errno::BUSY),
                (Route::Stock, Route::Stock) => Ok(stock!(
                    &mut caller,
                    path_rename(fd, path, len, new_fd, new, new_len)
                )),
            }
        },
    )?;
    Ok(())
}

/// A write of `bytes` ending at `end` through `fd`, a descriptor in a volume: charged to
/// the room its mount was lent (not the sandbox's quota), or ENOSPC.
fn in_volume(
    caller: &mut Caller<'_, GuestState>,
    fd: i32,
    bytes: u64,
    end: u64,
    call: impl FnOnce(&mut Caller<'_, GuestState>) -> wasmtime::Result<i32>,
) -> wasmtime::Result<i32> {
    if !caller.data_mut().fs.mounts.charge_write(fd, bytes, end) {
        caller.data_mut().fs.refused_disk = true;
        return Ok(errno::NOSPC);
    }
    call(caller)
}

/// Whether a link to `target` (a guest string), made as `link` (a guest string: a path below
/// the directory descriptor `fd`), would lead out of the sandbox: `target` is absolute, or
/// resolved lexically against the link's own directory it climbs (`..`) above the working
/// directory. The host follows no link in a sandbox (every path it opens there goes through
/// cap-std, which refuses to leave the directory), so this keeps a link the guest makes
/// from naming a place outside for anything that would.
///
/// The link's directory is found for real (its path's own links resolved, by cap-std inside
/// the working directory) when `fd` is the working directory's preopen, as it is for every
/// path a program names; through any other directory descriptor, whose place the host does
/// not know, the target may not climb above the link's own directory. A path that does not
/// read (out of bounds, not UTF-8) is left to the stock call, which refuses it.
///
/// What this does not see: a link is checked as it is made; a later rename of it or of a
/// folder above it, or a link made later that a target's path passes through, can change
/// where it leads.
fn symlink_leaves(
    caller: &mut Caller<'_, GuestState>,
    (target, target_len): (i32, i32),
    fd: i32,
    (link, link_len): (i32, i32),
) -> bool {
    let Some(mem) = memory(caller) else {
        return false;
    };
    let data = mem.data(&*caller);
    let text = |ptr: i32, len: i32| {
        range(data, ptr, len as u32 as usize)
            .and_then(|r| std::str::from_utf8(&data[r]).ok().map(str::to_string))
    };
    let (Some(target), Some(link)) = (text(target, target_len), text(link, link_len)) else {
        return false;
    };
    if target.starts_with('/') {
        return true;
    }
    let depth = if is_root_preopen(caller, fd) {
        link_depth(&caller.data().fs.root, &link)
    } else {
        0
    };
    climbs_above(depth, &target)
}

/// How many folders below the working directory at `root` the link `link` (a path below
/// it) lies, its path's links resolved inside `root`; 0 when that does not resolve (the
/// stock call then fails, or the link is made at the top).
fn link_depth(root: &Path, link: &str) -> usize {
    let parent = match Path::new(link).parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => return 0,
    };
    Dir::open_ambient_dir(root, cap_std::ambient_authority())
        .and_then(|d| d.canonicalize(parent))
        .map(|p| {
            p.components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .count()
        })
        .unwrap_or(0)
}

/// Whether `target`, read lexically from a directory `depth` folders below the top, climbs
/// above the top.
fn climbs_above(depth: usize, target: &str) -> bool {
    let mut level = depth;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if level == 0 => return true,
            ".." => level -= 1,
            _ => level += 1,
        }
    }
    false
}

/// Runs a call that creates one directory entry, under the quota.
fn entry_creating(
    caller: &mut Caller<'_, GuestState>,
    call: impl FnOnce(&mut Caller<'_, GuestState>) -> wasmtime::Result<i32>,
) -> wasmtime::Result<i32> {
    caller.data_mut().fs.changed = true;
    if !reserve(caller, ENTRY_BYTES) {
        return Ok(errno::NOSPC);
    }
    let rc = call(caller)?;
    if rc == errno::SUCCESS {
        caller.data_mut().fs.charged_bytes += ENTRY_BYTES;
    }
    Ok(rc)
}

/// Whether `bytes` more fit under the quota, measuring the directory when the running bound
/// says they do not. Records a refusal.
fn reserve(caller: &mut Caller<'_, GuestState>, bytes: u64) -> bool {
    let fs = &mut caller.data_mut().fs;
    let mut measured = false;
    if fs.charged_bytes.saturating_add(bytes) > fs.quota_bytes {
        fs.charged_bytes = measure_dir(&fs.root);
        measured = true;
        if fs.charged_bytes.saturating_add(bytes) > fs.quota_bytes {
            fs.refused_disk = true;
            return false;
        }
    }
    // On tmpfs the bytes are memory: the host's budget must have room for them too.
    let need = fs.charged_bytes.saturating_add(bytes);
    if fs.hold_on_host(need, measured) {
        return true;
    }
    if !measured {
        fs.charged_bytes = measure_dir(&fs.root);
        if fs.hold_on_host(fs.charged_bytes.saturating_add(bytes), true) {
            return true;
        }
    }
    fs.refused_disk = true;
    fs.refused_host_disk = true;
    false
}

/// Adds what the stock call wrote (its `nwritten`) to the running bound, in whole blocks.
fn charge_written(caller: &mut Caller<'_, GuestState>, nwritten: i32) {
    let written = memory(caller).and_then(|m| {
        let data = m.data(&*caller);
        range(data, nwritten, 4).map(|r| read_u32(data, r.start))
    });
    caller.data_mut().fs.charged_bytes += charge_for(u64::from(written.unwrap_or(0)));
}

/// The current offset of `fd`, from wasmtime-wasi's own `fd_tell`. That call stores its answer
/// in guest memory, so it borrows the first 8 bytes of the caller's iovec array (in bounds,
/// and the guest is blocked in this call, so nothing sees them) and puts them back.
/// `None` when there is no iovec to borrow or the descriptor has no position.
fn file_position(
    caller: &mut Caller<'_, GuestState>,
    fd: i32,
    iovs: i32,
    iovs_len: i32,
) -> wasmtime::Result<Option<u64>> {
    let Some(mem) = memory(caller) else {
        return Ok(None);
    };
    let saved: [u8; 8] = {
        let data = mem.data(&*caller);
        match range(data, iovs, 8).filter(|_| iovs_len > 0) {
            Some(r) => data[r].try_into().expect("8 bytes"),
            None => return Ok(None),
        }
    };
    let rc = stock!(sync caller, fd_tell(fd, iovs));
    let at = iovs as u32 as usize;
    let data = mem.data_mut(&mut *caller);
    let position = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
    data[at..at + 8].copy_from_slice(&saved);
    Ok((rc == errno::SUCCESS).then_some(position))
}

/// `rc`, the answer of a call that closes one of the guest's descriptors when it succeeds:
/// then one fewer is open.
fn closed_one(caller: &mut Caller<'_, GuestState>, rc: i32) -> i32 {
    if rc == errno::SUCCESS {
        let fs = &mut caller.data_mut().fs;
        fs.open_fds = fs.open_fds.saturating_sub(1);
    }
    rc
}

/// The bytes a `fd_write`/`fd_pwrite` asks to write: the sum of its iovec lengths. Out of
/// bounds iovecs count as nothing here; the stock call then answers EFAULT.
fn iovec_total(caller: &mut Caller<'_, GuestState>, iovs: i32, iovs_len: i32) -> u64 {
    let Some(mem) = memory(caller) else {
        return 0;
    };
    let data = mem.data(&*caller);
    let Some(r) = range(data, iovs, (iovs_len as u32 as usize).saturating_mul(8)) else {
        return 0;
    };
    data[r]
        .chunks_exact(8)
        .map(|iov| u64::from(read_u32(iov, 4)))
        .sum()
}

/// What the directory holds, by the quota's measure: the larger of each file's size and the
/// disk blocks it really holds (so sparse files count in full and so do blocks allocated
/// into holes), plus `ENTRY_BYTES` an entry. Links are not followed.
pub fn measure_dir(root: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            total = total.saturating_add(ENTRY_BYTES);
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len().max(meta.blocks() * 512));
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_may_climb_only_as_high_as_its_link_lies() {
        for (depth, target) in [
            (0, "a/b"),
            (0, "./a/../b"),
            (0, "a/.."),
            (1, "../x"),
            (2, "../../etc"),
            (2, "..//../a/b/../c"),
        ] {
            assert!(!climbs_above(depth, target), "{depth} {target}");
        }
        for (depth, target) in [
            (0, ".."),
            (0, "../../../etc"),
            (0, "a/../../x"),
            (1, "../../x"),
            (2, "a/../../../../x"),
        ] {
            assert!(climbs_above(depth, target), "{depth} {target}");
        }
    }

    #[test]
    fn a_links_depth_is_its_folders_own_links_resolved() {
        let root = std::env::temp_dir().join(format!(
            "vivarium-fs-guard-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink(".", root.join("here")).unwrap();
        std::os::unix::fs::symlink("a/b", root.join("deep")).unwrap();
        assert_eq!(link_depth(&root, "x"), 0);
        assert_eq!(link_depth(&root, "a/x"), 1);
        assert_eq!(link_depth(&root, "a/b/x"), 2);
        assert_eq!(link_depth(&root, "a/b/../x"), 1);
        // A folder that is a link counts where it leads, not as it is spelt.
        assert_eq!(link_depth(&root, "here/here/x"), 0);
        assert_eq!(link_depth(&root, "deep/x"), 2);
        // Out of the directory, or missing: the top (the stock call then fails anyway).
        assert_eq!(link_depth(&root, "../x"), 0);
        assert_eq!(link_depth(&root, "missing/x"), 0);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
