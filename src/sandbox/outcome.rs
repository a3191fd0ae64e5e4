//! How a call into the guest ended: its status, exit code, which limit stopped it, and
//! whether the interpreter can take another turn.

use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use crate::guest::turn_abi;
use crate::hostcalls::limiter::MemoryRefusal;
use crate::hostcalls::state::Interrupted;
use crate::limits::{Limits, TurnLimits};
use crate::report::{Report, Status};

/// Why an interpreter can take no more turns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum EndReason {
    /// The code called `exit()` or `quit()`.
    Quit,
    /// The code called `os._exit(n)` (or the interpreter hit a fatal error).
    Exit(i32),
    /// A limit or a trap stopped the instance mid-turn; its state is not trustworthy.
    Stopped(Status),
}

/// What one turn did, besides its report.
pub struct TurnOutcome {
    pub report: Report,
    /// The `repr` of the final expression's value, when the turn ended with one (sessions).
    pub result: Option<String>,
    /// Set when this turn ended the interpreter.
    pub ended: Option<EndReason>,
    /// A limit or trap stopped the turn and the interpreter was rolled back to its state
    /// before it (`ended` is then `None`: the session goes on).
    pub rolled_back: bool,
}

/// Which host limit stopped a run, to be put into words with the limits in force.
#[derive(Debug, Clone, Copy)]
pub(super) enum Breach {
    Timeout,
    Cancelled,
    Fuel,
    Stack,
    MemoryRefused,
    /// The host's budget refused a `memory.grow`.
    HostMemory,
    /// The host's budget refused a write to a tmpfs working directory (ENOSPC).
    HostDisk,
    Refused,
    /// A tool limit (code mode).
    Tool(crate::tools::ToolBreach),
}

impl Breach {
    pub(super) fn describe(self, turn: &TurnLimits, all: &Limits) -> String {
        match self {
            Breach::Timeout => format!("wall-clock limit of {} ms reached", turn.timeout_ms),
            Breach::Cancelled => "the host cancelled the run".into(),
            Breach::Fuel => format!("fuel limit of {} units exhausted", turn.fuel),
            Breach::Stack => "the wasm stack overflowed (deep C-level recursion)".into(),
            Breach::MemoryRefused => format!(
                "linear memory growth past the limit of {} bytes was refused",
                all.memory_bytes
            ),
            Breach::HostMemory => "linear memory growth was refused: the server's memory budget, \
                shared by every sandbox and session, has no room left (the sandbox's own limit \
                was not reached)"
                .into(),
            Breach::HostDisk => "a write to the working directory failed with ENOSPC: it is \
                in memory (tmpfs) and the server's memory budget has no room left (the \
                sandbox's own disk limit was not reached)"
                .into(),
            Breach::Refused => "the interpreter refused the turn".into(),
            Breach::Tool(b) => b.to_string(),
        }
    }
}

pub(super) struct Classified {
    pub(super) status: Status,
    pub(super) exit_code: Option<i32>,
    pub(super) detail: Option<Breach>,
    pub(super) ended: Option<EndReason>,
    pub(super) trap_detail: Option<String>,
}

/// `memory_refused` says which limit refused a `memory.grow` during the call, if any;
/// `host_disk_refused` whether the host's budget refused a write.
pub(super) fn classify(
    result: &wasmtime::Result<i32>,
    memory_refused: Option<MemoryRefusal>,
    host_disk_refused: bool,
) -> Classified {
    let exited = |code: i32| if code == 0 { Status::Ok } else { Status::Error };
    let stopped = |status: Status, detail: Option<Breach>| Classified {
        status,
        exit_code: None,
        detail,
        ended: Some(EndReason::Stopped(status)),
        trap_detail: None,
    };
    match result {
        Ok(turn_abi::REFUSED) => stopped(Status::Trap, Some(Breach::Refused)),
        Ok(v) => {
            let code = v & turn_abi::STATUS_MASK;
            let mut status = exited(code);
            let mut detail = None;
            if status == Status::Error {
                match memory_refused {
                    Some(MemoryRefusal::OwnCap) => {
                        status = Status::MemoryExceeded;
                        detail = Some(Breach::MemoryRefused);
                    }
                    Some(MemoryRefusal::HostBudget) => {
                        status = Status::HostMemoryExceeded;
                        detail = Some(Breach::HostMemory);
                    }
                    None if host_disk_refused => detail = Some(Breach::HostDisk),
                    None => {}
                }
            }
            Classified {
                status,
                exit_code: Some(code),
                detail,
                ended: (v & turn_abi::ENDED != 0).then_some(EndReason::Quit),
                trap_detail: None,
            }
        }
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                return Classified {
                    status: exited(exit.0),
                    exit_code: Some(exit.0),
                    detail: None,
                    ended: Some(EndReason::Exit(exit.0)),
                    trap_detail: None,
                };
            }
            match e.downcast_ref::<Interrupted>() {
                Some(Interrupted::Timeout) => {
                    return stopped(Status::Timeout, Some(Breach::Timeout));
                }
                Some(Interrupted::Cancelled) => {
                    return stopped(Status::Cancelled, Some(Breach::Cancelled));
                }
                Some(Interrupted::Tool(b)) => {
                    let status = if b.is_wait() {
                        Status::ToolTimeout
                    } else {
                        Status::ToolLimit
                    };
                    return stopped(status, Some(Breach::Tool(*b)));
                }
                None => {}
            }
            match e.downcast_ref::<Trap>() {
                Some(Trap::OutOfFuel) => stopped(Status::FuelExhausted, Some(Breach::Fuel)),
                Some(Trap::StackOverflow) => stopped(Status::StackOverflow, Some(Breach::Stack)),
                Some(Trap::Interrupt) => stopped(Status::Timeout, Some(Breach::Timeout)),
                _ => Classified {
                    trap_detail: Some(format!("{e:#}")),
                    ..stopped(Status::Trap, None)
                },
            }
        }
    }
}
