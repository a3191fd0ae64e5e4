//! The store's resource limiter: caps linear memory and tables, charges linear memory to the
//! host's budget, and records the peak.
//!
//! Refusing growth (rather than trapping) is what lets the guest's `malloc` fail and Python
//! raise `MemoryError`, so a memory bomb is an ordinary, catchable outcome. Which limit refused
//! (the sandbox's own cap or the host's budget) is remembered so the report can name it.

use wasmtime::ResourceLimiter;

use crate::budget::Charge;

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
    max_memory_bytes: usize,
    /// The linear memory's bytes, held against the host's budget (`None`: the host's own
    /// instances, which the budget does not count).
    host: Option<Charge>,
    /// The largest linear memory size granted so far.
    pub peak_bytes: usize,
    /// Which limit refused a growth (since the last [`MemoryLimiter::rearm`]).
    pub refused: Option<MemoryRefusal>,
}

impl MemoryLimiter {
    pub fn new(max_memory_bytes: u64, host: Option<Charge>) -> Self {
        MemoryLimiter {
            max_memory_bytes: usize::try_from(max_memory_bytes).unwrap_or(usize::MAX),
            host,
            peak_bytes: 0,
            refused: None,
        }
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
        if desired > self.max_memory_bytes {
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
