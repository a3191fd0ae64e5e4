//! In-process speed figures of issue 4, each beside the native interpreter in the same run:
//!
//! * `hello_world`: a fresh sandbox runs `print('hello world')` (prepare, run, tear down),
//!   on this thread (plain, and with what `/v1/execute` adds by default: rich outputs and the
//!   pre-execution check) and through `Vivarium::execute` (which adds a pooled guest thread);
//! * `pandas_describe`: `pd.DataFrame(...).describe()` in a fresh sandbox of the stock
//!   (`python`) and of the `scientific` template;
//! * `matplotlib_png`: a 1,000-point line plot saved as PNG, scientific template;
//! * `cpu_loop`: a pure-Python loop with our metering (fuel + epochs) and on bench-only
//!   engines with neither, fuel only and epochs only (same settings and module otherwise):
//!   the cost of metering and of each half.
//!
//! The native baseline is `VIVARIUM_BASELINE_PYTHON` (`benches/run.sh` sets it to a venv's
//! interpreter with numpy, pandas and matplotlib), else `python3`'s `sys.executable`.
//! Criterion writes its estimates under `target/criterion/`; `benches/report.py` reads them.
//!
//! Run: `benches/run.sh` (everything), or `cargo bench --bench speed [-- FILTER]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use criterion::Criterion;
use vivarium::testing::GuestSetup;
use vivarium::testing::HostShare;
use vivarium::testing::SandboxSpec;
use vivarium::{ExecRequest, Limits, Status, Template, Vivarium, VivariumOptions};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Store,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

const HELLO: &str = "print('hello world')";
const PANDAS: &str = "import pandas as pd; print(pd.DataFrame({'a': [1, 2, 3]}).describe())";
const PLOT: &str = "\
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 1000)
plt.plot(x, np.sin(x))
plt.savefig('plot.png')
";
const LOOP: &str = "\
s = 0
for i in range(1000000):
    s += i * i % 7
print(s)
";

fn native_python() -> PathBuf {
    if let Some(p) = std::env::var_os("VIVARIUM_BASELINE_PYTHON") {
        return p.into();
    }
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH for the baseline");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn spec(host: &Vivarium) -> SandboxSpec {
    SandboxSpec {
        host: HostShare::unlimited(),
        packages: host.no_packages(),
        limits: Limits::DEFAULT,
        env: vec![],
        files: vec![],
        stdin: vec![],
        observer: None,
        cancel: Arc::new(AtomicBool::new(false)),
        setup: Default::default(),
    }
}

fn native(python: &Path, code: &str) {
    let dir = std::env::temp_dir().join("vivarium-bench-native");
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(python)
        .args(["-c", code])
        .current_dir(&dir)
        .env("MPLBACKEND", "Agg")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sandbox(host: &Vivarium, template: Template, code: &str) {
    let r = host.prepare_with(spec(host), template).unwrap().run(code);
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
}

/// The same engine settings as `GuestEngine::new` with fuel and epochs each on or off, and
/// the same module (the `python` template): what each kind of metering costs. Bench-only;
/// each variant's module is compiled once and cached beside ours.
struct MeterVariant {
    fuel: bool,
    epochs: bool,
    engine: Engine,
    pre: InstancePre<WasiP1Ctx>,
    stdlib: PathBuf,
    mpl_data: PathBuf,
}

impl MeterVariant {
    fn new(host: &Vivarium, fuel: bool, epochs: bool) -> MeterVariant {
        let mut config = Config::new();
        config.consume_fuel(fuel);
        config.epoch_interruption(epochs);
        config.wasm_exceptions(true);
        config.async_stack_size(8 << 20);
        config.max_wasm_stack(8 << 20);
        config.memory_init_cow(true);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_core_instances(16)
            .total_memories(16)
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
        let (wasm, key) = vivarium::testing::ensure_wasm(Template::Python, files, &home).unwrap();
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
        MeterVariant {
            fuel,
            epochs,
            engine,
            pre,
            stdlib: files.stdlib_dir.clone(),
            mpl_data: files.mpl_data_dir.clone(),
        }
    }

    /// A fresh instance, one `turn` with `code`, dropped: the core of `Sandbox::run`.
    fn run(&self, code: &str) -> String {
        let out = MemoryOutputPipe::new(1 << 20);
        let mut b = WasiCtxBuilder::new();
        b.args(&["/usr/local/bin/python.wasm"])
            .env("TMPDIR", "/tmp")
            .env("HOME", "/tmp/home")
            .env("PYTHONTZPATH", "")
            .stdout(out.clone())
            .allow_blocking_current_thread(true);
        // The template's preopen table, in its order (fd 3, 4, 5).
        let root = std::env::temp_dir().join("vivarium-bench-unmetered");
        std::fs::create_dir_all(&root).unwrap();
        b.preopened_dir(&self.stdlib, "/usr/local/lib", FsPerms::ReadOnly)
            .unwrap();
        b.preopened_dir(
            &self.mpl_data,
            "/usr/local/lib/python315.zip/matplotlib/mpl-data",
            FsPerms::ReadOnly,
        )
        .unwrap();
        b.preopened_dir(&root, "/", FsPerms::ReadWrite).unwrap();
        let mut store = Store::new(&self.engine, b.build_p1());
        if self.fuel {
            store.set_fuel(u64::MAX).unwrap();
        }
        if self.epochs {
            // Checked at every loop header and call, as ours; no ticker, so never reached.
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let inst = self.pre.instantiate(&mut store).unwrap();
        let alloc = inst
            .get_typed_func::<i32, i32>(&mut store, "host_alloc")
            .unwrap();
        let turn = inst
            .get_typed_func::<(i32, i32), i32>(&mut store, "turn")
            .unwrap();
        let mem = inst.get_memory(&mut store, "memory").unwrap();
        let src = format!("{code}\npass\n");
        let p = alloc.call(&mut store, src.len() as i32).unwrap();
        mem.write(&mut store, p as u32 as usize, src.as_bytes())
            .unwrap();
        let status = turn.call(&mut store, (p, src.len() as i32)).unwrap();
        assert_eq!(status, 0);
        String::from_utf8_lossy(&out.contents()).into_owned()
    }
}

fn benches(c: &mut Criterion, host: &Arc<Vivarium>, python: &Path, variants: &[MeterVariant; 3]) {
    let [unmetered, fuel_only, epochs_only] = variants;
    let mut g = c.benchmark_group("hello_world");
    g.sample_size(50).measurement_time(Duration::from_secs(4));
    g.bench_function("vivarium_sandbox", |b| {
        b.iter(|| sandbox(host, Template::Python, HELLO))
    });
    // The default template (`scientific`, what a request that names none gets): numpy,
    // pandas and matplotlib already imported, so a larger image to reset and a set-up turn
    // that reseeds numpy too.
    g.bench_function("vivarium_sandbox_default_template", |b| {
        b.iter(|| sandbox(host, Template::Scientific, HELLO))
    });
    // What `/v1/execute` runs by default: the set-up turn also loads the rich-output helpers
    // and checks the code (`policy: warn`).
    g.bench_function("vivarium_sandbox_rich_checked", |b| {
        b.iter(|| {
            let mut spec = spec(host);
            spec.setup = GuestSetup {
                rich: true,
                line_buffered: false,
                check: Some(HELLO.into()),
            };
            let sandbox = host.prepare_with(spec, Template::Python).unwrap();
            assert!(sandbox.check_verdict().is_some());
            assert_eq!(sandbox.run(HELLO).status, Status::Ok);
        })
    });
    g.bench_function("vivarium_execute", |b| {
        b.iter(|| {
            let r = host
                .execute(ExecRequest {
                    code: HELLO.into(),
                    // The minimal template, as the other hello-world figures: the default's
                    // cost is in `benches/use_cases.py`.
                    template: Some(Template::Python),
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(r.status, Status::Ok);
        })
    });
    g.bench_function("native_python3", |b| b.iter(|| native(python, HELLO)));
    g.finish();

    let mut g = c.benchmark_group("pandas_describe");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("vivarium_scientific", |b| {
        b.iter(|| sandbox(host, Template::Scientific, PANDAS))
    });
    g.bench_function("native_python3", |b| b.iter(|| native(python, PANDAS)));
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("vivarium_python", |b| {
        b.iter(|| sandbox(host, Template::Python, PANDAS))
    });
    g.finish();

    let mut g = c.benchmark_group("matplotlib_png");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("vivarium_scientific", |b| {
        b.iter(|| sandbox(host, Template::Scientific, PLOT))
    });
    g.bench_function("native_python3", |b| b.iter(|| native(python, PLOT)));
    g.finish();

    let mut g = c.benchmark_group("cpu_loop");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("vivarium_metered", |b| {
        b.iter(|| sandbox(host, Template::Python, LOOP))
    });
    g.bench_function("unmetered", |b| b.iter(|| unmetered.run(LOOP)));
    g.bench_function("fuel_only", |b| b.iter(|| fuel_only.run(LOOP)));
    g.bench_function("epochs_only", |b| b.iter(|| epochs_only.run(LOOP)));
    g.bench_function("native_python3", |b| b.iter(|| native(python, LOOP)));
    g.finish();
}

fn main() {
    // Guests need a deep native stack; criterion runs on this thread.
    std::thread::Builder::new()
        .stack_size(vivarium::testing::GUEST_THREAD_STACK_BYTES)
        .spawn(|| {
            let host = Vivarium::open(VivariumOptions::from_env()).expect("runtime");
            // Build/load the template before timing anything.
            host.template_pre(Template::Scientific)
                .expect("scientific template");
            let variants = [
                MeterVariant::new(&host, false, false),
                MeterVariant::new(&host, true, false),
                MeterVariant::new(&host, false, true),
            ];
            for v in &variants {
                assert!(v.run(LOOP).trim().parse::<u64>().is_ok());
            }
            let python = native_python();
            let mut c = Criterion::default().configure_from_args();
            benches(&mut c, &host, &python, &variants);
            c.final_summary();
        })
        .unwrap()
        .join()
        .unwrap();
}
