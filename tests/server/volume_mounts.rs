//! Volumes mounted into sandboxes, over real HTTP with the real runtime: a file written in a
//! session read by a fresh execution and through the HTTP file API once it is closed, never
//! before (what a concurrent writer sees, exactly as `docs/guides/volumes.md` says); a
//! read-only mount refusing every write with EROFS; a write past the room lent refused with
//! ENOSPC and the volume as it was; hostile mounts and paths refused by name; a session's
//! volume kept by name through a snapshot and a fork, and a restore without it refused.

use serde_json::{Value, json};

use crate::http_support::*;

const ALICE: &str = "mounts-key-alice-0123456789ab";
const BOB: &str = "mounts-key-bob-0123456789abcd";

/// Runs `code` in a fresh sandbox of the small template with `volumes`: the response.
async fn run(c: &reqwest::Client, s: &TestServer, code: &str, volumes: Value) -> (u16, Value) {
    post(
        c,
        &s.url("/v1/execute"),
        &json!({"code": code, "template": "python", "policy": "off", "volumes": volumes}),
    )
    .await
}

/// `run`'s stdout, the run having ended `ok`.
async fn stdout(c: &reqwest::Client, s: &TestServer, code: &str, volumes: Value) -> String {
    let (st, r) = run(c, s, code, volumes).await;
    assert_eq!((st, r["status"].as_str()), (200, Some("ok")), "{r}");
    r["stdout"].as_str().unwrap().to_string()
}

/// A turn of session `id`: its stdout, the turn having ended `ok`.
async fn turn(c: &reqwest::Client, s: &TestServer, id: &str, code: &str) -> String {
    let (st, r) = post(
        c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({"code": code, "policy": "off"}),
    )
    .await;
    assert_eq!((st, r["status"].as_str()), (200, Some("ok")), "{r}");
    r["stdout"].as_str().unwrap().to_string()
}

async fn file(c: &reqwest::Client, s: &TestServer, volume: &str, path: &str) -> (u16, String) {
    let r = c
        .get(s.url(&format!("/v1/volumes/{volume}/files/{path}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn put_file(c: &reqwest::Client, s: &TestServer, volume: &str, path: &str, body: &str) {
    let r = c
        .put(s.url(&format!("/v1/volumes/{volume}/files/{path}")))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_seen_whole_by_every_sandbox_once_its_writer_closes_it() {
    let s = start("mounts-writers", |_| {}).await;
    let c = client();
    assert_eq!(
        post(&c, &s.url("/v1/volumes"), &json!({"name": "work"}))
            .await
            .0,
        201
    );
    let rw = json!([{"name": "work", "path": "/mnt/work"}]);
    let ro = json!([{"name": "work", "path": "/data", "read_only": true}]);

    // A session writes a file and keeps it open between turns.
    let (st, opened) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"template": "python", "volumes": rw}),
    )
    .await;
    assert_eq!(st, 201, "{opened}");
    assert_eq!(
        opened["volumes"],
        json!([{"name": "work", "path": "/mnt/work", "read_only": false}])
    );
    let id = opened["id"].as_str().unwrap();
    turn(
        &c,
        &s,
        id,
        r#"import os
os.makedirs('/mnt/work/notes', exist_ok=True)
f = open('/mnt/work/notes/day1.txt', 'w')
f.write('first draft')
f.flush()"#,
    )
    .await;
    // Until it is closed, no other sandbox and no HTTP reader sees it; the writer's own
    // folder has it only as the session's private copy.
    let look =
        "import os\nprint(os.path.exists('/data/notes/day1.txt'), sorted(os.listdir('/data')))";
    assert_eq!(stdout(&c, &s, look, ro.clone()).await, "False ['notes']\n");
    assert_eq!(file(&c, &s, "work", "notes/day1.txt").await.0, 404);
    turn(&c, &s, id, "f.close()").await;
    assert_eq!(
        stdout(
            &c,
            &s,
            "print(open('/data/notes/day1.txt').read())",
            ro.clone()
        )
        .await,
        "first draft\n"
    );
    assert_eq!(
        file(&c, &s, "work", "notes/day1.txt").await,
        (200, "first draft".to_string())
    );

    // In one sandbox: a reader keeps the file it opened; two writers, the last close wins.
    let writers = r#"r = open('/mnt/work/notes/day1.txt')
w1 = open('/mnt/work/notes/day1.txt', 'w')
w2 = open('/mnt/work/notes/day1.txt', 'a')
w1.write('one'); w2.write(' and two')
print(repr(open('/mnt/work/notes/day1.txt').read()))
w1.close(); print(repr(open('/mnt/work/notes/day1.txt').read()))
w2.close(); print(repr(open('/mnt/work/notes/day1.txt').read()))
print(repr(r.read()))"#;
    assert_eq!(
        stdout(&c, &s, writers, rw.clone()).await,
        "'first draft'\n'one'\n'first draft and two'\n'first draft'\n"
    );
    // A file left open when the run ends is closed then, and kept.
    stdout(
        &c,
        &s,
        "f = open('/mnt/work/left-open.txt', 'w'); f.write('kept'); f.flush()",
        rw.clone(),
    )
    .await;
    assert_eq!(
        file(&c, &s, "work", "left-open.txt").await,
        (200, "kept".into())
    );
    // The session sees what others wrote since, and what the HTTP API put there.
    put_file(&c, &s, "work", "from-http.txt", "uploaded").await;
    assert_eq!(
        turn(
            &c,
            &s,
            id,
            "print(open('/mnt/work/from-http.txt').read(), open('/mnt/work/left-open.txt').read())"
        )
        .await,
        "uploaded kept\n"
    );
    let (st, info) = get(&c, &s.url("/v1/volumes/work")).await;
    // notes/, notes/day1.txt, left-open.txt, from-http.txt: 19 + 4 + 8 bytes.
    assert_eq!(
        (st, info["files"].as_u64(), info["bytes"].as_u64()),
        (200, Some(4), Some(31)),
        "{info}"
    );
    // The default check knows the mount: a write there lands in the volume, not in the
    // working directory, and is no finding; one elsewhere still is.
    let (st, r) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "open('/mnt/work/checked.txt', 'w').write('x')\nopen('/elsewhere.txt', 'w')",
                "template": "python", "volumes": rw}),
    )
    .await;
    assert_eq!((st, r["status"].as_str()), (200, Some("ok")), "{r}");
    let findings: Vec<(&str, u64)> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), f["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(findings, [("write_outside_workdir", 2)], "{r}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mounts_refuse_every_write_and_room_is_enforced() {
    let s = start("mounts-limits", |a| {
        a.volume_bytes = 1 << 20;
        a.volume_files = 6;
    })
    .await;
    let c = client();
    post(&c, &s.url("/v1/volumes"), &json!({"name": "ds"})).await;
    put_file(&c, &s, "ds", "keep.txt", "precious").await;
    put_file(&c, &s, "ds", "dir/inner.txt", "inner").await;
    let ro = json!([{"name": "ds", "path": "/ds", "read_only": true}]);
    let code = r#"import errno, os
tries = [lambda: open('/ds/keep.txt', 'w'), lambda: open('/ds/new.txt', 'x'),
lambda: open('/ds/keep.txt', 'a'), lambda: os.mkdir('/ds/d'),
lambda: os.remove('/ds/keep.txt'), lambda: os.rmdir('/ds/dir'),
lambda: os.rename('/ds/keep.txt', '/ds/moved.txt'),
lambda: os.utime('/ds/keep.txt', (1, 1))]
for t in tries:
    try:
        t(); print('wrote')
    except OSError as e:
        print(errno.errorcode[e.errno])
print(open('/ds/keep.txt').read())"#;
    let out = stdout(&c, &s, code, ro).await;
    assert_eq!(out, format!("{}precious\n", "EROFS\n".repeat(8)), "{out}");

    // Writable, but 1 MiB a volume: a 2 MiB write is ENOSPC, and the file it was replacing
    // is as it was; what fits is kept.
    let rw = json!([{"name": "ds", "path": "/ds"}]);
    let code = r#"import errno
f = open('/ds/keep.txt', 'wb')
try:
    f.write(b'x' * (2 << 20)); f.flush()
except OSError as e:
    print(errno.errorcode[e.errno])
try:
    f.close()
except OSError as e:
    print('close', errno.errorcode[e.errno])
print(open('/ds/keep.txt').read())
open('/ds/small.txt', 'w').write('fits')"#;
    assert_eq!(
        stdout(&c, &s, code, rw.clone()).await,
        "ENOSPC\nclose ENOSPC\nprecious\n"
    );
    assert_eq!(
        file(&c, &s, "ds", "keep.txt").await,
        (200, "precious".into())
    );
    assert_eq!(file(&c, &s, "ds", "small.txt").await, (200, "fits".into()));
    // Six entries a volume: keep.txt, dir, dir/inner.txt, small.txt, and two more.
    let code = r#"import errno, os
for i in range(4):
    try:
        open(f'/ds/n{i}', 'w').close(); print('ok')
    except OSError as e:
        print(errno.errorcode[e.errno])"#;
    assert_eq!(
        stdout(&c, &s, code, rw.clone()).await,
        "ok\nok\nENOSPC\nENOSPC\n"
    );
    // A sandbox's own quota is its own: the volume's room does not cut it.
    assert_eq!(
        stdout(
            &c,
            &s,
            "open('/tmp/big', 'wb').write(b'x' * (4 << 20)); print('ok')",
            rw
        )
        .await,
        "ok\n"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_mounts_and_paths_are_refused_by_name() {
    let keys = two_tenant_keys("mounts-hostile", ALICE, BOB);
    let s = start("mounts-hostile", |a| a.api_keys_file = Some(keys)).await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    post(&alice, &s.url("/v1/volumes"), &json!({"name": "mine"})).await;
    put_file(&alice, &s, "mine", "secret.txt", "alice's").await;
    let mount = |path: &str| json!([{"name": "mine", "path": path}]);
    for bad in [
        mount("/"),
        mount("relative"),
        mount("/usr/local/lib"),
        mount("/usr/local/lib/python315.zip/x"),
        mount("/usr"),
        mount("/tmp"),
        mount("/tmp/home"),
        mount("/a/../b"),
        json!([{"name": "../mine", "path": "/v"}]),
        json!([{"name": "mine", "path": "/v"}, {"name": "mine", "path": "/v/inner"}]),
        json!([{"name": "mine", "path": "/v"}, {"name": "mine", "path": "/v/"}]),
        json!(
            (0..9)
                .map(|i| json!({"name": "mine", "path": format!("/m{i}")}))
                .collect::<Vec<_>>()
        ),
        json!([{"name": "mine", "path": "/v", "extra": true}]),
    ] {
        let (st, e) = run(&alice, &s, "print(1)", bad.clone()).await;
        assert_eq!(st, 400, "{bad}: {e}");
        assert!(e["error"]["code"].as_str().is_some(), "{bad}: {e}");
    }
    // A file placed where a volume is mounted.
    let (st, e) = post(
        &alice,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "volumes": mount("/v"),
                "files": [{"path": "v/x.txt", "content": "eA=="}]}),
    )
    .await;
    assert_eq!(
        (st, e["error"]["field"].as_str()),
        (400, Some("volumes")),
        "{e}"
    );
    // Another tenant's volume is no volume at all.
    let (st, e) = run(&bob, &s, "print(1)", mount("/v")).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (404, Some("volume_not_found")),
        "{e}"
    );

    // Inside the guest: nothing leads out of the volume or makes a link in it; a mount
    // point cannot be removed or renamed away.
    let code = r#"import errno, os
def t(f):
    try:
        r = f(); print('ok', r)
    except OSError as e:
        print(errno.errorcode[e.errno])
d = os.open('/v', os.O_RDONLY | os.O_DIRECTORY)
t(lambda: os.open('../../etc/passwd', os.O_RDONLY, dir_fd=d))
t(lambda: open('/v/../v/secret.txt').read())
t(lambda: os.symlink('/etc', '/v/link'))
t(lambda: os.symlink('secret.txt', '/v/link'))
t(lambda: os.link('/v/secret.txt', '/tmp/hard'))
t(lambda: os.rename('/v/secret.txt', '/tmp/stolen'))
t(lambda: os.rmdir('/v'))
t(lambda: os.rename('/v', '/w'))
t(lambda: sorted(os.listdir('/v')))"#;
    let out = stdout(&alice, &s, code, mount("/v")).await;
    assert_eq!(
        out, "EPERM\nok alice's\nEPERM\nEPERM\nEXDEV\nEXDEV\nEBUSY\nEBUSY\nok ['secret.txt']\n",
        "{out}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_volumes_are_kept_by_name_through_snapshots_and_forks() {
    let s = start("mounts-sessions", |_| {}).await;
    let c = client();
    post(&c, &s.url("/v1/volumes"), &json!({"name": "shared"})).await;
    put_file(&c, &s, "shared", "data.csv", "a,b\n1,2\n").await;
    let (st, opened) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"template": "python", "volumes": [{"name": "shared", "path": "/shared", "read_only": true}]}),
    )
    .await;
    assert_eq!(st, 201, "{opened}");
    let id = opened["id"].as_str().unwrap().to_string();
    turn(
        &c,
        &s,
        &id,
        "rows = open('/shared/data.csv').read().splitlines()",
    )
    .await;
    let (st, fork) = post(&c, &s.url(&format!("/v1/sessions/{id}/fork")), &json!({})).await;
    assert_eq!(st, 201, "{fork}");
    let fork = fork["id"].as_str().unwrap();
    assert_eq!(
        turn(
            &c,
            &s,
            fork,
            "print(rows, open('/shared/data.csv').read().count(','))"
        )
        .await,
        "['a,b', '1,2'] 2\n"
    );
    let (st, snap) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!(st, 201, "{snap}");
    let snap = snap["snapshot_id"].as_str().unwrap();
    // The snapshot holds the volume's name, not its files: a change shows in the restore.
    put_file(&c, &s, "shared", "data.csv", "a,b\n1,2\n3,4\n").await;
    let (st, restored) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": snap})).await;
    assert_eq!(st, 201, "{restored}");
    assert_eq!(restored["volumes"][0]["path"], "/shared", "{restored}");
    let restored = restored["id"].as_str().unwrap();
    assert_eq!(
        turn(
            &c,
            &s,
            restored,
            "print(len(rows), len(open('/shared/data.csv').read().splitlines()))"
        )
        .await,
        "2 3\n"
    );
    for sid in [id.as_str(), fork, restored] {
        c.delete(s.url(&format!("/v1/sessions/{sid}")))
            .send()
            .await
            .unwrap();
    }
    // Gone: the restore names it.
    assert_eq!(
        c.delete(s.url("/v1/volumes/shared"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        204
    );
    let (st, e) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": snap})).await;
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (404, Some("volume_not_found")),
        "{e}"
    );
    s.stop().await;
}
