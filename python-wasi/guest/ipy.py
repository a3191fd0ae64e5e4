"""Notebook cells in Vivarium, loaded into every template as `vivarium_ipy` (issue 49):
IPython's magics, `!` lines and `obj?` help, translated as IPython's input transformers do.

The host's API (what it calls, and nothing else is promised):

- `needs_transform(source) -> bool`: whether `source` has any IPython syntax (a line whose
  first token is `%`, `!`, `?`, `,`, `;` or `/`; `x = !cmd` or `x = %magic`; a `%%cell`
  magic; `obj?` / `obj??`). Exact, and cheap on plain Python: a regular expression first,
  then the tokenizer only when it matches. Plain Python never needs `run`.
- `transform(source) -> str`: the cell as Python, line for line: the call that replaces a
  magic or `!` line stays on that line (a line continued with backslashes leaves blank
  lines behind), so every other line keeps its number. IPython's `get_ipython()` is spelt
  `_vivarium_ipy_()` so a user's own `get_ipython` clashes with nothing; `transform`
  installs it (and `get_ipython`) as builtins, so its result runs wherever it is compiled
  (code mode: `vivarium_tools.run(vivarium_ipy.transform(SOURCE), ...)`), and remembers
  the cell as the current one (a cell magic's body keeps its line numbers in tracebacks).
- `run(source, echo=False)`: what the host runs for a cell that needs the transform
  (`__import__('vivarium_ipy').run(SOURCE, ECHO)`): transforms it, compiles it as
  `<turn N>` (N is the guest's turn count, as every turn's file name) with top-level
  `await` allowed, registers the caller's ORIGINAL lines for that file name so tracebacks
  show them, and runs it in `__main__`; with `echo` a final expression's value goes to
  `sys.displayhook` (a session's turn), as `vivarium_tools.run` does. A SyntaxError in the
  cell names the caller's line. `get_ipython()` becomes a builtin returning the shell
  object (`IPYTHON`), for code that calls it itself.

The magics are documented in docs/guides/notebooks.md. An unknown magic raises `UsageError`
with IPython's message. `!cmd` and `%%bash` run in the guest's own shell
(`vivarium_shell`), never a host process.

The transformer is adapted from IPython's IPython/core/inputtransformer2.py (Copyright (c)
IPython Development Team, Modified BSD License); the magics' output formats (`%time`,
`%timeit`, `%who`, `%whos`, `%%writefile`) and `SList` follow IPython's too.
"""

import ast
import builtins
import io
import linecache
import os
import re
import sys
import time
import tokenize

# ---------------------------------------------------------------------------------------
# The transformer (after IPython's inputtransformer2: one special form at a time, found by
# the tokenizer so strings and comments are left alone, the tokens regenerated after each).

# The name the transformed code calls; a builtin once `run` has been called.
SHELL_NAME = "_vivarium_ipy_"

# The cheap look first: a line starting with an escape, a line ending in `?`, `= !` or
# `= %` (three searches, each starting from a literal character, are faster than one with
# alternatives: about 1 ms for 2 000 lines of plain Python on the host).
_LINE_ESCAPE = re.compile(r"\n[ \t\f]*[%!?,;/]")
_LINE_HELP = re.compile(r"\?[ \t\f]*\r?$", re.M)
_ASSIGN_ESCAPE = re.compile(r"=[ \t\f]*[!%]")


def _prefilter(source):
    return bool(
        _LINE_ESCAPE.search("\n" + source)
        or ("?" in source and _LINE_HELP.search(source))
        or _ASSIGN_ESCAPE.search(source)
    )

ESC_SHELL = "!"
ESC_SH_CAP = "!!"
ESC_HELP = "?"
ESC_HELP2 = "??"
ESC_MAGIC = "%"
ESC_QUOTE = ","
ESC_QUOTE2 = ";"
ESC_PAREN = "/"
ESCAPE_SINGLES = {"!", "?", "%", ",", ";", "/"}
ESCAPE_DOUBLES = {"!!", "??"}

_TOKEN_ERRORS = (
    "unterminated string literal",
    "invalid non-printable character",
    "after line continuation character",
    "invalid decimal literal",
    "invalid binary literal",
    "invalid octal literal",
    "invalid hexadecimal literal",
    "in binary literal",
    "in octal literal",
    "expected EOF",
)


def _tokens(readline):
    """tokenize.generate_tokens, ending with an ERRORTOKEN where IPython's tokenutil does."""
    last = None
    try:
        for token in tokenize.generate_tokens(readline):
            last = token
            yield token
    except tokenize.TokenError as exc:
        if any(e in str(exc.args[0]) for e in _TOKEN_ERRORS):
            if last is not None:
                start = end = (last.start[0], last.end[0])
                line = last.line
            else:
                start = end = (1, 0)
                line = ""
            yield tokenize.TokenInfo(tokenize.ERRORTOKEN, "", start, end, line)
        else:
            raise
    except SyntaxError:
        # 3.12+: an indentation error and the like; what was tokenized so far stands.
        return


def _tokens_by_line(lines):
    """The tokens grouped by logical line (IPython's make_tokens_by_line)."""
    NEWLINE, NL = tokenize.NEWLINE, tokenize.NL
    by_line = [[]]
    level = 0
    try:
        for token in _tokens(iter(lines).__next__):
            by_line[-1].append(token)
            if token.type == NEWLINE or (token.type == NL and level <= 0):
                by_line.append([])
            elif token.type == tokenize.OP and token.string in ("(", "[", "{"):
                level += 1
            elif token.type == tokenize.OP and token.string in (")", "]", "}"):
                if level > 0:
                    level -= 1
    except tokenize.TokenError:
        pass
    if not by_line[-1]:
        by_line.pop()
    return by_line


def _find_assign_op(line):
    level = 0
    for i, t in enumerate(line):
        s = t.string
        if s == "=" and level == 0:
            return i
        if s in ("(", "[", "{"):
            level += 1
        elif s in (")", "]", "}") and level > 0:
            level -= 1
    return None


def _end_of_continued(lines, start):
    end = start
    while lines[end].endswith("\\\n"):
        end += 1
        if end >= len(lines):
            break
    return min(end, len(lines) - 1)


def _assemble(lines, start, end):
    parts = [lines[start[0]][start[1]:]] + lines[start[0] + 1 : end + 1]
    return " ".join([p.rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])


def _replace(lines, first, last, new_line):
    """`lines[first:last+1]` become `new_line` and blank lines: numbering is kept."""
    return lines[:first] + [new_line] + ["\n"] * (last - first) + lines[last + 1 :]


def _call(method, *args):
    return f"{SHELL_NAME}().{method}({', '.join(repr(a) for a in args)})"


class _Found:
    priority = 10

    def __init__(self, start):
        self.line = start[0] - 1
        self.col = start[1]

    def key(self):
        return (self.line, self.col, self.priority)


class _MagicAssign(_Found):
    @classmethod
    def find(cls, by_line):
        for line in by_line:
            i = _find_assign_op(line)
            if (
                i is not None
                and len(line) >= i + 3
                and line[i + 1].string == "%"
                and line[i + 2].type == tokenize.NAME
            ):
                return cls(line[i + 1].start)

    def transform(self, lines):
        lhs = lines[self.line][: self.col]
        end = _end_of_continued(lines, self.line)
        rhs = _assemble(lines, (self.line, self.col), end)
        name, _, args = rhs[1:].partition(" ")
        return _replace(lines, self.line, end, lhs + _call("run_line_magic", name, args) + "\n")


class _SystemAssign(_Found):
    @classmethod
    def find(cls, by_line):
        for line in by_line:
            i = _find_assign_op(line)
            if (
                i is None
                or line[i].line.strip().startswith("=")
                or len(line) < i + 2
            ):
                continue
            if sys.version_info >= (3, 12):
                if line[i + 1].type == tokenize.OP and line[i + 1].string == "!":
                    return cls(line[i + 1].start)
            else:
                ix = i + 1
                while ix < len(line) and line[ix].type == tokenize.ERRORTOKEN:
                    if line[ix].string == "!":
                        return cls(line[ix].start)
                    if not line[ix].string.isspace():
                        break
                    ix += 1

    def transform(self, lines):
        lhs = lines[self.line][: self.col]
        end = _end_of_continued(lines, self.line)
        rhs = _assemble(lines, (self.line, self.col), end)
        return _replace(lines, self.line, end, lhs + _call("getoutput", rhs[1:]) + "\n")


def _help_call(target, esc):
    method = "pinfo2" if esc == "??" else "psearch" if "*" in target else "pinfo"
    return _call("run_line_magic", method, target)


def _tr_help(content):
    return _call("show_usage") if not content else _help_call(content, "?")


def _tr_help2(content):
    return _call("show_usage") if not content else _help_call(content, "??")


def _tr_magic(content):
    name, _, args = content.partition(" ")
    return _call("run_line_magic", name, args)


def _tr_quote(content):
    name, _, args = content.partition(" ")
    return '{}("{}")'.format(name, '", "'.join(args.split()))


def _tr_quote2(content):
    name, _, args = content.partition(" ")
    return '{}("{}")'.format(name, args)


def _tr_paren(content):
    name, _, args = content.partition(" ")
    if name == "":
        raise SyntaxError('"!" must be followed by a callable name')
    return "{}({})".format(name, ", ".join(args.split()))


_TR = {
    ESC_SHELL: lambda c: _call("system", c),
    ESC_SH_CAP: lambda c: _call("getoutput", c),
    ESC_HELP: _tr_help,
    ESC_HELP2: _tr_help2,
    ESC_MAGIC: _tr_magic,
    ESC_QUOTE: _tr_quote,
    ESC_QUOTE2: _tr_quote2,
    ESC_PAREN: _tr_paren,
}


class _Escaped(_Found):
    @classmethod
    def find(cls, by_line):
        for line in by_line:
            ix = 0
            while ix < len(line) and line[ix].type in (tokenize.INDENT, tokenize.DEDENT):
                ix += 1
            if ix < len(line) and line[ix].string in ESCAPE_SINGLES:
                return cls(line[ix].start)

    def transform(self, lines):
        indent = lines[self.line][: self.col]
        end = _end_of_continued(lines, self.line)
        line = _assemble(lines, (self.line, self.col), end)
        if len(line) > 1 and line[:2] in ESCAPE_DOUBLES:
            escape, content = line[:2], line[2:]
        else:
            escape, content = line[:1], line[1:]
        call = _TR[escape](content) if escape in _TR else ""
        return _replace(lines, self.line, end, indent + call + "\n")


_HELP_END = re.compile(
    r"""(%{0,2}
    (?!\d)[\w*]+                        # a name
    (\.(?!\d)[\w*]+|\[-?[0-9]+\])*      # .attr or [0] (literal integers only)
    )
    (\?\??)$                            # ? or ??
    """,
    re.VERBOSE,
)


class _HelpEnd(_Found):
    priority = 5

    def __init__(self, start, q):
        super().__init__(start)
        self.q_line = q[0] - 1

    @classmethod
    def find(cls, by_line):
        for line in by_line:
            if len(line) > 2 and line[-2].string == "?":
                ix = 0
                while line[ix].type in (tokenize.INDENT, tokenize.DEDENT):
                    ix += 1
                return cls(line[ix].start, line[-2].start)

    def transform(self, lines):
        piece = "".join(lines[self.line : self.q_line + 1])
        indent, content = piece[: self.col], piece[self.col :]
        m = _HELP_END.search(content)
        if not m:
            raise SyntaxError(content)
        new = indent + _help_call(m.group(1), m.group(3)) + "\n"
        return _replace(lines, self.line, self.q_line, new)


_FINDERS = (_MagicAssign, _SystemAssign, _Escaped, _HelpEnd)


def _candidates(lines):
    by_line = _tokens_by_line(lines)
    found = [f for f in (cls.find(by_line) for cls in _FINDERS) if f]
    return sorted(found, key=_Found.key)


def _cell_magic_at(lines):
    """The index of the `%%name` line that makes this a cell magic, or None: the first line
    past blank ones (IPython drops leading blank lines first)."""
    for i, line in enumerate(lines):
        if line and not line.isspace():
            if line.startswith("%%") and not re.match(r"%%\w+\?", line):
                return i
            return None
    return None


def _dedent(lines):
    """IPython's leading_indent: a cell indented as a whole is dedented (line for line)."""
    if not lines:
        return lines
    from textwrap import dedent

    out = dedent("".join(lines)).splitlines(keepends=True)
    return out if len(out) == len(lines) else lines


def needs_transform(source):
    """Whether `source` has IPython syntax: exact, and cheap when it has none."""
    if not isinstance(source, str) or not _prefilter(source):
        return False
    if not source.endswith("\n"):
        source += "\n"
    lines = _dedent(source.splitlines(keepends=True))
    if _cell_magic_at(lines) is not None:
        return True
    try:
        return bool(_candidates(lines))
    except Exception:
        return False


def _split(source):
    if not source.endswith("\n"):
        source += "\n"
    return _dedent(source.splitlines(keepends=True))


def _transform(source):
    """`source` as Python, line for line: the translation alone."""
    lines = _split(source)
    at = _cell_magic_at(lines)
    if at is not None:
        name, _, first = lines[at][2:].rstrip().partition(" ")
        body = "".join(lines[at + 1 :])
        return "".join(lines[:at]) + _call("run_cell_magic", name, first, body) + "\n"
    for _ in range(500):
        changed = False
        for found in _candidates(lines):
            try:
                lines = found.transform(lines)
            except SyntaxError:
                continue
            changed = True
            break
        if not changed:
            return "".join(lines)
    raise RuntimeError("Input transformation still changing after 500 iterations. Aborting.")


# ---------------------------------------------------------------------------------------
# What the transformed code calls.


class UsageError(Exception):
    """A magic used wrongly, or one that does not exist (IPython's UsageError)."""


# Tracebacks name it as IPython shows it: `UsageError: Line magic function `%foo` not found.`
UsageError.__module__ = "builtins"


try:
    from subprocess import CalledProcessError
except Exception:  # pragma: no cover - a build without subprocess

    class CalledProcessError(Exception):
        def __init__(self, returncode, cmd):
            super().__init__(returncode, cmd)
            self.returncode = returncode
            self.cmd = cmd

        def __str__(self):
            return f"Command '{self.cmd}' returned non-zero exit status {self.returncode}."


class SList(list):
    """A list of output lines with IPython's SList conveniences: .n (joined by newlines),
    .s (by spaces), .l (the list), .p (the paths that exist), .grep(), .fields(), .sort()."""

    def get_list(self):
        return self

    l = list = property(get_list)

    def get_spstr(self):
        return " ".join(self)

    s = spstr = property(get_spstr)

    def get_nlstr(self):
        return "\n".join(self)

    n = nlstr = property(get_nlstr)

    def get_paths(self):
        from pathlib import Path

        return [Path(p) for p in self if os.path.exists(p)]

    p = paths = property(get_paths)

    def grep(self, pattern, prune=False, field=None):
        def target(s):
            if field is None:
                return s
            parts = s.split()
            try:
                return parts[field]
            except IndexError:
                return ""

        if isinstance(pattern, str):
            pred = lambda x: re.search(pattern, x, re.IGNORECASE)  # noqa: E731
        else:
            pred = pattern
        if not prune:
            return type(self)([el for el in self if pred(target(el))])
        return type(self)([el for el in self if not pred(target(el))])

    def fields(self, *fields):
        if len(fields) == 0:
            return [el.split() for el in self]
        res = SList()
        for el in [f.split() for f in self]:
            parts = []
            for fd in fields:
                try:
                    parts.append(el[fd])
                except IndexError:
                    pass
            if parts:
                res.append(" ".join(parts))
        return res

    def sort(self, field=None, nums=False):
        if field is not None:
            dsu = [[SList([line]).fields(field), line] for line in self]
        else:
            dsu = [[line, line] for line in self]
        if nums:
            for i in range(len(dsu)):
                digits = "".join(ch for ch in dsu[i][0] if ch.isdigit())
                try:
                    dsu[i][0] = int(digits)
                except ValueError:
                    dsu[i][0] = 0
        dsu.sort()
        return type(self)([t[1] for t in dsu])


class CapturedIO:
    """What `%%capture NAME` stores: the cell's .stdout and .stderr (text); .show() (or
    calling it) writes them out again."""

    def __init__(self, stdout, stderr):
        self._stdout = stdout
        self._stderr = stderr
        self.outputs = []

    def __str__(self):
        return self.stdout

    @property
    def stdout(self):
        return self._stdout._text() if self._stdout is not None else ""

    @property
    def stderr(self):
        return self._stderr._text() if self._stderr is not None else ""

    def show(self):
        if self.stdout:
            sys.stdout.write(self.stdout)
            sys.stdout.flush()
        if self.stderr:
            sys.stderr.write(self.stderr)
            sys.stderr.flush()

    __call__ = show


class _Capture(io.TextIOWrapper):
    """A text stream over bytes (so the shell's writes to `.buffer` are captured too)."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def _text(self):
        try:
            self.flush()
        except ValueError:
            pass
        return self.buffer.getvalue().decode("utf-8", "replace")

    def close(self):  # the text stays readable
        self.flush()


class TimeitResult:
    """What `%timeit -o` returns (IPython's TimeitResult)."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time, precision):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [dt / loops for dt in all_runs]

    @property
    def average(self):
        import math

        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        import math

        mean = self.average
        return (math.fsum([(x - mean) ** 2 for x in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        pm = "\xb1"
        return (
            "{mean} {pm} {std} per loop (mean {pm} std. dev. of {runs} run{rp}, "
            "{loops:,} loop{lp} each)"
        ).format(
            pm=pm,
            runs=self.repeat,
            loops=self.loops,
            lp="" if self.loops == 1 else "s",
            rp="" if self.repeat == 1 else "s",
            mean=_format_time(self.average, self._precision),
            std=_format_time(self.stdev, self._precision),
        )

    def __repr__(self):
        return "<TimeitResult : " + str(self) + ">"


def _format_time(timespan, precision=3):
    """IPython's: a duration as `1.23 ms`, `4.56 \u03bcs`, `1min 2s`."""
    if timespan >= 60.0:
        parts = [("d", 60 * 60 * 24), ("h", 60 * 60), ("min", 60), ("s", 1)]
        out = []
        leftover = timespan
        for suffix, length in parts:
            value = int(leftover / length)
            if value > 0:
                leftover = leftover % length
                out.append(f"{value}{suffix}")
            if leftover < 1:
                break
        return " ".join(out)
    units = ["s", "ms", "\u03bcs", "ns"]
    scaling = [1, 1e3, 1e6, 1e9]
    if timespan > 0.0:
        import math

        order = min(-int(math.floor(math.log10(timespan)) // 3), 3)
    else:
        order = 3
    return "%.*g %s" % (precision, timespan * scaling[order], units[order])


class _HTML:
    def __init__(self, data):
        self.data = data

    def _repr_html_(self):
        return self.data

    def __repr__(self):
        return "<IPython.core.display.HTML object>"


class _Markdown(_HTML):
    def _repr_markdown_(self):
        return self.data

    def __repr__(self):
        return "<IPython.core.display.Markdown object>"


# A budget for `%timeit` without `-r`: fewer runs than 7 when each is long, so a cell's
# time stays bounded (the calibration's loops count once, as in IPython).
TIMEIT_BUDGET = 5.0

# Magics accepted and ignored: they configure what a sandbox already does or has no use for.
SILENT = {
    "matplotlib",
    "load_ext",
    "reload_ext",
    "unload_ext",
    "config",
    "autoreload",
    "aimport",
    "autosave",
    "colors",
    "xmode",
    "precision",
    "pprint",
    "automagic",
    "autocall",
    "doctest_mode",
}

class Shell:
    """The object `get_ipython()` returns: IPython's InteractiveShell, as far as a cell in a
    sandbox needs it."""

    def __init__(self):
        self.config = {}
        self._dh = []
        self._offset = 0
        self._source = None
        self._filename = None
        self._code = set()
        self._via_tools = False
        # IPython hides what it put in the namespace itself; here, what was there when
        # the template loaded this module (nothing of the caller's).
        self.user_ns_hidden = _HIDDEN

    def _turn_file(self):
        """The file name the current turn's code has (`<turn N>` in a session, `<string>` in
        a single program: `_vivarium.code_filename`)."""
        if self._filename:
            return self._filename
        try:
            import _vivarium

            return _vivarium.code_filename()
        except ImportError:
            try:
                import _reactor

                return f"<turn {_reactor._turns}>"
            except ImportError:
                return "<ipython-cell>"

    # ---- the namespace
    @property
    def user_ns(self):
        return sys.modules["__main__"].__dict__

    @property
    def user_global_ns(self):
        return self.user_ns

    def __repr__(self):
        return "<vivarium_ipy.Shell object>"

    # ---- IPython's entry points
    def run_line_magic(self, magic_name, line, _stack_depth=1):
        fn = getattr(self, "magic_" + magic_name, None)
        if fn is None:
            if magic_name in SILENT:
                return None
            raise UsageError(f"Line magic function `%{magic_name}` not found.")
        if magic_name not in ("time", "timeit", "who", "whos", "who_ls", "pinfo", "pinfo2"):
            line = self.var_expand(line, 2)
        return fn(line)

    def run_cell_magic(self, magic_name, line, cell):
        fn = getattr(self, "cell_" + magic_name, None)
        if fn is None:
            if magic_name in SILENT:
                return None
            raise UsageError(f"Cell magic `%%{magic_name}` not found.")
        line = self.var_expand(line, 2)
        return fn(line, cell)

    def find_line_magic(self, name):
        return getattr(self, "magic_" + name, None)

    def find_cell_magic(self, name):
        return getattr(self, "cell_" + name, None)

    def var_expand(self, cmd, depth=1):
        """`$name` and `{expr}` from the caller's namespace, as IPython does; when anything
        fails the command is left as it is (so `$HOME` reaches the shell)."""
        if "$" not in cmd and "{" not in cmd:
            return cmd
        ns = dict(self.user_ns)
        try:
            frame = sys._getframe(depth)
            if frame.f_locals is not frame.f_globals:
                ns.update(frame.f_locals)
        except Exception:
            pass
        try:
            return _DollarFormatter().vformat(cmd, args=[], kwargs=ns)
        except Exception:
            return cmd

    def transform_cell(self, cell):
        return _transform(cell)

    def show_usage(self):
        print(
            "Vivarium runs notebook cells as IPython does: %magics, %%cell magics, "
            "!commands and obj? help.\nSee docs/guides/notebooks.md."
        )

    def system(self, cmd):
        """`!cmd`: runs in the sandbox's shell; its output goes out as it comes; the status
        is `_exit_code` in the namespace."""
        cmd = self.var_expand(cmd, 2)
        _flush()
        status = _shell().run(cmd, persist=False)
        _flush()
        self.user_ns["_exit_code"] = status
        return None

    system_piped = system_raw = system

    def getoutput(self, cmd, split=True, depth=0):
        """`x = !cmd`: its output (stdout and stderr, as IPython's) as an SList of lines."""
        cmd = self.var_expand(cmd, depth + 2)
        _flush()
        status, out = _shell().run_capture("{ " + cmd + "\n} 2>&1")
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
        lines = SList(text.splitlines())
        return lines if split else lines.n

    def ev(self, expr):
        return eval(expr, self.user_ns)

    def ex(self, cmd):
        exec(cmd, self.user_ns)

    def push(self, variables, interactive=True):
        if isinstance(variables, str):
            frame = sys._getframe(1)
            variables = {n: eval(n, frame.f_globals, frame.f_locals) for n in variables.split()}
        self.user_ns.update(variables)

    def run_cell(self, raw_cell, store_history=False, silent=False, shell_futures=True):
        """Runs `raw_cell` (IPython syntax allowed) in the namespace, as its own source
        `<ipython-run-cell>`; the value of a final expression is displayed and returned."""
        saved = self._source, self._filename, self._offset
        self._source, self._filename, self._offset = raw_cell, "<ipython-run-cell>", 0
        try:
            return self._run_body(raw_cell, 0, echo=not silent)
        finally:
            self._source, self._filename, self._offset = saved

    # ---- running a body (a cell magic's cell, `%time`'s statement) in the user's namespace
    def _compile(self, source, offset, echo):
        """Compiles `source` (already Python) as the current turn's code; line numbers are
        shifted by `offset` (the lines of the original cell above it)."""
        filename = self._turn_file()
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        text = "\n" * offset + source
        try:
            tree = compile(text, filename, "exec", flags | ast.PyCF_ONLY_AST)
        except SyntaxError as e:
            _caller_line(e, self._source, filename)
            raise
        last = None
        if echo and tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", flags)
        tail = compile(last, filename, "eval", flags) if last is not None else None
        for c in (body, tail):
            if c is not None:
                self._code.add(c)
                _register(c, self._source, filename)
        return body, tail

    def _execute(self, source, offset=0, echo=False, display=True):
        """Runs cell text `source` (IPython syntax allowed) whose first line is line
        `offset + 1` of the original cell; with `echo` the value of a final expression is
        returned (and displayed when `display`)."""
        lines = _split(source)
        at = _cell_magic_at(lines)
        if at is not None:
            self._offset = offset + at + 1
        python = "".join(lines) if at is None and not needs_transform(source) else _transform(source)
        body, tail = self._compile(python, offset, echo)
        scope = self.user_ns
        _evaluate(body, scope)
        if tail is not None:
            value = _evaluate(tail, scope)
            if display:
                sys.displayhook(value)
            return value
        return None

    def _run_body(self, cell, offset, echo=False):
        return self._execute(cell, offset, echo=echo, display=echo)

    # ---- line magics
    def magic_pinfo(self, line, detail=0):
        name = line.strip()
        if name.startswith("%"):
            stripped = name.lstrip("%")
            fn = self.find_cell_magic(stripped) if name.startswith("%%") else None
            fn = fn or self.find_line_magic(stripped) or self.find_cell_magic(stripped)
            if fn is None:
                print(f"Object `{name}` not found.")
                return
            print("Docstring:")
            print(_doc(fn))
            return
        try:
            obj = eval(name, self.user_ns)
        except Exception:
            print(f"Object `{name}` not found.")
            return
        _pinfo(name, obj, detail)

    def magic_pinfo2(self, line):
        return self.magic_pinfo(line, detail=1)

    def magic_psearch(self, line):
        """`a*?`: the names matching a wildcard."""
        import fnmatch

        pattern = line.split()[0] if line.split() else "*"
        if "." in pattern:
            base, _, pat = pattern.rpartition(".")
            try:
                names = dir(eval(base, self.user_ns))
            except Exception:
                return
            prefix = base + "."
        else:
            names = list(self.user_ns) + dir(builtins)
            pat, prefix = pattern, ""
        for n in sorted(set(names)):
            if fnmatch.fnmatchcase(n, pat) and (pat.startswith("_") or not n.startswith("_")):
                print(prefix + n)

    def magic_pip(self, line):
        """Packages: `%pip install NAME ...` names what the host installed before the cell
        ran (the host reads the cell's `%pip install` and `!pip install` lines first)."""
        sh = sys.modules.get("vivarium_shell")
        if _registry_has(sh, "pip"):
            _flush()
            sh.run("pip " + line, persist=False)
            _flush()
            return None
        words = line.split()
        if not words or words[0] != "install":
            print(
                "ERROR: this sandbox's %pip only installs (`%pip install NAME`); the host "
                "installs the packages a cell names before it runs.",
                file=sys.stderr,
            )
            return None
        for name in _requirement_names(words[1:]):
            if _installed(name):
                print(f"Requirement already satisfied: {name}")
            else:
                print(
                    f"ERROR: Could not install {name}: the host did not provide it "
                    "(packages are installed by the host before the cell runs).",
                    file=sys.stderr,
                )
        return None

    def magic_time(self, line):
        """Times a statement (CPU = time.process_time; Wall = time.perf_counter)."""
        return self._time(line, None, offset=None)

    def _time(self, line, cell, offset):
        if line.strip() and cell is not None:
            raise UsageError("Can't use statement directly after '%%time'!")
        source = cell if cell is not None else line
        python = _transform(source) if needs_transform(source) else source
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        filename = self._turn_file() if cell is not None else "<timed exec>"
        pad = "\n" * (offset or 0)
        try:
            tree = compile(pad + python, filename, "exec", flags | ast.PyCF_ONLY_AST)
        except SyntaxError as e:
            if cell is not None:
                _caller_line(e, self._source, filename)
            raise
        value_code = None
        if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
            mode_code = compile(
                ast.Expression(tree.body[0].value),
                "<timed eval>" if cell is None else filename,
                "eval",
                flags,
            )
        else:
            if len(tree.body) > 1 and isinstance(tree.body[-1], ast.Expr):
                value_code = compile(
                    ast.Expression(tree.body.pop().value), filename, "eval", flags
                )
            mode_code = compile(tree, filename, "exec", flags)
        for c in (mode_code, value_code):
            if c is not None and cell is not None:
                self._code.add(c)
                _register(c, self._source, filename)
        scope = self.user_ns
        wall0 = time.perf_counter()
        cpu0 = time.process_time()
        error = None
        out = None
        try:
            out = _evaluate(mode_code, scope)
            if value_code is not None:
                out = _evaluate(value_code, scope)
        except BaseException as e:
            error = e
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        print(f"CPU times: user {_format_time(cpu)}, sys: {_format_time(0.0)}, total: {_format_time(cpu)}")
        print(f"Wall time: {_format_time(wall)}")
        if error is not None:
            raise error
        return out

    def magic_timeit(self, line):
        """Times a statement over loops and runs: `-n N` loops, `-r R` runs, `-q` quiet,
        `-o` returns the TimeitResult, `-p P` digits."""
        return self._timeit(line, None)

    def _timeit(self, line, cell):
        import timeit as _timeit

        opts, stmt = _parse_opts(line, {"n", "r", "p", "v"}, {"t", "c", "q", "o"})
        if stmt == "" and cell is None:
            return None
        number = int(opts.get("n", 0))
        repeat_given = "r" in opts
        repeat = int(opts.get("r", 7))
        precision = int(opts.get("p", 3))
        timer_fn = time.perf_counter
        if "t" in opts:
            timer_fn = time.time
        if "c" in opts:
            timer_fn = time.process_time
        if cell is None:
            setup, body = "pass", _transform(stmt) if needs_transform(stmt) else stmt
        else:
            setup = _transform(stmt) if needs_transform(stmt) else (stmt or "pass")
            body = _transform(cell) if needs_transform(cell) else cell
        compile(setup, "<magic-timeit-setup>", "exec")
        compile(body, "<magic-timeit-stmt>", "exec")
        t0 = time.perf_counter()
        timer = _timeit.Timer(body, setup, timer=timer_fn, globals=self.user_ns)
        tc = time.perf_counter() - t0
        if number == 0:
            for index in range(0, 10):
                number = 10**index
                took = timer.timeit(number)
                if took >= 0.2:
                    break
        else:
            took = None
        if not repeat_given and took is not None and took > 0:
            repeat = max(1, min(repeat, int(TIMEIT_BUDGET / took)))
        if not repeat_given and took is not None and took >= TIMEIT_BUDGET:
            runs = [took]  # one run already took the budget: it is the measurement
        else:
            runs = timer.repeat(repeat, number)
        best = min(runs) / number
        worst = max(runs) / number
        result = TimeitResult(number, repeat, best, worst, runs, tc, precision)
        if "q" not in opts:
            if worst > 4 * best and best > 0 and worst > 1e-6:
                print(
                    "The slowest run took %0.2f times longer than the fastest. This could "
                    "mean that an intermediate result is being cached." % (worst / best)
                )
            print(result)
            if tc > 0.1:
                print("Compiler time: %.2f s" % tc)
        if "v" in opts:
            self.user_ns[opts["v"]] = result
        if "o" in opts:
            return result
        return None

    def magic_cd(self, line):
        """Changes the working directory and prints the new one (`%cd -` goes back,
        `%cd` alone goes home, `-q` quiet)."""
        opts, arg = _parse_opts(line, set(), {"q"})
        arg = arg.strip()
        if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "'\"":
            arg = arg[1:-1]
        try:
            old = os.getcwd()
        except OSError:
            old = None
        if not self._dh and old is not None:
            self._dh.append(old)
        if arg == "-":
            if len(self._dh) < 2:
                raise UsageError("%cd -: No previous directory to change to.")
            arg = self._dh[-2]
        elif not arg:
            arg = os.environ.get("HOME") or os.path.expanduser("~")
        try:
            os.chdir(os.path.expanduser(arg))
        except OSError as e:
            print(e)
        else:
            cwd = os.getcwd()
            if old != cwd:
                self._dh.append(cwd)
        self.user_ns["_dh"] = self._dh
        if "q" not in opts and self._dh:
            print(self._dh[-1])

    def magic_pwd(self, line=""):
        """The working directory."""
        return os.getcwd()

    def magic_env(self, line=""):
        """`%env` (all, secrets hidden), `%env VAR`, `%env VAR=value`, `%env VAR value`."""
        if line.strip():
            split = "=" if "=" in line else " "
            bits = line.split(split)
            if len(bits) == 1:
                key = line.strip()
                if key in os.environ:
                    return os.environ[key]
                raise UsageError(f"Environment does not have key: {key}")
            return self.magic_set_env(line)
        env = dict(os.environ)
        for key in list(env):
            if any(s in key.lower() for s in ("key", "token", "secret")):
                env[key] = "<hidden>"
        return env

    def magic_set_env(self, line):
        """`%set_env VAR=value`."""
        split = "=" if "=" in line else " "
        bits = line.split(split, 1)
        if not line.strip() or len(bits) < 2:
            raise UsageError("usage is 'set_env var=val'")
        var = bits[0].strip()
        val = bits[1].strip()
        if re.match(r".*\s.*", var):
            raise UsageError(f"refusing to set env var with whitespace: '{val}'")
        os.environ[var] = val
        print(f"env: {var}={val}")

    def magic_who_ls(self, line=""):
        """The names of the user's variables (sorted; no `_` names)."""
        ns = self.user_ns
        hidden = self.user_ns_hidden
        missing = object()
        out = [n for n in ns if not n.startswith("_") and ns[n] is not hidden.get(n, missing)]
        types = line.split()
        if types:
            out = [n for n in out if type(ns[n]).__name__ in set(types)]
        out.sort()
        return out

    def magic_who(self, line=""):
        """The user's variables, as IPython lists them."""
        names = self.magic_who_ls(line)
        if not names:
            print("No variables match your requested type." if line else "Interactive namespace is empty.")
            return
        count = 0
        for n in names:
            print(n + "\t", end=" ")
            count += 1
            if count > 8:
                count = 0
                print()
        print()

    def magic_whos(self, line=""):
        """The user's variables with their types and values, as IPython's table."""
        names = self.magic_who_ls(line)
        if not names:
            print("No variables match your requested type." if line else "Interactive namespace is empty.")
            return
        ns = self.user_ns
        values = [ns[n] for n in names]
        types = [type(v).__name__ for v in values]
        ndarray = None
        if "numpy" in sys.modules:
            ndarray = getattr(sys.modules["numpy"], "ndarray", None)
            ndarray = ndarray.__name__ if ndarray is not None else None
        varwidth = max(max(map(len, names)), len("Variable")) + 3
        typewidth = max(max(map(len, types)), len("Type")) + 3
        print(
            "Variable".ljust(varwidth)
            + "Type".ljust(typewidth)
            + " Data/Info\n"
            + "-" * (varwidth + typewidth + len("Data/Info") + 1)
        )
        fmt = "{0:<{varwidth}}{1:<{typewidth}}"
        aformat = "%s: %s elems, type `%s`, %s bytes"
        for name, var, vtype in zip(names, values, types):
            print(fmt.format(name, vtype, varwidth=varwidth, typewidth=typewidth), end=" ")
            if vtype in ("dict", "list", "tuple"):
                print("n=" + str(len(var)))
            elif vtype == ndarray:
                shape = str(var.shape).replace(",", "").replace(" ", "x")[1:-1]
                size = var.size
                nbytes = size * var.itemsize
                if nbytes < 100000:
                    print(aformat % (shape, size, var.dtype, nbytes))
                else:
                    print(aformat % (shape, size, var.dtype, nbytes), end=" ")
                    if nbytes < 1048576:
                        print(f"({nbytes / 1024} kb)")
                    else:
                        print(f"({nbytes / 1048576} Mb)")
            elif vtype in ("DataFrame", "Series"):
                print(f"Shape: {var.shape}")
            else:
                try:
                    text = str(var)
                except Exception:
                    text = "<object with id %d (str() failed)>" % id(var)
                text = text.replace("\n", "\\n")
                if len(text) < 50:
                    print(text)
                else:
                    print(text[:25] + "<...>" + text[-25:])

    def magic_reset(self, line=""):
        """`%reset -f`: removes the user's variables."""
        opts, _ = _parse_opts(line, set(), {"f", "s"})
        if "f" not in opts:
            try:
                answer = input("Once deleted, variables cannot be recovered. Proceed (y/[n])? ")
            except Exception:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("Nothing done.")
                return
        ns = self.user_ns
        for name in self.magic_who_ls():
            del ns[name]

    def magic_ls(self, line=""):
        """`ls` in the sandbox's shell."""
        return self.system(("ls " + line).rstrip())

    def magic_sx(self, line=""):
        """`%sx cmd`: as `!!cmd`."""
        return self.getoutput(line)

    magic_system = magic_sx

    def magic_lsmagic(self, line=""):
        """The magics this sandbox has."""
        lines = sorted("%" + n[6:] for n in dir(self) if n.startswith("magic_"))
        cells = sorted("%%" + n[5:] for n in dir(self) if n.startswith("cell_"))
        print("Available line magics:\n" + "  ".join(lines))
        print("\nAvailable cell magics:\n" + "  ".join(cells))
        print("\nAccepted and ignored: " + "  ".join("%" + n for n in sorted(SILENT)))

    def magic_magic(self, line=""):
        return self.magic_lsmagic(line)

    # ---- cell magics
    def cell_time(self, line, cell):
        """Times the cell."""
        return self._time(line, cell, offset=self._offset)

    def cell_timeit(self, line, cell):
        """Times the cell (the magic's line is the setup)."""
        return self._timeit(line, cell)

    def cell_bash(self, line, cell):
        """The cell in the sandbox's shell; a non-zero status raises CalledProcessError."""
        return self._script(line, cell)

    cell_sh = cell_bash

    def cell_script(self, line, cell):
        """`%%script bash` / `%%script sh`: the cell in the sandbox's shell."""
        words = line.split()
        if not words or os.path.basename(words[0]) not in ("bash", "sh"):
            raise UsageError(
                f"%%script {words[0] if words else ''}: only bash and sh run in a sandbox"
            )
        return self._script(" ".join(words[1:]), cell)

    def _script(self, line, cell):
        words = line.split()
        raise_error = "--no-raise-error" not in words
        out_var = None
        for opt in words:
            if opt in ("--bg", "--proc", "--err") or opt.startswith(("--proc=", "--err=")):
                raise UsageError(
                    f"%%script {opt}: a sandbox runs no background process and keeps no "
                    "separate stderr (use `2>&1` in the cell)"
                )
        if "--out" in words:
            at = words.index("--out")
            out_var = words[at + 1] if at + 1 < len(words) else None
            if not out_var:
                raise UsageError("%%script --out: a variable name is needed")
        _flush()
        if out_var is not None:
            status, out = _shell().run_capture(cell)
            self.user_ns[out_var] = out.decode("utf-8", "replace")
        else:
            status = _shell().run(cell, persist=False)
        _flush()
        if raise_error and status != 0:
            # IPython's message names the cell as bytes: Command 'b'exit 2\n'' returned ...
            raise CalledProcessError(status, cell.encode("utf-8", "replace"))
        return None

    def cell_writefile(self, line, cell):
        """`%%writefile [-a] FILE`: writes (or appends) the cell to FILE."""
        opts, name = _parse_opts(line, set(), {"a"})
        words = name.split()
        if "--append" in words:
            opts["a"] = True
            words.remove("--append")
        name = " ".join(words)
        if not name:
            raise UsageError("the following arguments are required: filename")
        if re.match(r"^(\'.*\')|(\".*\")$", name):
            name = name[1:-1]
        filename = os.path.expanduser(name)
        if os.path.exists(filename):
            print(("Appending to %s" if "a" in opts else "Overwriting %s") % filename)
        else:
            print("Writing %s" % filename)
        with open(filename, "a" if "a" in opts else "w", encoding="utf-8") as f:
            f.write(cell)

    def cell_capture(self, line, cell):
        """`%%capture [NAME] [--no-stdout] [--no-stderr]`: runs the cell with its output
        captured; NAME holds it (.stdout, .stderr, .show())."""
        words = line.split()
        out = "--no-stdout" not in words
        err = "--no-stderr" not in words
        names = [w for w in words if not w.startswith("-")]
        name = names[0] if names else None
        _flush()
        old_out, old_err = sys.stdout, sys.stderr
        cap_out = _Capture() if out else None
        cap_err = _Capture() if err else None
        captured = CapturedIO(cap_out, cap_err)
        try:
            if out:
                sys.stdout = cap_out
            if err:
                sys.stderr = cap_err
            self._execute(cell, self._offset, echo=False)
        finally:
            sys.stdout, sys.stderr = old_out, old_err
        if cell.rstrip().endswith(";"):
            self.user_ns.pop(name, None)
        elif name:
            self.user_ns[name] = captured
        return None

    def cell_html(self, line, cell):
        """Shows the cell as HTML (a rich output where the sandbox returns them)."""
        return _show(_HTML(cell), cell)

    def cell_markdown(self, line, cell):
        """Shows the cell as Markdown (text where no renderer is at hand)."""
        return _show(_Markdown(cell), cell)

    def cell_python(self, line, cell):
        """The cell as Python."""
        return self._execute(cell, self._offset)

    cell_python3 = cell_python

    def cell_file(self, line, cell):
        return self.cell_writefile(line, cell)


def _show(obj, text):
    disp = sys.modules.get("vivarium_display")
    if disp is not None and getattr(disp, "_enabled", False):
        disp.display(obj)
    else:
        print(text, end="" if text.endswith("\n") else "\n")


class _DollarFormatter:
    """IPython's DollarFormatter: `{expr}` evaluated, `$name` / `$a.b` replaced, `$$` a
    dollar; `$x` inside single quotes is left alone."""

    _dollar = re.compile(r"(.*?)\$(\$?[\w\.]+)(?=([^']*'[^']*')*[^']*$)")

    def vformat(self, fmt, args, kwargs):
        import string

        base = string.Formatter()
        out = []
        for literal, field, spec, conv in base.parse(fmt):
            cont = 0
            txt = ""
            for m in self._dollar.finditer(literal):
                new_txt, new_field = m.group(1, 2)
                if new_field.startswith("$"):
                    txt += new_txt + new_field
                else:
                    out.append(txt + new_txt)
                    out.append(str(eval(new_field, dict(kwargs))))
                    txt = ""
                cont = m.end()
            out.append(txt + literal[cont:])
            if field is not None:
                if spec:
                    field = ":".join([field, spec])
                obj = eval(field, dict(kwargs))
                obj = base.convert_field(obj, conv)
                out.append(base.format_field(obj, ""))
        return "".join(out)


def _parse_opts(line, valued, flags):
    """`-n 5 -r3 -q rest...` as IPython's parse_options (posix=False): options up to the
    first word that is not one; the rest is the text after them, unchanged."""
    opts = {}
    rest = line.lstrip()
    while rest.startswith("-") and not rest.startswith("--"):
        word, _, after = rest.partition(" ")
        letters = word[1:]
        if not letters:
            break
        i = 0
        ok = True
        while i < len(letters):
            c = letters[i]
            if c in valued:
                value = letters[i + 1 :]
                if not value:
                    value, _, after = after.lstrip().partition(" ")
                opts[c] = value
                break
            if c in flags:
                opts[c] = True
                i += 1
                continue
            ok = False
            break
        if not ok:
            raise UsageError(f"option -{letters[i]} not recognized ( allowed: \"{''.join(sorted(valued | flags))}\")")
        rest = after.lstrip()
    return opts, rest


def _requirement_names(words):
    names = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w.startswith("-"):
            if w in ("-r", "--requirement", "-c", "--constraint", "-i", "--index-url",
                     "--extra-index-url", "-f", "--find-links", "-t", "--target"):
                skip = True
            continue
        name = re.split(r"[\[<>=!~;@ ]", w, 1)[0].strip()
        if name:
            names.append(name)
    return names


def _installed(name):
    try:
        import importlib.metadata as md

        md.distribution(name)
        return True
    except Exception:
        pass
    import importlib.util

    for mod in {name, name.replace("-", "_"), name.lower().replace("-", "_")}:
        try:
            if importlib.util.find_spec(mod) is not None:
                return True
        except Exception:
            pass
    return False


def _registry_has(sh, name):
    if sh is None:
        return False
    for attr in ("BUILTINS", "COMMANDS", "REGISTRY"):
        reg = getattr(sh, attr, None)
        if isinstance(reg, dict) and name in reg:
            return True
    return False


def _doc(obj):
    import inspect

    return inspect.getdoc(obj) or "<no docstring>"


def _pinfo(name, obj, detail):
    """IPython's plain-text object information: a callable's Signature, Docstring, File and
    Type; anything else's Type, String form, Length and Docstring; `??` adds the Source."""
    import inspect

    fields = []
    sig = None
    if callable(obj):
        try:
            sig = str(inspect.signature(obj))
        except (TypeError, ValueError):
            sig = None
    doc = inspect.getdoc(obj) or "<no docstring>"
    if sig is not None:
        label = getattr(obj, "__name__", name)
        fields.append(("Signature", f"{label}{sig}"))
        fields.append(("Docstring", doc))
        if detail:
            try:
                fields.append(("Source", inspect.getsource(obj)))
            except (TypeError, OSError):
                pass
        try:
            f = inspect.getfile(obj)
            if not f.startswith("<"):
                fields.append(("File", f))
        except TypeError:
            pass
        fields.append(("Type", type(obj).__name__))
    else:
        fields.append(("Type", type(obj).__name__))
        try:
            text = str(obj)
        except Exception:
            text = "<str() failed>"
        if len(text) > 200:
            text = text[:100] + "<...>" + text[-100:]
        fields.append(("String form", text))
        if hasattr(obj, "__len__") and not isinstance(obj, type):
            try:
                fields.append(("Length", str(len(obj))))
            except Exception:
                pass
        fields.append(("Docstring", doc))
    width = max(len(k) for k, _ in fields) + 2
    for k, v in fields:
        if "\n" in v:
            print(f"{k}:".ljust(width) + "\n" + v.rstrip("\n"))
        else:
            print(f"{k}:".ljust(width) + v)


def _flush():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass


def _shell():
    sh = sys.modules.get("vivarium_shell")
    if sh is None:
        import vivarium_shell as sh  # noqa: F811
    return sh


def _register(code, source, filename):
    """The caller's original lines for `filename`, for tracebacks."""
    if source is None:
        return
    register = getattr(linecache, "_register_code", None)
    if register is not None:
        register(code, source, filename)
    else:
        # Host python before 3.13 (development): the plain cache.
        lines = [line + "\n" for line in source.splitlines()]
        linecache.cache[filename] = (len(source), None, lines, filename)


def _caller_line(error, source, filename):
    """A SyntaxError in the transformed cell shows the caller's line, not the translation."""
    if source is None or error.filename != filename or not error.lineno:
        return
    lines = source.splitlines()
    if 0 < error.lineno <= len(lines):
        original = lines[error.lineno - 1]
        if error.text is not None and error.text.rstrip("\n") != original:
            error.text = original + "\n"
            error.offset = len(original) - len(original.lstrip()) + 1
            error.end_offset = None
            error.end_lineno = None
    error._vivarium_ipy = True


def _evaluate(code, scope):
    tools = sys.modules.get("vivarium_tools")
    if tools is not None and hasattr(tools, "_evaluate"):
        return tools._evaluate(code, scope)
    result = eval(code, scope)
    import inspect

    if code.co_flags & inspect.CO_COROUTINE:
        import asyncio

        loop = asyncio.new_event_loop()
        try:
            result = loop.run_until_complete(result)
        finally:
            loop.close()
    return result


IPYTHON = None

_main = sys.modules.get("__main__")
_HIDDEN = dict(vars(_main)) if _main is not None else {}
del _main


def get_ipython():
    """The shell object (IPython's `get_ipython()`)."""
    global IPYTHON
    if IPYTHON is None:
        IPYTHON = Shell()
    return IPYTHON


def _own_file(code):
    name = code.co_filename
    if name == __file__:
        return True
    tools = sys.modules.get("vivarium_tools")
    return tools is not None and name == getattr(tools, "__file__", None)


def trim(tb):
    """A cell's traceback from its first frame in the caller's code, without the frames of
    this module (and of vivarium_tools' loop) between or below the caller's: a magic's
    error is shown at the caller's line. None when no frame is the caller's."""
    shell = IPYTHON
    code = shell._code if shell is not None else ()
    t = tb
    if shell is None or not shell._via_tools:
        while t is not None and t.tb_frame.f_code not in code:
            t = t.tb_next
    # (Through code mode, vivarium_tools' own hook finds where the caller's code starts.)
    if t is None:
        return None
    kept = []
    while t is not None:
        if not _own_file(t.tb_frame.f_code):
            kept.append(t)
        t = t.tb_next
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    kept[-1].tb_next = None
    return kept[0]


def _trimming(hook):
    """An excepthook showing a cell's traceback as `trim` makes it. A SyntaxError of the
    cell keeps only the frame that compiled it (as a plain turn's shows `ast.parse`)."""

    def excepthook(kind, value, tb):
        trimmed = trim(tb)
        if trimmed is not None:
            tb = trimmed
        elif getattr(value, "_vivarium_ipy", False):
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
        try:
            value.__traceback__ = tb
        except Exception:
            pass
        hook(kind, value, tb)

    excepthook._vivarium_ipy = True
    return excepthook


def _builtins():
    builtins.get_ipython = get_ipython
    setattr(builtins, SHELL_NAME, get_ipython)


def install():
    """`get_ipython` and the transformed code's name as builtins; the traceback hook."""
    shell = get_ipython()
    _builtins()
    if not getattr(sys.excepthook, "_vivarium_ipy", False):
        sys.excepthook = _trimming(sys.excepthook)
    return shell


def _prepare(shell, source):
    """The cell being run: its original text for tracebacks, where a cell magic's body
    starts, and the turn's file name (known when the cell's code runs)."""
    shell._filename = None
    shell._via_tools = False
    shell._source = source
    shell._code = set()
    at = _cell_magic_at(_split(source))
    shell._offset = 0 if at is None else at + 1


def transform(source):
    """`source` as Python, line for line (see the module's docstring). The code it gives
    needs this module's builtins, which are installed here (code mode runs it through
    `vivarium_tools.run`); the cell is remembered as the current one, for the line numbers
    of a cell magic's body."""
    shell = install()
    _prepare(shell, source)
    shell._via_tools = True
    python = _transform(source)
    # Whoever compiles the result as this turn's code makes the same code objects (file,
    # name and first line): the caller's original lines are registered for them now.
    filename = shell._turn_file()
    if getattr(linecache, "_register_code", None) is not None:
        try:
            code = compile(python, filename, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except Exception:
            pass
        else:
            _register(code, source, filename)
    return python


def run(source, echo=False):
    """Runs a notebook cell in `__main__` as the current turn (see the module docstring)."""
    shell = install()
    _prepare(shell, source)
    shell._filename = shell._turn_file()
    shell._execute(source, 0, echo=echo)
