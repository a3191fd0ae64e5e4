//! In-process speed figures of issue 4, each beside the native interpreter in the same run:
//!
//! * `hello_world`: a fresh sandbox runs `print('hello world')` (prepare, run, tear down),
//!   on this thread (plain, and with what `/v1/execute` adds by default: rich outputs and the
//!   pre-execution check) and through `Vivarium::execute` (which adds a pooled guest thread);
//! * `pandas_describe`: `pd.DataFrame(...).describe()` in a fresh sandbox of the stock
//!   (`python`) and of the `scientific` template;
//! * `matplotlib_png`: a 1,000-point line plot saved as PNG, scientific template;
//! * `cpu_loop`: a pure-Python loop with our metering (fuel, whose refills check the epoch
//!   deadline: `engine::FUEL_CHECK_INTERVAL`) and on bench-only engines with neither, fuel
//!   only, epochs only, and both compiled in (our metering before the fuel checks took over
//!   the epoch's job), same settings and module otherwise: the cost of metering and of each
//!   half.
//!
//! The native baseline is `VIVARIUM_BASELINE_PYTHON` (`benches/run.sh` sets it to a venv's
//! interpreter with numpy, pandas and matplotlib), else `python3`'s `sys.executable`.
//! Criterion writes its estimates under `target/criterion/`; `benches/report.py` reads them.
//!
//! Run: `benches/run.sh` (everything), or `cargo bench --bench speed [-- FILTER]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use meter::MeterVariant;
use spec::spec;
use vivarium::testing::GuestSetup;
use vivarium::{ExecRequest, Status, Template, Vivarium, VivariumOptions};

#[path = "support/meter.rs"]
mod meter;
#[path = "support/spec.rs"]
mod spec;

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
    let r = host
        .prepare_with(spec(host, false), template)
        .unwrap()
        .run(code);
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
}

fn benches(c: &mut Criterion, host: &Arc<Vivarium>, python: &Path, variants: &[MeterVariant; 4]) {
    let [unmetered, fuel_only, epochs_only, fuel_and_epochs] = variants;
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
            let mut spec = spec(host, false);
            spec.setup = GuestSetup {
                program: true,
                rich: true,
                line_buffered: false,
                check: Some(HELLO.into()),
                session: false,
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
    g.bench_function("fuel_and_epochs", |b| b.iter(|| fuel_and_epochs.run(LOOP)));
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
                MeterVariant::new(&host, Template::Python, false, false),
                MeterVariant::new(&host, Template::Python, true, false),
                MeterVariant::new(&host, Template::Python, false, true),
                MeterVariant::new(&host, Template::Python, true, true),
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
