//! What a run's source is written in: the closed set of languages (how each becomes the
//! guest's turn is `guest/language.rs`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The language of a run's `code`: a closed set, named by both doors and the sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[derive(Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Python, with notebook syntax (IPython's magics, `!cmd`, `var = !cmd`, `obj?`)
    /// translated as IPython does. The default.
    #[default]
    Python,
    /// A POSIX shell script, run by the guest's shell (`"sh"` is accepted for it).
    #[serde(alias = "sh")]
    Bash,
}

impl Language {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Bash => "bash",
        }
    }
}
