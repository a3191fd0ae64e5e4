//! User templates over real HTTP with the real runtime, against the fixture package index on
//! 127.0.0.1: a template built from packages, a file, shell commands, set-up code, imports,
//! variables and a working folder, then used by fresh runs and sessions (each still fresh:
//! its own variables and randomness), rebuilt, reused for identical inputs, built on, kept
//! over a restart and deleted; a run's folder kept for the next run only when it changed nothing;
//! tenants kept apart; failed and hostile builds ending with the
//! step named while the server keeps serving; the tenant's limits.

use serde_json::{Value, json};

use crate::http_support::*;

const ALICE: &str = "templates-key-alice-0123456789";
const BOB: &str = "templates-key-bob-0123456789ab";

/// Template `name`'s record once its build ended.
async fn built(c: &reqwest::Client, s: &TestServer, name: &str) -> Value {
    template_built(c, &s.base, name).await
}

/// Builds `body`, expecting the build to start (202) and end `ready`; its record.
async fn build_ready(c: &reqwest::Client, s: &TestServer, body: Value) -> Value {
    let (st, v) = post(c, &s.url("/v1/templates"), &body).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["status"], "building", "{v}");
    let v = built(c, s, body["name"].as_str().unwrap()).await;
    assert_eq!(v["status"], "ready", "{v}");
    v
}

async fn run(c: &reqwest::Client, s: &TestServer, body: Value) -> Value {
    let (st, v) = post(c, &s.url("/v1/execute"), &body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    v
}

fn reporting(file: &[u8]) -> Value {
    json!({
        "name": "reporting",
        "packages": ["vivtest-greet"],
        "files": [{"path": "data/table.csv", "content": b64(file)}],
        "workdir": "work",
        "commands": ["mkdir -p out", "echo made by the shell > out/NOTE", "echo step-output"],
        "setup": "import vivtest_greet\nTITLE = 'Quarterly'\nROWS = sum(1 for _ in open('../data/table.csv'))\n",
        "imports": ["json.decoder", "vivtest_base"],
        "env": {"REPORT_MODE": "fast", "OVERRIDDEN": "template"},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_is_built_used_rebuilt_reused_and_deleted() {
    let index = PackageIndex::start("templates");
    let cache = scratch_dir("templates-cache");
    let home = scratch_dir("templates-home");
    let (url, cache2, home2) = (index.url.clone(), cache.clone(), home.clone());
    let configure = move |a: &mut vivarium::server::ServeArgs| {
        a.package_index = Some(url);
        a.package_cache_dir = Some(cache2);
        a.template_dir = Some(home2);
    };
    let s = start("templates", configure.clone()).await;
    let c = client();
    let file: Vec<u8> = (0..1_000_000u32)
        .map(|i| b"0123456789,\n"[(i % 12) as usize])
        .collect();
    let v = build_ready(&c, &s, reporting(&file)).await;
    assert_eq!(v["version"], 1, "{v}");
    assert_eq!(v["base"], "scientific", "{v}");
    assert_eq!(v["env"], json!(["OVERRIDDEN", "REPORT_MODE"]), "{v}");
    let pins: Vec<&str> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        pins.contains(&"vivtest-greet==1.0") && pins.contains(&"vivtest-base==1.0"),
        "{v}"
    );
    let id = v["id"].as_str().unwrap().to_string();
    assert!(v["bytes"].as_u64().unwrap() > 0, "{v}");
    // Each step's output is in the log, by step.
    let step = v["log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["step"] == "commands[2]")
        .unwrap();
    assert_eq!(step["stdout"], "step-output\n", "{v}");
    // Listed after the built-in ones.
    let (_, list) = get(&c, &s.url("/v1/templates")).await;
    let names: Vec<&str> = list["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["python", "scientific", "reporting"], "{list}");

    // A fresh run starts where the build ended: its imports done (no import time), its
    // names defined, its files, folder and variables; a request's own variable wins.
    let probe = "import os, sys\n\
        print(TITLE, ROWS, 'vivtest_greet' in sys.modules, 'vivtest_base' in sys.modules)\n\
        print(os.getcwd(), open('out/NOTE').read().strip(), os.path.getsize('../data/table.csv'))\n\
        print(os.environ['REPORT_MODE'], os.environ['OVERRIDDEN'], vivtest_greet.hello())\n\
        import random; print(random.random())\n\
        X = 1\n";
    let r = run(
        &c,
        &s,
        json!({"code": probe, "template": "reporting", "env": {"OVERRIDDEN": "request"}}),
    )
    .await;
    let out: Vec<&str> = r["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(out[0], "Quarterly 83334 True True", "{r}");
    assert!(out[1].ends_with("/work made by the shell 1000000"), "{r}");
    assert_eq!(out[2], "fast request hello from greet, base 1.0", "{r}");
    // The template's files are not the run's output: only what the run changes comes back.
    assert_eq!(r["files"], json!([]), "{r}");
    // Every run is fresh: its own randomness, nothing of the run before.
    let again = run(
        &c,
        &s,
        json!({"code": probe.replace("X = 1", "print('X' in dir())"), "template": "reporting"}),
    )
    .await;
    let out2: Vec<&str> = again["stdout"].as_str().unwrap().lines().collect();
    assert_eq!(
        out2[2], "fast template hello from greet, base 1.0",
        "{again}"
    );
    assert_ne!(
        out[3], out2[3],
        "random numbers repeat across runs: {r} {again}"
    );
    assert_eq!(out2[4], "False", "{again}");
    // A run's disk limit holds the template's files too: one too small for them is refused.
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", "template": "reporting", "limits": {"disk_bytes": 512 << 10}}),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk limit"),
        "{v}"
    );
    // A template's file the run changes comes back, even at the same size and at once.
    let r = run(&c, &s, json!({"code": "f = open('out/NOTE', 'r+'); f.write('MADE'); f.close()", "template": "reporting"})).await;
    let files: Vec<&str> = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["work/out/NOTE"], "{r}");
    // A file the run writes over a template's is the run's, and comes back.
    let r = run(
        &c,
        &s,
        json!({"code": "print(open('out/NOTE').read())", "template": "reporting",
        "files": [{"path": "work/out/NOTE", "content": b64(b"mine")}]}),
    )
    .await;
    assert_eq!(r["stdout"], "mine\n", "{r}");

    // A session from it: the same state, over turns, snapshots and forks.
    let api = s.api();
    let sid = api.session(&json!({"template": "reporting"})).await;
    let t = api
        .turn_ok(&sid, "import os; TITLE, ROWS, os.environ['REPORT_MODE']")
        .await;
    assert_eq!(t["result"], "('Quarterly', 83334, 'fast')", "{t}");
    api.turn_ok(&sid, "TITLE = 'changed'").await;
    let fork = api.fork(&sid).await.expect(201);
    let t = api
        .turn_ok(fork["id"].as_str().unwrap(), "TITLE, vivtest_greet.hello()")
        .await;
    assert_eq!(
        t["result"], "('changed', 'hello from greet, base 1.0')",
        "{t}"
    );

    // Identical inputs: the same template at once, under its name or another.
    let (st, same) = post(&c, &s.url("/v1/templates"), &reporting(&file)).await;
    assert_eq!(
        (st, same["id"].as_str()),
        (200, Some(id.as_str())),
        "{same}"
    );
    let mut other = reporting(&file);
    other["name"] = json!("reporting-copy");
    let (st, copy) = post(&c, &s.url("/v1/templates"), &other).await;
    assert_eq!(
        (st, copy["status"].as_str(), copy["id"].as_str()),
        (200, Some("ready"), Some(id.as_str())),
        "{copy}"
    );

    // Rebuilt with other inputs: a new version; one built on it has both.
    let mut v2 = reporting(&file);
    v2["setup"] = json!("import vivtest_greet\nTITLE = 'Yearly'\nROWS = 0\n");
    let v = build_ready(&c, &s, v2).await;
    assert_eq!(v["version"], 2, "{v}");
    assert_ne!(v["id"], json!(id), "{v}");
    let v = build_ready(
        &c,
        &s,
        json!({"name": "layered", "from": "reporting", "packages": ["vivtest-extra"],
        "setup": "import vivtest_extra\nSUBTITLE = TITLE + ' extra'", "env": {"LAYER": "2"}}),
    )
    .await;
    assert_eq!(v["base"], "scientific", "{v}");
    let r = run(&c, &s, json!({"code": "import os; print(SUBTITLE, vivtest_extra.VALUE, os.environ['REPORT_MODE'], os.environ['LAYER'])", "template": "layered"})).await;
    assert_eq!(r["stdout"], "Yearly extra 42 fast 2\n", "{r}");

    // Kept over a restart.
    s.stop().await;
    let s = start("templates-again", configure).await;
    let r = run(
        &c,
        &s,
        json!({"code": "print(TITLE, SUBTITLE)", "template": "layered"}),
    )
    .await;
    assert_eq!(r["stdout"], "Yearly Yearly extra\n", "{r}");

    // Deleted: gone for new runs; a session opened before goes on.
    let api = s.api();
    let sid = api.session(&json!({"template": "reporting"})).await;
    let del = c
        .delete(s.url("/v1/templates/reporting"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 204);
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", "template": "reporting"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    let (st, _) = get(&c, &s.url("/v1/templates/reporting")).await;
    assert_eq!(st, 404);
    assert_eq!(api.turn_ok(&sid, "TITLE").await["result"], "'Yearly'");
    // A built-in one cannot be deleted.
    let del = c
        .delete(s.url("/v1/templates/python"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 400);
    // The audit log names each build and deletion.
    let audit = s.audit();
    assert!(
        audit.iter().any(|l| l["action"] == "template_delete"),
        "{audit:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_templates_are_its_own() {
    let keys = two_tenant_keys("templates-tenants", ALICE, BOB);
    let s = start("templates-tenants", move |a| a.api_keys_file = Some(keys)).await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    build_ready(
        &alice,
        &s,
        json!({"name": "mine", "setup": "SECRET_SAUCE = 'alice'"}),
    )
    .await;
    // Bob cannot see, use, build on or delete it.
    let (st, v) = get(&bob, &s.url("/v1/templates/mine")).await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    let (_, list) = get(&bob, &s.url("/v1/templates")).await;
    assert_eq!(list["templates"].as_array().unwrap().len(), 2, "{list}");
    let (st, v) = post(
        &bob,
        &s.url("/v1/execute"),
        &json!({"code": "print(SECRET_SAUCE)", "template": "mine"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    let (st, v) = post(&bob, &s.url("/v1/sessions"), &json!({"template": "mine"})).await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    let (st, v) = post(
        &bob,
        &s.url("/v1/templates"),
        &json!({"name": "his", "from": "mine"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    let del = bob
        .delete(s.url("/v1/templates/mine"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 404);
    // His own of the same name is his.
    build_ready(
        &bob,
        &s,
        json!({"name": "mine", "setup": "SECRET_SAUCE = 'bob'"}),
    )
    .await;
    let r = run(
        &bob,
        &s,
        json!({"code": "print(SECRET_SAUCE)", "template": "mine"}),
    )
    .await;
    assert_eq!(r["stdout"], "bob\n", "{r}");
    let r = run(
        &alice,
        &s,
        json!({"code": "print(SECRET_SAUCE)", "template": "mine"}),
    )
    .await;
    assert_eq!(r["stdout"], "alice\n", "{r}");
    s.stop().await;
}

/// What a run sees of the template's file without opening anything: its inode, change
/// time, size and modification time (the same in two runs: the same folder, kept).
const STAT: &str = "import os\ns = os.stat('data/table.bin')\nprint(s.st_ino, s.st_ctime_ns, s.st_size, s.st_mtime_ns)";

/// What a run sees of its folder, reading everything.
const LOOK: &str = "import os, hashlib\nprint(sorted(os.listdir('.')), sorted(os.listdir('data')), os.stat('data/table.bin').st_mtime_ns, hashlib.sha256(open('data/table.bin', 'rb').read()).hexdigest())";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_changed_nothing_hands_its_folder_on_and_one_that_did_never() {
    // One worker: one scratch root, so the runs below meet each other's folders.
    let s = start("templates-kept", |a| a.workers = Some(1)).await;
    let c = client();
    let file: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    build_ready(
        &c,
        &s,
        json!({"name": "kept", "files": [{"path": "data/table.bin", "content": b64(&file)}]}),
    )
    .await;
    let exec = |code: &str| json!({"code": code, "template": "kept"});
    let settle = || tokio::time::sleep(std::time::Duration::from_millis(150));
    let fresh = run(&c, &s, exec(LOOK)).await["stdout"].clone();
    // A run that opened nothing leaves its folder to the next run of the template.
    settle().await;
    let first = run(&c, &s, exec(STAT)).await["stdout"].clone();
    settle().await;
    let second = run(&c, &s, exec(STAT)).await["stdout"].clone();
    assert_eq!(
        first, second,
        "a folder left as laid is kept for the next run"
    );
    // Whatever a run changes, the next run finds the template's files as laid: each change
    // is made in a kept folder (its STAT line is the one before), which is then not kept.
    let changes = [
        "open('data/table.bin', 'ab').write(b'x')",
        "open('data/new.txt', 'w').write('hi')",
        "os.utime('data/table.bin', (0, 0))",
        "os.rename('data/table.bin', 'data/moved.bin')",
        "os.remove('data/table.bin')",
        "os.mkdir('made')",
        "os.symlink('table.bin', 'data/link')",
        "os.link('data/table.bin', 'data/hard')",
    ];
    for change in changes {
        settle().await;
        let before = run(&c, &s, exec(STAT)).await["stdout"].clone();
        settle().await;
        let r = run(&c, &s, exec(&format!("{STAT}\n{change}"))).await;
        assert_eq!(r["stdout"], before, "{change}: made in a kept folder");
        settle().await;
        let after = run(&c, &s, exec(LOOK)).await;
        assert_eq!(after["stdout"], fresh, "{change}: the next run saw it");
        assert!(
            after["files"].as_array().is_none_or(|f| f.is_empty()),
            "{after}"
        );
    }
    // A kept folder is no sandbox's: the gauge of sandbox folders still settles at zero.
    run(&c, &s, exec(STAT)).await;
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_hostile_builds_end_named_and_the_server_keeps_serving() {
    let s = start("templates-hostile", |a| {
        a.templates_per_tenant = 6;
        a.template_builds_per_tenant = 1;
    })
    .await;
    let c = client();
    let failed = async |body: Value| -> Value {
        let (st, v) = post(&c, &s.url("/v1/templates"), &body).await;
        assert_eq!(st, 202, "{v}");
        let v = built(&c, &s, body["name"].as_str().unwrap()).await;
        assert_eq!(v["status"], "failed", "{v}");
        v["error"].clone()
    };
    // A command that fails names its step and exit status; its output is in the log.
    let e = failed(json!({"name": "exits", "commands": ["echo fine", "echo broken >&2; exit 3"]}))
        .await;
    assert_eq!(e, json!({"step": "commands[1]", "reason": "exit status 3"}));
    let (_, v) = get(&c, &s.url("/v1/templates/exits")).await;
    assert_eq!(v["log"][1]["stderr"], "broken\n", "{v}");
    // Using it is a named refusal.
    let (st, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", "template": "exits"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (409, "template_failed"), "{v}");
    // Set-up code that raises; one that never ends (the step's time limit); a file past the
    // disk limit; an import that is not there.
    let e = failed(json!({"name": "raises", "setup": "1/0"})).await;
    assert_eq!(e["step"], "setup", "{e}");
    assert!(
        e["reason"]
            .as_str()
            .unwrap()
            .starts_with("ZeroDivisionError"),
        "{e}"
    );
    let e = failed(
        json!({"name": "endless", "setup": "while True: pass", "limits": {"timeout_ms": 1500}}),
    )
    .await;
    assert_eq!(e["step"], "setup", "{e}");
    assert!(e["reason"].as_str().unwrap().contains("1500"), "{e}");
    let e = failed(json!({"name": "huge", "commands": ["python -c \"open('big','wb').write(b'x' * (64 << 20))\""],
        "limits": {"disk_bytes": 16 << 20}})).await;
    assert_eq!(e["step"], "commands[0]", "{e}");
    let e = failed(json!({"name": "missing", "imports": ["no_such_module_here"]})).await;
    assert_eq!(e["step"], "imports", "{e}");
    // Bad asks are 400s naming the field; an unknown base is a 404.
    for (body, field) in [
        (json!({"name": "python"}), "name"),
        (json!({"name": "../x"}), "name"),
        (json!({"name": "ok", "imports": ["os; import sys"]}), ""),
        (
            json!({"name": "ok", "files": [{"path": "../escape", "content": ""}]}),
            "files[0].path",
        ),
        (json!({"name": "ok", "env": {"A=B": "x"}}), ""),
        (json!({"name": "ok", "bogus": 1}), ""),
    ] {
        let (st, v) = post(&c, &s.url("/v1/templates"), &body).await;
        assert_eq!(st, 400, "{body} {v}");
        if !field.is_empty() {
            assert_eq!(v["error"]["field"], field, "{body} {v}");
        }
    }
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "ok", "from": "nope"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (404, "template_not_found"), "{v}");
    // One build at a time for this tenant: a second while one runs is 429; then the
    // templates quota (six, failed ones included).
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "slow", "setup": "import time; time.sleep(3)"}),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "second", "setup": "pass"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (429, "quota_exceeded"), "{v}");
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "slow", "setup": "pass"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (409, "template_building"), "{v}");
    assert_eq!(built(&c, &s, "slow").await["status"], "ready");
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "seventh", "setup": "pass"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (429, "quota_exceeded"), "{v}");
    // Through all of it the server kept serving, and no sandbox folder was left.
    let r = run(&c, &s, json!({"code": "print('still here')"})).await;
    assert_eq!(r["stdout"], "still here\n");
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    s.stop().await;
}
