//! libFuzzer target: hostile Python composed from the corpus' building blocks, run in the
//! real guest, with host invariants (see fuzz/harness.rs).
#![no_main]

#[path = "../harness.rs"]
mod harness;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Ctx {
    inv: harness::Invariants,
    canary: harness::Canary,
    execs: std::sync::atomic::AtomicU64,
}

fn ctx() -> &'static Ctx {
    static CTX: OnceLock<Ctx> = OnceLock::new();
    CTX.get_or_init(|| {
        harness::warm_up();
        Ctx {
            inv: harness::Invariants::baseline(),
            canary: harness::Canary::new(),
            execs: Default::default(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let c = ctx();
    let code = harness::compose_python(data);
    if let Err(e) = harness::run_python(&code, &c.canary) {
        panic!("host invariant violated: {e}\n--- program ---\n{code}");
    }
    let n = c.execs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if n % 25 == 0 {
        if let Err(e) = c.inv.check_process() {
            panic!("host invariant violated: {e}");
        }
    }
});
