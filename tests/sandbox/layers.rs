//! The import rules of `ARCHITECTURE.md` ("Layers"), checked on the source itself:
//!
//! 1. In every folder of `src/`, the modules it holds import each other without a cycle (a
//!    module's imports of its own parent or children, the façade of `mod.rs`, do not count).
//! 2. A top-level module imports only the layers below it.
//! 3. The front doors in `server/api/` never import each other, only `api::types`.
//! 4. The control plane (`supervisor/`) speaks no HTTP: it names neither axum nor an HTTP
//!    status, and only `server/` itself imports `server::error`, where its domain errors
//!    become statuses.
//! 5. `server/` holds no control plane: it never reaches into admission, fair shares or the
//!    cluster (and the runner's residency and drain operations are visible only inside
//!    `supervisor/`, which the compiler enforces).
//! 6. A front door imports no floor below the supervisor (the sandbox, its host calls, the
//!    engine, templates, guest code, `vivarium.rs`, the workers): it reaches a run through
//!    `supervisor::intake`, and names what it shares with the floors from `src/vocabulary/`.
//!
//! Imports are every `crate::…`/`super::…`/`self::…` path in the code (in `use` items, with
//! their brace groups expanded, and inline), comments and `#[cfg(test)] mod tests` left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first: a module may import only modules of a lower rank.
const LAYERS: &[(&str, u32)] = &[
    ("vocabulary", 0),
    ("sync", 0),
    ("budget", 0),
    ("path_io", 0),
    ("limits", 0),
    ("report", 1),
    ("tools", 0),
    ("egress", 0),
    ("guest", 1),
    ("runtime", 1),
    ("leakage", 2),
    ("packages", 2),
    ("snapshot", 3),
    ("volumes", 2),
    ("hostcalls", 2),
    ("engine", 3),
    ("template", 4),
    ("sandbox", 5),
    ("check", 6),
    ("vivarium", 7),
    ("worker", 8),
    ("supervisor", 9),
    ("server", 10),
    ("cli", 11),
];

type Module = Vec<String>;

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Every file under `dir` (recursively) whose extension is `ext`.
pub fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, ext, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// The code of a file without comments and without its unit-test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            // Keep `//` inside string literals such as URLs: only cut a line comment that
            // starts the line's code or follows code with no quote open.
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(p).into_iter().map(move |e| format!("{prefix}{e}")))
        .collect()
}

/// A use tree without its `as name` renames.
fn without_renames(tree: &str) -> String {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "as" && i + 1 < words.len() {
            // Keep what followed the renamed name (`,` or `}`).
            out.extend(words[i + 1].chars().filter(|c| !is_ident(*c)));
            i += 2;
            continue;
        }
        out.push_str(words[i]);
        i += 1;
    }
    out
}

/// Every path the code names that starts with `crate`, `super` or `self`.
fn paths_in(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` items (a line that starts one, up to its `;`), brace groups expanded.
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(tree) = t.strip_prefix("use ") else {
            continue;
        };
        let start = at + (line.len() - tree.len());
        let Some(end) = code[start..].find(';') else {
            continue;
        };
        let tree = &code[start..start + end];
        if ["crate", "super", "self"]
            .iter()
            .any(|r| tree.starts_with(r))
        {
            out.extend(expand(&without_renames(tree)));
        }
    }
    // Inline paths.
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            if code[..at].chars().last().is_some_and(is_ident) {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(is_ident(c) || c == ':'))
                .map_or(code.len(), |e| at + e);
            out.push(code[at..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The module a path from `from` names: the longest known module prefix of it.
fn resolve(from: &Module, path: &str, known: &BTreeSet<Module>) -> Option<Module> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Module = match *segs.first()? {
        "crate" => Vec::new(),
        "self" | "super" => from.clone(),
        _ => return None,
    };
    while segs.first() == Some(&"super") {
        base.pop()?;
        segs.remove(0);
    }
    if matches!(segs.first(), Some(&"crate" | &"self")) {
        segs.remove(0);
    }
    let mut best = base.clone();
    let mut cur = base;
    for s in segs {
        cur.push(s.to_string());
        if known.contains(&cur) {
            best = cur.clone();
        }
    }
    Some(best)
}

fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let i = stack.iter().position(|s| s == n).unwrap();
                let mut c = stack[i..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// `(from, to)` module pairs of every import in `src/`.
fn imports() -> Vec<(Module, Module)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    files_under(&src, "rs", &mut files);
    let known: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut out = Vec::new();
    for f in &files {
        let from = module_of(&src, f);
        if f.ends_with("main.rs") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for p in paths_in(&code) {
            if let Some(to) = resolve(&from, &p, &known)
                && to != from
            {
                out.push((from.clone(), to));
            }
        }
    }
    out
}

#[test]
fn no_folder_has_an_import_cycle() {
    let mut graphs: BTreeMap<Module, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in imports() {
        let k = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        // A module's own parent or child: the façade, not a sibling edge.
        if k == from.len() || k == to.len() {
            continue;
        }
        graphs
            .entry(from[..k].to_vec())
            .or_default()
            .entry(from[k].clone())
            .or_default()
            .insert(to[k].clone());
    }
    assert!(
        graphs.contains_key(&Vec::new()),
        "the parser found no imports"
    );
    for (folder, edges) in &graphs {
        if let Some(c) = cycle(edges) {
            panic!(
                "import cycle in src/{}: {}",
                folder.join("/"),
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn layers_import_only_layers_below() {
    let rank: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut checked = 0;
    for (from, to) in imports() {
        let (Some(f), Some(t)) = (from.first(), to.first()) else {
            continue;
        };
        if f == t {
            continue;
        }
        let rf = rank
            .get(f.as_str())
            .unwrap_or_else(|| panic!("{f} has no layer"));
        let rt = rank
            .get(t.as_str())
            .unwrap_or_else(|| panic!("{t} has no layer"));
        assert!(
            rt < rf,
            "src/{} imports {}, which is not below it",
            from.join("/"),
            to.join("::")
        );
        checked += 1;
    }
    assert!(checked > 20, "only {checked} cross-layer imports found");
}

#[test]
fn front_doors_never_import_each_other() {
    let api = ["server".to_string(), "api".to_string()];
    let mut checked = 0;
    for (from, to) in imports() {
        if from.len() == 3 && from[..2] == api && to.len() == 3 && to[..2] == api {
            assert_eq!(
                to[2], "types",
                "front door {} imports front door {}",
                from[2], to[2]
            );
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no front door imports api::types: the parser is broken"
    );
}

#[test]
fn the_supervisor_speaks_no_http() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    files_under(&src.join("supervisor"), "rs", &mut files);
    assert!(
        files.len() > 10,
        "src/supervisor/ has only {} files",
        files.len()
    );
    for f in &files {
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for word in ["axum", "hyper", "StatusCode", "http::", "IntoResponse"] {
            assert!(
                !code.contains(word),
                "{} names `{word}`: HTTP belongs in src/server/",
                f.strip_prefix(&src).unwrap().display()
            );
        }
    }
    let mut mapped = 0;
    for (from, to) in imports() {
        if to.len() >= 2 && to[0] == "server" && to[1] == "error" {
            assert_eq!(
                from.first().map(String::as_str),
                Some("server"),
                "src/{} imports server::error: only the HTTP layer maps errors to statuses",
                from.join("/")
            );
            mapped += 1;
        }
    }
    assert!(mapped > 5, "only {mapped} imports of server::error found");
}

#[test]
fn the_server_reaches_no_control_plane_mechanism() {
    let mut checked = 0;
    for (from, to) in imports() {
        if from.first().is_some_and(|m| m == "server")
            && to.first().is_some_and(|m| m == "supervisor")
        {
            if let Some(m) = to.get(1) {
                assert!(
                    !["admission", "cluster", "fair"].contains(&m.as_str()),
                    "src/{} imports supervisor::{m}: the control plane's mechanisms stay in src/supervisor/",
                    from.join("/")
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked > 10,
        "only {checked} imports of the supervisor from the server found"
    );
}

/// The floors a front door must not see: a door parses and renders, and reaches a run only
/// through the intake (`supervisor::intake`) and the vocabulary it shares (`report`, `check`,
/// `limits`, `tools`, `egress`, `leakage`).
const FLOORS: [&str; 7] = [
    "sandbox",
    "hostcalls",
    "engine",
    "template",
    "guest",
    "vivarium",
    "worker",
];

#[test]
fn doors_import_no_floor() {
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    for (from, to) in imports() {
        let door = from.len() >= 2 && from[0] == "server" && from[1] == "api";
        if door && to.first().is_some_and(|m| FLOORS.contains(&m.as_str())) {
            found.insert((from.join("/"), to.join("/")));
        }
    }
    assert!(
        found.is_empty(),
        "a front door imports a floor (go through supervisor::intake or src/vocabulary/): {found:#?}"
    );
}
