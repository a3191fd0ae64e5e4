//! Which snapshot a sandbox starts from: the closed set of templates, by name.

use serde::{Deserialize, Serialize};

/// Which snapshot a sandbox starts from; a request that names none gets `scientific`. Each
/// takes any `memory_bytes`: the limit counts beyond the template's own image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[derive(Serialize, Deserialize, utoipa::ToSchema, clap::ValueEnum, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Template {
    /// The minimal one: the interpreter started (as in the wheel's stock snapshot), plus
    /// Vivarium's helpers.
    Python,
    /// The default: numpy, pandas, matplotlib (Vivarium's backend), scipy, scikit-learn,
    /// statsmodels and seaborn already imported and warmed.
    #[default]
    Scientific,
}

impl Template {
    /// Every template, in the order `vivarium runtime fetch` builds them.
    pub const ALL: [Template; 2] = [Template::Python, Template::Scientific];

    /// The name the API and the CLI take (`python`, `scientific`); it also names the
    /// template's cache directory.
    pub fn name(self) -> &'static str {
        match self {
            Template::Python => "python",
            Template::Scientific => "scientific",
        }
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Template {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Template::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!("unknown template {s:?} (expected \"python\" or \"scientific\")")
            })
    }
}
