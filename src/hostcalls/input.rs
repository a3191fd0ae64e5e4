//! `input()` in a session whose client can answer (a kernel's `input_request`): the guest asks
//! through the door ([`crate::guest::INPUT_TAG`] and the prompt), the host hands the prompt to
//! the turn's [`InputAsker`] and waits for the line on the guest thread, never past the turn's
//! deadline or an interrupt. Without an asker the door answers "no host" and `input()` reads
//! the turn's stdin as before.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// The longest line taken as an answer (longer ones are cut).
pub const MAX_INPUT_BYTES: usize = 1 << 20;

pub use crate::vocabulary::InputAsker;

/// How often a wait for an answer looks at the deadline and the cancel flag.
const POLL: Duration = Duration::from_millis(20);

/// Waits for the answer on `rx` while `running()` (the turn's clock: not past its deadline,
/// not interrupted); `None` once it is not, or when the asker went away (then the guest
/// traps at its next tick, or reads an empty stdin).
pub fn wait(rx: &Receiver<String>, running: impl Fn() -> bool) -> Option<String> {
    loop {
        if !running() {
            return None;
        }
        match rx.recv_timeout(POLL) {
            Ok(mut line) => {
                if line.len() > MAX_INPUT_BYTES {
                    let mut cut = MAX_INPUT_BYTES;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                return Some(line);
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
}
