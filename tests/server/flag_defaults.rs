//! The documented defaults are the binary's: every default `vivarium serve --help` prints
//! (clap's `[default: X]`, from the real binary) against the default column of every table of
//! flags in `docs/` and `README.md`, for each flag both name. A table is any whose header has a
//! column naming "flag" and one naming "default". A default clap prints is compared exactly;
//! one the flag's help describes in words (computed at start: cores, RAM, a per-tenant cap
//! that follows another) only when both sides begin with a number.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

/// A flag's default as `--help` gives it.
#[derive(Debug, Clone, PartialEq)]
enum Given {
    /// Clap's own `[default: X]` line: the value the flag takes.
    Value(String),
    /// `[default: …]` in the flag's help text: a default computed at start, in words.
    Described(String),
}

/// Each flag of `vivarium serve` (without its dashes) and the default its help gives, if any.
fn binary_defaults() -> BTreeMap<String, Option<Given>> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"));
    cmd.args(["serve", "--help"]);
    // A variable set here would be the flag's value, not its default.
    for (k, _) in std::env::vars() {
        if k.starts_with("VIVARIUM_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let flag = Regex::new(r"^[ \t]*(?:-[A-Za-z], )?--([a-z0-9-]+)").unwrap();
    let default = Regex::new(r"\[default: ([^\]]*)\]").unwrap();
    let mut flags = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        if let Some(c) = flag.captures(line) {
            let name = c[1].to_string();
            flags.insert(name.clone(), None);
            current = Some(name);
        }
        if let (Some(name), Some(d)) = (&current, default.captures(line)) {
            let said = d[1].trim();
            // Clap's own stands alone on its line, its value quoted when it is empty.
            let given = if line.trim() == &d[0] {
                Given::Value(said.trim_matches('"').to_string())
            } else {
                Given::Described(said.to_string())
            };
            flags.insert(name.clone(), Some(given));
        }
    }
    assert!(
        flags.contains_key("listen") && flags.contains_key("max-suspended-executions"),
        "the help's flags were not read:\n{help}"
    );
    flags
}

/// One flag's default as a document's table says it.
struct Documented {
    file: PathBuf,
    line: usize,
    flag: String,
    cell: String,
}

/// The markdown files of the documentation.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = row.strip_suffix('|').unwrap_or(row);
    row.split('|').map(|c| c.trim().to_string()).collect()
}

/// Every (flag, default cell) of every table of flags. A row naming several flags gives each
/// its part of the default cell, in order (`256 requests a run, 16 MiB a response body`).
fn documented_defaults() -> Vec<Documented> {
    let flag = Regex::new(r"`--([a-z0-9-]+)").unwrap();
    let mut out = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        // The flag and default columns of the table being read.
        let mut columns: Option<(usize, usize)> = None;
        let mut header_seen = false;
        for (i, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with('|') {
                columns = None;
                header_seen = false;
                continue;
            }
            let row = cells(line);
            if !header_seen {
                header_seen = true;
                let find = |word: &str| {
                    row.iter()
                        .position(|c| c.to_lowercase().split_whitespace().next() == Some(word))
                };
                columns = find("flag").zip(find("default"));
                continue;
            }
            let Some((f, d)) = columns else { continue };
            if row
                .iter()
                .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
            {
                continue;
            }
            let (Some(fcell), Some(dcell)) = (row.get(f), row.get(d)) else {
                continue;
            };
            let names: Vec<String> = flag
                .captures_iter(fcell)
                .map(|c| c[1].to_string())
                .collect();
            let parts: Vec<String> = if names.len() > 1 {
                dcell.split(", ").map(str::to_string).collect()
            } else {
                vec![dcell.clone()]
            };
            assert!(
                names.len() <= 1 || parts.len() == names.len(),
                "{}:{}: {} flags but {} defaults",
                file.display(),
                i + 1,
                names.len(),
                parts.len()
            );
            for (name, cell) in names.into_iter().zip(parts) {
                out.push(Documented {
                    file: file.clone(),
                    line: i + 1,
                    flag: name,
                    cell,
                });
            }
        }
    }
    out
}

/// The value a documented default starts with, as clap would print it for `flag`: a quoted
/// word as it is (`` `redact` ``), `empty` as nothing, a number with its thousands separated
/// by spaces or commas, times its unit (KiB, MiB, GiB; s to a `-ms` flag's milliseconds).
fn value(flag: &str, cell: &str) -> Option<String> {
    let cell = cell.trim();
    if let Some(rest) = cell.strip_prefix('`') {
        return Some(rest.split('`').next()?.to_string());
    }
    if cell.starts_with("empty") {
        return Some(String::new());
    }
    // ASCII classes: the crate's regex has no Unicode tables.
    let number =
        Regex::new(r"^([0-9]{1,3}(?:[ ,][0-9]{3})+|[0-9]+)(?: ?(KiB|MiB|GiB|ms|s)(?-u:\b)| ?%)?")
            .unwrap();
    let c = number.captures(cell)?;
    let n: u64 = c[1].replace([' ', ','], "").parse().ok()?;
    let unit = c.get(2).map_or("", |m| m.as_str());
    let n = match unit {
        "KiB" => n << 10,
        "MiB" => n << 20,
        "GiB" => n << 30,
        "s" if flag.ends_with("-ms") => n * 1000,
        "ms" if !flag.ends_with("-ms") => return None,
        _ => n,
    };
    Some(n.to_string())
}

#[test]
fn every_documented_default_is_the_binarys() {
    let binary = binary_defaults();
    let documented = documented_defaults();
    assert!(
        documented
            .iter()
            .any(|d| d.flag == "max-suspended-executions"),
        "no table of flags found in the docs"
    );
    let mut wrong = Vec::new();
    let mut compared = 0;
    for d in &documented {
        let said = value(&d.flag, &d.cell);
        let default = match binary.get(&d.flag) {
            Some(Some(Given::Value(v))) => v.clone(),
            // Described in words: compared when both begin with a number.
            Some(Some(Given::Described(words))) => match value(&d.flag, words) {
                Some(v) if said.as_deref().is_some_and(|s| s.parse::<u64>().is_ok()) => v,
                _ => continue,
            },
            // Not a flag of `serve`, or one without a default.
            _ => continue,
        };
        compared += 1;
        if said.as_deref() != Some(default.as_str()) {
            wrong.push(format!(
                "{}:{}: --{} is documented as {:?} ({:?}), the binary's default is {default:?}",
                d.file.display(),
                d.line,
                d.flag,
                d.cell,
                said
            ));
        }
    }
    assert!(compared >= 20, "only {compared} defaults compared");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_documented_value_is_read_as_clap_prints_it() {
    let cases = [
        ("queue-timeout-ms", "30 000", "30000"),
        ("egress-total-ms", "60,000", "60000"),
        ("egress-total-ms", "60 s a run's requests in all", "60000"),
        ("snapshot-retention-secs", "604 800 (7 days)", "604800"),
        ("max-body-bytes", "32 MiB", "33554432"),
        (
            "snapshot-quota-bytes",
            "10 GiB per tenant: snapshots",
            "10737418240",
        ),
        (
            "memory-percent-per-tenant",
            "50 % of the memory budget",
            "50",
        ),
        ("leakage", "`redact`: what a request gets", "redact"),
        ("egress-allow", "empty: no network", ""),
        ("queue-depth", "64 (then 429)", "64"),
        ("suspended-ttl-secs", "3600: how long", "3600"),
    ];
    for (flag, cell, want) in cases {
        assert_eq!(value(flag, cell).as_deref(), Some(want), "{flag}: {cell}");
    }
    assert_eq!(value("max-concurrency", "number of cores"), None);
}
