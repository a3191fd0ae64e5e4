//! The floor Wasm itself sets, and where a session turn's time goes above it (issue 31).
//!
//! The seed's use cases (the snippets of `benches/use_cases.py`) and a 1-million-row CSV
//! (`pd.read_csv`, then `groupby().sum()`), each as a turn on an instance kept across turns,
//! four ways on the default (`scientific`) template, each layer adding one thing to the one
//! before:
//!
//! * `floor`: a bench engine with no fuel and no epochs, plain WASI, the instance kept (every
//!   page it writes is resident after the warm-up): what Wasm and the guest's own code cost;
//! * `fuel`: the same with fuel compiled in, which is our metering's generated code (the
//!   epoch deadline is checked when fuel is refilled, about once a millisecond: one libcall,
//!   not measurable here): the cost of metering;
//! * `interpreter`: Vivarium's own interpreter (`Interpreter::turn`, our engine, host calls,
//!   limits armed, outputs collected, rich outputs on) without a rollback checkpoint: the cost
//!   of the host's turn;
//! * `session`: a real session turn (`Vivarium::session_turn`), whose checkpoint
//!   write-protects the memory and copies each page the turn writes once: the cost of the
//!   faults.
//!
//! `benches/use_cases.py` adds the same turn over HTTP (the server's share) beside a warm
//! Jupyter kernel and native CPython; `benches/report.py` puts them in one table. The figures
//! are criterion's medians; minor page faults per turn are counted on this thread after the
//! measurements. Results: `benches/results/floor.json`.
//!
//! Run: `cargo bench --bench floor` (first run: two copies of the guest compiled, minutes).

use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use faults::minor_faults;
use meter::{Kept, MeterVariant};
use serde_json::json;
use spec::spec;
use vivarium::testing::{Interpreter, TurnLimits};
use vivarium::{Limits, Status, Template, Vivarium, VivariumOptions};

#[path = "support/faults.rs"]
mod faults;
#[path = "support/meter.rs"]
#[allow(dead_code, reason = "`MeterVariant::run` is benches/speed.rs's")]
mod meter;
#[path = "support/spec.rs"]
mod spec;

const TEMPLATE: Template = Template::Scientific;
const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results/floor.json");

/// `(name, code)`: the use cases of `benches/use_cases.py` as native CPython runs them (the
/// plot rendered to PNG bytes in memory, as `plt.show()` does for a rich output), then the
/// 1-million-row CSV in two turns.
const CASES: &[(&str, &str)] = &[
    ("hello_world", "print('hello world')"),
    (
        "csv_groupby",
        "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(df.groupby('city').sum())",
    ),
    (
        "matplotlib_png",
        "import numpy as np\nimport matplotlib.pyplot as plt\nimport io\n\
         x = np.linspace(0, 10, 1000)\nplt.plot(x, np.sin(x))\n\
         plt.savefig(io.BytesIO(), format='png')\nplt.close('all')",
    ),
    (
        "sklearn_regression",
        "import numpy as np\nfrom sklearn.linear_model import LinearRegression\n\
         X = np.random.rand(200, 3)\ny = X @ [1.5, -2.0, 0.7] + 0.1\n\
         m = LinearRegression().fit(X, y)\nprint(m.coef_.round(3), m.predict(X[:2]).round(3))",
    ),
    ("zero_division", "a = 10 / 0"),
    (
        "csv_1m_read_csv",
        "import pandas as pd\nbig = pd.read_csv('big.csv')",
    ),
    ("csv_1m_groupby", "g = big.groupby('city').sum()"),
];

/// The small CSV of `benches/use_cases.py` (1,000 rows).
fn small_csv() -> Vec<u8> {
    csv(1000)
}

/// The 1-million-row CSV of `benches/use_cases.py`: the same generator, more rows.
fn big_csv() -> Vec<u8> {
    csv(1_000_000)
}

fn csv(rows: usize) -> Vec<u8> {
    let cities = ["Oslo", "Lima", "Pune", "Kyiv", "Rome"];
    let mut s = String::from("city,temp,rain\n");
    for i in 0..rows {
        s.push_str(&format!(
            "{},{},{}\n",
            cities[i % 5],
            (i * 7) % 35,
            (i * 13) % 20
        ));
    }
    s.into_bytes()
}

fn turn_limits() -> TurnLimits {
    TurnLimits::from(&Limits::DEFAULT)
}

/// The four layers, each with its instance kept across turns.
struct Layers<'h> {
    host: &'h Vivarium,
    floor: Kept,
    fuel: Kept,
    interpreter: Interpreter,
    session: Interpreter,
}

/// One layer of a turn, each adding one thing to the one before (see the module's docs).
#[derive(Clone, Copy)]
enum Layer {
    Floor,
    Fuel,
    Interpreter,
    Session,
}

impl Layer {
    const ALL: [Layer; 4] = [
        Layer::Floor,
        Layer::Fuel,
        Layer::Interpreter,
        Layer::Session,
    ];

    /// Its name in criterion's ids and in the results.
    fn name(self) -> &'static str {
        match self {
            Layer::Floor => "floor",
            Layer::Fuel => "fuel",
            Layer::Interpreter => "interpreter",
            Layer::Session => "session",
        }
    }
}

impl Layers<'_> {
    fn turn(&mut self, layer: Layer, code: &str) {
        match layer {
            Layer::Floor => {
                self.floor.turn(code);
            }
            Layer::Fuel => {
                self.fuel.turn(code);
            }
            Layer::Interpreter => {
                let o = self
                    .interpreter
                    .turn(code, vec![], &turn_limits())
                    .expect("alive");
                assert!(matches!(o.report.status, Status::Ok | Status::Error));
            }
            Layer::Session => {
                let o = self
                    .host
                    .session_turn(
                        &mut self.session,
                        TEMPLATE,
                        code,
                        vec![],
                        &turn_limits(),
                        None,
                    )
                    .expect("alive");
                assert!(matches!(o.report.status, Status::Ok | Status::Error));
            }
        }
    }
}

fn main() {
    let loadavg_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // Guests need a deep native stack; criterion runs on this thread.
    std::thread::Builder::new()
        .stack_size(vivarium::testing::GUEST_THREAD_STACK_BYTES)
        .spawn(move || {
            let host = Vivarium::open(VivariumOptions::from_env()).expect("runtime");
            host.template_pre(TEMPLATE).expect("scientific template");
            let (small, big) = (small_csv(), big_csv());
            let floor = MeterVariant::new(&host, TEMPLATE, false, false);
            let fuel = MeterVariant::new(&host, TEMPLATE, true, false);
            for v in [&floor, &fuel] {
                std::fs::write(v.root.join("data.csv"), &small).unwrap();
                std::fs::write(v.root.join("big.csv"), &big).unwrap();
            }
            let files: [(&str, &[u8]); 2] = [("data.csv", &small), ("big.csv", &big)];
            let mut interpreter = host
                .prepare_with(spec(&host, true), TEMPLATE)
                .unwrap()
                .into_interpreter();
            interpreter.write_files(&files).unwrap();
            let mut session = host
                .open_interpreter(
                    Limits::DEFAULT,
                    TEMPLATE,
                    Arc::default(),
                    host.no_packages(),
                    Vec::new(),
                    None,
                )
                .unwrap();
            session.write_files(&files).unwrap();
            assert!(
                session.checkpoint_untracked_because().is_some(),
                "a checkpoint"
            );
            let mut layers = Layers {
                host: &host,
                floor: floor.instance(),
                fuel: fuel.instance(),
                interpreter,
                session,
            };
            // Every layer prints the same, so each runs the same program.
            for layer in Layer::ALL {
                layers.turn(layer, "print('warm')");
            }
            assert!(layers.floor.stdout().contains("warm"));

            let mut c = Criterion::default().configure_from_args();
            let mut faults = serde_json::Map::new();
            for (case, code) in CASES {
                let mut g = c.benchmark_group(format!("floor_{case}"));
                let big = case.starts_with("csv_1m");
                g.sample_size(if big { 10 } else { 20 })
                    .warm_up_time(Duration::from_millis(if big { 1500 } else { 500 }))
                    .measurement_time(Duration::from_secs(if big { 8 } else { 2 }));
                for layer in Layer::ALL {
                    g.bench_function(layer.name(), |b| b.iter(|| layers.turn(layer, code)));
                }
                g.finish();
                let mut per = serde_json::Map::new();
                let n = if big { 3 } else { 20 };
                for layer in Layer::ALL {
                    let before = minor_faults();
                    for _ in 0..n {
                        layers.turn(layer, code);
                    }
                    per.insert(
                        layer.name().into(),
                        json!((minor_faults() - before) as f64 / n as f64),
                    );
                }
                faults.insert(case.to_string(), per.into());
            }
            c.final_summary();

            // Criterion's medians, from its estimates.
            let target = std::env::var("CARGO_TARGET_DIR")
                .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target").into());
            let mut medians = serde_json::Map::new();
            for (case, _) in CASES {
                let mut per = serde_json::Map::new();
                for layer in Layer::ALL {
                    let path = format!(
                        "{target}/criterion/floor_{case}/{}/new/estimates.json",
                        layer.name()
                    );
                    let ms = std::fs::read(&path)
                        .ok()
                        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                        .and_then(|v| v["median"]["point_estimate"].as_f64())
                        .map(|ns| (ns / 1e4).round() / 1e2);
                    per.insert(layer.name().into(), json!(ms));
                }
                medians.insert(case.to_string(), per.into());
            }
            let out = json!({
                "template": "scientific",
                "loadavg_before": loadavg_before.trim(),
                "median_ms": medians,
                "minor_faults_per_turn": faults,
            });
            std::fs::create_dir_all(std::path::Path::new(RESULTS).parent().unwrap()).unwrap();
            std::fs::write(RESULTS, serde_json::to_vec_pretty(&out).unwrap()).unwrap();
            println!("{}", serde_json::to_string_pretty(&out).unwrap());
        })
        .unwrap()
        .join()
        .unwrap();
}
