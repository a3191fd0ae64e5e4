//! The packages built into the guest runtime, read from the stdlib zip's `*.dist-info`
//! entries (the distributions installed when the wheel was built) and its top-level
//! modules, and the hint a `ModuleNotFoundError` gets from them.
//!
//! The guest has no dynamic linking: nothing with native code can be added to it, and the
//! built-in set is what a sandbox can import besides pure Python.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use zip::ZipArchive;

/// One distribution built into the runtime.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct BuiltinPackage {
    /// Its distribution name as its metadata spells it, e.g. `scikit-learn`.
    #[schema(example = "scikit-learn")]
    pub name: String,
    /// Its version, e.g. `1.9.1`.
    #[schema(example = "1.9.1")]
    pub version: String,
    /// The top-level modules it provides, e.g. `sklearn`.
    #[schema(example = json!(["sklearn"]))]
    pub imports: Vec<String>,
}

/// Bounds on what is read of the zip's metadata (it is the verified runtime's, but a bound
/// costs nothing).
const MAX_METADATA_BYTES: u64 = 1 << 20;

/// Packages whose code is native and that the guest cannot load, with what to use instead:
/// the hint for an import of one of them.
const NATIVE_ONLY: &[(&str, &str)] = &[
    ("torch", "PyTorch"),
    ("tensorflow", "TensorFlow"),
    ("jax", "JAX"),
    ("cv2", "OpenCV"),
    ("psycopg2", "psycopg2"),
    ("pyarrow", "PyArrow"),
    ("polars", "Polars"),
    ("xgboost", "XGBoost"),
    ("lightgbm", "LightGBM"),
];

/// Distributions whose import names are not their own names, as their wheels lay them out
/// (the dist-info in the runtime's zip holds METADATA only, no `top_level.txt` or RECORD).
/// Each name is kept only when the zip has it.
const IMPORT_NAMES: &[(&str, &[&str])] = &[
    ("scikit-learn", &["sklearn"]),
    ("pillow", &["PIL"]),
    ("python-dateutil", &["dateutil"]),
    ("pyyaml", &["yaml"]),
    ("beautifulsoup4", &["bs4"]),
    ("fonttools", &["fontTools"]),
    ("attrs", &["attr", "attrs"]),
    ("toolz", &["toolz", "tlz"]),
    ("matplotlib", &["matplotlib", "mpl_toolkits", "pylab"]),
];

/// The built-in distributions of the stdlib zip at `zip_path`, sorted by name, each with
/// the top-level modules of the zip it provides.
pub fn read_builtin(zip_path: &Path) -> std::io::Result<Vec<BuiltinPackage>> {
    let file = std::fs::File::open(zip_path)?;
    let mut zip = ZipArchive::new(file).map_err(std::io::Error::other)?;
    // Top-level modules: folders, and `.py`/`.pyc` files at the root.
    let tops: BTreeSet<String> = zip
        .file_names()
        .filter_map(|n| match n.split_once('/') {
            Some((dir, _)) => Some(dir),
            None => n.strip_suffix(".py").or_else(|| n.strip_suffix(".pyc")),
        })
        .filter(|m| !m.ends_with(".dist-info"))
        .map(str::to_string)
        .collect();
    let dist_infos: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.strip_suffix("/METADATA"))
        .filter(|d| d.ends_with(".dist-info") && !d.contains('/'))
        .map(str::to_string)
        .collect();
    let mut out = BTreeMap::new();
    for dir in dist_infos {
        let Some(meta) = read_entry(&mut zip, &format!("{dir}/METADATA"), MAX_METADATA_BYTES)
        else {
            continue;
        };
        let field = |key: &str| {
            meta.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().to_string())
        };
        let (Some(name), Some(version)) = (field("Name:"), field("Version:")) else {
            continue;
        };
        let key = name.to_ascii_lowercase();
        let own = key.replace(['-', '.'], "_");
        let candidates: Vec<&str> = IMPORT_NAMES
            .iter()
            .find(|(n, _)| *n == key)
            .map_or_else(|| vec![own.as_str()], |(_, i)| i.to_vec());
        let imports = candidates
            .into_iter()
            .filter(|m| tops.contains(*m))
            .map(str::to_string)
            .collect();
        out.insert(
            key,
            BuiltinPackage {
                name,
                version,
                imports,
            },
        );
    }
    Ok(out.into_values().collect())
}

fn read_entry(zip: &mut ZipArchive<std::fs::File>, name: &str, max: u64) -> Option<String> {
    let entry = zip.by_name(name).ok()?;
    let mut text = String::new();
    entry.take(max).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Normalises a distribution or module name for comparison (PEP 503, `-`/`_`/`.` alike).
fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '_', '.'], "")
}

/// What to tell a program that failed to import `module` (a `ModuleNotFoundError`), knowing
/// the built-in `packages`; `None` when there is nothing useful to say (a module of its own
/// that does not exist, say, inside a built-in package).
/// `addable`: the server lets requests add pure-Python packages (`packages`).
pub fn missing_module_hint(
    module: &str,
    packages: &[BuiltinPackage],
    addable: bool,
) -> Option<String> {
    let top = module.split('.').next().unwrap_or(module);
    if top.is_empty() {
        return None;
    }
    // Built in under another import name (`import scikit_learn`, `import pillow`, `import yaml`
    // works, `import pyyaml` does not).
    if let Some(p) = packages
        .iter()
        .find(|p| normalise(&p.name) == normalise(top) && !p.imports.iter().any(|i| i == top))
        && let Some(import) = p.imports.first()
    {
        return Some(format!(
            "{} {} is built in; import it as `{import}`",
            p.name, p.version
        ));
    }
    // A module of a built-in package that does not exist: the error says enough.
    if packages.iter().any(|p| p.imports.iter().any(|i| i == top)) {
        return None;
    }
    if let Some((_, what)) = NATIVE_ONLY.iter().find(|(m, _)| *m == top) {
        return Some(format!(
            "{what} has native code, which this sandbox cannot load (WebAssembly, no dynamic \
             linking); the built-in packages are listed at GET /v1/packages"
        ));
    }
    if addable {
        return Some(format!(
            "`{top}` is not built into this sandbox; if it is a pure-Python package, add it \
             with `packages` (e.g. \"packages\": [\"{top}\"], named as on the package index); \
             the built-in ones are listed at GET /v1/packages"
        ));
    }
    Some(format!(
        "`{top}` is not built into this sandbox, and this server adds no packages; the \
         built-in ones are listed at GET /v1/packages"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkgs() -> Vec<BuiltinPackage> {
        vec![
            BuiltinPackage {
                name: "scikit-learn".into(),
                version: "1.9.1".into(),
                imports: vec!["sklearn".into()],
            },
            BuiltinPackage {
                name: "pandas".into(),
                version: "3.0.6".into(),
                imports: vec!["pandas".into()],
            },
        ]
    }

    #[test]
    fn hints_name_the_right_import_the_native_code_or_the_missing_package() {
        let p = pkgs();
        let h = missing_module_hint("scikit_learn", &p, true).unwrap();
        assert!(h.contains("import it as `sklearn`"), "{h}");
        assert!(missing_module_hint("pandas.nope", &p, true).is_none());
        assert!(
            missing_module_hint("torch", &p, true)
                .unwrap()
                .contains("native code")
        );
        let h = missing_module_hint("plotly.express", &p, true).unwrap();
        assert!(h.contains("`plotly` is not built into"), "{h}");
        assert!(h.contains("add it with `packages`"), "{h}");
        let h = missing_module_hint("plotly.express", &p, false).unwrap();
        assert!(h.contains("this server adds no packages"), "{h}");
    }
}
