"""Commands of Vivarium's guest shell, loaded into every template as `vivarium_shell_lang`
(issue 49; the command API is in `vivarium_shell`): sed (GNU sed 4 as the reference), awk
(POSIX awk, output as the machine's awk prints it) and curl / wget over urllib.request (the
sandbox routes it through the host's egress door).

Every command is a generator: it yields stdout bytes and returns its exit status. Text is
bytes throughout; regular expressions are POSIX BRE / ERE translated to Python's `re` (bytes
patterns, so classes are ASCII as in the C locale). Known differences from the references:
POSIX's leftmost-longest alternation is Python's leftmost-first (`echo ab | sed -E
's/a|ab/X/'` gives `Xb`, GNU gives `X`); awk's `for (k in a)` visits keys in insertion
order (gawk's and mawk's orders are unspecified hash orders)."""

import math
import os
import random
import re
import sys
import time

# ---------------------------------------------------------------------------------------
# POSIX regular expressions -> Python re


_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "0-9A-Za-z",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "blank": " \\t",
    "punct": "!-/:-@\\[-`{-~",
    "print": " -~",
    "graph": "!-~",
    "cntrl": "\\x00-\\x1f\\x7f",
    "xdigit": "0-9A-Fa-f",
    "word": "0-9A-Za-z_",
}

_CLASS_SPECIAL = set("\\]^-[&~|")
_AWK_ESC = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b"}


class RegexError(Exception):
    pass


def _esc_class_char(ch):
    if ch in _CLASS_SPECIAL:
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    return ch


def _bracket(p, i, awk):
    """Translates the bracket expression starting after '[' at p[i]; returns (text, next i)."""
    n = len(p)
    neg = False
    if i < n and p[i] == "^":
        neg = True
        i += 1
    items = []  # ("c", char) or ("raw", text)
    first = True
    while True:
        if i >= n:
            raise RegexError("unterminated [")
        c = p[i]
        if c == "]" and not first:
            i += 1
            break
        first = False
        if c == "[" and i + 1 < n and p[i + 1] in ":=.":
            kind = p[i + 1]
            end = p.find(kind + "]", i + 2)
            if end >= 0:
                name = p[i + 2 : end]
                if kind == ":":
                    if name not in _CLASSES:
                        raise RegexError("invalid character class")
                    items.append(("raw", _CLASSES[name]))
                else:
                    items.append(("c", name[:1] or "["))
                i = end + 2
                continue
        if c == "\\" and i + 1 < n:
            d = p[i + 1]
            if awk:
                items.append(("c", _AWK_ESC.get(d, d)))
                i += 2
                continue
            if d == "n":
                items.append(("c", "\n"))
                i += 2
                continue
            if d == "t":
                items.append(("c", "\t"))
                i += 2
                continue
            if d == "\\":
                items.append(("c", "\\"))
                i += 2
                continue
        items.append(("c", c))
        i += 1
    out = ["[^" if neg else "["]
    k = 0
    m = len(items)
    while k < m:
        kind, v = items[k]
        if kind == "raw":
            out.append(v)
            k += 1
            continue
        if k + 2 < m and items[k + 1] == ("c", "-") and items[k + 2][0] == "c":
            lo, hi = v, items[k + 2][1]
            if ord(lo) > ord(hi):
                raise RegexError("Invalid range end")
            out.append(_esc_class_char(lo) + "-" + _esc_class_char(hi))
            k += 3
            continue
        out.append(_esc_class_char(v))
        k += 1
    out.append("]")
    if len(out) == 2:
        return ("[^\\x00-\\xff]" if not neg else "[\\x00-\\xff]"), i
    return "".join(out), i


_PY_SPECIAL = set(".^$*+?{}[]\\|()")


def posix_to_python(p, ere, awk=False, multiline=False):
    """Translates a POSIX (GNU-flavoured) BRE or ERE, as a latin-1 str, to a Python pattern."""
    out = []
    i = 0
    n = len(p)
    at_start = True  # where '*' is literal and '^' an anchor (BRE)
    end_anchor = "$" if multiline else "(?!\\n)\\Z" if False else "\\Z"
    while i < n:
        c = p[i]
        was_start = at_start
        at_start = False
        if c == "\\":
            i += 1
            if i >= n:
                if awk:
                    out.append("\\\\")
                    break
                raise RegexError("Trailing backslash")
            d = p[i]
            i += 1
            if not ere and d in "(){}|+?":
                if d == "(":
                    out.append("(")
                    at_start = True
                elif d == "|":
                    out.append("|")
                    at_start = True
                elif d in "+?" and was_start:
                    out.append("\\" + d)
                else:
                    out.append(d)
                continue
            if d == "n":
                out.append("\\n")
            elif d == "t":
                out.append("\\t")
            elif awk and d in _AWK_ESC:
                out.append(re.escape(_AWK_ESC[d]))
            elif d in "wWsS":
                out.append("\\" + d)
            elif d in "bB" and not awk:
                out.append("\\" + d)
            elif d == "<":
                out.append("\\b(?=\\w)")
            elif d == ">":
                out.append("\\b(?<=\\w)")
            elif d == "`":
                out.append("\\A")
            elif d == "'":
                out.append("\\Z")
            elif d == "y" and awk:
                out.append("\\b")
            elif d.isdigit() and d != "0" and not awk:
                out.append("(?:\\" + d + ")")
            elif d == "/" or d == '"':
                out.append(d)
            else:
                out.append(re.escape(d))
            continue
        if c == "[":
            text, i = _bracket(p, i + 1, awk)
            out.append(text)
            continue
        i += 1
        if c == "*":
            if was_start:
                out.append("\\*")
            else:
                out.append("*")
            continue
        if c == "^":
            if ere or was_start:
                out.append("^")
                at_start = True
            else:
                out.append("\\^")
            continue
        if c == "$":
            if ere or i >= n or p.startswith("\\)", i) or p.startswith("\\|", i):
                out.append(end_anchor)
            else:
                out.append("\\$")
            continue
        if ere:
            if c == "(":
                out.append("(")
                at_start = True
                continue
            if c == "|":
                out.append("|")
                at_start = True
                continue
            if c in "+?":
                out.append("\\" + c if was_start else c)
                continue
            if c == "{":
                m = re.match(r"(\d*)(,?)(\d*)\}", p[i:])
                if m and not was_start and (m.group(1) or m.group(3)):
                    out.append("{" + m.group(0))
                    i += m.end()
                else:
                    out.append("\\{")
                continue
            if c in ")}":
                out.append(c if c == ")" else "\\}")
                continue
            if c == ".":
                out.append(".")
                continue
            out.append(re.escape(c) if c in _PY_SPECIAL else c)
            continue
        if c == ".":
            out.append(".")
            continue
        out.append(re.escape(c) if c in _PY_SPECIAL or c in "#&~ " else c)
    return "".join(out)


_RX_CACHE = {}


def compile_regex(p, ere, icase=False, multiline=False, awk=False):
    """Compiles a POSIX pattern (bytes) to a bytes regex object (cached)."""
    key = (p, ere, icase, multiline, awk)
    rx = _RX_CACHE.get(key)
    if rx is None:
        text = posix_to_python(p.decode("latin-1"), ere, awk, multiline)
        flags = re.S
        if icase:
            flags |= re.I
        if multiline:
            flags |= re.M
        try:
            rx = re.compile(text.encode("latin-1"), flags)
        except re.error as e:
            raise RegexError(str(e))
        if len(_RX_CACHE) > 500:
            _RX_CACHE.clear()
        _RX_CACHE[key] = rx
    return rx


def _can_match_empty(rx):
    return rx.fullmatch(b"") is not None or any(
        t in rx.pattern for t in (b"\\b", b"\\B", b"^", b"\\Z", b"$", b"(?")
    )


def _sub_all(rx, s, template_fn, start_count=1, only=None):
    """Substitutes matches of rx in s as GNU does (an empty match right after a match is
    skipped); only=N replaces from the Nth match on when `start_count`... see callers.
    template_fn(m) -> bytes. Replaces the `only`-th match when only is set and not global,
    else all matches from the `start_count`-th. Returns (new, replaced?)."""
    out = []
    pos = 0
    last_end = -1
    count = 0
    done = False
    n = len(s)
    copied = 0
    while pos <= n:
        m = rx.search(s, pos)
        if m is None:
            break
        st, en = m.span()
        if st == en and st == last_end:
            if st >= n:
                break
            pos = st + 1
            continue
        count += 1
        if count >= start_count and (only is None or count == only):
            out.append(s[copied:st])
            out.append(template_fn(m))
            copied = en
            done = True
            if only is not None:
                break
        last_end = en
        pos = en if en > st else en + 1
        if st == en and st >= n:
            break
    if not done:
        return s, False
    out.append(s[copied:])
    return b"".join(out), True


# ---------------------------------------------------------------------------------------
# Shared helpers


def _open_out(path, mode="wb"):
    return open(path, mode)


def _strerror(e):
    return os.strerror(e.errno) if getattr(e, "errno", None) else str(e)


class _Usage(Exception):
    def __init__(self, msg, status=1):
        Exception.__init__(self, msg)
        self.status = status


# ---------------------------------------------------------------------------------------
# sed


class _SedError(Exception):
    pass


_END, _DELETE, _RESTART, _QUIT, _QUIT_SILENT = range(5)


class _SedCmd:
    __slots__ = ("a1", "a2", "neg", "name", "arg", "active", "end", "jump", "text")

    def __init__(self):
        self.a1 = None
        self.a2 = None
        self.neg = False
        self.name = ""
        self.arg = None
        self.active = False
        self.end = 0
        self.jump = 0
        self.text = b""


class _SedParser:
    def __init__(self, script, ere, wfiles, ctx):
        self.s = script
        self.i = 0
        self.ere = ere
        self.wfiles = wfiles
        self.ctx = ctx
        self.cmds = []
        self.last_rx_used = False

    def err(self, msg):
        raise _SedError(f"-e expression #1, char {self.i}: {msg}")

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_ws(self):
        s = self.s
        while self.i < len(s) and s[self.i] in " \t":
            self.i += 1

    def read_delimited(self, delim, regex):
        """Reads up to the unescaped delim; returns the text (latin-1 str)."""
        s = self.s
        out = []
        i = self.i
        n = len(s)
        while True:
            if i >= n:
                return None
            c = s[i]
            if c == "\\":
                if i + 1 >= n:
                    return None
                d = s[i + 1]
                if d == delim:
                    out.append(d if delim != "&" or regex else "\\&")
                elif d == "\n":
                    out.append("\\n" if regex else "\n")
                else:
                    out.append(c + d)
                i += 2
                continue
            if c == delim:
                self.i = i + 1
                return "".join(out)
            if c == "\n" and regex:
                return None
            out.append(c)
            i += 1

    def read_regex_addr(self, delim):
        text = self.read_delimited(delim, True)
        if text is None:
            self.err("unterminated address regex")
        flags = ""
        while self.peek() in ("I", "M"):
            flags += self.peek()
            self.i += 1
        return self.make_rx(text, "I" in flags, "M" in flags)

    def make_rx(self, text, icase, multi):
        if text == "":
            return None  # the last regex used
        try:
            return compile_regex(text.encode("latin-1"), self.ere, icase, multi)
        except RegexError as e:
            self.err(str(e))

    def read_number(self):
        s = self.s
        j = self.i
        while j < len(s) and s[j].isdigit():
            j += 1
        v = int(s[self.i : j])
        self.i = j
        return v

    def read_addr(self, second):
        c = self.peek()
        if c.isdigit():
            n = self.read_number()
            if self.peek() == "~" and not second:
                self.i += 1
                step = self.read_number() if self.peek().isdigit() else 0
                return ("step", n, step)
            if n == 0 and not second:
                return ("zero",)
            return ("line", n)
        if c == "$":
            self.i += 1
            return ("last",)
        if c == "/":
            self.i += 1
            return ("re", self.read_regex_addr("/"))
        if c == "\\":
            self.i += 1
            d = self.peek()
            self.i += 1
            return ("re", self.read_regex_addr(d))
        if second and c in "+~":
            self.i += 1
            if not self.peek().isdigit():
                self.err("expected newer version of sed")
            return ("plus" if c == "+" else "mult", self.read_number())
        return None

    def read_label(self):
        self.skip_ws()
        s = self.s
        j = self.i
        while j < len(s) and s[j] not in ";\n":
            j += 1
        label = s[self.i : j].strip()
        self.i = j
        return label

    def read_filename(self):
        self.skip_ws()
        s = self.s
        j = s.find("\n", self.i)
        if j < 0:
            j = len(s)
        name = s[self.i : j]
        self.i = j
        return name

    def read_text(self):
        s = self.s
        self.skip_ws()
        if self.peek() == "\\":
            self.i += 1
            if self.peek() == "\n":
                self.i += 1
        out = []
        n = len(s)
        i = self.i
        while i < n:
            c = s[i]
            if c == "\\":
                if i + 1 < n:
                    d = s[i + 1]
                    out.append("\t" if d == "t" else d)
                    i += 2
                    continue
                i += 1
                continue
            if c == "\n":
                i += 1
                break
            out.append(c)
            i += 1
        self.i = i
        return ("".join(out) + "\n").encode("latin-1")

    def wfile(self, name):
        if name == "/dev/stdout" or name == "/dev/stderr":
            return name
        if name not in self.wfiles:
            try:
                self.wfiles[name] = open(name, "wb")
            except OSError as e:
                raise _SedError(f"couldn't open file {name}: {_strerror(e)}")
        return name

    def end_of_cmd(self):
        self.skip_ws()
        c = self.peek()
        if c in ("", ";", "\n"):
            if c:
                self.i += 1
            return
        if c in "}#":
            return
        self.err(f"extra characters after command")

    def parse(self):
        s = self.s
        n = len(s)
        stack = []
        cmds = self.cmds
        while True:
            while self.i < n and s[self.i] in " \t\n;":
                self.i += 1
            if self.i >= n:
                break
            if s[self.i] == "#":
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j
                continue
            cmd = _SedCmd()
            cmd.a1 = self.read_addr(False)
            if cmd.a1 is not None:
                self.skip_ws()
                if self.peek() == ",":
                    self.i += 1
                    self.skip_ws()
                    cmd.a2 = self.read_addr(True)
                    if cmd.a2 is None:
                        self.err("unexpected `,'")
                elif cmd.a1[0] == "zero":
                    self.err("invalid usage of line address 0")
                if cmd.a1[0] == "zero" and (cmd.a2 is None or cmd.a2[0] != "re"):
                    self.err("invalid usage of line address 0")
                if cmd.a1[0] == "zero":
                    cmd.active = True
            self.skip_ws()
            while self.peek() == "!":
                cmd.neg = True
                self.i += 1
                self.skip_ws()
            c = self.peek()
            if not c:
                self.err("missing command")
            self.i += 1
            cmd.name = c
            if c == "{":
                stack.append(len(cmds))
                cmds.append(cmd)
                continue
            if c == "}":
                if not stack:
                    self.err("unexpected `}'")
                if cmd.a1 is not None:
                    self.err("} doesn't want any addresses")
                cmds[stack.pop()].jump = len(cmds) + 1
                cmds.append(cmd)
                self.end_of_cmd()
                continue
            if c == "s":
                self.parse_s(cmd)
            elif c == "y":
                delim = self.peek()
                self.i += 1
                a = self.read_delimited(delim, False)
                b = self.read_delimited(delim, False) if a is not None else None
                if b is None:
                    self.err("unterminated `y' command")
                a, b = self.y_unescape(a, delim), self.y_unescape(b, delim)
                if len(a) != len(b):
                    self.err("strings for `y' command are different lengths")
                table = bytearray(range(256))
                for x, y in zip(a.encode("latin-1"), b.encode("latin-1")):
                    table[x] = y
                cmd.arg = bytes(table)
                self.end_of_cmd()
            elif c in "aic":
                cmd.text = self.read_text()
            elif c == ":":
                if cmd.a1 is not None:
                    self.err(": doesn't want any addresses")
                label = self.read_label()
                if not label:
                    self.err("\":\" lacks a label")
                cmd.arg = label
                if self.peek() == ";":
                    self.i += 1
            elif c in "btT":
                cmd.arg = self.read_label()
                if self.peek() == ";":
                    self.i += 1
            elif c in "rRwW":
                name = self.read_filename()
                if not name:
                    self.err(f"missing filename in r/R/w/W commands")
                cmd.arg = self.wfile(name) if c in "wW" else name
            elif c in "qQlL":
                self.skip_ws()
                cmd.arg = self.read_number() if self.peek().isdigit() else None
                self.end_of_cmd()
            elif c in "=dDgGhHnNpPxzF":
                self.end_of_cmd()
            elif c == "e":
                self.err("the `e' command is not supported in the sandbox")
            else:
                self.i -= 1
                self.err(f"unknown command: `{c}'")
            cmds.append(cmd)
        if stack:
            self.i = n
            self.err("unmatched `{'")
        labels = {}
        for k, cmd in enumerate(cmds):
            if cmd.name == ":":
                if cmd.arg in labels:
                    raise _SedError(f"-e expression #1, char 0: duplicate label `{cmd.arg}'")
                labels[cmd.arg] = k
        for cmd in cmds:
            if cmd.name in "btT":
                if not cmd.arg:
                    cmd.jump = len(cmds)
                elif cmd.arg in labels:
                    cmd.jump = labels[cmd.arg]
                else:
                    raise _SedError(f"-e expression #1, char 0: can't find label for jump to `{cmd.arg}'")
        return cmds

    def y_unescape(self, t, delim):
        out = []
        i = 0
        while i < len(t):
            c = t[i]
            if c == "\\" and i + 1 < len(t):
                d = t[i + 1]
                out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(d, "\\" + d if d != delim else d))
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)

    def parse_s(self, cmd):
        delim = self.peek()
        if delim in ("", "\n", "\\"):
            self.err("unterminated `s' command")
        self.i += 1
        pat = self.read_delimited(delim, True)
        if pat is None:
            self.err("unterminated `s' command")
        rep = self.read_delimited(delim, False)
        if rep is None:
            self.err("unterminated `s' command")
        glob = False
        pflag = 0
        nth = None
        icase = multi = False
        wname = None
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "g":
                glob = True
            elif c == "p":
                pflag += 1
            elif c in "iI":
                icase = True
            elif c in "mM":
                multi = True
            elif c.isdigit():
                nth = self.read_number()
                if nth == 0:
                    self.err("number option to `s' command may not be zero")
                continue
            elif c == "w":
                self.i += 1
                wname = self.wfile(self.read_filename())
                break
            elif c == "e":
                self.err("the `e' flag is not supported in the sandbox")
            elif c in " \t;\n}#":
                break
            else:
                self.err("unknown option to `s'")
            self.i += 1
        self.end_of_cmd()
        rx = self.make_rx(pat, icase, multi)
        cmd.arg = (rx, _parse_replacement(rep), glob, nth, pflag, wname)


def _parse_replacement(rep):
    """Parses a sed replacement (latin-1 str) into parts: bytes, int group, or case op str."""
    parts = []
    lit = []
    i = 0
    n = len(rep)
    case_ops = False
    while i < n:
        c = rep[i]
        if c == "\\" and i + 1 < n:
            d = rep[i + 1]
            i += 2
            if d.isdigit():
                if lit:
                    parts.append("".join(lit).encode("latin-1"))
                    lit = []
                parts.append(int(d))
            elif d == "n":
                lit.append("\n")
            elif d == "t":
                lit.append("\t")
            elif d == "r":
                lit.append("\r")
            elif d in "LUluE":
                if lit:
                    parts.append("".join(lit).encode("latin-1"))
                    lit = []
                parts.append(d)
                case_ops = True
            else:
                lit.append(d)
            continue
        if c == "&":
            if lit:
                parts.append("".join(lit).encode("latin-1"))
                lit = []
            parts.append(0)
            i += 1
            continue
        lit.append(c)
        i += 1
    if lit:
        parts.append("".join(lit).encode("latin-1"))
    if not case_ops:
        if all(isinstance(p, bytes) for p in parts):
            const = b"".join(parts)
            return lambda m: const
        if len(parts) == 1 and parts[0] == 0:
            return lambda m: m.group(0)
        tpl = tuple(parts)

        def fn(m):
            g = m.group
            return b"".join(p if p.__class__ is bytes else (g(p) or b"") for p in tpl)

        return fn
    tpl = tuple(parts)

    def fn_case(m):
        out = []
        mode = None  # "U" / "L"
        one = None  # "u" / "l"
        for p in tpl:
            if p.__class__ is str:
                if p in "ul":
                    one = p
                elif p == "E":
                    mode = None
                    one = None
                else:
                    mode = p
                    one = None
                continue
            t = p if p.__class__ is bytes else (m.group(p) or b"")
            if not t:
                continue
            if mode == "U":
                t = t.upper()
            elif mode == "L":
                t = t.lower()
            if one:
                t = (t[:1].upper() if one == "u" else t[:1].lower()) + t[1:]
                one = None
            out.append(t)
        return b"".join(out)

    return fn_case


def _sed_escape_l(ps, width):
    out = []
    for b in ps:
        if b == 92:
            out.append("\\\\")
        elif b in (7, 8, 9, 10, 11, 12, 13):
            out.append("\\" + "abtnvfr"[b - 7])
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append("\\%03o" % b)
    lines = []
    if width and width > 1:
        cur = ""
        for piece in out:
            if len(cur) + len(piece) > width - 1:
                lines.append(cur + "\\\n")
                cur = ""
            cur += piece
        lines.append(cur)
    else:
        lines.append("".join(out))
    return ("".join(lines) + "$\n").encode("latin-1")


class _SedInput:
    """The input lines of one run: the files one after the other (or stdin)."""

    def __init__(self, ctx, files, sep, on_error):
        self.ctx = ctx
        self.files = list(files)
        self.sep = sep
        self.cur = None
        self.cur_name = "-"
        self.on_error = on_error
        self.ahead = None  # the next raw line (with its separator, if any)
        self.fill()

    def _open_next(self):
        while self.files:
            name = self.files.pop(0)
            if name == "-":
                self.cur = self.ctx.stdin
                self.cur_name = "-"
                return True
            try:
                if os.path.isdir(name):
                    self.on_error(f"couldn't edit {name}: not a regular file" if False else f"read error on {name}: Is a directory")
                    continue
                self.cur = open(name, "rb")
                self.cur_name = name
                return True
            except OSError as e:
                self.on_error(f"can't read {name}: {_strerror(e)}")
        self.cur = None
        return False

    def _readline(self):
        while True:
            if self.cur is None:
                if not self._open_next():
                    return None
            if self.sep == b"\n":
                line = self.cur.readline()
            else:
                line = self._read_until(self.sep)
            if line:
                return line
            if self.cur is not self.ctx.stdin:
                self.cur.close()
            self.cur = None

    def _read_until(self, sep):
        buf = getattr(self, "_zbuf", b"")
        while True:
            k = buf.find(sep)
            if k >= 0:
                self._zbuf = buf[k + 1 :]
                return buf[: k + 1]
            chunk = self.cur.read(65536)
            if not chunk:
                self._zbuf = b""
                return buf
            buf += chunk

    def fill(self):
        self.ahead = self._readline()

    def next(self):
        """The next line as (text without separator, had separator), or None at the end."""
        line = self.ahead
        if line is None:
            return None
        self.ahead = self._readline()
        if line.endswith(self.sep):
            return line[:-1], True
        return line, False

    def at_end(self):
        return self.ahead is None

    def close(self):
        if self.cur is not None and self.cur is not self.ctx.stdin:
            self.cur.close()


class _SedRun:
    def __init__(self, ctx, cmds, quiet, sep, wfiles, line_len, posix_sep=False):
        self.ctx = ctx
        self.cmds = cmds
        self.quiet = quiet
        self.sep = sep
        self.wfiles = wfiles
        self.line_len = line_len
        self.out = []
        self.outlen = 0
        self.missing_nl = False
        self.hold = b""
        self.last_rx = None
        self.rfiles = {}
        self.status = 0

    def write(self, data):
        if self.missing_nl:
            self.out.append(self.sep)
            self.missing_nl = False
        self.out.append(data)
        self.outlen += len(data)

    def write_ps(self, ps, had_nl):
        if self.missing_nl:
            self.out.append(self.sep)
        self.out.append(ps)
        if had_nl:
            self.out.append(self.sep)
            self.missing_nl = False
        else:
            self.missing_nl = True
        self.outlen += len(ps) + 1

    def take(self):
        data = b"".join(self.out)
        self.out = []
        self.outlen = 0
        return data

    def rx(self, rx):
        if rx is None:
            if self.last_rx is None:
                raise _SedError("no previous regular expression")
            return self.last_rx
        self.last_rx = rx
        return rx

    def match1(self, a, ps):
        k = a[0]
        if k == "line":
            return self.lineno == a[1]
        if k == "re":
            return self.rx(a[1]).search(ps) is not None
        if k == "last":
            return self.inp.at_end()
        if k == "step":
            first, step = a[1], a[2]
            if step <= 0:
                return self.lineno == first
            return self.lineno >= first and (self.lineno - first) % step == 0
        return False

    def matches(self, c, ps):
        if c.a2 is None:
            r = self.match1(c.a1, ps)
        elif c.active:
            a2 = c.a2
            k = a2[0]
            ln = self.lineno
            if k == "line":
                if ln >= a2[1]:
                    c.active = False
                r = True
            elif k == "plus":
                if ln >= c.end:
                    c.active = False
                r = True
            elif k == "mult":
                if a2[1] <= 0 or ln % a2[1] == 0:
                    c.active = False
                r = True
            elif k == "last":
                if self.inp.at_end():
                    c.active = False
                r = True
            else:
                if self.rx(a2[1]).search(ps) is not None:
                    c.active = False
                r = True
        elif self.match1(c.a1, ps):
            r = True
            a2 = c.a2
            k = a2[0]
            ln = self.lineno
            if k == "line":
                c.active = a2[1] > ln
            elif k == "plus":
                c.end = ln + a2[1]
                c.active = a2[1] > 0
            elif k == "mult":
                c.active = a2[1] > 0 and ln % a2[1] != 0
            elif k == "last":
                c.active = not self.inp.at_end()
            else:
                c.active = True
        else:
            r = False
        return r != c.neg

    def flush_append(self):
        for item in self.append:
            if item.__class__ is bytes:
                self.write(item)
            elif item[0] == "r":
                try:
                    with open(item[1], "rb") as f:
                        data = f.read()
                    if data:
                        self.write(data)
                except OSError:
                    pass
            else:
                f = self.rfiles.get(item[1])
                if f is None:
                    try:
                        f = self.rfiles[item[1]] = open(item[1], "rb")
                    except OSError:
                        f = self.rfiles[item[1]] = False
                if f:
                    line = f.readline()
                    if line:
                        self.write(line if line.endswith(b"\n") else line + b"\n")
        self.append = []

    def wwrite(self, name, data):
        if name == "/dev/stdout":
            self.write(data)
        elif name == "/dev/stderr":
            self.ctx.stderr.write(data)
        else:
            self.wfiles[name].write(data)

    def read_line(self):
        item = self.inp.next()
        if item is None:
            return None
        self.lineno += 1
        self.had_nl = item[1]
        return item[0]

    def run_file(self, inp):
        """Runs the script over one input stream; a generator of output chunks. Returns the
        quit status or None."""
        self.inp = inp
        self.lineno = 0
        self.append = []
        self.had_nl = True
        cmds = self.cmds
        ncmds = len(cmds)
        restart = False
        ps = b""
        quiet = self.quiet
        while True:
            if not restart:
                line = self.read_line()
                if line is None:
                    break
                ps = line
            restart = False
            tflag = False
            i = 0
            action = _END
            qstatus = None
            while i < ncmds:
                c = cmds[i]
                if c.a1 is not None and not self.matches(c, ps):
                    i = c.jump if c.name == "{" else i + 1
                    continue
                name = c.name
                i += 1
                if name == "s":
                    rx, repl, glob, nth, pflag, wname = c.arg
                    rx = self.rx(rx)
                    if glob or (nth and nth > 1):
                        new, did = _sub_all(rx, ps, repl, nth or 1, None if glob else nth)
                    else:
                        m = rx.search(ps)
                        if m is None:
                            did = False
                        else:
                            did = True
                            new = ps[: m.start()] + repl(m) + ps[m.end() :]
                    if did:
                        ps = new
                        tflag = True
                        if pflag:
                            for _ in range(pflag):
                                self.write_ps(ps, self.had_nl)
                        if wname:
                            self.wwrite(wname, ps + self.sep)
                elif name == "p":
                    self.write_ps(ps, self.had_nl)
                elif name == "d":
                    action = _DELETE
                    break
                elif name == "{" or name == "}" or name == ":":
                    pass
                elif name == "b":
                    i = c.jump
                elif name == "t":
                    if tflag:
                        tflag = False
                        i = c.jump
                elif name == "T":
                    if not tflag:
                        i = c.jump
                    else:
                        tflag = False
                elif name == "n":
                    if self.inp.at_end():
                        break
                    if not quiet:
                        self.write_ps(ps, self.had_nl)
                    self.flush_append()
                    ps = self.read_line()
                elif name == "N":
                    if self.inp.at_end():
                        break
                    self.flush_append()
                    ps = ps + self.sep + self.read_line()
                elif name == "h":
                    self.hold = ps
                elif name == "H":
                    self.hold = self.hold + self.sep + ps
                elif name == "g":
                    ps = self.hold
                elif name == "G":
                    ps = ps + self.sep + self.hold
                elif name == "x":
                    ps, self.hold = self.hold, ps
                elif name == "a":
                    self.append.append(c.text)
                elif name == "i":
                    self.write(c.text)
                elif name == "c":
                    if c.a2 is None or not c.active or c.neg:
                        self.write(c.text)
                    action = _DELETE
                    break
                elif name == "=":
                    self.write(b"%d\n" % self.lineno)
                elif name == "q":
                    action = _QUIT
                    qstatus = c.arg
                    break
                elif name == "Q":
                    action = _QUIT_SILENT
                    qstatus = c.arg
                    break
                elif name == "y":
                    ps = ps.translate(c.arg)
                elif name == "P":
                    k = ps.find(self.sep)
                    if k < 0:
                        self.write_ps(ps, self.had_nl)
                    else:
                        self.write(ps[: k + 1])
                elif name == "D":
                    k = ps.find(self.sep)
                    if k < 0:
                        action = _DELETE
                    else:
                        ps = ps[k + 1 :]
                        action = _RESTART
                    break
                elif name == "l":
                    width = self.line_len if c.arg is None else c.arg
                    self.write(_sed_escape_l(ps, width))
                elif name == "z":
                    ps = b""
                elif name == "F":
                    self.write(self.inp.cur_name.encode("utf-8", "surrogateescape") + b"\n")
                elif name == "r":
                    self.append.append(("r", c.arg))
                elif name == "R":
                    self.append.append(("R", c.arg))
                elif name == "w":
                    self.wwrite(c.arg, ps + self.sep)
                elif name == "W":
                    k = ps.find(self.sep)
                    self.wwrite(c.arg, (ps if k < 0 else ps[:k]) + self.sep)
            if action == _END or action == _QUIT:
                if not quiet:
                    self.write_ps(ps, self.had_nl)
            if action == _RESTART:
                restart = True
                self.flush_append()
                if self.outlen > 32768:
                    yield self.take()
                continue
            self.flush_append()
            if action == _QUIT or action == _QUIT_SILENT:
                return qstatus or 0
            if self.outlen > 32768:
                yield self.take()
        return None


_SED_USAGE = """\
Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...

  -n, --quiet, --silent
                 suppress automatic printing of pattern space
  -e script, --expression=script
                 add the script to the commands to be executed
  -f script-file, --file=script-file
                 add the contents of script-file to the commands to be executed
  -i[SUFFIX], --in-place[=SUFFIX]
                 edit files in place (makes backup if SUFFIX supplied)
  -E, -r, --regexp-extended
                 use extended regular expressions in the script
  -s, --separate
                 consider files as separate rather than as a single
                 continuous long stream.
  -z, --null-data
                 separate lines by NUL characters
"""


def sed(ctx, argv):
    scripts = []
    files = []
    quiet = False
    ere = False
    inplace = None
    separate = False
    sep = b"\n"
    line_len = 70
    args = argv[1:]
    k = 0
    only_files = False

    def usage_error(msg):
        if msg:
            ctx.stderr.write(f"sed: {msg}\n".encode())
        ctx.stderr.write(_SED_USAGE.encode())
        return 1

    try:
        while k < len(args):
            a = args[k]
            k += 1
            if only_files or a == "-" or not a.startswith("-"):
                files.append(a)
                continue
            if a == "--":
                only_files = True
                continue
            if a.startswith("--"):
                name, eq, val = a[2:].partition("=")
                longs = [
                    "quiet", "silent", "expression", "file", "in-place", "regexp-extended",
                    "separate", "null-data", "line-length", "posix", "debug", "sandbox",
                    "unbuffered", "follow-symlinks", "help", "version", "zero-terminated",
                ]
                cands = [x for x in longs if x.startswith(name)]
                if name in longs:
                    cands = [name]
                if len(cands) != 1:
                    return usage_error(f"unrecognized option '{a}'" if not cands else f"option '{a}' is ambiguous")
                name = cands[0]
                if name in ("expression", "file", "line-length") and not eq:
                    if k >= len(args):
                        return usage_error(f"option '--{name}' requires an argument")
                    val = args[k]
                    k += 1
                if name in ("quiet", "silent"):
                    quiet = True
                elif name == "expression":
                    scripts.append(val)
                elif name == "file":
                    scripts.append(_read_script_file(ctx, val))
                elif name == "in-place":
                    inplace = val
                elif name == "regexp-extended":
                    ere = True
                elif name == "separate":
                    separate = True
                elif name in ("null-data", "zero-terminated"):
                    sep = b"\0"
                elif name == "line-length":
                    line_len = int(val)
                elif name == "help":
                    yield _SED_USAGE.encode()
                    return 0
                elif name == "version":
                    yield b"sed (GNU sed) 4.9 (Vivarium guest shell)\n"
                    return 0
                continue
            j = 1
            while j < len(a):
                o = a[j]
                j += 1
                if o == "n":
                    quiet = True
                elif o in "ef" or o == "l":
                    val = a[j:]
                    if not val:
                        if k >= len(args):
                            return usage_error(f"option requires an argument -- '{o}'")
                        val = args[k]
                        k += 1
                    j = len(a)
                    if o == "e":
                        scripts.append(val)
                    elif o == "f":
                        scripts.append(_read_script_file(ctx, val))
                    else:
                        line_len = int(val)
                elif o == "i":
                    inplace = a[j:]
                    j = len(a)
                elif o in "Er":
                    ere = True
                elif o == "s":
                    separate = True
                elif o == "z":
                    sep = b"\0"
                elif o == "u":
                    pass
                else:
                    return usage_error(f"invalid option -- '{o}'")
    except _Usage as e:
        ctx.stderr.write(f"sed: {e}\n".encode())
        return e.status
    if not scripts:
        if not files:
            return usage_error("")
        scripts.append(files.pop(0))
    script = "\n".join(s if isinstance(s, str) else s for s in scripts)
    if script.startswith("#n") and (len(script) == 2 or script[2] == "\n"):
        quiet = True
    wfiles = {}
    try:
        text = script.encode("utf-8", "surrogateescape").decode("latin-1")
        cmds = _SedParser(text, ere, wfiles, ctx).parse()
    except _SedError as e:
        ctx.stderr.write(f"sed: {e}\n".encode("utf-8", "surrogateescape"))
        for f in wfiles.values():
            f.close()
        return 1
    runner = _SedRun(ctx, cmds, quiet, sep, wfiles, line_len)
    status = 0

    def on_error(msg):
        nonlocal status
        ctx.stderr.write(f"sed: {msg}\n".encode("utf-8", "surrogateescape"))
        status = 2

    try:
        if inplace is not None:
            if not files:
                ctx.stderr.write(b"sed: no input files\n")
                return 1 if False else 4
            for name in files:
                if name == "-":
                    on_error("couldn't edit -: not a regular file")
                    continue
                try:
                    st = os.stat(name)
                except OSError as e:
                    on_error(f"can't read {name}: {_strerror(e)}")
                    continue
                if not os.path.isfile(name):
                    ctx.stderr.write(f"sed: couldn't edit {name}: not a regular file\n".encode())
                    status = 4
                    continue
                d = os.path.dirname(name) or "."
                tmp = os.path.join(d, f".sed{os.getpid()}_{random.randrange(1 << 30)}")
                inp = _SedInput(ctx, [name], sep, on_error)
                q = None
                try:
                    with open(tmp, "wb") as out:
                        gen = runner.run_file(inp)
                        while True:
                            try:
                                out.write(next(gen))
                            except StopIteration as e:
                                q = e.value
                                break
                        out.write(runner.take())
                        runner.missing_nl = False
                    os.chmod(tmp, st.st_mode & 0o7777)
                    if inplace:
                        base = os.path.basename(name)
                        bak = inplace.replace("*", base) if "*" in inplace else base + inplace
                        if "/" not in bak:
                            bak = os.path.join(d, bak)
                        os.replace(name, bak)
                    os.replace(tmp, name)
                except BaseException:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass
                    raise
                finally:
                    inp.close()
                if q is not None:
                    return q
            return status
        if separate and len(files) > 1:
            for name in files:
                inp = _SedInput(ctx, [name], sep, on_error)
                try:
                    q = yield from runner.run_file(inp)
                finally:
                    inp.close()
                if q is not None:
                    yield runner.take()
                    return q
            yield runner.take()
            return status
        inp = _SedInput(ctx, files or ["-"], sep, on_error)
        try:
            q = yield from runner.run_file(inp)
        except _SedError as e:
            yield runner.take()
            ctx.stderr.write(f"sed: {e}\n".encode())
            return 4
        finally:
            inp.close()
        data = runner.take()
        if data:
            yield data
        return status if q is None else q
    finally:
        for f in wfiles.values():
            f.close()
        for f in runner.rfiles.values():
            if f:
                f.close()


def _read_script_file(ctx, name):
    try:
        if name == "-":
            data = ctx.stdin.read()
        else:
            with open(name, "rb") as f:
                data = f.read()
    except OSError as e:
        raise _Usage(f"couldn't open file {name}: {_strerror(e)}")
    text = data.decode("utf-8", "surrogateescape")
    if text.endswith("\n"):
        text = text[:-1]
    return text


COMMANDS = {"sed": sed}
