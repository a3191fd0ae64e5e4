//! What a run's source is written in, and how it becomes the guest's turn: Python as it is
//! (or through `vivarium_ipy` when it holds notebook syntax: magics, `!` lines, `obj?`), or a
//! shell script through `vivarium_shell` (`python-wasi/guest/shell.py`), all inside the
//! guest's own CPython; never a host process.

pub use crate::vocabulary::Language;

/// `code` as the guest runs it, or `None` when it runs as it is (plain Python without
/// tools: nothing added, nothing to pay). `tools` is code mode's specs as the guest reads
/// them, a JSON list (ignored for a shell script): the code then runs through
/// `vivarium_tools.run`, which puts the tools on `tools` in `__main__` and allows top-level
/// `await`; `session`: a session's turn (a final expression's
/// value is the turn's result; `cd` and `export` stay for the next turn) rather than a
/// fresh program.
///
/// A shell script's status is the turn's, as `sys.exit(n)`'s is: raised as `SystemExit`
/// (which ends neither the program's report nor a session).
pub fn guest_source(
    code: &str,
    language: Language,
    tools: Option<&str>,
    session: bool,
) -> Option<String> {
    let py_bool = |b: bool| if b { "True" } else { "False" };
    let literal = py_literal;
    match language {
        Language::Bash => Some(format!(
            "raise SystemExit(__import__('vivarium_shell').run({}, persist={}))\n",
            literal(code),
            py_bool(session)
        )),
        Language::Python => {
            let notebook = needs_notebook(code);
            match tools {
                Some(tools) => {
                    let source = if notebook {
                        format!("__import__('vivarium_ipy').transform({})", literal(code))
                    } else {
                        literal(code)
                    };
                    Some(format!(
                        "__import__('vivarium_tools').run({source}, __import__('json').loads({}), {})\n",
                        literal(tools),
                        py_bool(session)
                    ))
                }
                None if notebook => Some(format!(
                    "__import__('vivarium_ipy').run({}, {})\n",
                    literal(code),
                    py_bool(session)
                )),
                None => None,
            }
        }
    }
}

/// A command line as E2B's `commands.run` runs it, as a session turn: in `cwd`, as a new
/// process would (nothing of its `cd` or `export` kept), its exit status (0-255) the turn's
/// final value (`vivarium_shell.command`).
pub fn command_source(line: &str, cwd: &str) -> String {
    format!(
        "__import__('vivarium_shell').command({}, {})\n",
        py_literal(line),
        py_literal(cwd)
    )
}

/// A Python string literal of `s` (a JSON string is one).
fn py_literal(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// The host's cheap look for notebook syntax, so plain Python is not touched: a line whose
/// first non-blank character is `%`, `!` or `?`, an assignment from one (`files = !ls`), or
/// a line ending with `?` (`obj?`) with no quote or comment on it. It may say yes where the
/// guest (`vivarium_ipy.needs_transform`, the exact check) finds nothing to translate: the
/// code then runs as Python all the same.
pub fn needs_notebook(code: &str) -> bool {
    code.lines().any(|line| {
        let t = line.trim_start();
        if t.starts_with(['%', '!', '?']) {
            return true;
        }
        if let Some((lhs, rhs)) = t.split_once('=') {
            let lhs = lhs.trim_end();
            if !lhs.is_empty()
                && lhs.chars().all(|c| c.is_alphanumeric() || c == '_')
                && rhs.trim_start().starts_with(['!', '%'])
            {
                return true;
            }
        }
        let t = t.trim_end();
        t.ends_with('?') && !t.contains(['#', '\'', '"'])
    })
}

/// The packages a run's `pip install` lines name, read before it runs so the host can give
/// them to it (the guest's pip then finds them importable): `%pip install`, `!pip install`,
/// `!pip3 install`, `!python -m pip install` in Python (and a `%%bash` cell's body), and a
/// shell script's simple commands `pip install`, `pip3 install`, `python -m pip install`.
/// Only plain names and specifiers (quotes taken off as the shell does), with the options
/// `-q`, `-U`, `--quiet`, `--upgrade`: a command with anything else is left whole to the
/// guest's pip (which says what it cannot do). In the order named, without duplicates.
pub fn pip_requirements(code: &str, language: Language) -> Vec<String> {
    let mut out = Vec::new();
    match language {
        Language::Bash => shell_pips(code, &mut out),
        Language::Python => {
            let first = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let head = first.split_whitespace().next().unwrap_or("");
            if matches!(head, "%%bash" | "%%sh") {
                let body = code.split_once('\n').map_or("", |(_, b)| b);
                shell_pips(body, &mut out);
                return dedup(out);
            }
            for line in code.lines() {
                let t = line.trim();
                if let Some(rest) = t.strip_prefix("%pip ") {
                    command_pips(&format!("pip {rest}"), &mut out);
                } else if let Some(rest) = t.strip_prefix('!') {
                    shell_pips(rest, &mut out);
                }
            }
        }
    }
    dedup(out)
}

fn dedup(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Every simple command of a script's lines (split at `;`, `&&`, `||`, `|`; a `#` word ends
/// the line).
fn shell_pips(script: &str, out: &mut Vec<String>) {
    for line in script.lines() {
        let line = match line.find(" #") {
            Some(i) => &line[..i],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        for command in line.split([';', '|', '&']) {
            command_pips(command, out);
        }
    }
}

/// One simple command: `pip[3] install …` or `python[3] -m pip install …`.
fn command_pips(command: &str, out: &mut Vec<String>) {
    let Some(words) = shlex::split(command) else {
        return;
    };
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    out.extend(pip_install_args(&words).unwrap_or_default());
}

/// A command line that is exactly one `pip install NAME…` of plain words (no operator,
/// redirection, expansion or comment anywhere): its packages. E2B's `commands.run` gives such
/// a line to the host; any other line is the shell's, whose `pip` says what it cannot do.
pub fn pip_install_line(line: &str) -> Option<Vec<String>> {
    if line.contains(|c: char| "|&;<>()$`*?[]{}~#\\\n".contains(c)) {
        return None;
    }
    let words = shlex::split(line)?;
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    pip_install_args(&words).filter(|names| !names.is_empty())
}

/// The requirements of `pip[3] install …` or `python[3[.x]] -m pip install …` when every
/// argument is a plain requirement or one of `-q`, `-U`, `--quiet`, `--upgrade`; `None` for
/// any other command.
fn pip_install_args(words: &[&str]) -> Option<Vec<String>> {
    let args = match words {
        ["pip" | "pip3", "install", args @ ..] => args,
        [python, "-m", "pip", "install", args @ ..]
            if *python == "python" || python.starts_with("python3") =>
        {
            args
        }
        _ => return None,
    };
    let mut named = Vec::new();
    for a in args {
        if matches!(*a, "-q" | "-U" | "-qU" | "-Uq" | "--quiet" | "--upgrade") {
            continue;
        }
        if !is_simple_requirement(a) {
            return None;
        }
        named.push(a.to_string());
    }
    Some(named)
}

/// A name with optional extras and `==`, `~=` or `!=` version clauses, nothing a shell would
/// expand or redirect (`a>=1` is `a` with stdout to `=1`, in a shell as under `%pip`).
fn is_simple_requirement(s: &str) -> bool {
    let name_end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    let (name, mut rest) = s.split_at(name_end);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return false;
    }
    if let Some(extras) = rest.strip_prefix('[') {
        let Some((inner, after)) = extras.split_once(']') else {
            return false;
        };
        if inner.is_empty()
            || !inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, ',' | '.' | '_' | '-'))
        {
            return false;
        }
        rest = after;
    }
    if rest.is_empty() {
        return true;
    }
    rest.split(',').all(|clause| {
        let version = ["==", "~=", "!="]
            .iter()
            .find_map(|op| clause.strip_prefix(op));
        version.is_some_and(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '*' | '+' | '!' | '_'))
        })
    })
}

/// A program that runs file `name` of the working directory as `__main__`, with `sys.argv`
/// = `[name, *args]` (Piston's run): its own frame is cut from tracebacks, so they show
/// only the file's, and an uncaught exception exits with status 1.
pub fn run_file_source(name: &str, args: &[String]) -> String {
    let argv = serde_json::to_string(
        &std::iter::once(name.to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>(),
    )
    .unwrap_or_else(|_| "[]".into());
    let name_lit = serde_json::to_string(name).unwrap_or_else(|_| "\"main.py\"".into());
    format!(
        "\
def __vivarium_piston():
    import sys, traceback
    name = {name_lit}
    sys.argv = {argv}
    with open(name, 'rb') as f:
        source = f.read()
    g = {{'__name__': '__main__', '__file__': name, '__builtins__': __builtins__}}
    try:
        code = compile(source, name, 'exec', dont_inherit=True)
        exec(code, g)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        if isinstance(e, SyntaxError):
            tb = None
        else:
            while tb is not None and tb.tb_frame.f_code.co_filename != name:
                tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.exit(1)
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass
__vivarium_piston()
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_names() {
        let parse = |s: &str| serde_json::from_str::<Language>(s);
        assert_eq!(parse("\"python\"").unwrap(), Language::Python);
        assert_eq!(parse("\"bash\"").unwrap(), Language::Bash);
        assert_eq!(parse("\"sh\"").unwrap(), Language::Bash);
        let e = parse("\"fish\"").unwrap_err().to_string();
        assert!(e.contains("fish"), "{e}");
        assert_eq!(serde_json::to_string(&Language::Bash).unwrap(), "\"bash\"");
    }

    #[test]
    fn plain_python_is_left_alone() {
        for code in [
            "print('hello')",
            "x = 1\nif x != 2:\n    print(x % 2)\n",
            "s = 'what?'\n",
            "a = b  # why?\n",
            "d = {'a': 1}\nx = d['a']",
        ] {
            assert!(!needs_notebook(code), "{code}");
            assert_eq!(guest_source(code, Language::Python, None, false), None);
            assert_eq!(guest_source(code, Language::Python, None, true), None);
        }
    }

    #[test]
    fn notebook_syntax_is_seen() {
        for code in [
            "%matplotlib inline\nimport matplotlib",
            "!ls",
            "  !echo hi",
            "files = !ls\nprint(files)",
            "t = %time f()",
            "%%bash\nls",
            "len?",
            "?len",
        ] {
            assert!(needs_notebook(code), "{code}");
            let s = guest_source(code, Language::Python, None, true).unwrap();
            assert!(s.starts_with("__import__('vivarium_ipy').run("), "{s}");
            assert!(s.ends_with(", True)\n"), "{s}");
        }
    }

    #[test]
    fn shell_scripts_report_their_status() {
        let s = guest_source("ls | wc -l", Language::Bash, None, false).unwrap();
        assert_eq!(
            s,
            "raise SystemExit(__import__('vivarium_shell').run(\"ls | wc -l\", persist=False))\n"
        );
        let s = guest_source("cd /tmp", Language::Bash, Some("[]"), true).unwrap();
        assert!(s.contains("persist=True"), "{s}");
    }

    #[test]
    fn tools_and_magics() {
        let s = guest_source("%time 1", Language::Python, Some("[]"), false).unwrap();
        assert!(
            s.starts_with(
                "__import__('vivarium_tools').run(__import__('vivarium_ipy').transform(\"%time 1\"), "
            ),
            "{s}"
        );
        let s = guest_source("1", Language::Python, Some("[]"), true).unwrap();
        assert_eq!(
            s,
            "__import__('vivarium_tools').run(\"1\", __import__('json').loads(\"[]\"), True)\n"
        );
    }

    #[test]
    fn a_command_line_of_only_pip_install_is_the_hosts() {
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            pip_install_line("pip install -q tabulate six"),
            names(&["tabulate", "six"])
        );
        assert_eq!(
            pip_install_line("python -m pip install tabulate"),
            names(&["tabulate"])
        );
        assert_eq!(
            pip_install_line("python3.13 -m pip install -qU six"),
            names(&["six"])
        );
        assert_eq!(
            pip_install_line("pip3 install 'six==1.16'"),
            names(&["six==1.16"])
        );
        for line in [
            "ls -la",
            "python a.py | grep x",
            "pip install x > log.txt",
            "pip install x && python a.py",
            "pip install $PKG",
            "pip install -r requirements.txt",
            "pip uninstall x",
            "pip install",
            "FOO=1 pip install x",
            "pip install x # comment",
            "pip install 'plotly>=6'",
            "python -c 'unclosed",
        ] {
            assert_eq!(pip_install_line(line), None, "{line}");
        }
    }

    #[test]
    fn pip_lines() {
        let py = |c: &str| pip_requirements(c, Language::Python);
        let sh = |c: &str| pip_requirements(c, Language::Bash);
        // `%pip` runs through the guest's shell, which takes the quotes off, as the host does.
        assert_eq!(py("%pip install -q tabulate 'x'"), ["tabulate", "x"]);
        assert_eq!(py("!pip install 'a;b'"), Vec::<String>::new());
        assert_eq!(
            py("%pip install -q tabulate rich==13.*"),
            ["tabulate", "rich==13.*"]
        );
        assert_eq!(py("%pip install tabulate rich>=13"), Vec::<String>::new());
        assert_eq!(py("!pip install seaborn\nimport seaborn"), ["seaborn"]);
        assert_eq!(py("!python -m pip install -U a[x,y]==1.0"), ["a[x,y]==1.0"]);
        assert_eq!(py("%%bash\npip install a && pip3 install b a"), ["a", "b"]);
        assert_eq!(py("pip install a"), Vec::<String>::new());
        assert_eq!(py("!pip install -r req.txt"), Vec::<String>::new());
        assert_eq!(py("!pip install $PKG"), Vec::<String>::new());
        assert_eq!(sh("pip install a; echo ok | pip install b # c"), ["a", "b"]);
        assert_eq!(
            sh("python3 -m pip install --quiet c~=1.2,!=1.2.3"),
            ["c~=1.2,!=1.2.3"]
        );
        assert_eq!(
            sh("# pip install a\necho pip install b"),
            Vec::<String>::new()
        );
        assert_eq!(sh("pip list"), Vec::<String>::new());
        assert_eq!(sh("pip install --index-url x a"), Vec::<String>::new());
    }
}
