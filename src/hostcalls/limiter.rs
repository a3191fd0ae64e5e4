//! The store's resource limiter: caps linear memory and tables, charges linear memory to the
//! host's budget, and records the peak.
//!
//! A template's instance starts with the template's own image in its linear memory (40 MiB
//! for `python`, 167 MiB for `scientific`): that is the server's cost, charged to the budget
//! like the rest, but not the caller's. `memory_bytes` is what the caller's code may take
//! beyond it ([`MemoryLimiter::count_from`]), so a limit means the same headroom on every
//! template. Any other module (the adversarial ones in `wasm/`) has its whole memory capped.
//!
//! Refusing growth (rather than trapping) is what lets the guest's `malloc` fail and Python
//! raise `MemoryError`, so a memory bomb is an ordinary, catchable outcome. Which limit refused
//! (the sandbox's own cap or the host's budget) is remembered so the report can name it.

use wasmtime::ResourceLimiter;

use crate::budget::Charge;
use crate::limits::MAX_LINEAR_MEMORY_BYTES;

/// A module's tables may grow to this many elements; the Python guest starts at 47 157.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Which limit refused a `memory.grow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryRefusal {
    /// The sandbox's own `memory_bytes`.
    OwnCap,
    /// The host's budget, shared by every sandbox of the process.
    HostBudget,
}

pub struct MemoryLimiter {
    /// The caller's `memory_bytes`: what may be taken beyond `start_bytes`.
    limit_bytes: u64,
    /// The memory the instance starts with that is not the caller's (its template's image);
    /// 0 unless [`MemoryLimiter::count_from`] said otherwise.
    start_bytes: u64,
    /// The linear memory's bytes, held against the host's budget (`None`: the host's own
    /// instances, which the budget does not count).
    host: Option<Charge>,
    /// The largest linear memory size granted so far.
    pub peak_bytes: usize,
    /// Which limit refused a growth (since the last [`MemoryLimiter::rearm`]).
    pub refused: Option<MemoryRefusal>,
}

impl MemoryLimiter {
    /// A limiter that lets the linear memory reach `limit_bytes` (beyond what
    /// [`MemoryLimiter::count_from`] sets aside), charging every byte to `host`.
    pub fn new(limit_bytes: u64, host: Option<Charge>) -> Self {
        MemoryLimiter {
            limit_bytes,
            start_bytes: 0,
            host,
            peak_bytes: 0,
            refused: None,
        }
    }

    /// Counts the limit from `start_bytes` (a template's starting linear memory): the hard
    /// cap becomes `start_bytes + limit_bytes`, never above [`MAX_LINEAR_MEMORY_BYTES`] (an
    /// engine pool slot). Called before the memory is made.
    pub fn count_from(&mut self, start_bytes: u64) {
        self.start_bytes = start_bytes;
    }

    /// Lets the caller's code take `extra` bytes more: a user template's layer, whose memory
    /// beyond its built-in template is not the caller's either (`sandbox::Layer`). Widening
    /// the limit rather than the start keeps it in the sandbox's `Limits`, so a session
    /// opened from a layer is restored under the same cap.
    pub fn widen(&mut self, extra: u64) {
        self.limit_bytes = self.limit_bytes.saturating_add(extra);
    }

    /// The largest the linear memory may grow: what it starts with plus the caller's limit.
    pub fn cap_bytes(&self) -> u64 {
        self.start_bytes
            .saturating_add(self.limit_bytes)
            .min(MAX_LINEAR_MEMORY_BYTES)
    }

    /// Starts a new turn's accounting of refusals (the cap and the peak are session-wide).
    pub fn rearm(&mut self) {
        self.refused = None;
    }

    /// An empty charge on the same budget, for what else the sandbox holds (its rollback
    /// checkpoint); `None` when its memory is not charged.
    pub fn host_sibling(&self) -> Option<Charge> {
        self.host.as_ref().map(Charge::sibling)
    }

    /// Bytes held against the host's budget.
    pub fn charged_bytes(&self) -> u64 {
        self.host.as_ref().map_or(0, Charge::bytes)
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.cap_bytes() {
            self.refused = Some(MemoryRefusal::OwnCap);
            return Ok(false);
        }
        // Called with `current == 0` when the memory is created, so the whole of it is
        // charged once and every growth after that.
        let more = desired.saturating_sub(current) as u64;
        if let Some(host) = &mut self.host
            && !host.grow(more)
        {
            self.refused = Some(MemoryRefusal::HostBudget);
            return Ok(false);
        }
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    // One module, one memory, one table: anything more is not our guest.
    fn instances(&self) -> usize {
        1
    }
    fn memories(&self) -> usize {
        1
    }
    fn tables(&self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn the_limit_counts_beyond_the_templates_image() {
        let mut l = MemoryLimiter::new(256 << 20, None);
        l.count_from(166 << 20);
        assert_eq!(l.cap_bytes(), 422 << 20);
        // Made at the image's size, then grown by the whole limit, and not a page more.
        assert!(l.memory_growing(0, 166 * MIB, None).unwrap());
        assert!(l.memory_growing(166 * MIB, 422 * MIB, None).unwrap());
        assert!(
            !l.memory_growing(422 * MIB, 422 * MIB + 65536, None)
                .unwrap()
        );
        assert_eq!(l.refused, Some(MemoryRefusal::OwnCap));
        assert_eq!(l.peak_bytes, 422 * MIB);
    }

    #[test]
    fn a_module_not_ours_has_its_whole_memory_capped_and_no_cap_passes_wasm32() {
        let mut l = MemoryLimiter::new(64 << 20, None);
        assert!(!l.memory_growing(0, 64 * MIB + 65536, None).unwrap());
        let mut big = MemoryLimiter::new(crate::limits::Limits::MAXIMUM.memory_bytes, None);
        big.count_from(1 << 30);
        assert_eq!(big.cap_bytes(), MAX_LINEAR_MEMORY_BYTES);
    }
}
