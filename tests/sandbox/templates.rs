//! Templates: our own snapshots of `python.wasm`. `python` (minimal) carries the guest-side
//! helpers; `scientific` (the default) also has the scientific stack imported. The first test
//! on a fresh machine builds the scientific one (minutes, once; then cached like the
//! `.cwasm`), so every template test lives in this one binary.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::common::host;
use vivarium::testing::HostShare;
use vivarium::testing::{SandboxSpec, TurnLimits, run_on_guest_thread};
use vivarium::{ExecRequest, Limits, Policy, Report, Status, Template};

fn sci(code: &str, env: &[(&str, &str)]) -> Report {
    run_in(Template::Scientific, code, env)
}

fn run_in(template: Template, code: &str, env: &[(&str, &str)]) -> Report {
    host()
        .execute(ExecRequest {
            code: code.into(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            template: Some(template),
            ..Default::default()
        })
        .expect("execution could be attempted")
}

fn ok(r: &Report) {
    assert_eq!(r.status, Status::Ok, "stderr: {}", r.stderr);
}

#[test]
fn pandas_is_already_imported() {
    let r = sci(
        "import sys\nprint('pandas' in sys.modules, 'numpy' in sys.modules)\n\
         import pandas as pd\nprint(pd.DataFrame({'a': [1, 2, 3]}).describe())",
        &[],
    );
    ok(&r);
    assert!(r.stdout.starts_with("True True\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("count") && r.stdout.contains("3.0"),
        "{}",
        r.stdout
    );
    // `import pandas` alone burns about 4.4 G fuel in a stock sandbox.
    assert!(r.usage.fuel < 1_000_000_000, "fuel {}", r.usage.fuel);

    // The stock template has not imported it, and the user's namespace starts empty in both.
    let stock = common::run("import sys\nprint('pandas' in sys.modules)");
    ok(&stock);
    assert_eq!(stock.stdout, "False\n");
    let r = sci(
        "print(sorted(k for k in globals() if not k.startswith('__')))",
        &[],
    );
    ok(&r);
    assert_eq!(r.stdout, "[]\n");
}

#[test]
fn every_sandbox_gets_fresh_randomness() {
    let code = "import numpy, random, os\n\
                print(numpy.random.rand(), random.random(), os.urandom(8).hex(), \
                numpy.random.default_rng().integers(1 << 62), \
                numpy.random.get_state()[1][:4].tolist())";
    let a = sci(code, &[]);
    let b = sci(code, &[]);
    ok(&a);
    ok(&b);
    let (a, b): (Vec<&str>, Vec<&str>) = (
        a.stdout.split_whitespace().collect(),
        b.stdout.split_whitespace().collect(),
    );
    assert_eq!(a.len(), 8, "{a:?}");
    for i in 0..8 {
        assert_ne!(a[i], b[i], "value {i} is the same in two sandboxes");
    }
    // The set-up turn put numpy's own seed back (`python-wasi/guest/setup.py`): a program
    // that seeds gets numpy's sequence.
    let r = sci(
        "import numpy\nnumpy.random.seed(0)\n\
         print(numpy.random.seed is numpy.random.mtrand.seed, numpy.random.rand())",
        &[],
    );
    ok(&r);
    assert_eq!(r.stdout, "True 0.5488135039273248\n");
}

/// The template's objects are immortal (the build's door wrote their refcounts,
/// `template::immortal`), so using them writes nothing; what a program makes is mortal and is
/// freed as usual; and a sandbox's own door does not make anything immortal.
#[test]
fn template_objects_are_immortal_and_new_objects_are_not() {
    let common = "import sys, gc, json.decoder, collections, weakref\n\
                  imm = sys._is_immortal\n\
                  def consts(c):\n\
                  \x20   yield c.co_consts\n\
                  \x20   for k in c.co_consts:\n\
                  \x20       if isinstance(k, type(c)): yield from consts(k)\n\
                  mods = [json.decoder, collections, sys.modules['_vivarium']]\n";
    let scientific = "import numpy, pandas.core.frame\n\
                      mods += [numpy, pandas.core.frame]\n\
                      print(imm(numpy.array), imm(pandas.DataFrame), \
                      imm(pandas.DataFrame.describe.__doc__), \
                      all(map(imm, consts(pandas.DataFrame.describe.__code__))))\n";
    let checks = "print([f'{m.__name__}.{k}' for m in mods for k, v in vars(m).items() \
                  if not imm(v) and k not in ('__builtins__',)])\n\
                  print(imm(sys.modules), imm(gc.collect), all(map(imm, consts(json.loads.__code__))))\n\
                  class C: pass\n\
                  c = C(); freed = []\n\
                  weakref.finalize(c, freed.append, 1)\n\
                  print(imm(C), imm(c), imm([1]), imm('x' * 100), imm(10 ** 30), imm(object()))\n\
                  del c\n\
                  print(freed)\n\
                  import _host\n\
                  x = object()\n\
                  try:\n\
                  \x20   _host.call(b'\\0vivarium-immortal\\0' + id(x).to_bytes(4, 'little'))\n\
                  except ConnectionRefusedError:\n\
                  \x20   print('refused', imm(x))\n";
    for template in Template::ALL {
        let code = match template {
            Template::Scientific => format!("{common}{scientific}{checks}"),
            Template::Python => format!("{common}{checks}"),
        };
        let r = run_in(template, &code, &[]);
        ok(&r);
        let mut lines: Vec<&str> = r.stdout.lines().collect();
        if template == Template::Scientific {
            assert_eq!(lines.remove(0), "True True True True", "{template}");
        }
        assert_eq!(
            lines,
            [
                "[]",
                "True True True",
                "False False False False False False",
                "[1]",
                "refused False"
            ],
            "{template}"
        );
    }
}

#[test]
fn a_run_finds_the_templates_free_space_filled() {
    // The build fills the allocator's free chunks before the snapshot (`guest::SNAPSHOT_READY`;
    // 6,167 of them, 1.2 MB, in the scientific template), so a run's
    // new objects come from the top of the heap, above the fillers. What a run still finds
    // free below them is what its set-up turn and the compiling of its code freed there
    // (tens of KiB: old tables of template dicts that grew), counted here in 80-byte blocks.
    // (The helpers' sources, over 1 MB since the shell, are freed by the end of the first
    // init turn, before the second fills: 25,000 blocks were free here when one turn did
    // both.)
    let code = "import _host\n\
                fillers = [b for b in _host._fillers if b is not None]\n\
                top = max(map(id, fillers))\n\
                below = []\n\
                while len(below) < 100000:\n\
                \x20   b = b'\\x01' * (40 + len(below) % 3)\n\
                \x20   if id(b) > top:\n\
                \x20       break\n\
                \x20   below.append(b)\n\
                print(len(fillers), len(below))";
    for template in Template::ALL {
        let r = host()
            .execute(ExecRequest {
                code: code.into(),
                template: Some(template),
                policy: Policy::Off,
                ..Default::default()
            })
            .unwrap();
        ok(&r);
        let counts: Vec<usize> = r
            .stdout
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        // 889 in `python` since code mode's helper (asyncio, inspect) is in every template.
        assert!(counts[0] > 500, "{template}: {} fillers", counts[0]);
        assert!(
            counts[1] < 2000,
            "{template}: {} blocks free below the fillers",
            counts[1]
        );
    }
}

#[test]
fn every_sandbox_gets_its_own_environment() {
    let code = "import os, tempfile\nprint(os.environ.get('MODE'), os.environ.get('ONLY_A'), \
                os.environ['HOME'], os.environ['TMPDIR'], os.getenv('MODE'))\n\
                print(tempfile.mktemp())";
    for template in Template::ALL {
        let a = run_in(template, code, &[("MODE", "alpha"), ("ONLY_A", "1")]);
        let b = run_in(template, code, &[("MODE", "beta")]);
        ok(&a);
        ok(&b);
        let (a, b): (Vec<&str>, Vec<&str>) =
            (a.stdout.lines().collect(), b.stdout.lines().collect());
        assert_eq!(a[0], "alpha 1 /tmp/home /tmp alpha", "{template}");
        assert_eq!(b[0], "beta None /tmp/home /tmp beta", "{template}");
        // tempfile's name sequence was seeded at snapshot time in neither.
        assert_ne!(
            a[1], b[1],
            "{template}: the same temporary name in two sandboxes"
        );
    }
}

#[test]
fn files_plots_and_tracebacks_work() {
    // The preopen table is the snapshot's: files in the working directory must work.
    let r = sci(
        "import matplotlib.pyplot as plt, numpy as np\n\
         x = np.linspace(0, 10, 1000)\n\
         plt.plot(x, np.sin(x))\n\
         plt.savefig('plot.png')\n\
         open('note.txt', 'w').write('yo')\n\
         print(open('note.txt').read())",
        &[],
    );
    ok(&r);
    assert_eq!(r.stdout, "yo\n");
    let png = r
        .files
        .iter()
        .find(|f| f.path == "plot.png")
        .expect("plot.png");
    assert!(png.size > 10_000, "png of {} bytes", png.size);
    assert!(r.files.iter().any(|f| f.path == "note.txt"));

    let r = sci("x = 1\n1 / 0", &[]);
    assert_eq!(r.status, Status::Error);
    let err = r.error.expect("parsed error");
    assert_eq!(err.kind, "ZeroDivisionError");
    assert_eq!(err.line, Some(2));
    // A single program's code is `<string>`, as `python -c`'s (a session's turns are
    // `<turn N>`).
    assert!(
        r.stderr.contains("File \"<string>\", line 2, in <module>"),
        "{}",
        r.stderr
    );
}

#[test]
fn sessions_start_from_the_template() {
    let host = host();
    run_on_guest_thread(move || {
        let mut interp = host
            .prepare_with(
                SandboxSpec {
                    host: HostShare::unlimited(),
                    packages: host.no_packages(),
                    limits: Limits::DEFAULT,
                    env: vec![("K".into(), "v".into())],
                    files: vec![],
                    stdin: vec![],
                    observer: None,
                    cancel: Arc::new(AtomicBool::new(false)),
                    setup: Default::default(),
                    seed: None,
                    volumes: Vec::new(),
                    layer: None,
                },
                Template::Scientific,
            )
            .unwrap()
            .into_interpreter();
        let turn = TurnLimits::from(&Limits::DEFAULT);
        let t = interp
            .turn(
                "import pandas as pd, os\ndf = pd.DataFrame({'a': [1, 2]})",
                vec![],
                &turn,
            )
            .unwrap();
        assert_eq!(t.report.status, Status::Ok, "{}", t.report.stderr);
        let t = interp
            .turn("int(df['a'].sum()), os.environ['K']", vec![], &turn)
            .unwrap();
        assert_eq!(t.result.as_deref(), Some("(3, 'v')"));
        let t = interp.turn("1/0", vec![], &turn).unwrap();
        assert!(t.report.stderr.contains("<turn 3>"), "{}", t.report.stderr);
    })
    .unwrap();
}

use crate::http_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_requests_and_sessions_pick_a_template() {
    use serde_json::json;
    let s = http_support::start("tpl", |_| {}).await;
    let c = http_support::client();
    let url = s.url("/v1/execute");
    let code = "import sys\nprint('pandas' in sys.modules)";
    let (st, v) =
        http_support::post(&c, &url, &json!({"code": code, "template": "scientific"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "True\n", "{v}");
    // The default is `scientific`; `python` by name is the minimal one.
    let (st, v) = http_support::post(&c, &url, &json!({"code": code})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "True\n", "{v}");
    let (st, v) = http_support::post(&c, &url, &json!({"code": code, "template": "python"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "False\n", "{v}");
    // Little memory is still the default: `memory_bytes` counts beyond the template's image,
    // so every template takes every limit.
    let (st, v) = http_support::post(
        &c,
        &url,
        &json!({"code": code, "limits": {"memory_bytes": 64 << 20}}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "True\n", "{v}");
    // A name that is no template (built in or the caller's) is a 404 naming the field.
    let (st, v) = http_support::post(&c, &url, &json!({"code": code, "template": "nope"})).await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(v["error"]["code"], "template_not_found", "{v}");
    assert_eq!(v["error"]["field"], "template", "{v}");
    // Below the minimum is a 400 naming the field, on any template.
    let (st, v) = http_support::post(
        &c,
        &url,
        &json!({"code": code, "template": "scientific", "limits": {"memory_bytes": 16 << 20}}),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["field"], "limits.memory_bytes", "{v}");

    let (st, v) = http_support::post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"template": "scientific"}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));
    let (st, v) = http_support::post(
        &c,
        &turn,
        &json!({"code": "import sys\n'pandas' in sys.modules"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["result"], "True", "{v}");
    s.stop().await;
}
