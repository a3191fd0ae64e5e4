//! libFuzzer target: wasm-smith modules under the real engine, linker and limits, with host
//! invariants (see fuzz/harness.rs). A violated invariant panics, so libFuzzer saves the input.
#![no_main]

#[path = "../harness.rs"]
mod harness;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Ctx {
    inv: harness::Invariants,
    execs: std::sync::atomic::AtomicU64,
}

fn ctx() -> &'static Ctx {
    static CTX: OnceLock<Ctx> = OnceLock::new();
    CTX.get_or_init(|| {
        harness::warm_up();
        Ctx {
            inv: harness::Invariants::baseline(),
            execs: Default::default(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let c = ctx();
    if let Err(e) = harness::run_wasm_input(data) {
        panic!("host invariant violated: {e}");
    }
    let n = c.execs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if n % 25 == 0 {
        if let Err(e) = c.inv.check_process() {
            panic!("host invariant violated: {e}");
        }
    }
});
