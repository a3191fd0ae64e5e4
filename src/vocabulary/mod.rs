//! The words the front doors and the layers below them share: closed sets named once (the
//! templates, the languages), the rules every door applies to what a caller sends (a path
//! inside the working directory, environment variables), and the one callback a door hands
//! down (`InputAsker`, a notebook client answering `input()`). A leaf: it imports nothing of
//! the crate, so a door names these without importing a floor (`tests/sandbox/layers.rs`,
//! rule 6), and the floors re-export them where they always were.

mod env;
mod language;
mod names;
mod paths;
mod template;
mod turns;

pub use env::{EnvError, check_env};
pub use language::Language;
pub use names::check_name;
pub use paths::{BadPath, MAX_INPUT_FILES, MAX_PATH_BYTES, check_relative_path, link_stays_inside};
pub use template::Template;
pub use turns::{TurnHistory, first_line};

/// Sends a prompt of the guest's `input()` to whoever can answer it (a notebook's client)
/// and returns where the answer will come. Called on the guest thread: it must not block.
pub type InputAsker =
    std::sync::Arc<dyn Fn(String) -> std::sync::mpsc::Receiver<String> + Send + Sync>;

/// The most completions a notebook's completion query answers with (the guest's code stops
/// there; a door keeps no more of its answer).
pub const MAX_COMPLETIONS: usize = 200;
