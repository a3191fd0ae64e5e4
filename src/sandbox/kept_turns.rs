//! A session's kept turns: for each of its last turns, what that turn replaced in the
//! rollback checkpoint (the pages and files as they were, and the small rest of the state),
//! so the checkpoint can be taken back to the state after any kept turn. A refresh replaces
//! a page's or file's shared copy and never writes into one, so keeping the replaced copy
//! is all it takes: keeping a turn costs the pages and files it changed, nothing more.
//!
//! States are named by the turn after which the session was in them, in the supervisor's
//! numbering (a turn a limit stopped and rolled back has no state of its own). What the
//! host changes between turns (an upload, a file call) belongs to the state before the next
//! turn: it is folded into the newest record, never a state of its own.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::snapshot::PAGE_BYTES;
use crate::vocabulary::TurnHistory;

/// Which state: the turn after which the session was in it, when that turn ended, and the
/// first line of its code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnMark {
    pub turn: u64,
    pub at: SystemTime,
    pub code: String,
}

/// A kept state as a session lists it: its mark and what keeping it costs (the bytes of
/// the record that leads back to it; 0 for the state the session is in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptState {
    pub mark: TurnMark,
    pub bytes: u64,
}

/// What one step of the checkpoint replaced, keyed by page or path: `None` where there was
/// nothing (a page still the template's, a file not there yet).
pub(super) struct Replaced<F, R> {
    pub pages: BTreeMap<u32, Option<Arc<[u8]>>>,
    pub files: BTreeMap<String, Option<F>>,
    /// The rest of the state before the step (globals, sizes, folders, links, open files).
    pub rest: R,
}

impl<F: FileBytes, R> Replaced<F, R> {
    pub fn new(rest: R) -> Self {
        Replaced {
            pages: BTreeMap::new(),
            files: BTreeMap::new(),
            rest,
        }
    }

    /// Page `p` was `old` before the step (the first replacement of a page wins).
    pub fn page(&mut self, p: u32, old: Option<Arc<[u8]>>) {
        self.pages.entry(p).or_insert(old);
    }

    /// File `path` was `old` before the step.
    pub fn file(&mut self, path: &str, old: Option<F>) {
        if !self.files.contains_key(path) {
            self.files.insert(path.to_string(), old);
        }
    }

    fn bytes(&self) -> u64 {
        let pages = self.pages.values().flatten().count() * PAGE_BYTES;
        let files: u64 = self.files.values().flatten().map(|f| f.len()).sum();
        pages as u64 + files
    }

    /// Folds a later step into this one: what it replaced that this one did not is what
    /// this one's state held. This one's `rest` stays (it is the older).
    fn absorb(&mut self, later: Replaced<F, R>) {
        for (p, old) in later.pages {
            self.page(p, old);
        }
        for (path, old) in later.files {
            self.files.entry(path).or_insert(old);
        }
    }
}

/// A file's entry in the checkpoint, as far as its cost goes.
pub(super) trait FileBytes {
    fn len(&self) -> u64;
}

/// One record: the state `to` and what leads back to it from the state after it.
struct Record<F, R> {
    to: TurnMark,
    replaced: Replaced<F, R>,
    bytes: u64,
}

/// A checkpoint's kept turns (see the module documentation).
pub(super) struct KeptTurns<F, R> {
    /// Oldest first; each leads from the state after it (the next record's, or the one the
    /// checkpoint is in) back to its `to`.
    records: VecDeque<Record<F, R>>,
    /// The state the checkpoint is in, once a turn named it.
    now: Option<TurnMark>,
    /// The turn running now: the state its refresh makes.
    next: Option<TurnMark>,
    /// When the checkpoint began (the time of the first state, before a turn names it).
    began: SystemTime,
    keep: TurnHistory,
    /// The last turn alone was past the byte budget: nothing before it is kept.
    too_large: bool,
}

impl<F: FileBytes, R> KeptTurns<F, R> {
    pub fn new() -> Self {
        KeptTurns {
            records: VecDeque::new(),
            now: None,
            next: None,
            began: SystemTime::now(),
            keep: TurnHistory::DEFAULT,
            too_large: false,
        }
    }

    /// Whether any step is recorded at all (a session that keeps one turn records none).
    pub fn recording(&self) -> bool {
        self.keep.turns > 1
    }

    /// Turn `number` (its `code`) is about to run under `keep`; its refresh makes its state.
    pub fn begin(&mut self, number: u64, code: &str, keep: TurnHistory) {
        self.keep = keep;
        self.too_large = false;
        self.name(number.saturating_sub(1));
        self.next = Some(TurnMark {
            turn: number,
            at: self.began,
            code: crate::vocabulary::first_line(code),
        });
        self.evict();
    }

    /// Names the state it is in, unless a turn did: the session's turn count `current`
    /// (a checkpoint begun by an open, a restore or a wake knows no number of its own).
    pub fn name(&mut self, current: u64) {
        if self.now.is_none() {
            self.now = Some(TurnMark {
                turn: current,
                at: self.began,
                code: String::new(),
            });
        }
    }

    /// The turn begun did not make a state (a limit stopped it; the session is as before).
    pub fn abandon(&mut self) {
        self.next = None;
    }

    /// A step of the checkpoint happened: a turn's (which makes a new state) or the host's
    /// (which belongs to the state it is in).
    pub fn record(&mut self, replaced: Replaced<F, R>) {
        match self.next.take() {
            Some(mut mark) => {
                mark.at = SystemTime::now();
                let to = self
                    .now
                    .replace(mark)
                    .expect("begin names the state before");
                let bytes = replaced.bytes();
                self.too_large = bytes > self.keep.bytes;
                if self.too_large {
                    self.records.clear();
                } else {
                    self.records.push_back(Record {
                        to,
                        replaced,
                        bytes,
                    });
                }
            }
            None => {
                if let Some(last) = self.records.back_mut() {
                    last.replaced.absorb(replaced);
                    last.bytes = last.replaced.bytes();
                }
            }
        }
        self.evict();
    }

    /// Whether the last turn alone was past the byte budget (so nothing before it is kept).
    pub fn last_too_large(&self) -> bool {
        self.too_large
    }

    fn evict(&mut self) {
        let most = self.keep.turns.saturating_sub(1) as usize;
        while self.records.len() > most || self.bytes() > self.keep.bytes {
            self.records.pop_front();
        }
    }

    /// Drops every state before the one it is in (the host's budget has no room for them).
    pub fn drop_records(&mut self) {
        self.records.clear();
    }

    /// Bytes the records hold.
    pub fn bytes(&self) -> u64 {
        self.records.iter().map(|r| r.bytes).sum()
    }

    /// Every kept state, oldest first, the one the checkpoint is in last.
    pub fn list(&self) -> Vec<KeptState> {
        let mut out: Vec<KeptState> = self
            .records
            .iter()
            .map(|r| KeptState {
                mark: r.to.clone(),
                bytes: r.bytes,
            })
            .collect();
        let now = self.now.clone().unwrap_or(TurnMark {
            turn: 0,
            at: self.began,
            code: String::new(),
        });
        out.push(KeptState {
            mark: now,
            bytes: 0,
        });
        out
    }

    /// The state the checkpoint is in, when a turn named it.
    pub fn now(&self) -> Option<u64> {
        self.now.as_ref().map(|m| m.turn)
    }

    /// The records that lead from the state the checkpoint is in back to state `turn`,
    /// newest first; `None` when that state is not kept. Empty for the state it is in.
    pub fn path_to(&self, turn: u64) -> Option<impl Iterator<Item = &Replaced<F, R>>> {
        let steps = if self.now() == Some(turn) {
            0
        } else {
            self.records.len() - self.records.iter().rposition(|r| r.to.turn == turn)?
        };
        Some(self.records.iter().rev().take(steps).map(|r| &r.replaced))
    }

    /// Takes the records that lead back to state `turn` off (newest first), the checkpoint
    /// being put in that state by the caller; `None` when it is not kept.
    pub fn rewind(&mut self, turn: u64) -> Option<Vec<Replaced<F, R>>> {
        if self.now() == Some(turn) {
            return Some(Vec::new());
        }
        let at = self.records.iter().rposition(|r| r.to.turn == turn)?;
        let mut taken: Vec<Record<F, R>> = self.records.drain(at..).collect();
        taken.reverse();
        self.now = taken.last().map(|r| r.to.clone());
        self.next = None;
        self.too_large = false;
        Some(taken.into_iter().map(|r| r.replaced).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl FileBytes for Vec<u8> {
        fn len(&self) -> u64 {
            Vec::len(self) as u64
        }
    }

    fn page(b: u8) -> Option<Arc<[u8]>> {
        Some(Arc::from(vec![b; PAGE_BYTES]))
    }

    fn turn(kept: &mut KeptTurns<Vec<u8>, u64>, n: u64, pages: &[(u32, Option<Arc<[u8]>>)]) {
        let keep = kept.keep;
        kept.begin(n, &format!("turn {n}\nsecond line"), keep);
        let mut r = Replaced::new(n);
        for (p, old) in pages {
            r.page(*p, old.clone());
        }
        kept.record(r);
    }

    #[test]
    fn keeps_the_last_turns_within_their_count_and_bytes() {
        let mut kept = KeptTurns::<Vec<u8>, u64>::new();
        kept.keep = TurnHistory {
            turns: 4,
            bytes: 3 * PAGE_BYTES as u64,
        };
        for n in 1..=6 {
            turn(&mut kept, n, &[(n as u32, page(n as u8))]);
        }
        let turns: Vec<u64> = kept.list().iter().map(|s| s.mark.turn).collect();
        assert_eq!(turns, [3, 4, 5, 6]);
        assert_eq!(kept.list()[3].bytes, 0);
        assert_eq!(kept.list()[2].mark.code, "turn 5");
        // A page that was the template's before costs nothing to keep.
        turn(&mut kept, 7, &[(9, None)]);
        assert_eq!(kept.list()[0].mark.turn, 4);
        assert_eq!(kept.bytes(), 2 * PAGE_BYTES as u64);
        // The byte budget evicts the oldest first.
        turn(&mut kept, 8, &[(1, page(1)), (2, page(2)), (3, page(3))]);
        let turns: Vec<u64> = kept.list().iter().map(|s| s.mark.turn).collect();
        assert_eq!(turns, [6, 7, 8]);
        // A turn alone past the budget keeps nothing before it, and says so.
        let four: Vec<_> = (1..=4).map(|p| (p, page(p as u8))).collect();
        turn(&mut kept, 9, &four);
        assert!(kept.last_too_large());
        assert_eq!(kept.list().len(), 1);
        assert!(kept.path_to(8).is_none());
    }

    #[test]
    fn host_steps_fold_into_the_state_before_the_next_turn() {
        let mut kept = KeptTurns::<Vec<u8>, u64>::new();
        turn(&mut kept, 1, &[(1, None)]);
        turn(&mut kept, 2, &[(1, page(1))]);
        // An upload after turn 2 changes page 1 again and page 5: state 1 must still see
        // page 1 as turn 1 left it, and page 5 as it was.
        let mut upload = Replaced::new(99);
        upload.page(1, page(2));
        upload.page(5, page(7));
        kept.record(upload);
        let back: Vec<_> = kept.path_to(1).unwrap().collect();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].pages[&1].as_deref(), page(1).as_deref());
        assert_eq!(back[0].pages[&5].as_deref(), page(7).as_deref());
        assert_eq!(back[0].rest, 2, "the older rest stays");
        // A turn that a limit stopped has no state; the next turn's leads back to turn 2.
        let keep = kept.keep;
        kept.begin(3, "x", keep);
        kept.abandon();
        turn(&mut kept, 4, &[(3, None)]);
        let turns: Vec<u64> = kept.list().iter().map(|s| s.mark.turn).collect();
        assert_eq!(turns, [0, 1, 2, 4]);
        assert!(kept.path_to(3).is_none());
        assert_eq!(kept.path_to(0).unwrap().count(), 3);
        let taken = kept.rewind(1).unwrap();
        assert_eq!(taken.len(), 2);
        assert_eq!(kept.now(), Some(1));
        let turns: Vec<u64> = kept.list().iter().map(|s| s.mark.turn).collect();
        assert_eq!(turns, [0, 1]);
    }
}
