//! The store's resource limiter: caps linear memory and tables, and records the peak.
//!
//! Refusing growth (rather than trapping) is what lets the guest's `malloc` fail and Python
//! raise `MemoryError`, so a memory bomb is an ordinary, catchable outcome. Whether the cap was
//! hit is remembered so the report can name it.

use wasmtime::ResourceLimiter;

/// A module's tables may grow to this many elements; the Python guest starts at 47 157.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

pub struct MemoryLimiter {
    max_memory_bytes: usize,
    /// The largest linear memory size granted so far.
    pub peak_bytes: usize,
    /// Whether a growth was refused at the cap (since the last [`MemoryLimiter::rearm`]).
    pub refused: bool,
}

impl MemoryLimiter {
    pub fn new(max_memory_bytes: u64) -> Self {
        MemoryLimiter {
            max_memory_bytes: usize::try_from(max_memory_bytes).unwrap_or(usize::MAX),
            peak_bytes: 0,
            refused: false,
        }
    }

    /// Starts a new turn's accounting of refusals (the cap and the peak are session-wide).
    pub fn rearm(&mut self) {
        self.refused = false;
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory_bytes {
            self.refused = true;
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
