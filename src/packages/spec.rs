//! Requirement specifiers as a request gives them, checked before pip sees any: a name,
//! optional extras and version clauses (`plotly>=6`, `requests[socks]==2.*`). Direct
//! references (`name @ URL`), paths, markers and options are refused: a URL would make the
//! host fetch what the guest chose (a `file://` one, read the host's files), and an option
//! would change how pip runs.

use super::{PackageError, PackageErrorKind, normalize};

/// The longest specifier accepted.
const MAX_SPEC_BYTES: usize = 200;

/// A request's requirements, checked and in a canonical order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageSpecs {
    /// Each specifier without spaces, its name normalised; sorted and without repeats.
    pub specs: Vec<String>,
    /// The normalised names they require.
    pub names: Vec<String>,
}

impl PackageSpecs {
    /// No packages asked for.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The key of this request in the resolution memo.
    pub fn key(&self) -> String {
        self.specs.join(" ")
    }
}

/// Checks `raw` (at most `max` of them) and puts them in canonical form.
pub fn parse_specs(raw: &[String], max: usize) -> Result<PackageSpecs, PackageError> {
    if raw.len() > max {
        return Err(PackageError::new(
            PackageErrorKind::TooMany,
            None,
            format!(
                "{} packages were asked for; at most {max} may be",
                raw.len()
            ),
        ));
    }
    let mut out = PackageSpecs::default();
    for s in raw {
        let (spec, name) = parse_one(s)?;
        out.specs.push(spec);
        out.names.push(name);
    }
    out.specs.sort();
    out.specs.dedup();
    out.names.sort();
    out.names.dedup();
    Ok(out)
}

fn parse_one(raw: &str) -> Result<(String, String), PackageError> {
    let bad = |why: &str| {
        PackageError::new(
            PackageErrorKind::InvalidSpec,
            None,
            format!("package {raw:?}: {why}"),
        )
    };
    if raw.len() > MAX_SPEC_BYTES {
        return Err(bad(&format!("longer than {MAX_SPEC_BYTES} bytes")));
    }
    let compact: String = raw.chars().filter(|c| *c != ' ').collect();
    let name_end = compact
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(compact.len());
    let (name, rest) = compact.split_at(name_end);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(bad("a requirement starts with a package name"));
    }
    let mut rest = rest;
    let mut extras = "";
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']').ok_or_else(|| bad("unclosed extras"))?;
        extras = &r[..close];
        if extras.is_empty()
            || !extras.split(',').all(|e| {
                !e.is_empty()
                    && e.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            })
        {
            return Err(bad("extras are names separated by commas"));
        }
        rest = &r[close + 1..];
    }
    if !rest.is_empty() {
        for clause in rest.split(',') {
            let op_end = clause
                .find(|c: char| !matches!(c, '<' | '>' | '=' | '!' | '~'))
                .unwrap_or(clause.len());
            let (op, version) = clause.split_at(op_end);
            if !matches!(op, "==" | "!=" | "<=" | ">=" | "<" | ">" | "~=" | "===") {
                return Err(bad(
                    "only version clauses (==, !=, <=, >=, <, >, ~=) may follow the name: \
                     no URLs, paths, markers or options",
                ));
            }
            if version.is_empty()
                || !version.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '-' | '_')
                })
            {
                return Err(bad("a version clause needs a version"));
            }
        }
    }
    let norm = normalize(name);
    let extras = if extras.is_empty() {
        String::new()
    } else {
        format!("[{}]", extras.to_ascii_lowercase())
    };
    Ok((format!("{norm}{extras}{rest}"), norm))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(v: &[&str]) -> Result<PackageSpecs, PackageError> {
        parse_specs(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 20)
    }

    #[test]
    fn plain_requirements_are_canonical() {
        let s = specs(&[
            "Plotly >= 6",
            "tabulate",
            "requests[SOCKS]==2.*",
            "tabulate",
        ])
        .unwrap();
        assert_eq!(s.specs, ["plotly>=6", "requests[socks]==2.*", "tabulate"]);
        assert_eq!(s.names, ["plotly", "requests", "tabulate"]);
        assert!(specs(&["a>=1,<2"]).is_ok());
    }

    #[test]
    fn urls_paths_markers_and_options_are_refused() {
        for bad in [
            "foo @ file:///etc/passwd",
            "foo@https://example.com/x.whl",
            "./local",
            "/abs/path",
            "--index-url=http://evil",
            "-e .",
            "foo; python_version>'3'",
            "foo>=",
            "foo==1;rm",
            "",
            "[x]",
            "foo[]",
        ] {
            let e = specs(&[bad]).unwrap_err();
            assert_eq!(e.kind, PackageErrorKind::InvalidSpec, "{bad}");
        }
        let many: Vec<String> = (0..21).map(|i| format!("p{i}")).collect();
        assert_eq!(
            parse_specs(&many, 20).unwrap_err().kind,
            PackageErrorKind::TooMany
        );
    }
}
