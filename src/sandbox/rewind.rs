//! Taking an interpreter back to one of its kept turns in place: the pages and files the
//! turns since then changed are written back, as that state has them, into the instance
//! the session already has, with its globals; no instance is made. It applies when the
//! state's shape is the one the instance is in (the same folders, links and open files, and
//! no more memory than the instance has); otherwise the caller restores a fresh instance
//! from the state ([`crate::vivarium::Vivarium::roll_back_to`]).
//!
//! Linear memory never shrinks: when it grew since the state, the instance keeps its size
//! and the pages past the state's end are zeroed (every page written since the state is
//! among those the turns since changed, or written since the refresh). The guest's
//! allocator, whose state is back to the state's, grows from its own end as it did: the
//! memory past it is only more room, charged as it was.
//!
//! What else may differ from the checkpoint is covered: pages a query wrote since the last
//! refresh (a completion runs guest code and is not kept) are written back too, from the
//! kernel's tracking; a working directory that moved since the refresh declines.

use super::capture::Baseline;
use super::interpreter::Interpreter;
use super::layer::write_globals;
use crate::hostcalls::fs_guard;
use crate::snapshot::PAGE_BYTES;

/// What [`Interpreter::rewind_in_place`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rewound {
    /// The interpreter is in the kept state.
    Done,
    /// It could not be done in place; the interpreter is untouched.
    NotInPlace,
    /// It failed part way: the interpreter must be replaced (or the session ended).
    Broken,
}

impl Interpreter {
    /// Puts this interpreter in its checkpoint's kept state `turn` in place (see the module
    /// documentation), the template's pristine instance `baseline` giving the pages that
    /// state has as the template's; the states after it are dropped.
    pub fn rewind_in_place(&mut self, turn: u64, baseline: &Baseline) -> Rewound {
        let Some(cp) = self.checkpoint.as_ref() else {
            return Rewound::NotInPlace;
        };
        let Some(plan) = cp.plan(turn) else {
            return Rewound::NotInPlace;
        };
        let live = &mut self.live;
        let size = live.memory.data_size(&live.store);
        let root = live.workdir.path().to_path_buf();
        if live.ended.is_some() || !plan.same_shape || plan.memory_bytes > size as u64 {
            return Rewound::NotInPlace;
        }
        // Only guest code run since the refresh (a query not kept) can have made the instance
        // differ from the checkpoint: then its files must be as read, and the pages it wrote
        // are written back too.
        let since_refresh = match cp.guest_ran() {
            false => Vec::new(),
            true if !cp.files_unchanged(&root) => return Rewound::NotInPlace,
            true => match cp.written_since_refresh(size) {
                Some(pages) => pages,
                None => return Rewound::NotInPlace,
            },
        };
        // Files first: the one step that can fail on the host.
        for (path, content) in &plan.files {
            let at = root.join(path);
            let done = match content {
                Some(c) => std::fs::write(&at, c),
                None => std::fs::remove_file(&at).or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                }),
            };
            if let Err(e) = done {
                tracing::warn!(error = %e, "rolling a session's files back in place");
                return Rewound::Broken;
            }
        }
        let template = baseline.memory.data(&baseline.store);
        let mem = live.memory.data_mut(&mut live.store);
        let page_of = |p: u32| -> Option<&[u8]> {
            let at = p as usize * PAGE_BYTES;
            template.get(at..at + PAGE_BYTES)
        };
        let mut write = |p: u32, content: Option<&[u8]>| {
            let at = p as usize * PAGE_BYTES;
            if let Some(dst) = mem.get_mut(at..at + PAGE_BYTES) {
                match content.or_else(|| page_of(p)) {
                    Some(src) => dst.copy_from_slice(src),
                    None => dst.fill(0),
                }
            }
        };
        let mut written: Vec<u32> = Vec::with_capacity(plan.pages.len());
        for (p, content) in &plan.pages {
            write(*p, content.as_deref());
            written.push(*p);
        }
        for p in since_refresh {
            if !plan.pages.contains_key(&p) {
                write(p, cp.page(p).map(|c| &c[..]));
                written.push(p);
            }
        }
        if write_globals(live, &plan.globals).is_err() {
            return Rewound::Broken;
        }
        live.turns_run = plan.turns_run;
        // The disk it holds is what the folder holds now.
        if !plan.files.is_empty() {
            let bytes = fs_guard::measure_dir(&root);
            let fs = &mut live.store.data_mut().fs;
            fs.charged_bytes = bytes;
            fs.hold_on_host(bytes, true);
        }
        let cp = self.checkpoint.as_mut().expect("checked above");
        // What was written back is the checkpoint's copy already: taken off the tracking, so
        // the next refresh does not copy it again (and each rollback does not write back
        // more than the last).
        written.sort_unstable();
        for (first, last) in runs(&written) {
            cp.forget_written(first, last);
        }
        cp.rewind(turn);
        cp.restamp(&root, plan.files.keys());
        Rewound::Done
    }
}

/// The runs of consecutive pages in `pages` (sorted), as `(first, last)`; past 64 runs, one
/// span from the first page to the last (a walk of each run costs a call, of the span one).
fn runs(pages: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &p in pages {
        match out.last_mut() {
            Some((_, last)) if *last + 1 >= p => *last = (*last).max(p),
            _ => out.push((p, p)),
        }
    }
    match (out.len() > 64, pages.first(), pages.last()) {
        (true, Some(&first), Some(&last)) => vec![(first, last)],
        _ => out,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_group_consecutive_pages_and_fall_back_to_one_span() {
        assert_eq!(super::runs(&[]), []);
        assert_eq!(
            super::runs(&[3, 4, 5, 9, 10, 20]),
            [(3, 5), (9, 10), (20, 20)]
        );
        let scattered: Vec<u32> = (0..100).map(|i| i * 3).collect();
        assert_eq!(super::runs(&scattered), [(0, 297)]);
    }
}
