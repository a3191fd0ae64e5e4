//! Who sees a sandbox's output while it runs ([`LiveOutput`]): shared by the host's ends of
//! the guest's stdout and stderr (`sandbox::output`), which feed it, and the `host::call`
//! [`door`](super::door), through which the guest mutes a stream for the rest of a turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::lock;

pub use crate::report::{OutputObserver, StreamKind};

/// Who sees a sandbox's output live, shared by its two pipes and the host door: set for a
/// whole run, or for one session turn (a kernel's cell). The guest can mute a stream for
/// the rest of a turn by telling the door that what follows is not the program's own
/// output (a final value's echo, the uncaught exception's traceback): those still reach
/// the report, which says them another way. Muted only what is seen live; capture goes on.
#[derive(Default)]
pub struct LiveOutput {
    observer: Mutex<Option<OutputObserver>>,
    muted: [AtomicBool; 2],
}

impl LiveOutput {
    pub fn new(observer: Option<OutputObserver>) -> Arc<Self> {
        Arc::new(LiveOutput {
            observer: Mutex::new(observer),
            muted: Default::default(),
        })
    }

    /// Who sees the output from now on (`None`: nobody).
    pub fn set(&self, observer: Option<OutputObserver>) {
        *lock(&self.observer) = observer;
    }

    /// `kind` is not seen live again until [`LiveOutput::unmute`] (its pipe's next take).
    pub fn mute(&self, kind: StreamKind) {
        self.muted[kind as usize].store(true, Ordering::Relaxed);
    }

    /// `kind` is seen live again (a new turn).
    pub fn unmute(&self, kind: StreamKind) {
        self.muted[kind as usize].store(false, Ordering::Relaxed);
    }

    /// Shows `bytes` of `kind` to the observer, unless `kind` is muted.
    pub fn observe(&self, kind: StreamKind, bytes: &[u8]) {
        if self.muted[kind as usize].load(Ordering::Relaxed) {
            return;
        }
        // Cloned out, so the observer runs without the lock (it may take its own).
        let observer = lock(&self.observer).clone();
        if let Some(observer) = observer {
            observer(kind, bytes);
        }
    }
}
