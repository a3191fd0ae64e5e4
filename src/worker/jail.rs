//! The second wall: what a worker process may do once it runs guest code. The first wall is
//! WebAssembly itself; this one holds if a guest ever got out of it (a Cranelift or
//! wasmtime-wasi bug, one of our shadows), so that such a guest owns one jailed worker and
//! not the server.
//!
//! Layers, applied in this order, each reported in [`JailReport`] (a layer the kernel lacks
//! is said loudly, in the log, `/readyz` and `/metrics`, never skipped silently):
//! 1. a network namespace of its own (no interface but a down loopback), made by the
//!    supervisor between fork and exec (`process.rs`); [`network_isolated`] checks it;
//! 2. rlimits: no core files, a descriptor cap, a file-size cap, a data (heap) cap;
//! 3. `PR_SET_NO_NEW_PRIVS`;
//! 4. Landlock (the `landlock` crate), before the runtime is opened, on the worker's only
//!    thread so every later thread inherits it: its scratch root read-write, the runtime's
//!    home and its own `/proc/<pid>` (the page map) read-only, nothing else; no TCP bind or connect; no signals to processes outside
//!    its domain (the supervisor);
//! 5. no capabilities: the bounding, ambient, effective, permitted and inheritable sets
//!    emptied, on the only thread like Landlock (a worker started as root keeps uid 0 but
//!    none of root's powers);
//! 6. seccomp-bpf (Firecracker's `seccompiler`), once the runtime is open, on every thread:
//!    an allowlist of the calls a worker makes, everything else kills the process; `socket`
//!    fails with `EPERM` (the one channel it needs was made by the supervisor), threads may
//!    be cloned but processes not, `execve` kills.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the jail around one worker should hold (set by the supervisor).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JailConfig {
    /// Off: no layer is applied (`--worker-jail off`, for debugging; said in the log).
    pub enabled: bool,
    /// Read-only: the runtime's home (runtime, templates, compiled modules, packages).
    pub read_only: Vec<PathBuf>,
    /// Read-write besides its scratch root: the volumes' folder (the supervisor decides
    /// which volume a sandbox mounts; the worker reaches no other by path).
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// The descriptor cap.
    pub open_files: u64,
    /// The largest file it may write.
    pub file_bytes: u64,
    /// Its heap (`RLIMIT_DATA`): past it an allocation fails and the worker aborts; the
    /// supervisor then reports it lost.
    pub data_bytes: u64,
    /// The supervisor's network namespace (its inode), to tell whether the worker has its own.
    pub supervisor_netns: Option<u64>,
}

/// How much of one layer holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "why")]
pub enum Layer {
    /// All of it.
    Full,
    /// Some of it (an older kernel): what is missing.
    Partial(String),
    /// None of it: why.
    Missing(String),
}

impl Layer {
    /// `full`, `partial` or `missing`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Layer::Full => "full",
            Layer::Partial(_) => "partial",
            Layer::Missing(_) => "missing",
        }
    }
}

/// What a worker's jail holds, as the worker found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailReport {
    /// Its own network namespace.
    pub network: Layer,
    /// rlimits.
    pub rlimits: Layer,
    /// `PR_SET_NO_NEW_PRIVS`.
    pub no_new_privs: Layer,
    /// Landlock.
    pub landlock: Layer,
    /// No capabilities.
    pub capabilities: Layer,
    /// seccomp-bpf.
    pub seccomp: Layer,
}

impl JailReport {
    /// A report of no jail at all (`--worker-jail off`).
    pub fn off() -> Self {
        let off = || Layer::Missing("the jail is off".into());
        JailReport {
            network: off(),
            rlimits: off(),
            no_new_privs: off(),
            landlock: off(),
            capabilities: off(),
            seccomp: off(),
        }
    }

    /// Each layer by name.
    pub fn layers(&self) -> [(&'static str, &Layer); 6] {
        [
            ("network", &self.network),
            ("rlimits", &self.rlimits),
            ("no_new_privs", &self.no_new_privs),
            ("landlock", &self.landlock),
            ("capabilities", &self.capabilities),
            ("seccomp", &self.seccomp),
        ]
    }
}

/// The inode of this process's network namespace.
pub fn netns_inode() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/net").ok().map(|m| m.ino())
}

/// Whether this process is in another network namespace than the supervisor's.
pub fn network_isolated(config: &JailConfig) -> Layer {
    match (netns_inode(), config.supervisor_netns) {
        (Some(mine), Some(theirs)) if mine != theirs => Layer::Full,
        (Some(_), Some(_)) => Layer::Missing(
            "the kernel refused a network namespace (unshare CLONE_NEWNET needs CAP_SYS_ADMIN); \
             seccomp still refuses sockets"
                .into(),
        ),
        _ => Layer::Missing("no /proc/self/ns/net to tell".into()),
    }
}

/// Layers 2–5, on the worker's only thread, before it opens anything it will keep.
/// `scratch_root` is its own scratch root (made already), the one folder it may write.
pub fn before_open(config: &JailConfig, scratch_root: &std::path::Path) -> JailReport {
    let mut report = JailReport::off();
    if !config.enabled {
        return report;
    }
    report.network = network_isolated(config);
    report.rlimits = rlimits(config);
    report.no_new_privs = no_new_privs();
    report.landlock = landlock(config, scratch_root);
    report.capabilities = drop_capabilities();
    report.seccomp = Layer::Missing("not yet applied".into());
    report
}

/// Layer 6, on every thread, once the runtime is open and before any guest code runs.
pub fn after_open(config: &JailConfig, report: &mut JailReport) {
    if config.enabled {
        report.seccomp = seccomp();
    }
}

/// Empties every capability set, on the worker's only thread (capabilities are per thread:
/// every thread made later inherits the empty sets).
fn drop_capabilities() -> Layer {
    // Linux's capability numbers end below 64.
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last capability is ignored.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    // SAFETY: as above.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version-3 header and two data structs, which live for the call.
    let set = unsafe { libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) };
    if set != 0 {
        return Layer::Missing(format!("capset: {}", std::io::Error::last_os_error()));
    }
    match std::fs::read_to_string("/proc/self/status") {
        Ok(status)
            if status
                .lines()
                .any(|l| l.starts_with("CapEff:\t0000000000000000")) =>
        {
            Layer::Full
        }
        Ok(_) => Layer::Partial("some capability is still effective".into()),
        Err(e) => Layer::Partial(format!("could not read /proc/self/status to check: {e}")),
    }
}

fn rlimits(config: &JailConfig) -> Layer {
    let set = |resource, value: u64| {
        let mut now = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given, which lives for the call.
        unsafe { libc::getrlimit(resource, &mut now) };
        // Never above the hard limit this process was given (raising it needs privilege).
        let value = (value as libc::rlim_t).min(now.rlim_max);
        let lim = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct it is given, which lives for the call.
        unsafe { libc::setrlimit(resource, &lim) == 0 }
    };
    let mut failed = Vec::new();
    for (name, resource, value) in [
        ("core", libc::RLIMIT_CORE, 0),
        ("nofile", libc::RLIMIT_NOFILE, config.open_files),
        ("fsize", libc::RLIMIT_FSIZE, config.file_bytes),
        ("data", libc::RLIMIT_DATA, config.data_bytes),
    ] {
        if !set(resource, value) {
            failed.push(format!("{name}: {}", std::io::Error::last_os_error()));
        }
    }
    if failed.is_empty() {
        Layer::Full
    } else {
        Layer::Partial(failed.join("; "))
    }
}

fn no_new_privs() -> Layer {
    // SAFETY: prctl with integer arguments only.
    match unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } {
        0 => Layer::Full,
        _ => Layer::Missing(std::io::Error::last_os_error().to_string()),
    }
}

fn landlock(config: &JailConfig, scratch_root: &std::path::Path) -> Layer {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictionStatus, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let applied = (|| -> Result<RestrictionStatus, landlock::RulesetError> {
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::from_all(abi))?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(
                &config.read_only,
                AccessFs::from_read(abi),
            ))?
            .add_rules(path_beneath_rules([scratch_root], AccessFs::from_all(abi)))?
            .add_rules(path_beneath_rules(
                config.read_write.iter().filter(|p| p.is_dir()),
                AccessFs::from_all(abi),
            ))?
            // Its own /proc entry, read-only: the page map that capture and the rollback
            // checkpoint's dirty tracking read (no other process's).
            .add_rules(path_beneath_rules(
                std::fs::canonicalize("/proc/self").ok(),
                AccessFs::from_read(abi),
            ))?
            .restrict_self()
    })();
    match applied {
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => Layer::Full,
            RulesetStatus::PartiallyEnforced => Layer::Partial(
                "this kernel's Landlock lacks some rights (older ABI): files are confined, \
                 not every operation or scope"
                    .into(),
            ),
            RulesetStatus::NotEnforced => {
                Layer::Missing("this kernel has no Landlock (or it is disabled at boot)".into())
            }
        },
        Err(e) => Layer::Missing(format!("landlock: {e}")),
    }
}

/// The system calls a worker makes once its runtime is open, each group for a reason;
/// everything else kills it. Found by tracing workers through the test suite (`strace -f -c`).
#[cfg(target_arch = "x86_64")]
const ALLOWED: &[(&str, libc::c_long)] = &[
    // memory: the instance pool, copy-on-write images, userfaultfd dirty tracking (`ioctl` for it and `PAGEMAP_SCAN`)
    ("mmap", libc::SYS_mmap),
    ("munmap", libc::SYS_munmap),
    ("mprotect", libc::SYS_mprotect),
    ("mremap", libc::SYS_mremap),
    ("madvise", libc::SYS_madvise),
    ("brk", libc::SYS_brk),
    ("membarrier", libc::SYS_membarrier),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("ioctl", libc::SYS_ioctl),
    ("mincore", libc::SYS_mincore),
    // threads, their signals (wasmtime's trap handlers), time
    ("clone", libc::SYS_clone),
    ("futex", libc::SYS_futex),
    ("restart_syscall", libc::SYS_restart_syscall),
    ("set_robust_list", libc::SYS_set_robust_list),
    ("rseq", libc::SYS_rseq),
    ("sched_yield", libc::SYS_sched_yield),
    ("sched_getaffinity", libc::SYS_sched_getaffinity),
    ("rt_sigaction", libc::SYS_rt_sigaction),
    ("rt_sigprocmask", libc::SYS_rt_sigprocmask),
    ("rt_sigreturn", libc::SYS_rt_sigreturn),
    ("sigaltstack", libc::SYS_sigaltstack),
    ("tgkill", libc::SYS_tgkill),
    ("gettid", libc::SYS_gettid),
    // a long run's guest thread lowers its own priority (`guest_threads::demote_current`)
    ("setpriority", libc::SYS_setpriority),
    ("getpid", libc::SYS_getpid),
    ("prctl", libc::SYS_prctl),
    ("nanosleep", libc::SYS_nanosleep),
    ("clock_nanosleep", libc::SYS_clock_nanosleep),
    ("clock_gettime", libc::SYS_clock_gettime),
    ("clock_getres", libc::SYS_clock_getres),
    ("gettimeofday", libc::SYS_gettimeofday),
    ("getrandom", libc::SYS_getrandom),
    ("exit", libc::SYS_exit),
    ("exit_group", libc::SYS_exit_group),
    ("set_tid_address", libc::SYS_set_tid_address),
    ("prlimit64", libc::SYS_prlimit64),
    ("getrlimit", libc::SYS_getrlimit),
    ("uname", libc::SYS_uname),
    ("sysinfo", libc::SYS_sysinfo),
    ("getuid", libc::SYS_getuid),
    ("geteuid", libc::SYS_geteuid),
    ("getgid", libc::SYS_getgid),
    ("getegid", libc::SYS_getegid),
    // files: WASI through cap-std, under the two roots Landlock leaves it
    ("read", libc::SYS_read),
    ("write", libc::SYS_write),
    ("readv", libc::SYS_readv),
    ("writev", libc::SYS_writev),
    ("pread64", libc::SYS_pread64),
    ("pwrite64", libc::SYS_pwrite64),
    ("preadv", libc::SYS_preadv),
    ("preadv2", libc::SYS_preadv2),
    ("pwritev2", libc::SYS_pwritev2),
    ("pwritev", libc::SYS_pwritev),
    ("openat", libc::SYS_openat),
    ("openat2", libc::SYS_openat2),
    ("chmod", libc::SYS_chmod),
    ("fchmod", libc::SYS_fchmod),
    ("fchmodat", libc::SYS_fchmodat),
    ("open", libc::SYS_open),
    ("close", libc::SYS_close),
    ("fstat", libc::SYS_fstat),
    ("stat", libc::SYS_stat),
    ("lstat", libc::SYS_lstat),
    ("newfstatat", libc::SYS_newfstatat),
    ("statx", libc::SYS_statx),
    ("statfs", libc::SYS_statfs),
    ("fstatfs", libc::SYS_fstatfs),
    ("lseek", libc::SYS_lseek),
    ("getdents64", libc::SYS_getdents64),
    ("mkdirat", libc::SYS_mkdirat),
    ("mkdir", libc::SYS_mkdir),
    ("unlinkat", libc::SYS_unlinkat),
    ("unlink", libc::SYS_unlink),
    ("rmdir", libc::SYS_rmdir),
    ("renameat", libc::SYS_renameat),
    ("renameat2", libc::SYS_renameat2),
    ("rename", libc::SYS_rename),
    ("linkat", libc::SYS_linkat),
    ("symlinkat", libc::SYS_symlinkat),
    ("readlinkat", libc::SYS_readlinkat),
    ("readlink", libc::SYS_readlink),
    ("ftruncate", libc::SYS_ftruncate),
    ("fallocate", libc::SYS_fallocate),
    ("fsync", libc::SYS_fsync),
    ("fdatasync", libc::SYS_fdatasync),
    ("fadvise64", libc::SYS_fadvise64),
    ("fcntl", libc::SYS_fcntl),
    ("flock", libc::SYS_flock),
    ("utimensat", libc::SYS_utimensat),
    ("futimesat", libc::SYS_futimesat),
    ("faccessat", libc::SYS_faccessat),
    ("faccessat2", libc::SYS_faccessat2),
    ("access", libc::SYS_access),
    ("getcwd", libc::SYS_getcwd),
    ("dup", libc::SYS_dup),
    ("dup2", libc::SYS_dup2),
    ("dup3", libc::SYS_dup3),
    ("copy_file_range", libc::SYS_copy_file_range),
    ("sendfile", libc::SYS_sendfile),
    // wasmtime-wasi runs some calls on a tokio runtime of its own (epoll, eventfd)
    ("epoll_create1", libc::SYS_epoll_create1),
    ("epoll_ctl", libc::SYS_epoll_ctl),
    ("epoll_wait", libc::SYS_epoll_wait),
    ("epoll_pwait", libc::SYS_epoll_pwait),
    ("eventfd2", libc::SYS_eventfd2),
    ("poll", libc::SYS_poll),
    ("ppoll", libc::SYS_ppoll),
    ("close_range", libc::SYS_close_range),
    // its channel to the supervisor (inherited; `socket` is listed so that the first filter's EPERM, not a kill, answers it)
    ("recvfrom", libc::SYS_recvfrom),
    ("sendto", libc::SYS_sendto),
    ("recvmsg", libc::SYS_recvmsg),
    ("sendmsg", libc::SYS_sendmsg),
    ("shutdown", libc::SYS_shutdown),
    ("socket", libc::SYS_socket),
];

#[cfg(target_arch = "x86_64")]
/// One filter: `numbers` get `action`, the rest `otherwise`.
fn filter(
    numbers: &[libc::c_long],
    action: seccompiler::SeccompAction,
    otherwise: seccompiler::SeccompAction,
    arch: seccompiler::TargetArch,
) -> Result<seccompiler::BpfProgram, String> {
    let rules = numbers.iter().map(|n| (*n, vec![])).collect();
    seccompiler::SeccompFilter::new(rules, otherwise, action, arch)
        .and_then(|f| f.try_into())
        .map_err(|e| e.to_string())
}

#[cfg(not(target_arch = "x86_64"))]
fn seccomp() -> Layer {
    Layer::Missing(format!(
        "seccomp: no allowlist for {} yet",
        std::env::consts::ARCH
    ))
}

#[cfg(target_arch = "x86_64")]
fn seccomp() -> Layer {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch: TargetArch = match std::env::consts::ARCH.try_into() {
        Ok(a) => a,
        Err(_) => {
            return Layer::Missing(format!("seccomp: no filter for {}", std::env::consts::ARCH));
        }
    };
    let built = (|| -> Result<Vec<seccompiler::BpfProgram>, String> {
        let e = |e: seccompiler::BackendError| e.to_string();
        // `socket` fails: the one channel a worker needs was made by the supervisor.
        let sockets = filter(
            &[libc::SYS_socket, libc::SYS_socketpair],
            SeccompAction::Errno(libc::EPERM as u32),
            SeccompAction::Allow,
            arch,
        )?;
        // `clone3` passes its flags in memory, where no filter can read them: ENOSYS, so the
        // C library falls back to `clone`, whose flags the allowlist reads.
        let clone3 = filter(
            &[libc::SYS_clone3],
            SeccompAction::Errno(libc::ENOSYS as u32),
            SeccompAction::Allow,
            arch,
        )?;
        let mut allow: BTreeMap<i64, Vec<SeccompRule>> =
            ALLOWED.iter().map(|(_, nr)| (*nr, vec![])).collect();
        // A thread, never a process.
        let thread = libc::CLONE_THREAD as u64;
        allow.insert(
            libc::SYS_clone,
            vec![
                SeccompRule::new(vec![
                    SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Qword,
                        SeccompCmpOp::MaskedEq(thread),
                        thread,
                    )
                    .map_err(e)?,
                ])
                .map_err(e)?,
            ],
        );
        allow.insert(libc::SYS_clone3, vec![]);
        allow.insert(libc::SYS_socketpair, vec![]);
        let allow = SeccompFilter::new(
            allow,
            SeccompAction::KillProcess,
            SeccompAction::Allow,
            arch,
        )
        .and_then(|f| f.try_into())
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
        Ok(vec![sockets, clone3, allow])
    })();
    let programs = match built {
        Ok(p) => p,
        Err(e) => return Layer::Missing(format!("seccomp: {e}")),
    };
    // The most restrictive answer of all filters wins: EPERM and ENOSYS over Allow.
    for program in &programs {
        if let Err(e) = seccompiler::apply_filter_all_threads(program) {
            return Layer::Missing(format!("seccomp: {e}"));
        }
    }
    Layer::Full
}
