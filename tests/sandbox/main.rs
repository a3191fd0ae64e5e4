//! The sandbox tier: the real runtime in this process (`Vivarium`, no server), plus the
//! command line and the source checks (`layers`). One binary, so the crate is linked once
//! for all of them; `cargo test --test sandbox` runs the tier, `cargo test --test sandbox
//! templates::` one module.

#[path = "../common/mod.rs"]
mod common;
#[path = "../../fuzz/harness.rs"]
mod harness;
#[path = "../http_support/mod.rs"]
mod http_support;

mod checkers;
mod cli;
mod code_mode;
mod doc_paths;

mod fuzz_regressions;
mod hostile_regressions;
mod interpreter;
mod kept_turns;
mod layers;
mod memory_headroom;
mod sandbox_basics;
mod sandbox_escape;
mod sandbox_limits;
mod session_image;
mod slot_reset;
mod templates;
