//! Which pages of a linear memory a turn wrote, asked of the kernel: a userfaultfd in
//! asynchronous write-protect mode over the memory's range, read (and re-armed in the same
//! call) with the page map's `PAGEMAP_SCAN` ioctl (Linux 6.7+). No write waits for us: the
//! kernel resolves the protection itself and notes the page, at the price of one minor fault
//! on the first write to each page after a scan (about a microsecond; a pandas turn that
//! writes 370 pages pays about 0.4 ms).
//!
//! Only pages the guest wrote are ever protected: populated (or swapped) and neither a page
//! of the template's image the guest only read nor the zero page a read of fresh memory maps.
//! Every other page needs no protection to be seen: a write to it makes a new page of the
//! sandbox's own, which has none, and so is reported. The kernel's work (protecting, walking,
//! and unprotecting all when the tracker goes) thus follows the pages the session wrote, not
//! the memory it has nor the cap it may grow to, and memory grown into needs nothing more.
//!
//! This is what keeps a session's rollback checkpoint (`checkpoint.rs`) current at a cost
//! that follows what a turn wrote, not what the session holds. Where the kernel refuses any
//! step (an older kernel, `vm.unprivileged_userfaultfd = 0` without the capability, a
//! seccomp filter), [`DirtyTracker::start`] says why and the checkpoint falls back to the page
//! map's coarser "written since the template" bit, which is correct but costs time in
//! proportion to the session's whole written memory.
//!
//! The same scan without protecting anything, [`written_since_mapped`], answers that coarser
//! question for a full capture (a session's first checkpoint, a snapshot): only the pages
//! that match come back, where reading `/proc/self/pagemap` costs 8 bytes for every page of
//! the memory, written or not.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::snapshot::PAGE_BYTES;

// From <linux/userfaultfd.h> and <linux/fs.h> (Linux 6.7), which the libc crate does not
// carry yet.
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
const PAGE_IS_PFNZERO: u64 = 1 << 5;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `_IOWR(type, nr, size)` of asm-generic/ioctl.h.
const fn iowr(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    ((3u64 << 30) | ((size as u64) << 16) | ((ty as u64) << 8) | nr as u64) as libc::c_ulong
}

const UFFDIO_API_IOCTL: libc::c_ulong = iowr(0xAA, 0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER_IOCTL: libc::c_ulong =
    iowr(0xAA, 0x00, std::mem::size_of::<UffdioRegister>());
const PAGEMAP_SCAN_IOCTL: libc::c_ulong = iowr(b'f', 16, std::mem::size_of::<PmScanArg>());

/// Tracks the pages written in `[start, start + len)` since the last [`DirtyTracker::take`].
/// Dropping it unregisters the range (closing a userfaultfd does), so drop it before the
/// memory is unmapped or handed to another instance.
pub struct DirtyTracker {
    uffd: OwnedFd,
    pagemap: File,
    start: u64,
    len: u64,
}

impl DirtyTracker {
    /// Starts tracking `[start, start + len)` (page-aligned; every page of it mapped), or
    /// says why the kernel would not. The pages written so far in its first `now` bytes (what
    /// the memory holds) are protected now and returned (as [`DirtyTracker::take`] counts
    /// them: what a full capture must look at, without a walk of its own); a later write to
    /// one is reported by the next take.
    pub fn start(start: *const u8, len: usize, now: usize) -> Result<(Self, Vec<u32>), String> {
        let host_page = rustix::param::page_size();
        let (start, len) = (start as u64, len as u64);
        if host_page != PAGE_BYTES || start % PAGE_BYTES as u64 != 0 || len % PAGE_BYTES as u64 != 0
        {
            return Err(format!("host pages of {host_page} bytes"));
        }
        // SAFETY: a plain system call with flag arguments; the result is checked.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if fd < 0 {
            return Err(format!("userfaultfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a descriptor the call above just opened; nothing else owns it.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        // The features the scans need: a write resolves its own fault, and the scans may
        // protect pages of any kind (no page is protected before a scan finds it written).
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED,
            ioctls: 0,
        };
        ioctl(
            &uffd,
            UFFDIO_API_IOCTL,
            &mut api,
            "UFFDIO_API (asynchronous write-protect)",
        )?;
        let mut reg = UffdioRegister {
            range: UffdioRange { start, len },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        ioctl(&uffd, UFFDIO_REGISTER_IOCTL, &mut reg, "UFFDIO_REGISTER")?;
        let pagemap =
            File::open("/proc/self/pagemap").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
        let tracker = DirtyTracker {
            uffd,
            pagemap,
            start,
            len,
        };
        // The first scan protects what is written so far, and fails here, not at the first
        // turn, where PAGEMAP_SCAN is missing.
        let written = tracker.take(now)?;
        Ok((tracker, written))
    }

    /// The [`PAGE_BYTES`] pages (indices from the start of the range) written since the last
    /// call, and write-protects them again, in one step; only the first `upto` bytes of the
    /// range are walked. Pass the memory's size now: the guest cannot have written beyond it,
    /// and a page beyond stays unreported until a later call's `upto` covers it.
    ///
    /// What counts as written: a page not write-protected, populated or swapped out, and
    /// neither a page of a file (the template's image, only read so far) nor the shared zero
    /// page.
    pub fn take(&self, upto: usize) -> Result<Vec<u32>, String> {
        let _ = &self.uffd;
        let end = self.start + self.len.min(upto as u64);
        scan(&self.pagemap, (self.start, end), Scan::TakeWritten)
    }

    /// Write-protects pages `first..=last` again, forgetting that they were written (the
    /// host wrote them with what the checkpoint already holds): a walk of that span only.
    pub fn forget(&self, first: u32, last: u32) -> Result<(), String> {
        let page = PAGE_BYTES as u64;
        let end = self.start + self.len;
        let from = (self.start + first as u64 * page).min(end);
        let to = (self.start + (last as u64 + 1) * page).min(end);
        scan(&self.pagemap, (from, to), Scan::TakeWritten).map(drop)
    }
}

/// The [`PAGE_BYTES`] pages of `mem` (indices from its start) the guest wrote since they were
/// mapped: private (not a page of the template's image only read) and present, or swapped
/// out, as the page map's `PAGEMAP_SCAN` reports them. Only the pages that match come back,
/// so its cost follows what was written, not the memory's size. An error where the kernel
/// lacks the scan.
pub fn written_since_mapped(mem: &[u8]) -> Result<Vec<u32>, String> {
    let start = mem.as_ptr() as u64;
    if rustix::param::page_size() != PAGE_BYTES || !start.is_multiple_of(PAGE_BYTES as u64) {
        return Err("host pages of another size".into());
    }
    let pagemap =
        File::open("/proc/self/pagemap").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
    scan(&pagemap, (start, start + mem.len() as u64), Scan::Written)
}

/// What a [`scan`] asks.
enum Scan {
    /// Pages written since the last take (not write-protected), protected again.
    TakeWritten,
    /// Pages written since they were mapped; nothing protected.
    Written,
}

/// The pages of `[start, end)` that match `what`, as indices from `start`.
fn scan(pagemap: &File, (start, end): (u64, u64), what: Scan) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    let mut regions = vec![PageRegion::default(); 1024];
    // A page matches when its categories, flipped by `category_inverted`, hold all of
    // `category_mask` and any of `category_anyof_mask` (pagemap.rst).
    let (flags, category_inverted, category_mask, return_mask) = match what {
        // Neither a file's page nor the shared zero page: written.
        Scan::TakeWritten => (
            PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
            PAGE_IS_FILE | PAGE_IS_PFNZERO,
            PAGE_IS_WRITTEN | PAGE_IS_FILE | PAGE_IS_PFNZERO,
            PAGE_IS_WRITTEN,
        ),
        // As the page map's own bits have it (`image_io::written_pages`'s fallback).
        Scan::Written => (
            0,
            PAGE_IS_FILE,
            PAGE_IS_FILE,
            PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
        ),
    };
    let mut from = start;
    while from < end {
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags,
            start: from,
            end,
            walk_end: 0,
            vec: regions.as_mut_ptr() as u64,
            vec_len: regions.len() as u64,
            max_pages: 0,
            category_inverted,
            category_mask,
            category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
            return_mask,
        };
        // SAFETY: `arg` points at `regions`, which outlives the call and has `vec_len`
        // entries; the kernel writes at most that many and reads only `arg`.
        let n = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN_IOCTL, &mut arg) };
        if n < 0 {
            return Err(format!("PAGEMAP_SCAN: {}", std::io::Error::last_os_error()));
        }
        for r in &regions[..n as usize] {
            let first = (r.start - start) / PAGE_BYTES as u64;
            let last = (r.end - start) / PAGE_BYTES as u64;
            out.extend((first..last).map(|p| p as u32));
        }
        // The walk stops early when the buffer is full; go on from where it stopped.
        if arg.walk_end <= from || arg.walk_end >= end {
            break;
        }
        from = arg.walk_end;
    }
    Ok(out)
}

fn ioctl<T>(fd: &OwnedFd, request: libc::c_ulong, arg: &mut T, what: &str) -> Result<(), String> {
    // SAFETY: `arg` is a live, exclusively borrowed struct of the layout `request` expects
    // (the `#[repr(C)]` mirrors above).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg as *mut T) };
    if r < 0 {
        return Err(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private, writable mapping of `len` bytes: of the file `fd`, or anonymous (`fd` -1).
    /// The test unmaps it.
    fn mapping(len: usize, fd: libc::c_int) -> *mut u8 {
        let flags = libc::MAP_PRIVATE | if fd < 0 { libc::MAP_ANONYMOUS } else { 0 };
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh mapping at an address the kernel picks; `fd` is the caller's.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        p as *mut u8
    }

    #[test]
    fn writes_are_seen_once_each() {
        let len = 64 * PAGE_BYTES;
        let p = mapping(len, -1);
        let tracker = match DirtyTracker::start(p, len, len) {
            Ok((t, _)) => t,
            // The kernel may refuse (see the module docs); the fallback is tested elsewhere.
            Err(why) => {
                eprintln!("no dirty tracking here: {why}");
                return;
            }
        };
        // SAFETY: within the mapping.
        unsafe {
            *p.add(3 * PAGE_BYTES) = 1;
            *p.add(40 * PAGE_BYTES + 7) = 1;
        }
        assert_eq!(tracker.take(len).unwrap(), vec![3, 40]);
        assert_eq!(tracker.take(len).unwrap(), Vec::<u32>::new());
        // SAFETY: within the mapping.
        unsafe { *p.add(3 * PAGE_BYTES + 1) = 2 };
        assert_eq!(tracker.take(len).unwrap(), vec![3]);
        // A write past `upto` is not walked, and not lost: the next walk that covers it
        // finds it.
        // SAFETY: within the mapping.
        unsafe { *p.add(50 * PAGE_BYTES) = 3 };
        assert_eq!(tracker.take(10 * PAGE_BYTES).unwrap(), Vec::<u32>::new());
        assert_eq!(tracker.take(len).unwrap(), vec![50]);
        drop(tracker);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    #[test]
    fn pages_written_before_or_past_the_first_scan_are_seen_once_each() {
        let len = 64 * PAGE_BYTES;
        let p = mapping(len, -1);
        // A page written before the tracker starts, in the part its first scan protects and
        // past it (memory the guest grew into).
        // SAFETY: within the mapping.
        unsafe {
            *p.add(2 * PAGE_BYTES) = 1;
            *p.add(20 * PAGE_BYTES) = 1;
        }
        let tracker = match DirtyTracker::start(p, len, 16 * PAGE_BYTES) {
            // The first walk finds the page written in its part, not the one past it.
            Ok((t, first)) => {
                assert_eq!(first, vec![2]);
                t
            }
            Err(why) => {
                eprintln!("no dirty tracking here: {why}");
                return;
            }
        };
        // A page only read maps the zero page: not a written one.
        // SAFETY: within the mapping.
        let read = unsafe { std::ptr::read_volatile(p.add(40 * PAGE_BYTES)) };
        assert_eq!(read, 0);
        // The one past the first scan was written before it: reported once, then protected.
        assert_eq!(tracker.take(len).unwrap(), vec![20]);
        assert_eq!(tracker.take(len).unwrap(), Vec::<u32>::new());
        // Writes on both sides, to touched and untouched pages, are each seen once.
        // SAFETY: within the mapping.
        unsafe {
            *p.add(2 * PAGE_BYTES + 5) = 2;
            *p.add(5 * PAGE_BYTES) = 2;
            *p.add(20 * PAGE_BYTES + 5) = 2;
            *p.add(33 * PAGE_BYTES) = 2;
            *p.add(40 * PAGE_BYTES) = 2;
        }
        assert_eq!(tracker.take(len).unwrap(), vec![2, 5, 20, 33, 40]);
        assert_eq!(tracker.take(len).unwrap(), Vec::<u32>::new());
        // SAFETY: within the mapping.
        unsafe { *p.add(33 * PAGE_BYTES + 1) = 3 };
        assert_eq!(tracker.take(len).unwrap(), vec![33]);
        drop(tracker);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    /// The template's image is a file mapped privately: a page of it only read is the file's
    /// and not reported; one written is the sandbox's own copy, reported once per write after
    /// a scan, whether written before the tracker started or not.
    #[test]
    fn a_privately_mapped_files_pages_are_reported_once_written() {
        use std::io::Write;
        let len = 32 * PAGE_BYTES;
        // A memory file, as wasmtime keeps a module's memory image in.
        // SAFETY: a plain system call on a C string; the result is checked.
        let fd = unsafe { libc::memfd_create(c"image".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.write_all(&vec![9u8; len]).unwrap();
        let p = mapping(len, file.as_raw_fd());
        // SAFETY: within the mapping.
        unsafe { *p.add(4 * PAGE_BYTES) = 1 };
        let tracker = match DirtyTracker::start(p, len, len) {
            Ok((t, _)) => t,
            Err(why) => {
                eprintln!("no dirty tracking here: {why}");
                return;
            }
        };
        // Reads of the file's pages, of the one copied before and of fresh ones.
        let mut sum = 0u32;
        for page in [1, 4, 7, 20] {
            // SAFETY: within the mapping.
            sum += u32::from(unsafe { std::ptr::read_volatile(p.add(page * PAGE_BYTES)) });
        }
        assert_eq!(sum, 9 + 1 + 9 + 9);
        assert_eq!(tracker.take(len).unwrap(), Vec::<u32>::new());
        // SAFETY: within the mapping.
        unsafe {
            *p.add(4 * PAGE_BYTES + 1) = 2;
            *p.add(7 * PAGE_BYTES) = 2;
            *p.add(30 * PAGE_BYTES) = 2;
        }
        assert_eq!(tracker.take(len).unwrap(), vec![4, 7, 30]);
        assert_eq!(tracker.take(len).unwrap(), Vec::<u32>::new());
        // SAFETY: within the mapping.
        unsafe { *p.add(7 * PAGE_BYTES + 3) = 3 };
        assert_eq!(tracker.take(len).unwrap(), vec![7]);
        drop(tracker);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    /// The one-off scan (`written_since_mapped`) answers what the page map's own entries
    /// say: a file's page only read is not written, one copied by a write is.
    #[test]
    fn a_scan_of_written_pages_agrees_with_the_page_map() {
        use std::io::Write;
        let len = 48 * PAGE_BYTES;
        // SAFETY: a plain system call on a C string; the result is checked.
        let fd = unsafe { libc::memfd_create(c"image".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.write_all(&vec![9u8; len]).unwrap();
        let p = mapping(len, file.as_raw_fd());
        let mut sum = 0u32;
        for page in [1, 3] {
            // SAFETY: within the mapping.
            sum += u32::from(unsafe { std::ptr::read_volatile(p.add(page * PAGE_BYTES)) });
        }
        assert_eq!(sum, 18);
        // SAFETY: within the mapping.
        unsafe {
            *p.add(3 * PAGE_BYTES) = 1;
            *p.add(10 * PAGE_BYTES) = 1;
            *p.add(40 * PAGE_BYTES + 9) = 1;
        }
        // SAFETY: the mapping above, `len` bytes, alive until unmapped below.
        let mem = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        match written_since_mapped(mem) {
            Ok(pages) => {
                assert!(pages.contains(&3) && pages.contains(&10) && pages.contains(&40));
                assert!(!pages.contains(&1), "a file's page only read: {pages:?}");
                let flags = super::super::image_io::page_map_flags(mem).unwrap();
                let from_map: Vec<u32> = (0..flags.len() as u32)
                    .filter(|&p| flags[p as usize])
                    .collect();
                assert_eq!(pages, from_map, "the scan and the page map");
            }
            Err(why) => eprintln!("no PAGEMAP_SCAN here: {why}"),
        }
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }
}
