//! Test builds only (`debug_assertions`; never compiled into a release): ways to make a worker
//! fail, and probes of its jail from the inside, so tests can prove what the supervisor does
//! when a worker dies and what each jail layer refuses.

use serde::{Deserialize, Serialize};

/// What to do to the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Dereference a wild pointer (SIGSEGV, outside any guest: wasmtime's handler passes it on).
    Segfault,
    /// Allocate host memory until the heap limit stops it (the allocation fails: abort).
    Exhaust,
    /// Call a system call the seccomp allowlist leaves out (`ptrace`): SIGSYS.
    ForbiddenSyscall,
    /// Try what the jail should refuse and say how each went.
    Probe,
    /// Break the channel's protocol as a compromised worker might: a reply to a job nobody
    /// sent, then one of the wrong kind, then a frame over the bound (the supervisor must
    /// end it at the first).
    BreakProtocol,
}

/// What [`Fault::Probe`] found: each `Ok` is what the jail let through, each `Err` the error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// Reading a host file outside the worker's roots (`/etc/hostname`).
    pub read_outside: Result<usize, String>,
    /// Writing a file outside its scratch root (beside it, in the scratch base).
    pub write_outside: Result<(), String>,
    /// Reading a file under the runtime's home (allowed, read-only).
    pub read_runtime: Result<usize, String>,
    /// Creating an inet socket.
    pub inet_socket: Result<(), String>,
    /// Its network namespace (`/proc/self/ns/net`'s link, `net:[inode]`).
    pub netns: Result<String, String>,
    /// Its effective capabilities (`/proc/self/status`'s `CapEff`, hex).
    pub capabilities: Result<String, String>,
}

/// Does `fault`; only a probe returns.
pub fn inflict(
    fault: Fault,
    scratch_base: &std::path::Path,
    runtime_file: &std::path::Path,
) -> Result<ProbeReport, String> {
    match fault {
        Fault::Segfault => {
            // SAFETY: not safe at all, on purpose: the worker must die of it.
            unsafe {
                std::ptr::write_volatile(std::ptr::dangling_mut::<u64>().wrapping_add(1 << 40), 1)
            };
            unreachable!("the write above faults")
        }
        Fault::Exhaust => {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                // Touched, so it is really used.
                held.push(vec![1u8; 64 << 20]);
            }
        }
        Fault::BreakProtocol => Err("the channel's frames are written by the worker's loop".into()),
        Fault::ForbiddenSyscall => {
            // SAFETY: PTRACE_TRACEME takes no pointers.
            unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
            Err("ptrace was allowed".into())
        }
        Fault::Probe => {
            let err = |e: std::io::Error| e.to_string();
            let inet = {
                // SAFETY: socket takes integers; a descriptor it returns is closed below.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
                if fd >= 0 {
                    // SAFETY: fd was just returned by socket.
                    unsafe { libc::close(fd) };
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error().to_string())
                }
            };
            Ok(ProbeReport {
                read_outside: std::fs::read("/etc/hostname").map(|b| b.len()).map_err(err),
                write_outside: std::fs::write(scratch_base.join("probe-outside"), b"x")
                    .map_err(err),
                read_runtime: std::fs::read(runtime_file).map(|b| b.len()).map_err(err),
                inet_socket: inet,
                capabilities: std::fs::read_to_string("/proc/self/status")
                    .map_err(err)
                    .and_then(|s| {
                        s.lines()
                            .find_map(|l| l.strip_prefix("CapEff:"))
                            .map(|v| v.trim().to_string())
                            .ok_or_else(|| "no CapEff line".to_string())
                    }),
                netns: std::fs::read_link("/proc/self/ns/net")
                    .map(|p| p.display().to_string())
                    .map_err(err),
            })
        }
    }
}
