//! Packages under concurrency, over real HTTP against the fixture index on 127.0.0.1: first
//! requests for one set are joined (one resolution, one download, every caller answered),
//! requests past a tenant's `package_jobs` wait their turn instead of failing, and only a
//! full queue is refused (429 `quota_exceeded` naming `package_jobs`, with Retry-After); a
//! waiter past its deadline is told so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef";

/// Two tenants of one key each, at the default quotas (`package_jobs` 2 unless `more` says).
async fn serve(
    tag: &str,
    index: &PackageIndex,
    more: impl FnOnce(&mut vivarium::server::ServeArgs),
) -> (TestServer, PathBuf) {
    let dir = scratch_dir(tag);
    let keys = dir.join("keys.txt");
    std::fs::write(&keys, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    let cache = dir.join("pkg-cache");
    let url = index.url.clone();
    let c = cache.clone();
    let s = start(tag, move |a| {
        a.api_keys_file = Some(keys);
        a.package_index = Some(url);
        a.package_cache_dir = Some(c);
        more(a);
    })
    .await;
    (s, cache)
}

/// `n` requests at once, each for a set of its own (`vivtest-extra>=0.{i}`: each its own
/// resolution, all picking vivtest-extra 2.0), importing it: what [`execute`] gives each.
async fn distinct_sets(
    c: &reqwest::Client,
    s: &TestServer,
    n: usize,
) -> Vec<(u16, Option<String>, Value)> {
    let asks = (0..n).map(|i| async move {
        let set = vec![format!("vivtest-extra>=0.{i}")];
        execute(
            c,
            s,
            &set,
            "import vivtest_extra\nprint(vivtest_extra.VALUE)",
        )
        .await
    });
    futures_util::future::join_all(asks).await
}

/// Runs `code` with `packages`: the status, the Retry-After header, the body.
async fn execute(
    c: &reqwest::Client,
    s: &TestServer,
    packages: &[String],
    code: &str,
) -> (u16, Option<String>, Value) {
    let r = c
        .post(s.url("/v1/execute"))
        .json(&json!({"code": code, "packages": packages, "template": "python", "policy": "off"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, retry, v)
}

fn envs(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("envs")).map_or(0, |d| d.count())
}

/// The tenant's `package_jobs` in use, as `/v1/usage` says.
async fn jobs_in_use(c: &reqwest::Client, s: &TestServer) -> u64 {
    let (st, u) = get(c, &s.url("/v1/usage")).await;
    assert_eq!(st, 200, "{u}");
    u["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == "package_jobs")
        .unwrap()["used"]
        .as_u64()
        .unwrap()
}

/// Waits until the tenant of `c` holds `n` package jobs (a resolution is under way).
async fn until_jobs(c: &reqwest::Client, s: &TestServer, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while jobs_in_use(c, s).await != n {
        assert!(Instant::now() < deadline, "package_jobs never reached {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_first_requests_for_one_set_from_two_keys_are_all_answered_by_one_download() {
    let index = PackageIndex::start("queue-join");
    let (s, cache) = serve("pkg-queue-join", &index, |_| {}).await;
    let code = "import vivtest_greet\nprint(vivtest_greet.hello())";
    let asks = (0..12).map(|i| {
        let c = client_with_key(if i % 2 == 0 { ALICE } else { BOB });
        let s = &s;
        async move { execute(&c, s, &["vivtest-greet>=1".into()], code).await }
    });
    for (st, _, v) in futures_util::future::join_all(asks).await {
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["stdout"], "hello from greet, base 1.0\n", "{v}");
    }
    // One resolution (pip read the project page once) and one download by the host of each
    // wheel. pip before 23.3 also fetches each wheel once for its dry-run report, whatever
    // the PEP 658 metadata; newer pips read the metadata only.
    assert_eq!(index.gets("/simple/vivtest-greet/"), 1);
    for wheel in [
        "vivtest_greet-1.0-py3-none-any.whl",
        "vivtest_base-1.0-py3-none-any.whl",
    ] {
        let path = format!("/files/{wheel}");
        assert_eq!(index.gets_by(&path, "Python-urllib/"), 1, "{wheel}");
        assert!(index.gets_by(&path, "pip/") <= 1, "{wheel}");
    }
    assert_eq!(envs(&cache), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_first_requests_for_distinct_sets_wait_their_turn_past_package_jobs() {
    let index = PackageIndex::start("queue-distinct");
    let (s, _cache) = serve("pkg-queue-distinct", &index, |_| {}).await;
    let c = client_with_key(ALICE);
    // Eight specifier sets, each its own resolution (they all pick vivtest-extra 2.0).
    for (st, _, v) in distinct_sets(&c, &s, 8).await {
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["stdout"], "42\n", "{v}");
    }
    assert_eq!(index.gets("/simple/vivtest-extra/"), 8);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_full_queue_is_refused_and_it_names_package_jobs() {
    let index = PackageIndex::start("queue-full");
    // One job a tenant: its queue holds 8 waiting (`package_jobs` × 8).
    let (s, _cache) = serve("pkg-queue-full", &index, |a| {
        a.max_package_jobs_per_tenant = 1;
        a.queue_timeout_ms = 120_000;
    })
    .await;
    let c = client_with_key(ALICE);
    // The one place is held by a slow resolution (its project page answers after 3 s).
    let slow = {
        let (c, s) = (c.clone(), &s);
        async move {
            execute(
                &c,
                s,
                &["vivtest-slow".into()],
                "import vivtest_slow\nprint(vivtest_slow.VALUE)",
            )
            .await
        }
    };
    let rest = async {
        until_jobs(&c, &s, 1).await;
        distinct_sets(&c, &s, 14).await
    };
    let ((st, _, v), answers) = tokio::join!(slow, rest);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "slow\n", "{v}");
    let mut refused = 0;
    for (st, retry, v) in answers {
        match st {
            200 => assert_eq!(v["stdout"], "42\n", "{v}"),
            429 => {
                refused += 1;
                assert_eq!(error_code(&v), "quota_exceeded", "{v}");
                assert_eq!(v["quota"]["quota"], "package_jobs", "{v}");
                assert!(
                    v["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("package_jobs"),
                    "{v}"
                );
                assert!(retry.is_some(), "no Retry-After: {v}");
            }
            _ => panic!("{st}: {v}"),
        }
    }
    // 14 asked while the one place was held: 8 waited, the rest were refused.
    assert!((1..=6).contains(&refused), "{refused} refused");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_past_its_deadline_is_told_why() {
    let index = PackageIndex::start("queue-deadline");
    std::fs::write(index.dir.join("slow-secs"), "6").unwrap();
    let (s, _cache) = serve("pkg-queue-deadline", &index, |a| {
        a.max_package_jobs_per_tenant = 1;
        a.queue_timeout_ms = 1_000;
    })
    .await;
    let c = client_with_key(ALICE);
    let slow = {
        let (c, s) = (c.clone(), &s);
        async move { execute(&c, s, &["vivtest-slow".into()], "print(1)").await }
    };
    let late = async {
        until_jobs(&c, &s, 1).await;
        let asked = Instant::now();
        let answer = execute(&c, &s, &["vivtest-other".into()], "print(2)").await;
        (answer, asked.elapsed())
    };
    let ((st, _, v), ((late_st, _, late_v), waited)) = tokio::join!(slow, late);
    assert_eq!(st, 200, "{v}");
    assert_eq!(late_st, 504, "{late_v}");
    assert_eq!(
        error_code(&late_v),
        "package_resolution_timeout",
        "{late_v}"
    );
    let message = late_v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("package_jobs") && message.contains("1000 ms"),
        "{late_v}"
    );
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    // A tenant whose place is free again is served.
    let (st, _, v) = execute(&c, &s, &["vivtest-other".into()], "print(3)").await;
    assert_eq!(st, 200, "{v}");
    s.stop().await;
}
