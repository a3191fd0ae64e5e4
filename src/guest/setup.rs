//! The hidden set-up turn every sandbox runs before any caller code (`_vivarium.begin` in
//! `python-wasi/guest/setup.py`): its own environment, fresh randomness, and what the front
//! door asked for.

use super::PACKAGES_DIR;
use crate::limits::TurnLimits;

/// Limits of the hidden set-up turn of every sandbox (the checker runs in it).
pub const SETUP_LIMITS: TurnLimits = TurnLimits {
    timeout_ms: 10_000,
    fuel: 50_000_000_000,
    output_bytes: 64 << 10,
};

/// What the hidden first turn of a sandbox does besides giving it its own environment and
/// randomness (see `python-wasi/guest/setup.py`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestSetup {
    /// `display()` and `plt.show()` produce rich outputs.
    pub rich: bool,
    /// stdout and stderr flush at each newline, so streamed chunks leave as printed.
    pub line_buffered: bool,
    /// Run the pre-execution checker on this source first; its verdict (JSON) is the set-up
    /// turn's result.
    pub check: Option<String>,
    /// A single program (a fresh execution), not a session: its code is `<string>` in
    /// tracebacks, as `python -c`'s (a session's turns are `<turn N>`).
    pub program: bool,
    /// An interpreter kept for turns (a session, a checker): the REPL's echo sends each
    /// turn's value to the door as its result, the door hears of an uncaught exception, and
    /// `input()` asks the turn's client (`_session_hooks` in `python-wasi/guest/setup.py`).
    pub session: bool,
}

/// Puts [`PACKAGES_DIR`] on `sys.path` once (last, so that nothing in it shadows the
/// standard library or a built-in package) and drops the finder cached for it, which may
/// have listed a smaller set (a session given more packages). Not
/// `importlib.invalidate_caches()`: that imports `importlib.metadata`, 45 ms a sandbox.
pub fn packages_on_path() -> String {
    format!(
        "import sys as _s\n\
         if {PACKAGES_DIR:?} not in _s.path: _s.path.append({PACKAGES_DIR:?})\n\
         _s.path_importer_cache.pop({PACKAGES_DIR:?}, None); del _s\n"
    )
}

/// Sets a turn's own variables (a cell's `env_vars`), keeping what they replace for
/// [`UNDO_TURN_ENV`]: a hidden turn before the caller's.
pub fn turn_env(env: &[(String, String)]) -> String {
    format!(
        "import os as _o\n_e = {env}\n\
         _o._vivarium_turn_env = {{_k: _o.environ.get(_k) for _k in _e}}\n\
         _o.environ.update(_e)\ndel _o, _e\n",
        env = env_literal(pairs(env))
    )
}

/// Undoes what [`turn_env`] set: a hidden turn after the caller's.
pub const UNDO_TURN_ENV: &str = "import os as _o\n\
    for _k, _v in _o.__dict__.pop('_vivarium_turn_env', {}).items():\n    \
    _o.environ.pop(_k, None) if _v is None else _o.environ.__setitem__(_k, _v)\n\
    del _o\n";

/// `env`'s pairs as `&str`s.
fn pairs(env: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// `env` as a Python dict literal: JSON objects of strings read the same as Python literals
/// (serde_json escapes only `"`, `\` and control characters, each in a form Python reads the
/// same way).
pub fn env_literal<'a>(env: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let map: serde_json::Map<String, serde_json::Value> = env
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// The hidden first turn of a sandbox: `_vivarium.begin(...)` with the sandbox's environment,
/// and, when it has extra packages, [`PACKAGES_DIR`] on `sys.path` (last: a wheel cannot
/// shadow the standard library or a built-in package).
pub fn setup_code(env: &[(String, String)], setup: &GuestSetup, packages: bool) -> String {
    let env = env_literal(pairs(env));
    let mut path = if packages {
        packages_on_path()
    } else {
        String::new()
    };
    // A JSON string reads the same as a Python string literal.
    let check = match &setup.check {
        // A notebook cell is checked as it will run: its magics and `!` lines translated
        // (`vivarium_ipy.transform` keeps the lines where they were), or as it is if the
        // translation fails (the run then reports that failure itself).
        Some(src) if super::needs_notebook(src) => {
            let src = serde_json::to_string(src).expect("a string serialises");
            path.push_str(&format!(
                "def __vivarium_cell(s):\n    try:\n        return __import__('vivarium_ipy').transform(s)\n    except BaseException:\n        return s\n\
                 __vivarium_c = __vivarium_cell({src})\ndel __vivarium_cell\n"
            ));
            "__vivarium_c".to_string()
        }
        Some(src) => serde_json::to_string(src).expect("a string serialises"),
        None => "None".into(),
    };
    let py_bool = |b: bool| if b { "True" } else { "False" };
    let tail = if check == "__vivarium_c" {
        "del __vivarium_c\n"
    } else {
        ""
    };
    format!(
        "{path}__import__('_vivarium').begin({env}, {}, {}, {check}, {}, {})\n{tail}",
        py_bool(setup.rich),
        py_bool(setup.line_buffered),
        py_bool(setup.program),
        py_bool(setup.session)
    )
}
