//! A freed pool slot's reset, as `src/engine.rs` configures Wasmtime's pooling allocator
//! (`linear_memory_keep_resident` with the `PAGEMAP_SCAN` ioctl), with the fix vendored in
//! `vendor/wasmtime` (vendor/README.md): the dirty pages of a run are reset in place however
//! many scattered regions they make, so the next instance in the slot writes them without
//! faulting, and reads none of the last one's data.

use wasmtime::{
    Config, Enabled, Engine, Instance, InstanceAllocationStrategy, Module, PoolingAllocationConfig,
    Store,
};

/// Pages apart from each other, so each is a region of its own: well past the 32 regions
/// one scan returns.
const PAGES: u32 = 200;
const PAGE: u32 = 4096;
/// Where the pages start: past the image's data, in the memory's zero-filled part.
const BASE: u32 = 1 << 20;
const SECRET: i64 = 0x5ec2_e7c0_ffee_d00d;

/// One slot, so every instance reuses the last one's memory.
fn engine() -> Engine {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_memories(1)
        .total_core_instances(1)
        .total_tables(1)
        .total_stacks(1)
        .max_memory_size(64 << 20)
        .linear_memory_keep_resident(4 << 20)
        .pagemap_scan(Enabled::Yes);
    let mut config = Config::new();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).unwrap()
}

fn module(engine: &Engine) -> Module {
    let wat = r#"(module
        (memory (export "m") 512)
        (data (i32.const 0) "the image")
        (func (export "write") (param i32 i64) (i64.store (local.get 0) (local.get 1)))
        (func (export "read") (param i32) (result i64) (i64.load (local.get 0))))"#;
    Module::new(engine, wat::parse_str(wat).unwrap()).unwrap()
}

/// Minor page faults this thread has taken so far.
fn thread_faults() -> i64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
        usage.ru_minflt
    }
}

#[test]
fn a_run_dirtying_hundreds_of_scattered_pages_leaves_them_reset_and_resident() {
    if !PoolingAllocationConfig::is_pagemap_scan_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs on a kernel with PAGEMAP_SCAN (Linux 6.7+)"
        );
        eprintln!("SKIPPED: no PAGEMAP_SCAN on this kernel");
        return;
    }
    let engine = engine();
    let module = module(&engine);
    let pages = || (0..PAGES).map(|i| (BASE + i * 2 * PAGE) as i32);
    let mut faults_after_first_reset = None;
    for run in 0..3 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        let write = instance
            .get_typed_func::<(i32, i64), ()>(&mut store, "write")
            .unwrap();
        let read = instance
            .get_typed_func::<i32, i64>(&mut store, "read")
            .unwrap();
        let before = thread_faults();
        for at in pages() {
            // The last run's secret is gone: each page is the image's again (zeros here).
            assert_eq!(
                read.call(&mut store, at).unwrap(),
                0,
                "run {run}, at {at:#x}"
            );
            write.call(&mut store, (at, SECRET)).unwrap();
        }
        let faults = thread_faults() - before;
        assert_eq!(
            read.call(&mut store, 0).unwrap(),
            i64::from_le_bytes(*b"the imag")
        );
        if run > 0 {
            faults_after_first_reset.get_or_insert(faults);
        }
        // Dropping the store frees the slot: the reset runs now.
    }
    // Unpatched, only the first 32 regions stay resident and the other 168 pages fault
    // again (twice: the read maps the zero page, the write copies it).
    let faults = faults_after_first_reset.unwrap();
    assert!(
        faults < 32,
        "{faults} faults writing {PAGES} pages the last run had dirtied"
    );
}
