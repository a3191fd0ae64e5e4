//! Our `poll_oneoff`, which replaces wasmtime-wasi's.
//!
//! The stock one sleeps in the host for the whole timeout, and an epoch deadline cannot
//! interrupt a host call: `time.sleep(60)` under a 1 s deadline would hold its thread for a
//! minute. Ours sleeps in slices of at most [`SLICE`], checks the run's deadline and cancel
//! flag between slices, and stops the guest as soon as either says so.
//!
//! The guest has no sockets and no pipes that can block, so fd subscriptions are answered as
//! ready at once (a read then returns what there is, or EOF).

use std::time::{Duration, Instant, SystemTime};

use wasmtime::Caller;

use super::errno;
use super::guest_memory::{memory, range, read_u32, read_u64};
use super::state::GuestState;

/// How long one sleep lasts before the deadline is looked at again.
const SLICE: Duration = Duration::from_millis(10);
/// Subscriptions one call may pass; more is a guest bug or an attack on host memory.
const MAX_SUBSCRIPTIONS: u32 = 4096;

const SUBSCRIPTION_SIZE: usize = 48;
const EVENT_SIZE: usize = 32;
const TAG_CLOCK: u8 = 0;
const TAG_FD_READ: u8 = 1;
const TAG_FD_WRITE: u8 = 2;
const CLOCK_REALTIME: u32 = 0;
const SUBCLOCKFLAGS_ABSTIME: u16 = 1;

struct Subscription {
    userdata: u64,
    tag: u8,
    /// For clocks: when it is due (`None`: too far away to represent, i.e. never).
    due: Option<Instant>,
}

/// `poll_oneoff(subs, events, nsubscriptions, nevents_out) -> errno`.
pub fn poll_oneoff(
    mut caller: Caller<'_, GuestState>,
    subs_ptr: i32,
    events_ptr: i32,
    nsubscriptions: i32,
    nevents_ptr: i32,
) -> wasmtime::Result<i32> {
    let n = nsubscriptions as u32;
    if n == 0 {
        return Ok(errno::INVAL);
    }
    if n > MAX_SUBSCRIPTIONS {
        return Ok(errno::NOMEM);
    }
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let n = n as usize;
    let now = Instant::now();
    let origin = caller.data().clock.origin;
    let subs = {
        let data = mem.data(&caller);
        let (Some(subs), Some(_), Some(_)) = (
            range(data, subs_ptr, n * SUBSCRIPTION_SIZE),
            range(data, events_ptr, n * EVENT_SIZE),
            range(data, nevents_ptr, 4),
        ) else {
            return Ok(errno::FAULT);
        };
        let bytes = &data[subs];
        let mut parsed = Vec::with_capacity(n);
        for i in 0..n {
            let s = &bytes[i * SUBSCRIPTION_SIZE..(i + 1) * SUBSCRIPTION_SIZE];
            let tag = s[8];
            let due = match tag {
                TAG_CLOCK => {
                    let clock_id = read_u32(s, 16);
                    let timeout = Duration::from_nanos(read_u64(s, 24));
                    let flags = u16::from_le_bytes([s[40], s[41]]);
                    clock_due(now, origin, clock_id, timeout, flags)
                }
                TAG_FD_READ | TAG_FD_WRITE => Some(now),
                _ => return Ok(errno::INVAL),
            };
            parsed.push(Subscription {
                userdata: read_u64(s, 0),
                tag,
                due,
            });
        }
        parsed
    };

    // Sleep until the earliest subscription is due, a slice at a time.
    let earliest = subs.iter().filter_map(|s| s.due).min();
    loop {
        caller.data().clock.check().map_err(wasmtime::Error::new)?;
        let now = Instant::now();
        match earliest {
            Some(due) if due <= now => break,
            Some(due) => std::thread::sleep((due - now).min(SLICE)),
            None => std::thread::sleep(SLICE),
        }
    }

    let now = Instant::now();
    let data = mem.data_mut(&mut caller);
    let mut written = 0usize;
    for s in subs.iter().filter(|s| s.due.is_some_and(|d| d <= now)) {
        let at = events_ptr as u32 as usize + written * EVENT_SIZE;
        let event = &mut data[at..at + EVENT_SIZE];
        event.fill(0);
        event[0..8].copy_from_slice(&s.userdata.to_le_bytes());
        // error (u16) stays 0 = success; type is the subscription's tag.
        event[10] = s.tag;
        written += 1;
    }
    let at = nevents_ptr as u32 as usize;
    data[at..at + 4].copy_from_slice(&(written as u32).to_le_bytes());
    Ok(errno::SUCCESS)
}

/// When a clock subscription is due, as an `Instant`.
fn clock_due(
    now: Instant,
    origin: Instant,
    clock_id: u32,
    timeout: Duration,
    flags: u16,
) -> Option<Instant> {
    if flags & SUBCLOCKFLAGS_ABSTIME == 0 {
        return now.checked_add(timeout);
    }
    if clock_id == CLOCK_REALTIME {
        let target = SystemTime::UNIX_EPOCH.checked_add(timeout)?;
        let wait = target
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        now.checked_add(wait)
    } else {
        // Monotonic (and the CPU-time clocks, which the guest cannot tell apart here):
        // counted from the sandbox's clock origin, as our monotonic clock reports it.
        origin.checked_add(timeout)
    }
}
