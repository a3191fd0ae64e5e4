//! A resident session's life, as one enum: the only state that says what it can do now.
//! [`super::Session`] keeps it under its one lock; every change is one of the transitions
//! below, and each hands back what the session lets go of ([`Remains`]) so that nothing is
//! released twice or kept by a session that can no longer use it.
//!
//! ```text
//!            begin                    finish(no end)
//!    Idle ──────────▶ Busy ────────────────────────────▶ Idle
//!     │                │  finish(end), end  ──────────▶ Ended
//!     │ end            │  close             ──────────▶ Closed
//!     ▼                │  retire (hibernated) ─────────▶ Closed
//!   Ended ──close──▶ Closed
//! ```
//!
//! - `Idle`: its interpreter is in it; it takes a turn, a file operation or a capture.
//! - `Busy`: one use has the interpreter (a turn, a file operation, a query, a capture for a
//!   snapshot or for hibernation); a second use is refused (409). Only that use ends it.
//! - `Ended`: its interpreter is gone (the code quit, a limit stopped it, its worker died);
//!   it says why to every request until it expires.
//! - `Closed`: deleted, expired, shut down, given up to another node, or hibernated; its id
//!   is answered elsewhere (404, 410, or the registry's hibernated sessions).
//!
//! A session's two other states are not here because it is not resident in them: asleep in
//! the store (`Registry`'s hibernated map), and being brought back (a gate per id in
//! `runner/placement.rs`, until `Registry::insert` makes it `Idle`).
//!
//! Generic over the interpreter `I` and what the session holds `H` (its memory reserve and
//! place under the caps), so its tests run with tokens instead of workers.

use super::info::EndInfo;

/// Where a resident session is in its life.
#[derive(Debug)]
pub enum Phase<I, H> {
    /// Its interpreter is in it, with what it holds.
    Idle { interp: I, held: H },
    /// One use has its interpreter; it still holds its places.
    Busy { held: H },
    /// It takes no more uses, and says why; it holds nothing.
    Ended(EndInfo),
    /// It is gone from here; it holds nothing.
    Closed,
}

/// Why [`Phase::begin`] found no interpreter to hand out.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another use has it.
    Busy,
    /// The session ended: why, in words.
    Ended(String),
    /// The session is closed.
    Closed,
}

/// What a transition lets go of: dropping it frees them (the interpreter's directory, the
/// memory reserve, the places under the caps).
#[derive(Debug)]
pub struct Remains<I, H> {
    pub interp: Option<I>,
    pub held: Option<H>,
}

impl<I, H> Remains<I, H> {
    fn nothing() -> Self {
        Remains {
            interp: None,
            held: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.interp.is_none() && self.held.is_none()
    }
}

impl<I, H> Phase<I, H> {
    /// A session that just opened (or came back): idle, with its interpreter.
    pub fn new(interp: I, held: H) -> Self {
        Phase::Idle { interp, held }
    }

    /// Idle → Busy: hands the interpreter to one use.
    pub fn begin(&mut self) -> Result<I, Refusal> {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Idle { interp, held } => {
                *self = Phase::Busy { held };
                Ok(interp)
            }
            other => {
                let refusal = match &other {
                    Phase::Busy { .. } => Refusal::Busy,
                    Phase::Ended(end) => Refusal::Ended(end.message.clone()),
                    Phase::Closed | Phase::Idle { .. } => Refusal::Closed,
                };
                *self = other;
                Err(refusal)
            }
        }
    }

    /// Busy → Idle, with the interpreter back; or Busy → Ended when the use ended it
    /// (`end`). A session that ended or closed while the use ran stays so (the first reason
    /// it ended stands) and the interpreter is let go.
    pub fn finish(&mut self, interp: I, end: Option<EndInfo>) -> Remains<I, H> {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Busy { held } => match end {
                None => {
                    *self = Phase::Idle { interp, held };
                    Remains::nothing()
                }
                Some(end) => {
                    *self = Phase::Ended(end);
                    Remains {
                        interp: Some(interp),
                        held: Some(held),
                    }
                }
            },
            other => {
                // Idle here would be a second interpreter, which `Session::begin` makes
                // impossible (one use at a time); it is let go rather than kept.
                debug_assert!(!matches!(other, Phase::Idle { .. }), "finished twice");
                *self = other;
                Remains {
                    interp: Some(interp),
                    held: None,
                }
            }
        }
    }

    /// → Ended (its interpreter is gone: its worker died). What it held goes now; a
    /// running use's interpreter goes when the use finishes. Ended or closed already: no
    /// change.
    pub fn end(&mut self, why: EndInfo) -> Remains<I, H> {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Idle { interp, held } => {
                *self = Phase::Ended(why);
                Remains {
                    interp: Some(interp),
                    held: Some(held),
                }
            }
            Phase::Busy { held } => {
                *self = Phase::Ended(why);
                Remains {
                    interp: None,
                    held: Some(held),
                }
            }
            other => {
                *self = other;
                Remains::nothing()
            }
        }
    }

    /// → Closed, from any phase; also whether a use was running (it is to be stopped, and
    /// its interpreter goes when it finishes).
    pub fn close(&mut self) -> (Remains<I, H>, bool) {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Idle { interp, held } => (
                Remains {
                    interp: Some(interp),
                    held: Some(held),
                },
                false,
            ),
            Phase::Busy { held } => (
                Remains {
                    interp: None,
                    held: Some(held),
                },
                true,
            ),
            Phase::Ended(_) | Phase::Closed => (Remains::nothing(), false),
        }
    }

    /// Busy → Closed by the use itself, which moved the session elsewhere (hibernation):
    /// everything goes. `Err` when the session ended or closed while the use ran: then it
    /// must not be moved anywhere (a deleted session would come back).
    pub fn retire(&mut self, interp: I) -> Result<Remains<I, H>, Remains<I, H>> {
        match std::mem::replace(self, Phase::Closed) {
            Phase::Busy { held } => Ok(Remains {
                interp: Some(interp),
                held: Some(held),
            }),
            other => {
                *self = other;
                Err(Remains {
                    interp: Some(interp),
                    held: None,
                })
            }
        }
    }

    pub fn is_idle(&self) -> bool {
        matches!(self, Phase::Idle { .. })
    }

    pub fn is_busy(&self) -> bool {
        matches!(self, Phase::Busy { .. })
    }

    pub fn ended(&self) -> Option<&EndInfo> {
        match self {
            Phase::Ended(end) => Some(end),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier, Mutex};

    use super::*;

    /// A resource that counts its drops: each must be let go exactly once.
    #[derive(Debug)]
    struct Token(Arc<AtomicUsize>);

    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    struct Counts {
        interp: Arc<AtomicUsize>,
        held: Arc<AtomicUsize>,
    }

    impl Counts {
        fn new() -> Self {
            Counts {
                interp: Arc::default(),
                held: Arc::default(),
            }
        }

        fn idle(&self) -> Phase<Token, Token> {
            Phase::new(Token(self.interp.clone()), Token(self.held.clone()))
        }

        fn freed(&self) -> (usize, usize) {
            (
                self.interp.load(Ordering::SeqCst),
                self.held.load(Ordering::SeqCst),
            )
        }
    }

    fn ended(why: &str) -> EndInfo {
        EndInfo::host_error(why.to_string())
    }

    fn name<I, H>(p: &Phase<I, H>) -> &'static str {
        match p {
            Phase::Idle { .. } => "idle",
            Phase::Busy { .. } => "busy",
            Phase::Ended(_) => "ended",
            Phase::Closed => "closed",
        }
    }

    /// Each of the four phases, for the transition table.
    fn each(c: &Counts) -> Vec<(Phase<Token, Token>, Option<Token>)> {
        let idle = c.idle();
        let mut busy = c.idle();
        let running = busy.begin().unwrap();
        let mut end = c.idle();
        drop(end.end(ended("worker lost")));
        let mut closed = c.idle();
        drop(closed.close());
        vec![
            (idle, None),
            (busy, Some(running)),
            (end, None),
            (closed, None),
        ]
    }

    #[test]
    fn begin_hands_the_interpreter_out_of_idle_only() {
        let c = Counts::new();
        let want = [
            ("idle", Ok("busy")),
            ("busy", Err(Refusal::Busy)),
            ("ended", Err(Refusal::Ended("worker lost".into()))),
            ("closed", Err(Refusal::Closed)),
        ];
        for ((mut p, running), (from, to)) in each(&c).into_iter().zip(want) {
            assert_eq!(name(&p), from);
            let before = c.freed();
            let got = p.begin();
            assert_eq!(c.freed(), before, "begin from {from} lets go of nothing");
            assert_eq!(got.map(|_interp| name(&p)), to, "begin from {from}");
            drop(running);
        }
        // Every interpreter and every held thing, handed out or not, is freed once.
        assert_eq!(c.freed(), (4, 4));
    }

    #[test]
    fn finish_puts_back_or_ends_and_lets_go_of_the_rest() {
        // Busy, no end → Idle, nothing freed.
        let c = Counts::new();
        let mut p = c.idle();
        let i = p.begin().unwrap();
        assert!(p.finish(i, None).is_empty());
        assert!(p.is_idle());
        assert_eq!(c.freed(), (0, 0));

        // Busy, ended by the use → Ended, everything freed.
        let mut p = c.idle();
        let i = p.begin().unwrap();
        drop(p.finish(i, Some(ended("quit"))));
        assert_eq!(p.ended().map(|e| e.message.as_str()), Some("quit"));
        assert_eq!(c.freed(), (1, 1));

        // Ended meanwhile (its worker died) → stays Ended with the first reason; the
        // interpreter goes, what it held went with the end.
        let c = Counts::new();
        let mut p = c.idle();
        let i = p.begin().unwrap();
        let at_end = p.end(ended("worker lost"));
        assert!(at_end.interp.is_none() && at_end.held.is_some());
        drop(at_end);
        let r = p.finish(i, Some(ended("quit")));
        assert!(r.interp.is_some() && r.held.is_none());
        drop(r);
        assert_eq!(p.ended().unwrap().message, "worker lost");
        assert_eq!(c.freed(), (1, 1));

        // Closed meanwhile → stays Closed; the interpreter goes at the finish.
        let c = Counts::new();
        let mut p = c.idle();
        let i = p.begin().unwrap();
        let (r, was_busy) = p.close();
        assert!(was_busy);
        drop(r);
        assert_eq!(c.freed(), (0, 1));
        drop(p.finish(i, None));
        assert_eq!(name(&p), "closed");
        assert_eq!(c.freed(), (1, 1));
    }

    #[test]
    fn end_and_close_from_every_phase() {
        let c = Counts::new();
        // (from, after end, after close, busy at close)
        let want = [
            ("idle", "ended", "closed", false),
            ("busy", "ended", "closed", true),
            ("ended", "ended", "closed", false),
            ("closed", "closed", "closed", false),
        ];
        for ((p, running), (from, after_end, _, _)) in each(&c).into_iter().zip(want) {
            let mut p = p;
            drop(p.end(ended("later")));
            assert_eq!(name(&p), after_end, "end from {from}");
            if from != "idle" && from != "busy" {
                assert_ne!(p.ended().map(|e| e.message.as_str()), Some("later"));
            }
            drop(running);
        }
        for ((p, running), (from, _, after_close, busy)) in each(&c).into_iter().zip(want) {
            let mut p = p;
            let (_, was_busy) = p.close();
            assert_eq!(
                (name(&p), was_busy),
                (after_close, busy),
                "close from {from}"
            );
            drop(running);
        }
        // Each phase made twice: two interpreters and two helds apiece, all freed once.
        assert_eq!(c.freed(), (8, 8));
    }

    #[test]
    fn retire_moves_a_busy_session_only() {
        let c = Counts::new();
        let mut p = c.idle();
        let i = p.begin().unwrap();
        let r = p.retire(i).expect("busy: it moves");
        assert!(r.interp.is_some() && r.held.is_some());
        drop(r);
        assert_eq!(name(&p), "closed");
        assert_eq!(c.freed(), (1, 1));

        // Closed while the capture ran (a DELETE): it must not move.
        let mut p = c.idle();
        let i = p.begin().unwrap();
        drop(p.close());
        assert!(p.retire(i).is_err());
        assert_eq!(name(&p), "closed");
        assert_eq!(c.freed(), (2, 2));
    }

    /// A turn, a hibernation, a close and a take-over (a close by the lease's rule) race
    /// over one session, many times: at most one use runs at a time, the session ends
    /// closed, and its interpreter and what it held are each let go exactly once.
    #[test]
    fn racing_uses_and_closes_free_everything_once() {
        for round in 0..200 {
            let c = Counts::new();
            let phase = Arc::new(Mutex::new(c.idle()));
            let running = Arc::new(AtomicUsize::new(0));
            let start = Arc::new(Barrier::new(4));
            let user = |retire: bool| {
                let (phase, running, start) = (phase.clone(), running.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..20 {
                        let Ok(interp) = phase.lock().unwrap().begin() else {
                            std::thread::yield_now();
                            continue;
                        };
                        assert_eq!(running.fetch_add(1, Ordering::SeqCst), 0, "two uses");
                        std::thread::yield_now();
                        running.fetch_sub(1, Ordering::SeqCst);
                        let mut p = phase.lock().unwrap();
                        if retire {
                            let _ = p.retire(interp);
                            return;
                        }
                        drop(p.finish(interp, None));
                    }
                })
            };
            let closer = |end: bool| {
                let (phase, start) = (phase.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    std::thread::yield_now();
                    let mut p = phase.lock().unwrap();
                    if end {
                        drop(p.end(ended("worker lost")));
                    } else {
                        drop(p.close());
                    }
                })
            };
            let threads = [
                user(false),
                user(true),
                closer(round % 2 == 0),
                closer(false),
            ];
            for t in threads {
                t.join().unwrap();
            }
            let p = phase.lock().unwrap();
            assert_eq!(name(&p), "closed", "round {round}");
            assert_eq!(c.freed(), (1, 1), "round {round}: freed once each");
        }
    }
}
