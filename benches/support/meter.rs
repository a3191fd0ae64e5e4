//! Bench-only engines: the guest module on an engine with the same settings as
//! `GuestEngine::new` but fuel and epoch instrumentation each on or off, and no Vivarium host
//! around it (plain WASI, a `host::call` that answers nothing). What metering costs, and the
//! floor Wasm itself sets. Each variant's module is compiled once (minutes) and cached beside
//! ours under `VIVARIUM_HOME/compiled/`.

use std::path::PathBuf;

use vivarium::{Template, Vivarium, VivariumOptions};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Memory, Module,
    PoolingAllocationConfig, Store, TypedFunc,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// One template's module on an engine with fuel and epochs each on or off.
pub struct MeterVariant {
    fuel: bool,
    epochs: bool,
    engine: Engine,
    pre: InstancePre<WasiP1Ctx>,
    stdlib: PathBuf,
    mpl_data: PathBuf,
    /// The guest's `/`: input files go here.
    pub root: PathBuf,
}

/// An instance kept across turns, as a session keeps one: after its first turns every page
/// it writes is resident, so a turn pays for neither faults nor a reset.
pub struct Kept {
    store: Store<WasiP1Ctx>,
    alloc: TypedFunc<i32, i32>,
    turn: TypedFunc<(i32, i32), i32>,
    memory: Memory,
    out: MemoryOutputPipe,
}

impl MeterVariant {
    pub fn new(host: &Vivarium, template: Template, fuel: bool, epochs: bool) -> MeterVariant {
        let mut config = Config::new();
        config.consume_fuel(fuel);
        config.epoch_interruption(epochs);
        config.wasm_exceptions(true);
        config.async_stack_size(8 << 20);
        config.max_wasm_stack(8 << 20);
        config.memory_init_cow(true);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_core_instances(16)
            .total_memories(32)
            .total_tables(16)
            .total_stacks(0)
            .max_memories_per_module(1)
            .max_tables_per_module(1)
            .max_memory_size(4 << 30)
            .table_elements(100_000)
            .max_core_instance_size(16 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).unwrap();
        let files = host.runtime_files();
        let home = VivariumOptions::from_env().runtime.home;
        let (wasm, key) = vivarium::testing::ensure_wasm(template, files, &home).unwrap();
        let cwasm = home.join("compiled").join(format!(
            "bench-meter-{fuel}-{epochs}-{}-{:016x}.cwasm",
            &key[..16],
            {
                use std::hash::{Hash, Hasher};
                let mut h = std::hash::DefaultHasher::new();
                engine.precompile_compatibility_hash().hash(&mut h);
                h.finish()
            }
        ));
        // SAFETY: a file this bench wrote with `Module::serialize` for this engine's settings.
        let module = match unsafe { Module::deserialize_file(&engine, &cwasm) } {
            Ok(m) => m,
            Err(_) => {
                eprintln!(
                    "bench: compiling a copy of the guest with fuel {fuel}, epochs {epochs} (once; minutes)"
                );
                let m = Module::from_file(&engine, &wasm).unwrap();
                let tmp = cwasm.with_extension("tmp");
                std::fs::write(&tmp, m.serialize().unwrap()).unwrap();
                std::fs::rename(&tmp, &cwasm).unwrap();
                m
            }
        };
        let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s| s).unwrap();
        linker
            .func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -> i32 {
                -1
            })
            .unwrap();
        let pre = linker.instantiate_pre(&module).unwrap();
        let root = std::env::temp_dir().join(format!(
            "vivarium-bench-meter-{fuel}-{epochs}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&root).unwrap();
        MeterVariant {
            fuel,
            epochs,
            engine,
            pre,
            stdlib: files.stdlib_dir.clone(),
            mpl_data: files.mpl_data_dir.clone(),
            root,
        }
    }

    /// A fresh instance, ready for turns.
    pub fn instance(&self) -> Kept {
        // Large enough for every turn a bench runs on one instance.
        let out = MemoryOutputPipe::new(256 << 20);
        let mut b = WasiCtxBuilder::new();
        b.args(&["/usr/local/bin/python.wasm"])
            .env("TMPDIR", "/tmp")
            .env("HOME", "/tmp/home")
            .env("PYTHONTZPATH", "")
            .env("MPLBACKEND", "Agg")
            .stdout(out.clone())
            .allow_blocking_current_thread(true);
        // The template's preopen table, in its order (fd 3, 4, 5).
        b.preopened_dir(&self.stdlib, "/usr/local/lib", FsPerms::ReadOnly)
            .unwrap();
        b.preopened_dir(
            &self.mpl_data,
            "/usr/local/lib/python315.zip/matplotlib/mpl-data",
            FsPerms::ReadOnly,
        )
        .unwrap();
        b.preopened_dir(&self.root, "/", FsPerms::ReadWrite)
            .unwrap();
        let mut store = Store::new(&self.engine, b.build_p1());
        if self.fuel {
            store.set_fuel(u64::MAX).unwrap();
        }
        if self.epochs {
            // Checked at every loop header and call, as ours was; no ticker, so never reached.
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let inst = self.pre.instantiate(&mut store).unwrap();
        Kept {
            alloc: inst.get_typed_func(&mut store, "host_alloc").unwrap(),
            turn: inst.get_typed_func(&mut store, "turn").unwrap(),
            memory: inst.get_memory(&mut store, "memory").unwrap(),
            out,
            store,
        }
    }

    /// A fresh instance, one turn with `code`, dropped: the core of `Sandbox::run`.
    pub fn run(&self, code: &str) -> String {
        let mut k = self.instance();
        assert_eq!(k.turn(code), 0);
        k.stdout()
    }
}

impl Kept {
    /// Runs `code` as one turn; the guest's status (0: it ran to the end).
    pub fn turn(&mut self, code: &str) -> i32 {
        let src = format!("{code}\npass\n");
        let p = self.alloc.call(&mut self.store, src.len() as i32).unwrap();
        self.memory
            .write(&mut self.store, p as u32 as usize, src.as_bytes())
            .unwrap();
        self.turn
            .call(&mut self.store, (p, src.len() as i32))
            .unwrap()
    }

    /// Everything the instance has printed so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.contents()).into_owned()
    }
}
