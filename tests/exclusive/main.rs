//! The tests that count what this process holds (open descriptors, threads, resident memory)
//! around sandboxes run in it: nothing else of the suite may run in their process, and each
//! counting test holds [`COUNTING`] while it counts. `cargo test --test exclusive`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../hostile/mod.rs"]
mod hostile;
#[path = "../http_support/mod.rs"]
mod http_support;

mod hostile_corpus;
mod sandbox_resources;
mod wasm_attacks;

/// Held by every test of this binary while it counts the process's descriptors, threads or
/// memory: one count at a time.
pub static COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`COUNTING`] (a test that failed while holding it does not poison the others).
pub fn counting() -> std::sync::MutexGuard<'static, ()> {
    COUNTING.lock().unwrap_or_else(|e| e.into_inner())
}
