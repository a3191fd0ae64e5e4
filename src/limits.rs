//! Every limit a sandbox runs under, with its default and its maximum.
//!
//! A caller (CLI flag, HTTP body) asks for a [`LimitsRequest`]; [`LimitsRequest::resolve`]
//! fills the gaps from the defaults and refuses anything above the maxima, naming the field.
//! The sandbox only ever sees a resolved [`Limits`]: every value is set and was checked.

use serde::{Deserialize, Serialize};

/// Fuel the guest burns per second of CPU, measured on the 2-core CI machine
/// (`docs/guides/limits.md`, "Fuel"): pure-Python loops burn 7-10 G/s, C-heavy code (numpy,
/// hashlib) 15-20 G/s.
/// The interpreter's own rate is the one a typical snippet sees, so it sets the default.
pub const FUEL_PER_CPU_SECOND: u64 = 10_000_000_000;

/// The least `memory_bytes` a caller may ask for: room for the hidden set-up turn and a small
/// program beyond the template's own image (below it a sandbox could do nothing useful).
pub const MIN_MEMORY_BYTES: u64 = 40 << 20;

/// The largest linear memory a guest can have: wasm32's 4 GiB, which is also the size of an
/// engine pool slot (`EngineOptions::max_memory_bytes`).
pub const MAX_LINEAR_MEMORY_BYTES: u64 = 4 << 30;

/// What a pool slot keeps for a template's own image (its starting linear memory: 40 MiB for
/// `python`, 167 MiB for `scientific`), since `memory_bytes` counts beyond it: the slot less
/// this is the memory maximum. `tests/sandbox/memory_headroom.rs` checks every template fits.
pub const TEMPLATE_ROOM_BYTES: u64 = 512 << 20;

/// The largest linear memory a sandbox under `memory_bytes` can have, on any template (its
/// image, at most [`TEMPLATE_ROOM_BYTES`], plus `memory_bytes`): what a session image read
/// back is held to before the restore checks it against its own template.
pub fn linear_memory_bound(memory_bytes: u64) -> u64 {
    memory_bytes
        .saturating_add(TEMPLATE_ROOM_BYTES)
        .min(MAX_LINEAR_MEMORY_BYTES)
}

/// Resolved limits of one execution or one session turn (every field set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Limits {
    /// Wall-clock deadline, checked every ~1 ms of guest CPU and as host calls return.
    /// Sleeps and waits stop at it.
    pub timeout_ms: u64,
    /// Wasmtime fuel (about one unit per wasm operator).
    pub fuel: u64,
    /// Memory the caller's code may take beyond what the sandbox starts with (its template's
    /// image, the server's cost); growth past it fails, so Python raises MemoryError.
    pub memory_bytes: u64,
    /// Bytes kept of stdout, and separately of stderr; the rest is dropped and reported.
    pub output_bytes: u64,
    /// Bytes the guest may hold in its working directory (file contents plus 4 KiB an entry).
    pub disk_bytes: u64,
    /// Descriptors the guest may hold at once (stdio and preopens included), then EMFILE.
    pub open_files: u32,
}

impl Limits {
    /// The defaults: what a caller gets when it asks for nothing.
    pub const DEFAULT: Limits = Limits {
        timeout_ms: 30_000,
        fuel: 30 * FUEL_PER_CPU_SECOND,
        memory_bytes: 512 << 20,
        output_bytes: 1 << 20,
        disk_bytes: 100 << 20,
        open_files: 256,
    };

    /// The maxima a caller may ask for. The memory maximum plus a template's image fits a
    /// pooled memory slot ([`MAX_LINEAR_MEMORY_BYTES`], [`TEMPLATE_ROOM_BYTES`]).
    pub const MAXIMUM: Limits = Limits {
        timeout_ms: 10 * 60_000,
        fuel: 600 * FUEL_PER_CPU_SECOND,
        memory_bytes: MAX_LINEAR_MEMORY_BYTES - TEMPLATE_ROOM_BYTES,
        output_bytes: 64 << 20,
        disk_bytes: 4 << 30,
        open_files: 4096,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Limits as a caller asks for them: any field left out takes the host's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[derive(Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsRequest {
    /// Wall-clock deadline in milliseconds (default 30000, max 600000).
    pub timeout_ms: Option<u64>,
    /// Wasmtime fuel, about one unit per wasm operator (~10 G per CPU second; default 300 G).
    pub fuel: Option<u64>,
    /// Memory the code may use beyond the template's own image (default 512 MiB, at least
    /// 40 MiB, at most 3.5 GiB).
    pub memory_bytes: Option<u64>,
    /// Bytes kept of stdout and, separately, of stderr (default 1 MiB).
    pub output_bytes: Option<u64>,
    /// Bytes the guest may keep in its working directory (default 100 MiB).
    pub disk_bytes: Option<u64>,
    /// Descriptors the guest may hold at once (default 256).
    pub open_files: Option<u32>,
}

/// A limit asked for that cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("limits.{field} = {value} is above the maximum of {max}")]
    AboveMaximum {
        field: &'static str,
        value: u64,
        max: u64,
    },
    #[error("limits.{field} = {value} is below the minimum of {min}")]
    BelowMinimum {
        field: &'static str,
        value: u64,
        min: u64,
    },
}

impl LimitError {
    /// The request field at fault, for error bodies that name it.
    pub fn field(&self) -> &'static str {
        match self {
            LimitError::AboveMaximum { field, .. } | LimitError::BelowMinimum { field, .. } => {
                field
            }
        }
    }
}

/// `asked`, else `default`; refused above `max` or below `min`, naming `field`.
fn pick(
    field: &'static str,
    asked: Option<u64>,
    default: u64,
    max: u64,
    min: u64,
) -> Result<u64, LimitError> {
    let value = asked.unwrap_or(default);
    if value > max {
        return Err(LimitError::AboveMaximum { field, value, max });
    }
    if value < min {
        return Err(LimitError::BelowMinimum { field, value, min });
    }
    Ok(value)
}

impl LimitsRequest {
    /// Fills unset fields from `defaults` and checks every value against `maximum`.
    pub fn resolve(&self, defaults: &Limits, maximum: &Limits) -> Result<Limits, LimitError> {
        Ok(Limits {
            timeout_ms: pick(
                "timeout_ms",
                self.timeout_ms,
                defaults.timeout_ms,
                maximum.timeout_ms,
                1,
            )?,
            fuel: pick("fuel", self.fuel, defaults.fuel, maximum.fuel, 1)?,
            memory_bytes: pick(
                "memory_bytes",
                self.memory_bytes,
                defaults.memory_bytes,
                maximum.memory_bytes,
                MIN_MEMORY_BYTES,
            )?,
            output_bytes: pick(
                "output_bytes",
                self.output_bytes,
                defaults.output_bytes,
                maximum.output_bytes,
                0,
            )?,
            disk_bytes: pick(
                "disk_bytes",
                self.disk_bytes,
                defaults.disk_bytes,
                maximum.disk_bytes,
                0,
            )?,
            // stdio (3) and the preopens (3) are descriptors too; fewer could open nothing.
            open_files: pick(
                "open_files",
                self.open_files.map(u64::from),
                defaults.open_files.into(),
                maximum.open_files.into(),
                8,
            )? as u32,
        })
    }
}

/// Per-turn limits; memory and disk are for the sandbox's whole life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnLimits {
    /// Wall-clock deadline of the turn, in milliseconds.
    pub timeout_ms: u64,
    /// Fuel the turn may burn (about one unit per wasm operator).
    pub fuel: u64,
    /// Bytes kept of the turn's stdout and, separately, of its stderr.
    pub output_bytes: u64,
}

impl From<&Limits> for TurnLimits {
    fn from(l: &Limits) -> Self {
        TurnLimits {
            timeout_ms: l.timeout_ms,
            fuel: l.fuel,
            output_bytes: l.output_bytes,
        }
    }
}

/// Per-turn limits a session turn may ask for; each left out is the session's.
#[derive(Debug, Default, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnLimitsRequest {
    /// Wall-clock deadline of the turn, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Fuel of the turn.
    pub fuel: Option<u64>,
    /// Bytes kept of stdout and of stderr.
    pub output_bytes: Option<u64>,
}

impl TurnLimitsRequest {
    /// The session's limits (`session`) unless asked, never above `maximum`, and a deadline
    /// never past the session's lifetime (`lifetime_left_ms`).
    pub fn resolve(
        &self,
        session: &Limits,
        maximum: &Limits,
        lifetime_left_ms: u64,
    ) -> Result<TurnLimits, LimitError> {
        let l = session;
        let timeout_ms = pick(
            "timeout_ms",
            self.timeout_ms,
            l.timeout_ms,
            maximum.timeout_ms,
            1,
        )?;
        Ok(TurnLimits {
            timeout_ms: timeout_ms.min(lifetime_left_ms).max(1),
            fuel: pick("fuel", self.fuel, l.fuel, maximum.fuel, 1)?,
            output_bytes: pick(
                "output_bytes",
                self.output_bytes,
                l.output_bytes,
                maximum.output_bytes,
                0,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_request_gives_defaults() {
        let l = LimitsRequest::default()
            .resolve(&Limits::DEFAULT, &Limits::MAXIMUM)
            .unwrap();
        assert_eq!(l, Limits::DEFAULT);
    }

    #[test]
    fn above_maximum_names_the_field() {
        let req = LimitsRequest {
            memory_bytes: Some(8 << 30),
            ..Default::default()
        };
        let err = req.resolve(&Limits::DEFAULT, &Limits::MAXIMUM).unwrap_err();
        assert_eq!(err.field(), "memory_bytes");
        assert!(err.to_string().contains("maximum"));
    }

    #[test]
    fn memory_below_the_minimum_is_refused() {
        let req = LimitsRequest {
            memory_bytes: Some(1 << 20),
            ..Default::default()
        };
        let err = req.resolve(&Limits::DEFAULT, &Limits::MAXIMUM).unwrap_err();
        assert!(matches!(
            err,
            LimitError::BelowMinimum {
                field: "memory_bytes",
                ..
            }
        ));
    }
}
