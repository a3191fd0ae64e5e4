//! Shared set-up for the integration tests: a real `Vivarium` over the real runtime (fetched,
//! verified and compiled on first use, then cached), and small helpers.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use vivarium::testing::EngineOptions;
use vivarium::{ExecRequest, LimitsRequest, Report, Template, Vivarium, VivariumOptions};

/// A host of its own, with a private scratch base, for tests that count sandbox dirs.
pub fn fresh_host() -> (Arc<Vivarium>, PathBuf) {
    let base = std::env::temp_dir().join(format!(
        "vivarium-test-{}-{:08x}",
        std::process::id(),
        rand_u32()
    ));
    let mut opts = VivariumOptions::from_env();
    opts.scratch_base = base.clone();
    // Tests never hold many instances; a small pool keeps reserved address space modest.
    opts.engine = EngineOptions {
        max_instances: 64,
        ..EngineOptions::default()
    };
    (Vivarium::open(opts).expect("opening the runtime"), base)
}

/// One host for the whole test binary.
pub fn host() -> Arc<Vivarium> {
    static HOST: OnceLock<Arc<Vivarium>> = OnceLock::new();
    HOST.get_or_init(|| fresh_host().0).clone()
}

pub fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish() as u32
}

pub fn run(code: &str) -> Report {
    run_with(code, LimitsRequest::default())
}

/// Runs `code` on the minimal `python` template: these tests are about the sandbox's
/// mechanics and limits, not a template's packages (those are `tests/sandbox/templates.rs`').
pub fn run_with(code: &str, limits: LimitsRequest) -> Report {
    host()
        .execute(ExecRequest {
            code: code.into(),
            limits,
            template: Some(Template::Python),
            ..Default::default()
        })
        .expect("execution could be attempted")
}

/// A request for `code` on the minimal `python` template (see [`run_with`]).
pub fn request(code: &str) -> ExecRequest {
    ExecRequest {
        code: code.into(),
        template: Some(Template::Python),
        ..Default::default()
    }
}

/// Open descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A session's interpreter of the `python` template under the default limits, with no extra
/// packages, volumes or user template.
pub fn python_interpreter(host: &Vivarium) -> vivarium::testing::Interpreter {
    host.open_interpreter(
        vivarium::Limits::DEFAULT,
        Template::Python,
        Arc::default(),
        host.no_packages(),
        Vec::new(),
        None,
    )
    .unwrap()
}
