//! Every file path the map names exists: the paths in `ARCHITECTURE.md`, `README.md`,
//! `SECURITY.md`, `CHANGELOG.md`, `benches/RESULTS.md`, `docs/**.md` and in the module docs
//! (`//!`) of `src/`. A doc that names a moved or deleted file fails here, not in a newcomer's
//! hands.

use std::path::{Path, PathBuf};

use crate::layers::files_under;

/// The top-level folders a path named in a document may start with.
const ROOTS: [&str; 11] = [
    "src/",
    "tests/",
    "docs/",
    "benches/",
    "fuzz/",
    "deploy/",
    "scripts/",
    "python-wasi/",
    "wasm/",
    "assets/",
    ".ci/",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository-relative paths named in `text`: a word starting with one of [`ROOTS`], cut
/// at the first character that cannot be part of a path. Patterns (`*`, `<…>`, `{…}`, `…`)
/// and paths in generated or fetched folders are not paths to check.
fn named_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.char_indices() {
        let rest = &text[i..];
        let Some(r) = ROOTS.iter().find(|r| rest.starts_with(**r)) else {
            continue;
        };
        // Only at the start of a word: not the `src/` of `fuzz/src/` or of a URL.
        let before = text[..i].chars().next_back();
        if matches!(before, Some(c) if c.is_alphanumeric() || "/._-~$".contains(c)) {
            continue;
        }
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(rest.len());
        let after = rest[len..].chars().next();
        if matches!(after, Some('*' | '<' | '{' | '…' | '$')) {
            continue;
        }
        let path = rest[..len].trim_end_matches(['.', ',', ':', '-']);
        if path.len() > r.len() {
            out.push(path.to_string());
        }
    }
    out
}

#[test]
fn every_path_the_documents_and_module_docs_name_exists() {
    let mut docs: Vec<PathBuf> = [
        "ARCHITECTURE.md",
        "README.md",
        "SECURITY.md",
        "CHANGELOG.md",
        "benches/RESULTS.md",
    ]
    .iter()
    .map(|d| root().join(d))
    .collect();
    files_under(&root().join("docs"), "md", &mut docs);
    let mut sources = Vec::new();
    files_under(&root().join("src"), "rs", &mut sources);

    let mut missing = Vec::new();
    let mut checked = 0;
    let mut check = |file: &Path, text: &str| {
        for p in named_paths(text) {
            // A bench's raw figures: written by its run, not kept in the tree (`.gitignore`).
            if p.starts_with("benches/results/") && (p.ends_with(".json") || p.ends_with(".csv")) {
                continue;
            }
            checked += 1;
            if !root().join(&p).exists() {
                let file = file.strip_prefix(root()).unwrap_or(file).display();
                missing.push(format!("{file}: {p}"));
            }
        }
    };
    for doc in &docs {
        check(doc, &std::fs::read_to_string(doc).unwrap());
    }
    for src in &sources {
        let text = std::fs::read_to_string(src).unwrap();
        let module_doc: String = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        check(src, &module_doc);
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "paths named but not there:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn named_paths_cuts_at_the_path_and_skips_patterns() {
    let text = "see `src/server/mod.rs:62`, tests/hostile/**.py, (docs/api/http.md), \
                fuzz/src/x.rs and https://h/src/no.rs; `tests/<tier>/main.rs`.";
    assert_eq!(
        named_paths(text),
        ["src/server/mod.rs", "docs/api/http.md", "fuzz/src/x.rs"]
    );
}
