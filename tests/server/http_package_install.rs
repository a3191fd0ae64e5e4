//! Packages on demand, over real HTTP, against a real package index the test starts on
//! 127.0.0.1 (`tests/fixtures/package_index.py`: a PEP 503 simple index of wheels, and one
//! sdist, that it makes from source it writes). pip resolves on the host; nothing depends on
//! a public index.

use std::path::Path;
use std::process::Command;

use crate::http_support::*;
use serde_json::{Value, json};

async fn serve(
    tag: &str,
    index: &str,
    cache: &Path,
    more: impl FnOnce(&mut vivarium::server::ServeArgs),
) -> TestServer {
    let index = index.to_string();
    let cache = cache.to_path_buf();
    start(tag, move |a| {
        a.package_index = Some(index);
        a.package_cache_dir = Some(cache);
        more(a);
    })
    .await
}

async fn execute(
    c: &reqwest::Client,
    s: &TestServer,
    packages: &[&str],
    code: &str,
) -> (u16, Value) {
    post(
        c,
        &s.url("/v1/execute"),
        &json!({"code": code, "packages": packages, "template": "python", "policy": "off"}),
    )
    .await
}

fn envs(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("envs")).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_with_a_dependency_installs_once_for_twenty_first_requests() {
    let index = PackageIndex::start("install");
    let cache = scratch_dir("pkg-cache-install");
    let s = serve("pkg-install", &index.url, &cache, |_| {}).await;
    let c = client();
    let code =
        "import vivtest_greet, sys\nprint(vivtest_greet.hello())\nprint(vivtest_greet.__file__)";
    let runs = (0..20).map(|_| {
        let c = c.clone();
        let s = &s;
        async move { execute(&c, s, &["vivtest-greet>=1"], code).await }
    });
    for (st, v) in futures_util::future::join_all(runs).await {
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["status"], "ok", "{v}");
        let out = v["stdout"].as_str().unwrap();
        assert!(out.starts_with("hello from greet, base 1.0\n"), "{v}");
        assert!(
            out.contains("/usr/local/lib/vivarium-packages/vivtest_greet/"),
            "{v}"
        );
    }
    // One resolution and one build for all twenty: pip fetches each wheel once for its
    // report (pip 23; newer pips read the PEP 658 metadata only), the host once to unpack.
    for wheel in [
        "vivtest_greet-1.0-py3-none-any.whl",
        "vivtest_base-1.0-py3-none-any.whl",
    ] {
        let n = index.gets(&format!("/files/{wheel}"));
        assert!((1..=2).contains(&n), "{wheel} fetched {n} times");
    }
    assert_eq!(envs(&cache), 1);
    // In the background the host compiles the set to .pyc (in a sandbox of its own, the one
    // that sees it writable); later imports load those, and tracebacks keep the guest path.
    let env = std::fs::read_dir(cache.join("envs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !env.join("compiled").exists() {
        assert!(std::time::Instant::now() < deadline, "never compiled");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let pycs: Vec<_> = std::fs::read_dir(env.join("site/vivtest_greet/__pycache__"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(pycs, ["__init__.cpython-315.pyc"]);
    let (_, v) = execute(
        &c,
        &s,
        &["vivtest-greet"],
        "import vivtest_greet, os\nc = vivtest_greet.__spec__.cached\nprint(c, os.path.exists(c))\nprint(vivtest_greet.hello.__code__.co_filename)",
    )
    .await;
    assert_eq!(
        v["stdout"],
        "/usr/local/lib/vivarium-packages/vivtest_greet/__pycache__/__init__.cpython-315.pyc True\n\
         /usr/local/lib/vivarium-packages/vivtest_greet/__init__.py\n",
        "{v}"
    );
    // The environment is read-only to the guest, and sandboxes without packages see nothing.
    let (_, v) = execute(
        &c,
        &s,
        &["vivtest-greet"],
        "import os\ntry:\n    open('/usr/local/lib/vivarium-packages/x.py', 'w')\nexcept OSError as e:\n    print('refused', e.errno)",
    )
    .await;
    assert!(v["stdout"].as_str().unwrap().starts_with("refused"), "{v}");
    let (_, v) = execute(&c, &s, &[], "import vivtest_greet").await;
    assert_eq!(v["error"]["type"], "ModuleNotFoundError", "{v}");
    // The audit log records the resolved set with its hashes.
    let audit = s.audit();
    let line = audit
        .iter()
        .find(|r| r["action"] == "execute" && r["packages"].is_array())
        .expect("an audit line with packages");
    let names: Vec<&str> = line["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["sha256"].as_str().unwrap().len(), 64, "{p}");
            p["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(names, ["vivtest-base", "vivtest-greet"]);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_installed_is_refused_naming_the_package_and_nothing_runs() {
    let index = PackageIndex::start("refuse");
    let cache = scratch_dir("pkg-cache-refuse");
    let s = serve("pkg-refuse", &index.url, &cache, |a| {
        a.max_wheel_bytes = 200_000;
        a.max_package_env_bytes = 1_000_000;
    })
    .await;
    let c = client();
    // Each refusal: its status, its code, the package named; the code never ran.
    let cases: &[(&str, u16, &str, &str)] = &[
        (
            "vivtest-oldnumpy",
            422,
            "package_conflicts_with_builtin",
            "numpy",
        ),
        (
            "vivtest-native",
            422,
            "package_has_native_code",
            "vivtest-native",
        ),
        (
            "vivtest-sdist",
            422,
            "package_has_no_wheel",
            "vivtest-sdist",
        ),
        (
            "vivtest-nothing-here",
            422,
            "package_not_found",
            "vivtest-nothing-here",
        ),
        ("vivtest-big", 413, "package_too_large", "vivtest_big"),
        ("vivtest-bomb", 413, "package_too_large", "environment"),
        ("vivtest-slip", 422, "package_invalid", "escaped.py"),
        (
            "vivtest-greet>=2",
            422,
            "package_not_found",
            "vivtest-greet",
        ),
        (
            "vivtest @ file:///etc/passwd",
            400,
            "invalid_package_spec",
            "URL",
        ),
    ];
    for (spec, status, code, named) in cases {
        let (st, v) = execute(&c, &s, &[spec], "open('ran', 'w'); print('ran')").await;
        assert_eq!(st, *status, "{spec}: {v}");
        assert_eq!(error_code(&v), *code, "{spec}: {v}");
        assert_eq!(v["error"]["field"], "packages", "{v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(named), "{spec}: {msg}");
    }
    // The sdist's setup.py never ran on the host; the slip's file went nowhere.
    assert!(!index.dir.join("setup-py-ran").exists());
    assert!(!cache.join("escaped.py").exists() && !cache.join("tmp/escaped.py").exists());
    assert_eq!(envs(&cache), 0, "no environment was kept");
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", "packages": (0..21).map(|i| format!("p{i}")).collect::<Vec<_>>()}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (400, "too_many_packages"), "{v}");
    // Nothing ran for any of them: no execution in the audit log succeeded.
    assert!(
        s.audit()
            .iter()
            .filter(|r| r["action"] == "execute")
            .all(|r| r["http_status"] != 200)
    );
    // The server goes on serving.
    let (st, v) = execute(&c, &s, &[], "print(6 * 7)").await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("42\n")), "{v}");
    s.stop().await;

    // An index that is down: a clear 502, quickly.
    let dead = serve("pkg-dead", "http://127.0.0.1:9/simple", &cache, |_| {}).await;
    let started = std::time::Instant::now();
    let (st, v) = execute(&c, &dead, &["vivtest-greet"], "print(1)").await;
    assert_eq!(
        (st, error_code(&v)),
        (502, "package_index_unreachable"),
        "{v}"
    );
    assert!(started.elapsed().as_secs() < 30);
    dead.stop().await;

    // Packages off: 403, and GET /v1/packages says so.
    let off = start("pkg-off", |a| {
        a.packages = vivarium::server::PackagesMode::Off
    })
    .await;
    let (st, v) = execute(&c, &off, &["vivtest-greet"], "print(1)").await;
    assert_eq!((st, error_code(&v)), (403, "packages_disabled"), "{v}");
    let (_, v) = get(&c, &off.url("/v1/packages")).await;
    assert_eq!(v["extra"]["allowed"], false, "{v}");
    off.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_packages_gets_more_between_turns_and_restores_with_them() {
    let index = PackageIndex::start("session");
    let cache = scratch_dir("pkg-cache-session");
    let s = serve("pkg-session", &index.url, &cache, |_| {}).await;
    let c = client();
    let id = open_session(
        &c,
        &s.base,
        &json!({"template": "python", "packages": ["vivtest-greet"]}),
    )
    .await;
    session_turn(
        &c,
        &s.base,
        &id,
        "import vivtest_greet\nx = vivtest_greet.hello()",
    )
    .await;
    let v = session_turn(&c, &s.base, &id, "x").await;
    assert_eq!(v["result"], "'hello from greet, base 1.0'", "{v}");
    // Before: not there. Then added, with the session's state kept.
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({"code": "import vivtest_extra"}),
    )
    .await;
    assert_eq!(
        (st, v["error"]["type"].as_str()),
        (200, Some("ModuleNotFoundError")),
        "{v}"
    );
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/packages")),
        &json!({"packages": ["vivtest-extra==2.0"]}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let names: Vec<&str> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["vivtest-base", "vivtest-extra", "vivtest-greet"],
        "{v}"
    );
    let v = session_turn(
        &c,
        &s.base,
        &id,
        "import vivtest_extra\n(x, vivtest_extra.VALUE)",
    )
    .await;
    assert_eq!(v["result"], "('hello from greet, base 1.0', 42)", "{v}");
    // A refused addition leaves the session as it was.
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/packages")),
        &json!({"packages": ["vivtest-native"]}),
    )
    .await;
    assert_eq!(
        (st, error_code(&v)),
        (422, "package_has_native_code"),
        "{v}"
    );
    let v = session_turn(&c, &s.base, &id, "vivtest_extra.VALUE + 1").await;
    assert_eq!(v["result"], "43", "{v}");
    // A snapshot restores with the same packages (from the cache, by their hashes).
    let snap = take_snapshot(&c, &s.base, &id).await;
    let restored = open_session(&c, &s.base, &json!({"snapshot": snap["snapshot_id"]})).await;
    let (_, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{restored}/execute")),
        &json!({"code": "import vivtest_other"}),
    )
    .await;
    assert_eq!(v["error"]["type"], "ModuleNotFoundError", "{v}");
    let v = session_turn(
        &c,
        &s.base,
        &restored,
        "import importlib, vivtest_extra\nimportlib.reload(vivtest_extra).VALUE, x",
    )
    .await;
    assert_eq!(v["result"], "(42, 'hello from greet, base 1.0')", "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_evicts_the_least_recently_used_set_past_its_cap() {
    let index = PackageIndex::start("evict");
    let cache = scratch_dir("pkg-cache-evict");
    // Room for one small set at a time.
    let s = serve("pkg-evict", &index.url, &cache, |a| {
        a.package_cache_bytes = 100
    })
    .await;
    let c = client();
    let (_, v) = execute(
        &c,
        &s,
        &["vivtest-extra"],
        "import vivtest_extra; print(vivtest_extra.VALUE)",
    )
    .await;
    assert_eq!(v["stdout"], "42\n", "{v}");
    assert_eq!(envs(&cache), 1);
    let (_, v) = execute(
        &c,
        &s,
        &["vivtest-other"],
        "import vivtest_other; print(vivtest_other.VALUE)",
    )
    .await;
    assert_eq!(v["stdout"], "other\n", "{v}");
    assert_eq!(envs(&cache), 1, "the older set was evicted");
    let before = index.gets("/files/vivtest_extra-2.0-py3-none-any.whl");
    // The evicted set comes back when asked for again: built anew.
    let (_, v) = execute(
        &c,
        &s,
        &["vivtest-extra"],
        "import vivtest_extra; print(vivtest_extra.VALUE)",
    )
    .await;
    assert_eq!(v["stdout"], "42\n", "{v}");
    assert!(index.gets("/files/vivtest_extra-2.0-py3-none-any.whl") > before);
    assert_eq!(envs(&cache), 1);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_reach_mcp_and_the_command_line() {
    let index = PackageIndex::start("fronts");
    let cache = scratch_dir("pkg-cache-fronts");
    let s = serve("pkg-fronts", &index.url, &cache, |_| {}).await;
    // MCP: execute_python and open_session take `packages`.
    let mut mcp = McpClient::open(&s).await;
    let (_, r) = mcp
        .call(
            "execute_python",
            json!({"code": "import vivtest_greet\nprint(vivtest_greet.hello())", "packages": ["vivtest-greet"], "template": "python"}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["stdout"], "hello from greet, base 1.0\n",
        "{r}"
    );
    let (_, r) = mcp
        .call(
            "execute_python",
            json!({"code": "print(1)", "packages": ["vivtest-native"]}),
        )
        .await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        r["result"]["isError"] == true && text.contains("package_has_native_code"),
        "{r}"
    );
    let (_, r) = mcp
        .call(
            "open_session",
            json!({"packages": ["vivtest-extra"], "template": "python"}),
        )
        .await;
    let opened: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let (_, r) = mcp
        .call(
            "run_in_session",
            json!({"session_id": opened["session_id"], "code": "import vivtest_extra\nvivtest_extra.VALUE"}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["turn"]["result"], "42",
        "{r}"
    );
    s.stop().await;

    // The command line: `--package`, repeatable, from VIVARIUM_PACKAGE_INDEX.
    let out = Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args(["run", "--template", "python", "--package", "vivtest-greet", "--package", "vivtest-extra==2.0"])
        .args(["-c", "import vivtest_greet, vivtest_extra\nprint(vivtest_greet.hello(), vivtest_extra.VALUE)"])
        .env("VIVARIUM_PACKAGE_INDEX", &index.url)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from greet, base 1.0 42\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .args(["run", "--package", "vivtest-sdist", "-c", "print(1)"])
        .env("VIVARIUM_PACKAGE_INDEX", &index.url)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only as source"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!index.dir.join("setup-py-ran").exists());
    let _ = std::fs::remove_dir_all(&cache);
}
