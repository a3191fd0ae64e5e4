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


def _gnu_char_escape(p, i):
    """GNU sed's \\xHH, \\oNNN, \\dNNN and \\cX at p[i] (the letter after the backslash):
    (the character, the index after it) or None."""
    d = p[i]
    if d == "x":
        m = re.match(r"[0-9A-Fa-f]{1,2}", p[i + 1 : i + 3])
        if m:
            return chr(int(m.group(0), 16)), i + 1 + m.end()
    elif d == "o":
        m = re.match(r"[0-7]{1,3}", p[i + 1 : i + 4])
        if m:
            return chr(int(m.group(0), 8) & 255), i + 1 + m.end()
    elif d == "d":
        m = re.match(r"[0-9]{3}", p[i + 1 : i + 4])
        if m:
            return chr(int(m.group(0)) & 255), i + 4
    elif d == "c" and i + 1 < len(p):
        return chr(ord(p[i + 1].upper()) ^ 0x40), i + 2
    return None


def posix_to_python(p, ere, awk=False, multiline=False):
    """Translates a POSIX (GNU-flavoured) BRE or ERE, as a latin-1 str, to a Python pattern."""
    out = []
    i = 0
    n = len(p)
    at_start = True  # where '*' is literal and '^' an anchor (BRE)
    end_anchor = "$" if multiline else "\\Z"
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
            num = None if awk else _gnu_char_escape(p, i - 1)
            if num is not None:
                ch, i = num
                out.append(re.escape(ch))
            elif d == "n":
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
    replaced = 0
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
            replaced += 1
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
        return s, 0
    out.append(s[copied:])
    return b"".join(out), replaced


# ---------------------------------------------------------------------------------------
# Shared helpers


class _NullFile:
    """/dev/null, which the sandbox does not have."""

    def write(self, data):
        return len(data)

    def read(self, n=-1):
        return b""

    def readline(self, n=-1):
        return b""

    def __iter__(self):
        return iter(())

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _open(path, mode="rb"):
    """open(), with /dev/null that works in the sandbox too."""
    if path == "/dev/null" or path == b"/dev/null":
        return _NullFile()
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
        if not out:
            return b""
        return ("".join(out) + "\n").encode("latin-1")

    def wfile(self, name):
        if name == "/dev/stdout" or name == "/dev/stderr":
            return name
        if name not in self.wfiles:
            try:
                self.wfiles[name] = _open(name, "wb")
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
            elif c == "v":
                self.read_label()
                if self.peek() == ";":
                    self.i += 1
                continue
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
                    e = _SedError(f"can't find label for jump to `{cmd.arg}'")
                    e.status = 4  # GNU sed's panic status
                    raise e
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
        tpl = _replacement_template(rep)
        if tpl is not None and glob and (rx is None or _can_match_empty(rx)):
            tpl = None
        if nth is not None and not (nth == 1 and not glob):
            tpl = None
        cmd.arg = (rx, _parse_replacement(rep), glob, nth, pflag, wname, tpl)


def _replacement_template(rep):
    """A Python re template for a sed replacement without case conversion, else None."""
    parts = _parse_replacement_parts(rep)
    if parts is None:
        return None
    out = []
    for p in parts:
        if p.__class__ is int:
            out.append(b"\\g<%d>" % p)
        else:
            out.append(p.replace(b"\\", b"\\\\"))
    return b"".join(out)


def _parse_replacement_parts(rep):
    fn = _parse_replacement(rep)
    return getattr(fn, "parts", None)


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
            num = _gnu_char_escape(rep, i + 1)
            if num is not None:
                lit.append(num[0])
                i = num[1]
                continue
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
        tpl = tuple(parts)

        def fn(m):
            g = m.group
            return b"".join(p if p.__class__ is bytes else (g(p) or b"") for p in tpl)

        fn.parts = tpl
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
            if name == "-" or name == "/dev/stdin":
                self.cur = self.ctx.stdin
                self.cur_name = "-"
                return True
            try:
                if os.path.isdir(name):
                    self.on_error(f"read error on {name}: Is a directory")
                    continue
                self.cur = _open(name, "rb")
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
    def __init__(self, ctx, cmds, quiet, sep, wfiles, line_len):
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
                    with _open(item[1], "rb") as f:
                        data = f.read()
                    if data:
                        self.write(data)
                except OSError:
                    pass
            else:
                f = self.rfiles.get(item[1])
                if f is None:
                    try:
                        f = self.rfiles[item[1]] = _open(item[1], "rb")
                    except OSError:
                        f = self.rfiles[item[1]] = False
                if f:
                    line = f.readline()
                    if line:
                        self.write(line)
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
                    rx, repl, glob, nth, pflag, wname, tpl = c.arg
                    if rx is None:
                        rx = self.rx(rx)
                    else:
                        self.last_rx = rx
                    if tpl is not None:
                        new, did = rx.subn(tpl, ps, 0 if glob else 1)
                    elif glob or (nth and nth > 1):
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
        return getattr(e, "status", 1)
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
                return 4
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
            with _open(name, "rb") as f:
                data = f.read()
    except OSError as e:
        raise _Usage(f"couldn't open file {name}: {_strerror(e)}")
    text = data.decode("utf-8", "surrogateescape")
    if text.endswith("\n"):
        text = text[:-1]
    return text



# ---------------------------------------------------------------------------------------
# awk: a tokenizer and a recursive-descent parser that compile the program to Python
# source (one function per BEGIN / record / END part and per awk function), run by exec.
#
# Values at run time are float (numbers) or bytes (strings; a string that looks like a
# number compares as a number, the way awk's "strnum" input values do).


class AwkError(Exception):
    def __init__(self, msg, status=2):
        Exception.__init__(self, msg)
        self.status = status


class _AwkNext(Exception):
    pass


class _AwkNextFile(Exception):
    pass


class _AwkExit(Exception):
    def __init__(self, status):
        Exception.__init__(self)
        self.status = status


_A_KEYWORDS = {
    "BEGIN", "END", "function", "func", "if", "else", "while", "for", "do", "break",
    "continue", "next", "nextfile", "exit", "return", "delete", "in", "getline", "print",
    "printf",
}
_A_BUILTINS = {
    "length", "substr", "index", "split", "sub", "gsub", "match", "sprintf", "sin", "cos",
    "atan2", "exp", "log", "sqrt", "int", "rand", "srand", "tolower", "toupper", "system",
    "close", "fflush",
}
_A_SPECIAL = {
    "NR", "FNR", "NF", "FS", "OFS", "ORS", "RS", "FILENAME", "SUBSEP", "RSTART", "RLENGTH",
    "CONVFMT", "OFMT",
}
_A_OPS = [
    "**=", "+=", "-=", "*=", "/=", "%=", "^=", "**", "==", "<=", ">=", "!=", "++", "--",
    "&&", "||", ">>", "!~", "{", "}", "(", ")", "[", "]", ";", ",", "+", "-", "*", "/",
    "%", "^", "!", ">", "<", "|", "?", ":", "~", "$", "=",
]
_A_TOKEN_RX = re.compile(
    r"""
    (?P<ws>[ \t\r]+|\\\r?\n|\#[^\n]*)
  | (?P<nl>\n)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*=|\+=|-=|\*=|/=|%=|\^=|\*\*|==|<=|>=|!=|\+\+|--|&&|\|\||>>|!~|[{}()\[\];,+\-*/%^!><|?:~$=])
""",
    re.X | re.S,
)
_A_OPERAND_END = {"num", "str", "ere", "name", "builtin", "func"}

_A_STR_ESC = {
    "n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "/": "/", "a": "\a", "b": "\b",
    "f": "\f", "v": "\v",
}


def _awk_unescape(body):
    """Processes an awk string literal's escapes (latin-1 str in, str out)."""
    if "\\" not in body:
        return body
    out = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        d = body[i + 1]
        if d in _A_STR_ESC:
            out.append(_A_STR_ESC[d])
            i += 2
        elif d in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8) & 255))
            i = j
        elif d == "\n":
            i += 2
        else:
            out.append("\\" + d)
            i += 2
    return "".join(out)


def _awk_tokenize(src):
    toks = []  # (kind, value, line)
    i = 0
    n = len(src)
    line = 1
    prev = None
    while i < n:
        c = src[i]
        if c == "/" and (prev is None or (prev[0] not in _A_OPERAND_END and prev[1] not in (")", "]", "$", "++", "--"))):
            j = i + 1
            in_br = False
            while j < n:
                d = src[j]
                if d == "\\" and j + 1 < n:
                    j += 2
                    continue
                if d == "\n":
                    raise AwkError(f"line {line}: runaway regular expression /{src[i + 1 : j]} ...")
                if in_br:
                    if d == "]" and j > br_start:
                        in_br = False
                elif d == "[":
                    in_br = True
                    br_start = j + 1
                    if j + 1 < n and src[j + 1] == "^":
                        br_start += 1
                elif d == "/":
                    break
                j += 1
            else:
                raise AwkError(f"line {line}: runaway regular expression /{src[i + 1 : j]} ...")
            prev = ("ere", src[i + 1 : j], line)
            toks.append(prev)
            i = j + 1
            continue
        m = _A_TOKEN_RX.match(src, i)
        if m is None:
            raise AwkError(f"line {line}: syntax error at or near {c}")
        kind = m.lastgroup
        text = m.group(kind)
        i = m.end()
        if kind == "ws":
            line += text.count("\n")
            continue
        if kind == "nl":
            prev = ("nl", "\n", line)
            toks.append(prev)
            line += 1
            continue
        if kind == "str":
            prev = ("str", _awk_unescape(text[1:-1]), line)
        elif kind == "num":
            prev = ("num", float(text), line)
        elif kind == "name":
            if text in _A_KEYWORDS:
                prev = ("kw", "function" if text == "func" else text, line)
            elif text in _A_BUILTINS:
                prev = ("builtin", text, line)
            elif i < n and src[i] == "(":
                prev = ("func", text, line)
            else:
                prev = ("name", text, line)
        else:
            prev = ("op", text, line)
        toks.append(prev)
    toks.append(("eof", "", line))
    return toks


class _AwkCompiler:
    def __init__(self, src):
        self.toks = _awk_tokenize(src)
        self.p = 0
        self.consts = {}  # python name -> value
        self.nconst = 0
        self.globals_used = set()
        self.arrays = set()  # global names used as arrays
        self.funcs = {}  # name -> dict(params, body lines, arrays)
        self.calls = []  # (callee, argindex, scope function or None, name)
        self.func = None  # the function being compiled (dict) or None
        self.tmp = 0
        self.loop = 0
        self.begin = []
        self.end = []
        self.main = []
        self.nrange = 0
        self.lines = None
        self.ind = 1

    # --- tokens
    def tok(self):
        return self.toks[self.p]

    def peek(self, k=1):
        return self.toks[min(self.p + k, len(self.toks) - 1)]

    def adv(self):
        t = self.toks[self.p]
        self.p += 1
        return t

    def is_op(self, v):
        t = self.toks[self.p]
        return t[0] == "op" and t[1] == v

    def is_kw(self, v):
        t = self.toks[self.p]
        return t[0] == "kw" and t[1] == v

    def err(self, t=None):
        t = t or self.tok()
        near = {"nl": "end of line", "eof": "end of file"}.get(t[0], str(t[1]) if t[0] != "num" else "%g" % t[1])
        raise AwkError(f"line {t[2]}: syntax error at or near {near}")

    def expect(self, v):
        if not self.is_op(v):
            self.err()
        self.p += 1

    def opt_nl(self):
        while self.toks[self.p][0] == "nl":
            self.p += 1

    def skip_terms(self):
        while self.toks[self.p][0] == "nl" or self.is_op(";"):
            self.p += 1

    def const(self, value, prefix="_c"):
        self.nconst += 1
        name = f"{prefix}{self.nconst}"
        self.consts[name] = value
        return name

    def regex_const(self, text):
        try:
            rx = compile_regex(text.encode("latin-1"), True, awk=True)
        except RegexError as e:
            raise AwkError(f"regular expression compile failed ({e}): {text}")
        return self.const(rx, "_rx")

    def newtmp(self):
        self.tmp += 1
        return f"_t{self.tmp}"

    # --- emission
    def emit(self, line):
        self.lines.append("    " * self.ind + line)

    # --- program
    def compile(self):
        self.skip_terms()
        while self.tok()[0] != "eof":
            self.item()
            self.skip_terms()
        return self.assemble()

    def item(self):
        t = self.tok()
        if t[0] == "kw" and t[1] == "function":
            self.function()
            return
        if t[0] == "kw" and t[1] in ("BEGIN", "END"):
            self.adv()
            self.opt_nl()
            if not self.is_op("{"):
                self.err()
            self.lines = self.begin if t[1] == "BEGIN" else self.end
            self.ind = 1
            self.block()
            return
        self.lines = self.main
        self.ind = 1
        if self.is_op("{"):
            self.emit("if True:")
            self.ind += 1
            self.block()
            return
        c1, t1 = self.expr()
        if self.is_op(","):
            self.adv()
            self.opt_nl()
            c2, t2 = self.expr()
            self.nrange += 1
            flag = f"_rng{self.nrange}"
            self.globals_used.add(flag)
            self.emit(f"if {flag}:")
            self.emit(f"    _m = True")
            self.emit(f"    if {self.to_bool(c2, t2)}: {flag} = False")
            self.emit(f"elif {self.to_bool(c1, t1)}:")
            self.emit(f"    _m = True")
            self.emit(f"    if not {self.to_bool(c2, t2)}: {flag} = True")
            self.emit("else: _m = False")
            self.emit("if _m:")
        else:
            self.emit(f"if {self.to_bool(c1, t1)}:")
        self.ind += 1
        if self.is_op("{"):
            self.block()
        else:
            self.emit("_w(R.rec + R.ORS)")
        self.ind -= 1

    def function(self):
        self.adv()
        t = self.adv()
        if t[0] not in ("func", "name"):
            self.err(t)
        name = t[1]
        if name in self.funcs:
            raise AwkError(f"line {t[2]}: function {name} redefined")
        self.expect("(")
        params = []
        self.opt_nl()
        while not self.is_op(")"):
            pt = self.adv()
            if pt[0] != "name":
                self.err(pt)
            params.append(pt[1])
            self.opt_nl()
            if self.is_op(","):
                self.adv()
                self.opt_nl()
        self.adv()
        self.opt_nl()
        f = {"name": name, "params": params, "arrays": set(), "lines": []}
        self.funcs[name] = f
        self.func = f
        self.lines = f["lines"]
        self.ind = 1
        self.block()
        self.func = None

    def block(self):
        self.expect("{")
        start = len(self.lines)
        self.skip_terms()
        while not self.is_op("}"):
            if self.tok()[0] == "eof":
                self.err()
            self.stmt()
            self.skip_terms()
        self.adv()
        if len(self.lines) == start:
            self.emit("pass")

    def simple_end(self):
        t = self.tok()
        if t[0] in ("nl", "eof") or (t[0] == "op" and t[1] in (";", "}")):
            if t[0] == "nl" or t[1] == ";":
                self.adv()
            return
        self.err()

    def body(self):
        """A statement as the body of if / while / for (indented)."""
        self.ind += 1
        n = len(self.lines)
        self.opt_nl()
        if self.is_op(";"):
            self.adv()
        else:
            self.stmt()
        if len(self.lines) == n:
            self.emit("pass")
        self.ind -= 1

    def stmt(self):
        t = self.tok()
        if t[0] == "op" and t[1] == "{":
            self.block()
            return
        if t[0] == "op" and t[1] == ";":
            self.adv()
            return
        if t[0] == "kw":
            k = t[1]
            if k == "if":
                self.adv()
                self.expect("(")
                c, ty = self.expr()
                self.expect(")")
                self.emit(f"if {self.to_bool(c, ty)}:")
                self.body()
                save = self.p
                self.skip_terms()
                if self.is_kw("else"):
                    self.adv()
                    self.opt_nl()
                    if self.is_kw("if"):
                        self.emit("else:")
                        self.ind += 1
                        self.stmt()
                        self.ind -= 1
                    else:
                        self.emit("else:")
                        self.body()
                else:
                    self.p = save
                return
            if k == "while":
                self.adv()
                self.expect("(")
                c, ty = self.expr()
                self.expect(")")
                if self.is_op(";"):
                    self.adv()
                    self.emit(f"while {self.to_bool(c, ty)}: pass")
                    return
                self.emit(f"while {self.to_bool(c, ty)}:")
                self.emit("    if len(_out) > 256: yield")
                self.body()
                return
            if k == "do":
                self.adv()
                self.emit("while True:")
                self.emit("    if len(_out) > 256: yield")
                self.body()
                self.skip_terms()
                if not self.is_kw("while"):
                    self.err()
                self.adv()
                self.expect("(")
                c, ty = self.expr()
                self.expect(")")
                self.emit(f"    if not {self.to_bool(c, ty)}: break")
                self.simple_end()
                return
            if k == "for":
                self.adv()
                self.expect("(")
                if (
                    self.tok()[0] == "name"
                    and self.peek()[0:2] == ("kw", "in")
                    and self.peek(2)[0] == "name"
                    and self.peek(3)[0:2] == ("op", ")")
                ):
                    var = self.adv()[1]
                    self.adv()
                    arr = self.array_ref(self.adv()[1])
                    self.adv()
                    tmp = self.newtmp()
                    self.emit(f"for {tmp} in list({arr}):")
                    self.emit("    if len(_out) > 256: yield")
                    self.emit("    " + self.assign(("var", var), tmp, "x")[0])
                    self.body()
                    return
                if not self.is_op(";"):
                    self.simple_stmt_expr()
                self.expect(";")
                self.opt_nl()
                cond = "True"
                if not self.is_op(";"):
                    c, ty = self.expr()
                    cond = self.to_bool(c, ty)
                self.expect(";")
                self.opt_nl()
                incr = None
                if not self.is_op(")"):
                    incr = self.expr()[0]
                self.expect(")")
                # awk's continue runs the increment: a try/finally would run it on break too,
                # so the loop is `while` with the increment before each test after the first
                first = self.newtmp()
                self.emit(f"{first} = True")
                self.emit("while True:")
                self.ind += 1
                self.emit("if len(_out) > 256: yield")
                self.emit(f"if not {first}:")
                self.emit(f"    {incr or 'pass'}")
                self.emit(f"{first} = False")
                self.emit(f"if not {cond}: break")
                self.ind -= 1
                self.body()
                return
            if k == "break" or k == "continue":
                self.adv()
                self.emit(k)
                self.simple_end()
                return
            if k == "next":
                self.adv()
                self.emit("raise _Next")
                self.simple_end()
                return
            if k == "nextfile":
                self.adv()
                self.emit("raise _NextFile")
                self.simple_end()
                return
            if k == "exit":
                self.adv()
                t2 = self.tok()
                if t2[0] in ("nl", "eof") or (t2[0] == "op" and t2[1] in (";", "}")):
                    self.emit("raise _Exit(None)")
                else:
                    c, ty = self.expr()
                    self.emit(f"raise _Exit({self.to_num(c, ty)})")
                self.simple_end()
                return
            if k == "return":
                self.adv()
                if self.func is None:
                    raise AwkError(f"line {t[2]}: return outside function body")
                t2 = self.tok()
                if t2[0] in ("nl", "eof") or (t2[0] == "op" and t2[1] in (";", "}")):
                    self.emit('return b""')
                else:
                    c, ty = self.expr()
                    self.emit(f"return {self.stored(c, ty)}")
                self.simple_end()
                return
            if k == "delete":
                self.adv()
                nt = self.adv()
                if nt[0] != "name":
                    self.err(nt)
                arr = self.array_ref(nt[1])
                if self.is_op("["):
                    key = self.subscript()
                    self.emit(f"{arr}.pop({key}, None)")
                else:
                    self.emit(f"{arr}.clear()")
                self.simple_end()
                return
            if k == "print" or k == "printf":
                self.print_stmt(k)
                self.simple_end()
                return
        self.simple_stmt_expr()
        self.simple_end()

    def simple_stmt_expr(self):
        c, ty = self.expr()
        self.emit(c)

    def print_stmt(self, k):
        self.adv()
        args = []
        t = self.tok()
        ends = t[0] in ("nl", "eof") or (t[0] == "op" and t[1] in (";", "}", ">", ">>", "|"))
        if not ends:
            c, ty = self.expr(no_gt=True)
            if ty == "g":
                args = c
            else:
                args = [(c, ty)]
                while self.is_op(","):
                    self.adv()
                    self.opt_nl()
                    args.append(self.expr(no_gt=True))
        if k == "print":
            if not args:
                data = "R.rec + R.ORS"
            elif len(args) == 1:
                data = f"{self.to_out(*args[0])} + R.ORS"
            else:
                data = "R.OFS.join((" + ", ".join(self.to_out(*a) for a in args) + ",)) + R.ORS"
        else:
            if not args:
                self.err()
            fmt = self.to_str(*args[0])
            rest = ", ".join(self.to_val(*a) for a in args[1:])
            data = f"_sprintf({fmt}, ({rest}{',' if rest else ''}))"
        if self.is_op(">") or self.is_op(">>") or self.is_op("|"):
            mode = self.adv()[1]
            c, ty = self.concat_expr(no_gt=True)
            self.emit(f"R.redirect({mode!r}, {self.to_str(c, ty)}, {data})")
        else:
            self.emit(f"_w({data})")

    # --- names
    def var_ref(self, name):
        """The Python name of a scalar variable."""
        f = self.func
        if f is not None and name in f["params"]:
            return "l_" + name
        self.globals_used.add("g_" + name)
        return "g_" + name

    def array_ref(self, name):
        if name in _A_SPECIAL:
            raise AwkError(f"can't use scalar {name} as array")
        f = self.func
        if f is not None and name in f["params"]:
            f["arrays"].add(name)
            return "l_" + name
        if name in ("ENVIRON", "ARGV"):
            return "R." + name
        self.arrays.add(name)
        self.globals_used.add("g_" + name)
        return "g_" + name

    # --- conversions of (code, type): n float, s bytes, x either, c Python bool, r regex
    def to_num(self, c, t):
        if t == "n":
            return c
        if t == "c":
            return f"(1.0 if {c} else 0.0)"
        if t == "r":
            return f"(1.0 if {c}.search(R.rec) else 0.0)"
        if t == "g":
            self.err()
        if t == "f":
            return f"_atonum({c})"
        return f"_n({c})"

    def to_str(self, c, t):
        if t == "s" or t == "f":
            return c
        if t == "c":
            return f"(b'1' if {c} else b'0')"
        if t == "r":
            return f"(b'1' if {c}.search(R.rec) else b'0')"
        if t == "g":
            self.err()
        return f"_s({c})"

    def to_out(self, c, t):
        if t == "s" or t == "f":
            return c
        if t in ("c", "r"):
            return self.to_str(c, t)
        return f"_o({c})"

    def to_bool(self, c, t):
        if t == "c":
            return c
        if t == "n":
            return f"({c} != 0.0)"
        if t == "s":
            return f"(len({c}) > 0)"
        if t == "r":
            return f"({c}.search(R.rec) is not None)"
        if t == "g":
            self.err()
        return f"_b({c})"

    def to_val(self, c, t):
        if t == "c" or t == "r":
            return self.to_num(c, t)
        if t == "g":
            self.err()
        return c

    def to_regex(self, c, t):
        if t == "r":
            return c
        return f"_dre({self.to_str(c, t)})"

    # --- lvalues: ("var", name) ("elem", arrcode, keycode) ("field", idxcode)
    def stored(self, c, t):
        """A value to store (variable, element, argument, return value): a string
        expression's value keeps its string type."""
        if t == "s":
            return f"_S({c})"
        return self.to_val(c, t)

    def assign(self, lv, val, vt):
        """Code assigning val (already a value expression of type vt) to lv; returns (code, type)."""
        kind = lv[0]
        v = self.stored(val, vt) if kind != "field" else self.to_val(val, vt)
        if kind == "var":
            name = lv[1]
            if name in _A_SPECIAL:
                return f"R.setv({name!r}, {v})", "x"
            return f"({self.var_ref(name)} := {v})", vt if vt in ("n", "s") else "x"
        if kind == "elem":
            return f"_aset({lv[1]}, {lv[2]}, {v})", "x"
        return f"R.setf({lv[1]}, {v})", "x"

    def lv_get(self, lv):
        kind = lv[0]
        if kind == "var":
            name = lv[1]
            if name == "NF":
                return "R.getNF()", "n"
            if name in _A_SPECIAL:
                return f"R.{name}", "x"
            return self.var_ref(name), "x"
        if kind == "elem":
            return f"{lv[1]}.setdefault({lv[2]}, b'')", "x"
        if lv[1] == "0":
            return "R.rec", "f"
        return f"R.f({lv[1]})", "f"

    def compound(self, lv, op, val, vt):
        """lv op= val."""
        v = self.to_num(val, vt)
        kind = lv[0]
        if kind == "var" and lv[1] not in _A_SPECIAL:
            ref = self.var_ref(lv[1])
            return f"({ref} := {self.arith(op, f'_n({ref})', v)})", "n"
        if kind == "var":
            return f"R.vcomp({lv[1]!r}, {op!r}, {v})", "n"
        if kind == "elem":
            return f"_acomp({lv[1]}, {lv[2]}, {op!r}, {v})", "n"
        return f"R.fcomp({lv[1]}, {op!r}, {v})", "n"

    def incdec(self, lv, delta, post):
        kind = lv[0]
        if kind == "var" and lv[1] not in _A_SPECIAL:
            ref = self.var_ref(lv[1])
            if post:
                return f"(({ref} := _n({ref}) + {delta}) - {delta})", "n"
            return f"({ref} := _n({ref}) + {delta})", "n"
        if kind == "var":
            return f"R.vinc({lv[1]!r}, {delta}, {post})", "n"
        if kind == "elem":
            return f"_ainc({lv[1]}, {lv[2]}, {delta}, {post})", "n"
        return f"R.finc({lv[1]}, {delta}, {post})", "n"

    @staticmethod
    def arith(op, a, b):
        if op in "+-*":
            return f"({a} {op} {b})"
        if op == "/":
            return f"_div({a}, {b})"
        if op == "%":
            return f"_mod({a}, {b})"
        return f"_pow({a}, {b})"

    # --- expressions
    def expr(self, no_gt=False, no_in=False):
        return self.ternary(no_gt, no_in)

    def ternary(self, no_gt, no_in):
        start = self.p
        lv = self.try_lvalue()
        if lv is not None:
            t = self.tok()
            if t[0] == "op" and t[1] in ("=", "+=", "-=", "*=", "/=", "%=", "^=", "**="):
                self.adv()
                self.opt_nl()
                c, ty = self.ternary(no_gt, no_in)
                if t[1] == "=":
                    return self.assign(lv, c, ty)
                op = t[1][:-1]
                return self.compound(lv, "^" if op == "**" else op, c, ty)
            self.p = start
        c, ty = self.or_expr(no_gt, no_in)
        if self.is_op("?"):
            self.adv()
            self.opt_nl()
            a, at = self.ternary(no_gt, no_in)
            self.opt_nl()
            self.expect(":")
            self.opt_nl()
            b, bt = self.ternary(no_gt, no_in)
            rt = at if at == bt and at in ("n", "s") else "x"
            return f"({self.to_val(a, at)} if {self.to_bool(c, ty)} else {self.to_val(b, bt)})", rt
        return c, ty

    def try_lvalue(self):
        """Parses an lvalue if one starts here (NAME, NAME[...], $primary); else None and
        the position unchanged."""
        t = self.tok()
        if t[0] == "name":
            self.adv()
            if self.is_op("["):
                arr = self.array_ref(t[1])
                key = self.subscript()
                return ("elem", arr, key)
            return ("var", t[1])
        if t[0] == "op" and t[1] == "$":
            self.adv()
            c, ty = self.incdec_expr(no_post=True)
            return ("field", self.field_index(c, ty))
        return None

    def field_index(self, c, ty):
        if ty == "n" and re.fullmatch(r"\d+\.0", c):
            return str(int(float(c)))
        return f"_fi({self.to_num(c, ty)})"

    def subscript(self):
        self.expect("[")
        parts = [self.expr()]
        while self.is_op(","):
            self.adv()
            self.opt_nl()
            parts.append(self.expr())
        self.expect("]")
        if len(parts) == 1:
            c, ty = parts[0]
            if ty == "s" and c.startswith("b"):
                return c
            if ty == "n" and re.fullmatch(r"-?\d+\.0", c):
                return repr(str(int(float(c))).encode())
            return f"_k({self.to_val(c, ty)})"
        return "R.SUBSEP.join((" + ", ".join(f"_k({self.to_val(c, ty)})" for c, ty in parts) + ",))"

    def or_expr(self, no_gt, no_in):
        c, ty = self.and_expr(no_gt, no_in)
        while self.is_op("||"):
            self.adv()
            self.opt_nl()
            c2, t2 = self.and_expr(no_gt, no_in)
            c, ty = f"({self.to_bool(c, ty)} or {self.to_bool(c2, t2)})", "c"
        return c, ty

    def and_expr(self, no_gt, no_in):
        c, ty = self.in_expr(no_gt, no_in)
        while self.is_op("&&"):
            self.adv()
            self.opt_nl()
            c2, t2 = self.in_expr(no_gt, no_in)
            c, ty = f"({self.to_bool(c, ty)} and {self.to_bool(c2, t2)})", "c"
        return c, ty

    def in_expr(self, no_gt, no_in):
        c, ty = self.match_expr(no_gt, no_in)
        while not no_in and self.is_kw("in"):
            self.adv()
            nt = self.adv()
            if nt[0] != "name":
                self.err(nt)
            arr = self.array_ref(nt[1])
            c, ty = f"(_k({self.to_val(c, ty)}) in {arr})", "c"
        return c, ty

    def match_expr(self, no_gt, no_in):
        c, ty = self.comparison(no_gt, no_in)
        while self.is_op("~") or self.is_op("!~"):
            neg = self.adv()[1] == "!~"
            r, rt = self.comparison(no_gt, no_in)
            rx = self.to_regex(r, rt)
            c, ty = f"({rx}.search({self.to_str(c, ty)}) {'is' if neg else 'is not'} None)", "c"
        return c, ty

    def comparison(self, no_gt, no_in):
        c, ty = self.concat_expr(no_gt, no_in)
        while True:
            t = self.tok()
            if t[0] != "op":
                break
            op = t[1]
            if op == "|" and self.peek()[0:2] == ("kw", "getline"):
                self.adv()
                self.adv()
                lv = self.try_lvalue_simple()
                c, ty = self.getline_code("cmd", self.to_str(c, ty), lv), "n"
                continue
            if op not in ("<", "<=", "==", "!=", ">", ">=") or (no_gt and op == ">"):
                break
            self.adv()
            c2, t2 = self.concat_expr(no_gt, no_in)
            pyop = op
            if ty == "n" and t2 == "n":
                c = f"({c} {pyop} {c2})"
            elif ty in ("n", "c") and t2 in ("n", "c"):
                c = f"({self.to_num(c, ty)} {pyop} {self.to_num(c2, t2)})"
            elif ty == "s" or t2 == "s" or ty == "r" or t2 == "r":
                c = f"({self.to_str(c, ty)} {pyop} {self.to_str(c2, t2)})"
            else:
                c = f"(_cmp({self.to_val(c, ty)}, {self.to_val(c2, t2)}) {pyop} 0)"
            ty = "c"
        return c, ty

    def starts_operand(self):
        t = self.tok()
        k = t[0]
        if k in ("num", "str", "ere", "name", "func", "builtin"):
            return True
        if k == "op":
            return t[1] in ("$", "(", "!", "-", "+", "++", "--")
        if k == "kw":
            return t[1] == "getline"
        return False

    def concat_expr(self, no_gt=False, no_in=False):
        c, ty = self.additive(no_gt, no_in)
        parts = None
        while True:
            t = self.tok()
            if t[0] == "op" and t[1] in ("-", "+", "!"):
                break
            if t[0] == "kw" and t[1] == "in":
                break
            if not self.starts_operand():
                break
            if parts is None:
                parts = [self.to_str(c, ty)]
            c2, t2 = self.additive(no_gt, no_in)
            parts.append(self.to_str(c2, t2))
        if parts is not None:
            return "b''.join((" + ", ".join(parts) + ",))", "s"
        return c, ty

    def additive(self, no_gt, no_in):
        c, ty = self.multiplicative(no_gt, no_in)
        while self.is_op("+") or self.is_op("-"):
            op = self.adv()[1]
            c2, t2 = self.multiplicative(no_gt, no_in)
            c, ty = f"({self.to_num(c, ty)} {op} {self.to_num(c2, t2)})", "n"
        return c, ty

    def multiplicative(self, no_gt, no_in):
        c, ty = self.unary(no_gt, no_in)
        while self.is_op("*") or self.is_op("/") or self.is_op("%"):
            op = self.adv()[1]
            c2, t2 = self.unary(no_gt, no_in)
            c, ty = self.arith(op, self.to_num(c, ty), self.to_num(c2, t2)), "n"
        return c, ty

    def unary(self, no_gt, no_in):
        t = self.tok()
        if t[0] == "op":
            if t[1] == "!":
                self.adv()
                c, ty = self.unary(no_gt, no_in)
                return f"(not {self.to_bool(c, ty)})", "c"
            if t[1] == "-":
                self.adv()
                c, ty = self.unary(no_gt, no_in)
                return f"(-{self.to_num(c, ty)})", "n"
            if t[1] == "+":
                self.adv()
                c, ty = self.unary(no_gt, no_in)
                return self.to_num(c, ty), "n"
        return self.power()

    def power(self):
        c, ty = self.incdec_expr()
        if self.is_op("^") or self.is_op("**"):
            self.adv()
            # right associative, and the exponent may carry a unary minus
            t = self.tok()
            if t[0] == "op" and t[1] in ("-", "+", "!"):
                c2, t2 = self.unary(False, False)
            else:
                c2, t2 = self.power()
            return f"_pow({self.to_num(c, ty)}, {self.to_num(c2, t2)})", "n"
        return c, ty

    def incdec_expr(self, no_post=False):
        t = self.tok()
        if t[0] == "op" and t[1] in ("++", "--"):
            self.adv()
            lv = self.try_lvalue()
            if lv is None:
                self.err()
            return self.incdec(lv, "1.0" if t[1] == "++" else "-1.0", False)
        start = self.p
        lv = self.try_lvalue()
        if lv is not None:
            if not no_post and (self.is_op("++") or self.is_op("--")):
                op = self.adv()[1]
                return self.incdec(lv, "1.0" if op == "++" else "-1.0", True)
            return self.lv_get(lv)
        return self.primary()

    def try_lvalue_simple(self):
        """The optional variable after getline: NAME, NAME[..] or $expr."""
        t = self.tok()
        if t[0] == "name" or (t[0] == "op" and t[1] == "$"):
            return self.try_lvalue()
        return None

    def getline_code(self, kind, src, lv):
        tmp = self.newtmp()
        if lv is None:
            return f"R.getline_rec({kind!r}, {src})"
        assign = self.assign(lv, tmp, "x")[0]
        return f"(({assign}, 1.0)[1] if ({tmp} := R.getline_raw({kind!r}, {src})).__class__ is bytes else {tmp})"

    def primary(self):
        t = self.adv()
        k = t[0]
        if k == "num":
            return repr(float(t[1])), "n"
        if k == "str":
            return repr(t[1].encode("latin-1")), "s"
        if k == "ere":
            return self.regex_const(t[1]), "r"
        if k == "op":
            if t[1] == "(":
                self.opt_nl()
                c, ty = self.expr()
                self.opt_nl()
                if self.is_op(","):
                    items = [(c, ty)]
                    while self.is_op(","):
                        self.adv()
                        self.opt_nl()
                        items.append(self.expr())
                    self.opt_nl()
                    self.expect(")")
                    if self.is_kw("in"):
                        self.adv()
                        nt = self.adv()
                        if nt[0] != "name":
                            self.err(nt)
                        arr = self.array_ref(nt[1])
                        key = "R.SUBSEP.join((" + ", ".join(f"_k({self.to_val(a, b)})" for a, b in items) + ",))"
                        return f"({key} in {arr})", "c"
                    return items, "g"
                self.expect(")")
                if ty == "g":
                    self.err()
                return c, ty
            if t[1] == "-":
                c, ty = self.unary(False, False)
                return f"(-{self.to_num(c, ty)})", "n"
            if t[1] == "+":
                c, ty = self.unary(False, False)
                return self.to_num(c, ty), "n"
            if t[1] == "!":
                c, ty = self.unary(False, False)
                return f"(not {self.to_bool(c, ty)})", "c"
            self.err(t)
        if k == "kw" and t[1] == "getline":
            lv = self.try_lvalue_simple()
            if self.is_op("<"):
                self.adv()
                c, ty = self.incdec_expr()
                return self.getline_code("file", self.to_str(c, ty), lv), "n"
            return self.getline_code("main", "None", lv), "n"
        if k == "func":
            return self.call_user(t)
        if k == "builtin":
            return self.call_builtin(t)
        self.p -= 1
        self.err(t)

    def args(self):
        self.expect("(")
        self.opt_nl()
        out = []
        while not self.is_op(")"):
            out.append(self.expr())
            self.opt_nl()
            if self.is_op(","):
                self.adv()
                self.opt_nl()
            elif not self.is_op(")"):
                self.err()
        self.adv()
        return out

    def call_user(self, t):
        name = t[1]
        self.expect("(")
        self.opt_nl()
        codes = []
        while not self.is_op(")"):
            at = self.tok()
            if at[0] == "name" and self.peek()[0] == "op" and self.peek()[1] in (",", ")"):
                self.adv()
                # a bare name: an array or a scalar, decided when all functions are known
                ref = self.bare_name_ref(at[1])
                self.calls.append((name, len(codes), self.func["name"] if self.func else None, at[1]))
                codes.append(ref)
            else:
                c, ty = self.expr()
                codes.append(self.stored(c, ty))
            self.opt_nl()
            if self.is_op(","):
                self.adv()
                self.opt_nl()
            elif not self.is_op(")"):
                self.err()
        self.adv()
        return f"(yield from _call_{name}(" + ", ".join(codes) + "))", "x"

    def bare_name_ref(self, name):
        if name in _A_SPECIAL:
            return self.lv_get(("var", name))[0]
        if name in ("ENVIRON", "ARGV"):
            return "R." + name
        f = self.func
        if f is not None and name in f["params"]:
            return "l_" + name
        self.globals_used.add("g_" + name)
        return "g_" + name

    def call_builtin(self, t):
        name = t[1]
        if name == "length":
            if not self.is_op("("):
                return "float(len(R.rec))", "n"
            self.expect("(")
            if self.is_op(")"):
                self.adv()
                return "float(len(R.rec))", "n"
            at = self.tok()
            if at[0] == "name" and self.peek()[0:2] == ("op", ")"):
                self.adv()
                self.adv()
                ref = self.bare_name_ref(at[1])
                return f"_len({ref})", "n"
            c, ty = self.expr()
            self.expect(")")
            return f"float(len({self.to_str(c, ty)}))", "n"
        if name in ("split",):
            self.expect("(")
            s = self.to_str(*self.expr())
            self.expect(",")
            self.opt_nl()
            nt = self.adv()
            if nt[0] != "name":
                self.err(nt)
            arr = self.array_ref(nt[1])
            sep = "None"
            if self.is_op(","):
                self.adv()
                self.opt_nl()
                c, ty = self.expr()
                sep = c if ty == "r" else self.to_str(c, ty)
            self.expect(")")
            return f"R.split({s}, {arr}, {sep})", "n"
        if name in ("sub", "gsub"):
            self.expect("(")
            self.opt_nl()
            r = self.to_regex(*self.expr())
            self.expect(",")
            self.opt_nl()
            rep = self.to_str(*self.expr())
            self.opt_nl()
            if self.is_op(","):
                self.adv()
                self.opt_nl()
                lv = self.try_lvalue()
                if lv is None:
                    c, ty = self.expr()
                    target, lv = self.to_str(c, ty), None
                else:
                    target = self.to_str(*self.lv_get(lv))
            else:
                lv = ("field", "0")
                target = "R.rec"
            self.opt_nl()
            self.expect(")")
            tmp = self.newtmp()
            glob = name == "gsub"
            if lv is None:
                return f"_sub({r}, {rep}, {target}, {glob})[1]", "n"
            assign = self.assign(lv, f"{tmp}[0]", "s")[0]
            return f"(({assign}, {tmp}[1])[1] if ({tmp} := _sub({r}, {rep}, {target}, {glob}))[1] else 0.0)", "n"
        if name == "match":
            args = self.args()
            if len(args) not in (2, 3):
                self.err(t)
            arr = "None"
            if len(args) == 3:
                arr = args[2][0]
            return f"R.match({self.to_str(*args[0])}, {self.to_regex(*args[1])}, {arr})", "n"
        if name == "getline":
            self.err(t)
        args = self.args() if self.is_op("(") else []
        n = len(args)
        if name == "substr":
            if n not in (2, 3):
                self.err(t)
            return f"_substr({self.to_str(*args[0])}, {', '.join(self.to_num(*a) for a in args[1:])})", "s"
        if name == "index":
            if n != 2:
                self.err(t)
            return f"float({self.to_str(*args[0])}.find({self.to_str(*args[1])}) + 1)", "n"
        if name == "sprintf":
            if n < 1:
                self.err(t)
            rest = ", ".join(self.to_val(*a) for a in args[1:])
            return f"_sprintf({self.to_str(*args[0])}, ({rest}{',' if rest else ''}))", "s"
        if name in ("tolower", "toupper"):
            if n != 1:
                self.err(t)
            return f"{self.to_str(*args[0])}.{name[2:]}()", "s"
        if name == "int":
            return f"_int({self.to_num(*args[0])})", "n"
        if name in ("sin", "cos", "exp", "log", "sqrt"):
            if n != 1:
                self.err(t)
            return f"_math_{name}({self.to_num(*args[0])})", "n"
        if name == "atan2":
            if n != 2:
                self.err(t)
            return f"math.atan2({self.to_num(*args[0])}, {self.to_num(*args[1])})", "n"
        if name == "rand":
            return "R.rand()", "n"
        if name == "srand":
            return f"R.srand({self.to_num(*args[0]) if args else 'None'})", "n"
        if name == "system":
            if n != 1:
                self.err(t)
            return f"R.system({self.to_str(*args[0])})", "n"
        if name == "close":
            if n < 1:
                self.err(t)
            return f"R.close({self.to_str(*args[0])})", "n"
        if name == "fflush":
            return "0.0", "n"
        self.err(t)

    # --- the Python module
    def assemble(self):
        # a bare name passed where the callee takes an array is an array
        changed = True
        while changed:
            changed = False
            for callee, idx, scope, name in self.calls:
                f = self.funcs.get(callee)
                if f is None:
                    raise AwkError(f"function {callee} never defined")
                if idx < len(f["params"]) and f["params"][idx] in f["arrays"]:
                    if scope is not None and name in self.funcs[scope]["params"]:
                        if name not in self.funcs[scope]["arrays"]:
                            self.funcs[scope]["arrays"].add(name)
                            changed = True
                    elif name not in self.arrays and name not in ("ENVIRON", "ARGV"):
                        self.arrays.add(name)
                        changed = True
        for callee, idx, scope, name in self.calls:
            f = self.funcs[callee]
            if idx >= len(f["params"]):
                raise AwkError(f"function {callee} called with more arguments than declared")
        out = []
        gl = sorted(self.globals_used)
        gdecl = ("    global " + ", ".join(gl)) if gl else "    pass"
        for name in gl:
            base = name[2:] if name.startswith("g_") else None
            if base is not None and base in self.arrays:
                out.append(f"{name} = {{}}")
            elif base is not None:
                out.append(f"{name} = b''")
            else:
                out.append(f"{name} = False")
        for fname, f in self.funcs.items():
            params = ", ".join(f"l_{p}=None" for p in f["params"])
            out.append(f"def _call_{fname}({params}):")
            out.append(gdecl)
            out.append("    if False: yield")
            for p in f["params"]:
                init = "{}" if p in f["arrays"] else "b''"
                out.append(f"    if l_{p} is None: l_{p} = {init}")
            out.extend(f["lines"])
            out.append("    return b''")
        for part, lines in (("_begin", self.begin), ("_main", self.main), ("_end", self.end)):
            if not lines:
                out.append(f"{part} = None")
                out.append(f"{part}_gen = False")
                continue
            gen = any("yield" in line for line in lines)
            out.append(f"{part}_gen = {gen}")
            out.append(f"def {part}():")
            out.append(gdecl)
            if gen:
                out.append("    if False: yield")
            out.extend(lines)
        return "\n".join(out) + "\n"


_A_NUM_PREFIX = re.compile(rb"[ \t\n\r\f\v]*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_A_WS_FIND = re.compile(rb"[^ \t\n]+").findall


def _atonum(x):
    if not x:
        return 0.0
    try:
        v = float(x)
        if v - v == 0.0 and b"_" not in x:
            return v
    except ValueError:
        pass
    m = _A_NUM_PREFIX.match(x)
    return float(m.group(1)) if m else 0.0


def _strnum(x):
    """The number a string stands for when it looks numeric (awk's strnum), else None."""
    if not x:
        return 0.0
    try:
        v = float(x)
    except ValueError:
        return None
    if v - v != 0.0 or b"_" in x:
        return None
    return v


def _n(x):
    return x if x.__class__ is float else _atonum(x)


class _AStr(bytes):
    """A string value that is only a string (from a constant or a concatenation): it
    compares as a string even when it looks like a number, as awk's string values do."""

    __slots__ = ()


def _b(x):
    if x.__class__ is float:
        return x != 0.0
    if not x:
        return False
    if x.__class__ is _AStr:
        return True
    v = _strnum(x)
    return v is None or v != 0.0


def _div(a, b):
    if b == 0.0:
        raise AwkError("division by zero")
    return a / b


def _mod(a, b):
    if b == 0.0:
        raise AwkError("division by zero in %")
    return math.fmod(a, b)


def _pow(a, b):
    try:
        return float(a**b) if not (a < 0 and b != int(b)) else float("nan")
    except OverflowError:
        return float("inf")
    except ZeroDivisionError:
        return float("inf")


def _int(x):
    if x - x != 0.0:
        return x
    return float(int(x))


def _fi(x):
    if x - x != 0.0:
        raise AwkError("trying to access out of range field")
    i = int(x)
    if i < 0:
        raise AwkError(f"trying to access out of range field {i}")
    return i


def _aset(arr, key, v):
    arr[key] = v
    return v


def _arith(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _div(a, b)
    if op == "%":
        return _mod(a, b)
    return _pow(a, b)


def _acomp(arr, key, op, v):
    new = _arith(op, _n(arr.get(key, b"")), v)
    arr[key] = new
    return new


def _ainc(arr, key, delta, post):
    cur = _n(arr.get(key, b""))
    arr[key] = cur + delta
    return cur if post else cur + delta


def _len(x):
    if x.__class__ is dict:
        return float(len(x))
    if x.__class__ is float:
        x = _A_STATE_S(x)
    return float(len(x))


def _substr(s, m, n=None):
    if m - m != 0.0:
        return b""
    start = math.floor(m + 0.5)
    if n is None:
        return s[max(start, 1) - 1 :]
    if n != n:
        return b""
    if n == float("inf"):
        end = len(s) + 1
    else:
        end = start + math.floor(n + 0.5)
    start = max(start, 1)
    if end <= start:
        return b""
    return s[start - 1 : end - 1]


def _math_sin(x):
    return math.sin(x) if x - x == 0.0 else float("nan")


def _math_cos(x):
    return math.cos(x) if x - x == 0.0 else float("nan")


def _math_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return float("inf")


def _math_log(x):
    if x != x:
        return x
    if x < 0:
        return -float("nan")  # what C's log gives (printed -nan)
    if x == 0:
        return float("-inf")
    return math.log(x)


def _math_sqrt(x):
    if x != x:
        return x
    if x < 0:
        return -float("nan")
    return math.sqrt(x)


_A_FMT_RX = re.compile(rb"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(.)", re.S)
_A_FMT_CACHE = {}


def _fmt_parse(fmt):
    parts = _A_FMT_CACHE.get(fmt)
    if parts is not None:
        return parts
    parts = []
    pos = 0
    for m in _A_FMT_RX.finditer(fmt):
        if m.start() > pos:
            parts.append(fmt[pos : m.start()])
        flags, width, prec, conv = m.groups()
        if conv == b"%":
            parts.append(b"%")
        elif conv not in b"cdiouxXeEfFgGs" or len(conv) != 1:
            parts.append(m.group(0))
        else:
            parts.append((flags, width, prec, conv))
        pos = m.end()
    if pos < len(fmt):
        parts.append(fmt[pos:])
    if len(_A_FMT_CACHE) > 200:
        _A_FMT_CACHE.clear()
    _A_FMT_CACHE[fmt] = parts
    return parts


def _make_sprintf(to_s):
    def _sprintf(fmt, args):
        out = []
        ai = 0
        nargs = len(args)
        for part in _fmt_parse(fmt):
            if part.__class__ is bytes:
                out.append(part)
                continue
            flags, width, prec, conv = part
            if width == b"*":
                w = int(_n(args[ai])) if ai < nargs else 0
                ai += 1
                if w < 0:
                    flags += b"-"
                    w = -w
                width = b"%d" % w
            if prec == b"*":
                pr = int(_n(args[ai])) if ai < nargs else 0
                ai += 1
                prec = b"%d" % pr if pr >= 0 else None
            arg = args[ai] if ai < nargs else b""
            ai += 1
            spec = b"%" + flags + (width or b"") + (b"." + prec if prec is not None else b"")
            if conv in b"diouxX":
                v = _n(arg)
                if v - v != 0.0:
                    out.append((spec + b"s") % (b"%g" % v if v == v else b"nan"))
                    continue
                iv = int(v)
                c = conv
                if c in b"iu":
                    c = b"d"
                if c == b"o" and b"#" in flags:
                    body = b"0%o" % iv if iv else b"0"
                    out.append((spec.replace(b"#", b"") + b"s") % body)
                    continue
                out.append((spec + c) % iv)
            elif conv in b"eEfFgG":
                out.append((spec + conv) % _n(arg))
            elif conv == b"c":
                if arg.__class__ is float:
                    ch = bytes((int(arg) & 255,))
                else:
                    ch = arg[:1]
                out.append((spec.split(b".")[0] + b"s") % ch)
            else:
                out.append((spec + b"s") % to_s(arg))
        return b"".join(out)

    return _sprintf


_A_REPL_CACHE = {}


def _awk_repl(rep):
    """An awk sub/gsub replacement: & is the match, \\& a literal &, \\\\ a backslash."""
    fn = _A_REPL_CACHE.get(rep)
    if fn is not None:
        return fn
    if b"\\" not in rep and b"&" not in rep:
        fn = lambda m: rep  # noqa: E731
    else:
        parts = []
        lit = bytearray()
        i = 0
        n = len(rep)
        while i < n:
            c = rep[i]
            if c == 92 and i + 1 < n and rep[i + 1] in (38, 92):
                lit.append(rep[i + 1])
                i += 2
                continue
            if c == 38:
                if lit:
                    parts.append(bytes(lit))
                    lit = bytearray()
                parts.append(0)
                i += 1
                continue
            lit.append(c)
            i += 1
        if lit:
            parts.append(bytes(lit))
        tpl = tuple(parts)
        fn = lambda m: b"".join(p if p.__class__ is bytes else m.group(0) for p in tpl)  # noqa: E731
    if len(_A_REPL_CACHE) > 200:
        _A_REPL_CACHE.clear()
    _A_REPL_CACHE[rep] = fn
    return fn


def _sub(rx, rep, target, glob):
    fn = _awk_repl(rep)
    if glob:
        new, count = _sub_all(rx, target, fn)
        return new, float(count)
    m = rx.search(target)
    if m is None:
        return target, 0.0
    return target[: m.start()] + fn(m) + target[m.end() :], 1.0


def _dre(s):
    try:
        return compile_regex(s, True, awk=True)
    except RegexError as e:
        raise AwkError(f"regular expression compile failed ({e}): {s.decode('latin-1')}")


def _make_splitter(fs, paragraph=False):
    if fs == b" ":
        return _ws_split
    if paragraph:
        rx = _dre(b"(" + (re.escape(fs) if len(fs) == 1 else fs) + b")|\n")
        return lambda r: _rx_split(rx, r)
    if fs == b"":
        return lambda r: [r[i : i + 1] for i in range(len(r))]
    if len(fs) == 1 and fs != b"\\":
        return lambda r: r.split(fs) if r else []
    rx = _dre(fs)
    return lambda r: _rx_split(rx, r)


def _ws_split(r):
    if b"\r" in r or b"\x0b" in r or b"\x0c" in r:
        return _A_WS_FIND(r)
    return r.split()


def _rx_split(rx, r):
    if not r:
        return []
    out = []
    pos = 0
    for m in rx.finditer(r):
        st, en = m.span()
        if st == en:
            continue
        out.append(r[pos:st])
        pos = en
    out.append(r[pos:])
    return out


def _A_STATE_S(x):
    # replaced per run (CONVFMT lives in the run's state); default for module-level helpers
    if x.is_integer() and abs(x) < 1e30:
        return b"%d" % x
    return b"%.6g" % x


class _AwkRuntime:
    def __init__(self, ctx, out):
        self.ctx = ctx
        self.w = out.append
        self.rec = b""
        self.flds = None
        self.NR = 0.0
        self.FNR = 0.0
        self.FS = b" "
        self.OFS = b" "
        self.ORS = b"\n"
        self.RS = b"\n"
        self.FILENAME = b""
        self.SUBSEP = b"\x1c"
        self.RSTART = 0.0
        self.RLENGTH = -1.0
        self.CONVFMT = b"%.6g"
        self.OFMT = b"%.6g"
        self.splitter = _make_splitter(b" ")
        self.ENVIRON = {}
        self.ARGV = {}
        self.ARGC = 0.0
        self.files = {}
        self.pipes = {}
        self.readers = {}
        self.rng = random.Random(0)
        self.seed = 0.0
        self.main_iter = None
        self.ns = None

    # --- conversions with this run's formats
    def tos(self, x):
        if x.__class__ is not float:
            return x
        if x.is_integer() and abs(x) < 1e30:
            return b"%d" % x
        if x != x:
            return b"-nan" if math.copysign(1.0, x) < 0 else b"nan"
        return self.CONVFMT % x

    def too(self, x):
        if x.__class__ is not float:
            return x
        if x.is_integer() and abs(x) < 1e30:
            return b"%d" % x
        if x != x:
            return b"-nan" if math.copysign(1.0, x) < 0 else b"nan"
        return self.OFMT % x

    # --- records and fields
    def set_rec(self, data):
        self.rec = data
        self.flds = None

    def split_rec(self):
        self.flds = fl = self.splitter(self.rec)
        return fl

    def f(self, i):
        if i == 0:
            return self.rec
        fl = self.flds
        if fl is None:
            fl = self.split_rec()
        return fl[i - 1] if i <= len(fl) else b""

    def setf(self, i, v):
        s = self.tos(v)
        if s.__class__ is _AStr:
            s = bytes(s)
        if i == 0:
            self.set_rec(s)
            return v
        fl = self.flds
        if fl is None:
            fl = self.split_rec()
        if i > len(fl):
            fl.extend([b""] * (i - len(fl)))
        fl[i - 1] = s
        self.rec = self.OFS.join(fl)
        return v

    def getNF(self):
        fl = self.flds
        if fl is None:
            fl = self.split_rec()
        return float(len(fl))

    def setNF(self, v):
        n = int(_n(v))
        if n < 0:
            raise AwkError("NF set to negative value")
        fl = self.flds
        if fl is None:
            fl = self.split_rec()
        if n < len(fl):
            del fl[n:]
        else:
            fl.extend([b""] * (n - len(fl)))
        self.rec = self.OFS.join(fl)

    def fcomp(self, i, op, v):
        new = _arith(op, _n(self.f(i)), v)
        self.setf(i, new)
        return new

    def finc(self, i, delta, post):
        cur = _n(self.f(i))
        self.setf(i, cur + delta)
        return cur if post else cur + delta

    # --- special variables
    def setv(self, name, v):
        if name == "NF":
            self.setNF(v)
            return v
        if name in ("NR", "FNR", "RSTART", "RLENGTH"):
            setattr(self, name, _n(v))
            return v
        s = self.tos(v)
        if name == "FS" or (name == "RS" and (s == b"") != (self.RS == b"")):
            if self.flds is None:
                self.split_rec()
            setattr(self, name, s)
            self.splitter = _make_splitter(self.FS, self.RS == b"")
            return v
        setattr(self, name, s)
        return v

    def getv(self, name):
        return self.getNF() if name == "NF" else getattr(self, name)

    def vcomp(self, name, op, v):
        new = _arith(op, _n(self.getv(name)), v)
        self.setv(name, new)
        return new

    def vinc(self, name, delta, post):
        cur = _n(self.getv(name))
        self.setv(name, cur + delta)
        return cur if post else cur + delta

    # --- builtins
    def split(self, s, arr, sep):
        arr.clear()
        if sep is None:
            parts = self.splitter(s) if self.RS != b"" else _make_splitter(self.FS)(s)
        elif isinstance(sep, bytes):
            parts = _make_splitter(sep)(s)
        else:
            parts = _rx_split(sep, s)
        for i, p in enumerate(parts, 1):
            arr[b"%d" % i] = p
        return float(len(parts))

    def match(self, s, rx, arr):
        m = rx.search(s)
        if arr is not None:
            arr.clear()
        if m is None:
            self.RSTART = 0.0
            self.RLENGTH = -1.0
            return 0.0
        self.RSTART = float(m.start() + 1)
        self.RLENGTH = float(m.end() - m.start())
        if arr is not None:
            arr[b"0"] = m.group(0)
            for i in range(1, (rx.groups or 0) + 1):
                g = m.group(i)
                if g is not None:
                    arr[b"%d" % i] = g
        return self.RSTART

    def rand(self):
        return self.rng.random()

    def srand(self, seed):
        prev = self.seed
        self.seed = float(int(time.time())) if seed is None else seed
        self.rng.seed(self.seed)
        return prev

    def run_cmd(self, cmd, stdin=b""):
        run = getattr(self.ctx, "run", None)
        if run is None:
            self.ctx.stderr.write(b"awk: running commands is not available here\n")
            return 127, b""
        return run(["sh", "-c", cmd.decode("utf-8", "surrogateescape")], stdin=stdin)

    def system(self, cmd):
        self.flush_pipes()
        status, out = self.run_cmd(cmd)
        if out:
            self.w(out)
        return float(status)

    def redirect(self, mode, target, data):
        if mode == "|":
            self.pipes.setdefault(target, []).append(data)
            return
        if target in (b"/dev/stdout", b"-"):
            self.w(data)
            return
        if target == b"/dev/stderr":
            self.ctx.stderr.write(data)
            return
        f = self.files.get(target)
        if f is None:
            try:
                f = self.files[target] = _open(target, "ab" if mode == ">>" else "wb")
            except OSError as e:
                raise AwkError(f"can't redirect to `{target.decode('utf-8', 'surrogateescape')}' ({_strerror(e)})")
        f.write(data)

    def flush_pipes(self):
        for cmd in list(self.pipes):
            self.close(cmd)

    def close(self, name):
        status = -1.0
        f = self.files.pop(name, None)
        if f is not None:
            f.close()
            status = 0.0
        if name in self.pipes:
            data = b"".join(self.pipes.pop(name))
            st, out = self.run_cmd(name, data)
            if out:
                self.w(out)
            status = float(st)
        r = self.readers.pop(name, None)
        if r is not None:
            status = 0.0
        return status

    def close_all(self):
        if self.pipes:
            pending = self.w.__self__[:]
            del self.w.__self__[:]
            self.flush_pipes()
            self.w.__self__.extend(pending)
        for f in self.files.values():
            f.close()
        self.files.clear()

    # --- input
    def read_records(self, f):
        """Records of one input (a binary reader), split by the current RS."""
        rs = self.RS
        if rs == b"\n":
            for line in f:
                yield line[:-1] if line.endswith(b"\n") else line
            return
        if rs == b"":
            acc = []
            for line in f:
                if line == b"\n":
                    if acc:
                        yield b"\n".join(acc)
                        acc = []
                    continue
                acc.append(line[:-1] if line.endswith(b"\n") else line)
            if acc:
                yield b"\n".join(acc)
            return
        if len(rs) == 1:
            buf = b""
            while True:
                chunk = f.read(65536)
                if not chunk:
                    break
                buf += chunk
                parts = buf.split(rs)
                buf = parts.pop()
                yield from parts
            if buf:
                yield buf
            return
        data = f.read()
        rx = _dre(rs)
        pos = 0
        for m in rx.finditer(data):
            if m.end() == m.start():
                continue
            yield data[pos : m.start()]
            pos = m.end()
        if pos < len(data):
            yield data[pos:]

    def assign_operand(self, arg):
        name, _, val = arg.partition("=")
        v = _awk_unescape(val.encode("utf-8", "surrogateescape").decode("latin-1")).encode("latin-1")
        if name in _A_SPECIAL:
            self.setv(name, v)
        else:
            self.ns["g_" + name] = v

    def inputs(self):
        """All main-input records, with NR / FNR / FILENAME kept."""
        i = 1
        used = False
        while i < int(self.ARGC):
            arg = self.ARGV.get(b"%d" % i, b"")
            i += 1
            if not arg:
                continue
            sarg = arg.decode("utf-8", "surrogateescape")
            if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", sarg):
                self.assign_operand(sarg)
                continue
            used = True
            self.FILENAME = arg
            self.FNR = 0.0
            if sarg == "-" or sarg == "/dev/stdin":
                yield from self.read_records(self.ctx.stdin)
                continue
            try:
                f = _open(sarg, "rb")
            except OSError as e:
                raise AwkError(f"cannot open \"{sarg}\" ({_strerror(e)})")
            try:
                if os.path.isdir(sarg):
                    self.ctx.stderr.write(f"awk: warning: command line argument `{sarg}' is a directory: skipped\n".encode())
                    continue
                yield from self.read_records(f)
            finally:
                f.close()
        if not used:
            yield from self.read_records(self.ctx.stdin)

    def next_main(self):
        if self.main_iter is None:
            self.main_iter = self.inputs()
        for rec in self.main_iter:
            self.NR += 1.0
            self.FNR += 1.0
            return rec
        return None

    def getline_raw(self, kind, src):
        if kind == "main":
            rec = self.next_main()
            return 0.0 if rec is None else rec
        it = self.readers.get(src)
        if it is None:
            if kind == "file":
                if src in (b"-", b"/dev/stdin"):
                    it = self.read_records(self.ctx.stdin)
                else:
                    try:
                        f = _open(src, "rb")
                    except OSError:
                        return -1.0
                    it = self.read_records(f)
            else:
                self.flush_pipes()
                st, out = self.run_cmd(src)
                import io

                it = self.read_records(io.BytesIO(out))
            self.readers[src] = it
        for rec in it:
            if kind == "cmd":
                self.NR += 1.0
            return rec
        return 0.0

    def getline_rec(self, kind, src):
        r = self.getline_raw(kind, src)
        if r.__class__ is bytes:
            self.set_rec(r)
            return 1.0
        return r


_AWK_USAGE = b"""Usage: awk [-F fs][-v var=value][prog | -f progfile][file ...]
"""


def awk(ctx, argv):
    args = argv[1:]
    fs = None
    assigns = []
    progfiles = []
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            k += 1
            break
        if not a.startswith("-") or a == "-":
            break
        k += 1
        if a.startswith("--"):
            if a in ("--version", "-W"):
                yield b"awk (Vivarium guest shell; POSIX awk)\n"
                return 0
            ctx.stderr.write(f"awk: not an option: {a}\n".encode())
            return 2
        o = a[1]
        val = a[2:]
        if o in "Fvf":
            if not val:
                if k >= len(args):
                    ctx.stderr.write(f"awk: option requires an argument -- {o}\n".encode() + _AWK_USAGE)
                    return 2
                val = args[k]
                k += 1
            if o == "F":
                fs = val
            elif o == "v":
                if "=" not in val or not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", val):
                    ctx.stderr.write(f"awk: improper assignment: -v {val}\n".encode())
                    return 2
                assigns.append(val)
            else:
                progfiles.append(val)
        elif o == "W":
            if not val and k < len(args):
                val = args[k]
                k += 1
            if val.startswith("v"):
                yield b"awk (Vivarium guest shell; POSIX awk)\n"
                return 0
        else:
            ctx.stderr.write(f"awk: not an option: {a}\n".encode())
            return 2
    operands = args[k:]
    if progfiles:
        src_parts = []
        for pf in progfiles:
            try:
                if pf == "-":
                    src_parts.append(ctx.stdin.read())
                else:
                    with _open(pf, "rb") as f:
                        src_parts.append(f.read())
            except OSError as e:
                ctx.stderr.write(f"awk: couldn't open file {pf}: {_strerror(e)}\n".encode())
                return 2
        src = b"\n".join(src_parts).decode("latin-1")
    else:
        if not operands:
            ctx.stderr.write(_AWK_USAGE)
            return 2
        src = operands.pop(0).encode("utf-8", "surrogateescape").decode("latin-1")
    out = []
    R = _AwkRuntime(ctx, out)
    try:
        comp = _AwkCompiler(src)
        code = comp.compile()
        ns = dict(comp.consts)
        ns.update(
            R=R, _w=out.append, _out=out, _n=_n, _s=R.tos, _o=R.too, _b=_b, _k=R.tos, _cmp=None,
            _atonum=_atonum, _div=_div, _mod=_mod, _pow=_pow, _fi=_fi, _aset=_aset, _acomp=_acomp,
            _ainc=_ainc, _len=_len, _sub=_sub, _substr=_substr, _sprintf=_make_sprintf(R.tos),
            _int=_int, _math_sin=_math_sin, _math_cos=_math_cos, _math_exp=_math_exp,
            _math_log=_math_log, _math_sqrt=_math_sqrt, math=math, _dre=_dre,
            _Next=_AwkNext, _NextFile=_AwkNextFile, _Exit=_AwkExit, _S=_AStr,
        )
        ns["_cmp"] = _make_cmp(R.tos)
        exec(compile(code, "<awk>", "exec"), ns)
    except AwkError as e:
        ctx.stderr.write(f"awk: {e}\n".encode("utf-8", "surrogateescape"))
        return 2
    except (SyntaxError, RecursionError) as e:
        ctx.stderr.write(f"awk: syntax error in program ({e})\n".encode())
        return 2
    R.ns = ns
    for key, val in (ctx.env or {}).items():
        R.ENVIRON[key.encode("utf-8", "surrogateescape")] = val.encode("utf-8", "surrogateescape")
    R.ARGV[b"0"] = b"awk"
    for i, a in enumerate(operands, 1):
        R.ARGV[b"%d" % i] = a.encode("utf-8", "surrogateescape")
    R.ARGC = float(len(operands) + 1)
    status = 0
    try:
        if fs is not None:
            if fs == "t":
                fs = "\t"
            R.setv("FS", _awk_unescape(fs.encode("utf-8", "surrogateescape").decode("latin-1")).encode("latin-1"))
        for a in assigns:
            R.assign_operand(a)
        begin, main, end = ns["_begin"], ns["_main"], ns["_end"]
        exiting = False
        if begin is not None:
            try:
                if ns["_begin_gen"]:
                    for _ in begin():
                        yield b"".join(out)
                        out.clear()
                else:
                    begin()
            except _AwkExit as e:
                exiting = True
                if e.status is not None:
                    status = int(e.status) & 255
            except (_AwkNext, _AwkNextFile):
                raise AwkError("next used in BEGIN")
            if out:
                yield b"".join(out)
                out.clear()
        if not exiting and (main is not None or end is not None):
            nxt = R.next_main
            if main is None:
                last = None
                while True:
                    rec = nxt()
                    if rec is None:
                        break
                    last = rec
                if last is not None:
                    R.set_rec(last)
            else:
                main_gen = ns["_main_gen"]
                if R.main_iter is None:
                    R.main_iter = R.inputs()
                try:
                    for rec in R.main_iter:
                        R.NR += 1.0
                        R.FNR += 1.0
                        R.rec = rec
                        R.flds = None
                        try:
                            if main_gen:
                                for _ in main():
                                    yield b"".join(out)
                                    out.clear()
                            else:
                                main()
                        except _AwkNext:
                            pass
                        except _AwkNextFile:
                            fn = R.FILENAME
                            while R.FILENAME == fn:
                                if nxt() is None:
                                    break
                        if len(out) > 256:
                            yield b"".join(out)
                            out.clear()
                except _AwkExit as e:
                    exiting = True
                    if e.status is not None:
                        status = int(e.status) & 255
        if end is not None:
            try:
                if ns["_end_gen"]:
                    for _ in end():
                        yield b"".join(out)
                        out.clear()
                else:
                    end()
            except _AwkExit as e:
                if e.status is not None:
                    status = int(e.status) & 255
        R.close_all()
        if out:
            yield b"".join(out)
            out.clear()
        return status
    except AwkError as e:
        if out:
            yield b"".join(out)
        ctx.stderr.write(f"awk: {e}\n".encode("utf-8", "surrogateescape"))
        return 2
    except RecursionError:
        if out:
            yield b"".join(out)
        ctx.stderr.write(b"awk: function call nesting too deep\n")
        return 2
    finally:
        for f in R.files.values():
            f.close()


def _make_cmp(to_s):
    def _cmp(a, b):
        if a.__class__ is _AStr or b.__class__ is _AStr:
            a, b = to_s(a), to_s(b)
            return (a > b) - (a < b)
        if a.__class__ is float:
            if b.__class__ is float:
                return (a > b) - (a < b)
            nb = _strnum(b)
            if nb is not None:
                return (a > nb) - (a < nb)
            a = to_s(a)
        elif b.__class__ is float:
            na = _strnum(a)
            if na is not None:
                return (na > b) - (na < b)
            b = to_s(b)
        else:
            na = _strnum(a)
            if na is not None:
                nb = _strnum(b)
                if nb is not None:
                    return (na > nb) - (na < nb)
        return (a > b) - (a < b)

    return _cmp



# ---------------------------------------------------------------------------------------
# curl and wget over urllib.request (in the sandbox it goes through the host's egress door,
# under the run's network policy and secrets)


class _CurlFail(Exception):
    def __init__(self, code, msg):
        Exception.__init__(self, msg)
        self.code = code
        self.msg = msg


def _net_error(e, host, port):
    """(curl exit code, message) for an exception raised by urlopen."""
    import socket

    reason = getattr(e, "reason", e)
    if isinstance(reason, str):
        return 7, f"Failed to connect to {host} port {port} after 0 ms: {reason}"
    why = getattr(reason, "reason", None)
    if isinstance(why, str):  # the sandbox's egress refusal (vivarium_net.NetworkError)
        msg = getattr(reason, "message", "") or why
        if why in ("request_timeout", "total_time"):
            return 28, f"Operation timed out: {msg}"
        if why == "address_not_allowed" and "resolve" in msg:
            return 6, f"Could not resolve host: {host}"
        if why == "tls_error":
            return 60, f"SSL certificate problem: {msg}"
        if why == "response_too_large":
            return 63, f"Exceeded the maximum allowed file size: {msg}"
        if why == "request_too_large":
            return 55, f"Failed sending data to the peer: {msg}"
        return 7, f"Failed to connect to {host} port {port} after 0 ms: {msg} ({why})"
    if isinstance(reason, socket.gaierror):
        return 6, f"Could not resolve host: {host}"
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return 28, "Operation timed out"
    if isinstance(reason, ConnectionRefusedError):
        return 7, f"Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server"
    if isinstance(reason, ConnectionError):
        return 56, f"Recv failure: {reason}"
    name = type(reason).__name__
    if "SSL" in name or "Certificate" in name:
        return 60, f"SSL certificate problem: {reason}"
    return 7, f"Failed to connect to {host} port {port} after 0 ms: {reason}"


def _http_request(url, method, headers, data, follow, timeout, insecure, max_redirs=50):
    """Performs a request; returns (response, effective url, redirects followed). HTTP
    error statuses come back as responses (HTTPError is one)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, hdrs, newurl):
            return None

    handlers = [NoRedirect()]
    if insecure and url.startswith("https:"):
        try:
            import ssl

            handlers.append(urllib.request.HTTPSHandler(context=ssl._create_unverified_context()))
        except Exception:
            pass
    opener = urllib.request.build_opener(*handlers)
    redirects = 0
    while True:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise _CurlFail(1, f'Protocol "{parts.scheme}" not supported or disabled in libcurl')
        if not parts.hostname:
            raise _CurlFail(3, "URL using bad/illegal format or missing URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        req = urllib.request.Request(url, data=data, method=method)
        for k, v in headers:
            req.add_header(k, v)
        try:
            resp = opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            resp = e
        except urllib.error.URLError as e:
            raise _CurlFail(*_net_error(e, parts.hostname, port))
        except OSError as e:
            raise _CurlFail(*_net_error(e, parts.hostname, port))
        code = resp.status if getattr(resp, "status", None) is not None else resp.code
        if follow and code in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
            if redirects >= max_redirs:
                raise _CurlFail(47, f"Maximum ({max_redirs}) redirects followed")
            url = urllib.parse.urljoin(url, resp.headers["Location"])
            resp.close()
            redirects += 1
            if code in (301, 302, 303) and method not in ("GET", "HEAD"):
                if code == 303 or method == "POST":
                    method = "GET"
                    data = None
            continue
        return resp, url, redirects


def _status_line(resp):
    version = {10: "HTTP/1.0", 11: "HTTP/1.1"}.get(getattr(resp, "version", 11), "HTTP/1.1")
    code = resp.status if getattr(resp, "status", None) is not None else resp.code
    reason = getattr(resp, "reason", "") or ""
    head = f"{version} {code} {reason}".rstrip() + "\r\n"
    for k, v in resp.headers.items():
        head += f"{k}: {v}\r\n"
    return (head + "\r\n").encode("latin-1", "replace")


def _write_out(fmt, info):
    out = []
    i = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c == "%" and fmt.startswith("%{", i):
            j = fmt.find("}", i)
            if j > 0:
                name = fmt[i + 2 : j]
                if name.startswith("header{"):
                    out.append(str(info.get("headers", {}).get(name[7:], "")))
                else:
                    out.append(str(info.get(name, "")))
                i = j + 1
                continue
        if c == "%" and fmt.startswith("%%", i):
            out.append("%")
            i += 2
            continue
        if c == "\\" and i + 1 < n and fmt[i + 1] in "nrt\\":
            out.append({"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}[fmt[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out).encode("utf-8", "surrogateescape")


_CURL_ARG_OPTS = {
    "o": "output", "X": "request", "H": "header", "d": "data", "u": "user", "A": "user-agent",
    "e": "referer", "m": "max-time", "w": "write-out", "T": "upload-file", "b": "cookie",
    "F": "form", "r": "range", "x": "proxy", "c": "cookie-jar", "K": "config",
}
_CURL_FLAG_OPTS = {
    "s": "silent", "S": "show-error", "f": "fail", "L": "location", "O": "remote-name",
    "i": "include", "I": "head", "k": "insecure", "v": "verbose", "G": "get", "N": "no-buffer",
    "q": "disable", "#": "progress-bar", "g": "globoff", "4": "ipv4", "6": "ipv6",
    "Z": "parallel", "J": "remote-header-name", "R": "remote-time", "n": "netrc",
}
_CURL_LONG_ARG = {
    "output", "request", "header", "data", "data-raw", "data-binary", "data-ascii",
    "data-urlencode", "json", "user", "user-agent", "referer", "max-time", "connect-timeout",
    "write-out", "upload-file", "cookie", "form", "range", "proxy", "url", "retry",
    "retry-delay", "retry-max-time", "max-redirs", "cookie-jar", "config", "output-dir",
    "form-string", "limit-rate", "max-filesize", "resolve", "cacert", "cert", "key",
    "oauth2-bearer", "speed-time", "speed-limit", "expect100-timeout",
}


def curl(ctx, argv):
    import base64
    import urllib.parse

    opts = {"header": [], "data": [], "url": [], "output": []}
    flags = set()
    args = argv[1:]
    k = 0
    only_urls = False

    def fail_usage(msg, code=2):
        ctx.stderr.write(f"curl: {msg}\ncurl: try 'curl --help' or 'curl --manual' for more information\n".encode())
        return code

    def take(name, val):
        if name in ("header",):
            opts["header"].append(val)
        elif name in ("data", "data-ascii"):
            opts["data"].append(("data", val))
        elif name in ("data-raw", "data-binary", "data-urlencode", "json"):
            opts["data"].append((name, val))
        elif name == "url":
            opts["url"].append(val)
        elif name in ("form", "form-string"):
            opts.setdefault("form", []).append((name, val))
        elif name == "output":
            opts["output"].append(val)
        else:
            opts[name] = val

    while k < len(args):
        a = args[k]
        k += 1
        if only_urls or not a.startswith("-") or a == "-":
            opts["url"].append(a)
            continue
        if a == "--":
            only_urls = True
            continue
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name.startswith("no-"):
                flags.discard(name[3:])
                continue
            if name in _CURL_LONG_ARG:
                if not eq:
                    if k >= len(args):
                        return fail_usage(f"option {a}: requires parameter")
                    val = args[k]
                    k += 1
                take(name, val)
            elif name in _CURL_FLAG_OPTS.values() or name in (
                "compressed", "fail-with-body", "http1.1", "http2", "tlsv1.2", "ssl-reqd",
                "create-dirs", "remote-name-all", "fail-early", "path-as-is", "raw", "tcp-nodelay",
                "show-error", "silent", "location-trusted", "post301", "post302", "no-progress-meter",
            ):
                flags.add({"progress-bar": "progress-bar"}.get(name, name))
            elif name == "help":
                yield b"Usage: curl [options...] <url>\n -d, --data <data>   HTTP POST data\n -f, --fail  Fail fast with no output on HTTP errors\n -H, --header <header/@file> Pass custom header(s) to server\n -i, --include  Include protocol response headers in the output\n -o, --output <file> Write to file instead of stdout\n -O, --remote-name  Write output to a file named as the remote file\n -s, --silent  Silent mode\n -L, --location  Follow redirects\n -X, --request <method> Specify request method to use\n"
                return 0
            elif name == "version":
                yield b"curl 8.5.0 (Vivarium guest shell; urllib.request through the sandbox's egress door)\n"
                return 0
            else:
                return fail_usage(f"option {a}: is unknown")
            continue
        j = 1
        while j < len(a):
            o = a[j]
            j += 1
            if o in _CURL_ARG_OPTS:
                val = a[j:]
                if not val:
                    if k >= len(args):
                        return fail_usage(f"option -{o}: requires parameter")
                    val = args[k]
                    k += 1
                j = len(a)
                take(_CURL_ARG_OPTS[o], val)
            elif o in _CURL_FLAG_OPTS:
                flags.add(_CURL_FLAG_OPTS[o])
            else:
                return fail_usage(f"option -{o}: is unknown")
    if not opts["url"]:
        return fail_usage("no URL specified!")
    silent = "silent" in flags
    show_err = "show-error" in flags or not silent

    def report(code, msg):
        if show_err:
            ctx.stderr.write(f"curl: ({code}) {msg}\n".encode("utf-8", "surrogateescape"))
        return code

    # the request body
    body = None
    form_data = False
    json_data = False
    pieces = []
    for kind, val in opts["data"]:
        if kind == "data-urlencode":
            name, eq, v = val.partition("=")
            if eq:
                if v and name == "" :
                    pieces.append(urllib.parse.quote_plus(v).encode())
                else:
                    pieces.append(name.encode() + b"=" + urllib.parse.quote_plus(v).encode())
            else:
                pieces.append(urllib.parse.quote_plus(name).encode())
            form_data = True
            continue
        raw = val.encode("utf-8", "surrogateescape")
        if kind != "data-raw" and raw.startswith(b"@"):
            fname = raw[1:].decode("utf-8", "surrogateescape")
            try:
                if fname == "-":
                    raw = ctx.stdin.read()
                else:
                    with _open(fname, "rb") as f:
                        raw = f.read()
            except OSError:
                ctx.stderr.write(f"Warning: Couldn't read data from file \"{fname}\", this makes an empty POST.\n".encode())
                raw = b""
            if kind == "data":
                raw = raw.replace(b"\r", b"").replace(b"\n", b"")
        if kind == "json":
            json_data = True
        else:
            form_data = True
        pieces.append(raw)
    if pieces:
        body = (b"" if json_data and not form_data else b"&").join(pieces) if not json_data else b"".join(pieces)
    form_ct = None
    if opts.get("form"):
        boundary = "------------------------" + "%016x" % random.getrandbits(64)
        chunks = []
        for kind, spec in opts["form"]:
            name, _, value = spec.partition("=")
            ctype = None
            if kind == "form" and ";type=" in value:
                value, _, ctype = value.partition(";type=")
            if kind == "form" and value.startswith("@") or kind == "form" and value.startswith("<"):
                fname = value[1:]
                try:
                    with _open(fname, "rb") as f:
                        content = f.read()
                except OSError:
                    return report(26, "Failed to open/read local data from file/application")
                if value.startswith("@"):
                    disp = f'form-data; name="{name}"; filename="{os.path.basename(fname)}"'
                    ctype = ctype or "application/octet-stream"
                else:
                    disp = f'form-data; name="{name}"'
            else:
                content = value.encode("utf-8", "surrogateescape")
                disp = f'form-data; name="{name}"'
            head = f"--{boundary}\r\nContent-Disposition: {disp}\r\n"
            if ctype:
                head += f"Content-Type: {ctype}\r\n"
            chunks.append(head.encode("utf-8", "surrogateescape") + b"\r\n" + content + b"\r\n")
        body = b"".join(chunks) + f"--{boundary}--\r\n".encode()
        form_ct = f"multipart/form-data; boundary={boundary}"
    upload = opts.get("upload-file")
    if upload is not None:
        try:
            if upload == "-":
                body = ctx.stdin.read()
            else:
                with _open(upload, "rb") as f:
                    body = f.read()
        except OSError as e:
            return report(26, f"Failed to open/read local data from file/application")
    headers = []
    have = set()
    for h in opts["header"]:
        if h.startswith("@"):
            continue
        name, _, value = h.partition(":")
        value = value.strip()
        if not value and h.rstrip().endswith(";"):
            name = name.rstrip().rstrip(";")
        elif not value:
            have.add(name.strip().lower())  # "X-Foo:" removes a header curl would send
            continue
        headers.append((name.strip(), value))
        have.add(name.strip().lower())
    if "user-agent" not in have:
        headers.append(("User-Agent", opts.get("user-agent", "curl/8.5.0")))
    if "accept" not in have:
        headers.append(("Accept", "application/json" if json_data else "*/*"))
    if "user" in opts:
        headers.append(("Authorization", "Basic " + base64.b64encode(opts["user"].encode()).decode()))
    if "oauth2-bearer" in opts:
        headers.append(("Authorization", "Bearer " + opts["oauth2-bearer"]))
    if "referer" in opts:
        headers.append(("Referer", opts["referer"]))
    if "cookie" in opts and "=" in opts["cookie"]:
        headers.append(("Cookie", opts["cookie"]))
    if "range" in opts:
        headers.append(("Range", "bytes=" + opts["range"]))
    if "compressed" in flags:
        headers.append(("Accept-Encoding", "gzip, deflate"))
    method = opts.get("request")
    if body is not None and "content-type" not in have and "get" not in flags:
        if form_ct:
            headers.append(("Content-Type", form_ct))
        elif json_data:
            headers.append(("Content-Type", "application/json"))
        elif upload is None:
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
    if "head" in flags:
        method = method or "HEAD"
    timeout = None
    for t in ("max-time", "connect-timeout"):
        if t in opts:
            try:
                timeout = float(opts[t])
            except ValueError:
                return fail_usage(f"option --{t}: expected a proper numerical parameter")
    status = 0
    outputs = list(opts["output"])
    for url in opts["url"]:
        if "://" not in url:
            url = "http://" + url
        data = body
        m = method
        if "get" in flags and body is not None:
            url += ("&" if "?" in url else "?") + body.decode("latin-1")
            data = None
        if m is None:
            m = "PUT" if upload is not None else ("POST" if data is not None else "GET")
        target = outputs.pop(0) if outputs else None
        if target is None and "remote-name" in flags:
            path = urllib.parse.urlsplit(url).path
            target = urllib.parse.unquote(path.rsplit("/", 1)[-1])
            if not target:
                status = report(23, "Remote file name has no length!")
                continue
        info = {"http_code": "000", "response_code": "000", "url_effective": url, "size_download": 0,
                "num_redirects": 0, "content_type": "", "time_total": "0.000000", "exitcode": 0,
                "redirect_url": "", "method": m, "size_header": 0, "scheme": url.split(":", 1)[0].upper()}
        t0 = time.time()
        out_file = None
        try:
            try:
                resp, eff, nred = _http_request(url, m, headers, data, "location" in flags, timeout, "insecure" in flags)
            except _CurlFail as e:
                info["exitcode"] = e.code
                status = report(e.code, e.msg)
                if "write-out" in opts:
                    yield _write_out(opts["write-out"], info)
                continue
            code = resp.status if getattr(resp, "status", None) is not None else resp.code
            info.update(http_code="%03d" % code, response_code="%03d" % code, url_effective=eff,
                        num_redirects=nred, content_type=resp.headers.get("Content-Type", "") or "",
                        headers={k.lower(): v for k, v in resp.headers.items()},
                        redirect_url=resp.headers.get("Location", "") if code in (301, 302, 303, 307, 308) else "")
            failed = code >= 400 and ("fail" in flags or "fail-with-body" in flags)
            if failed and "fail-with-body" not in flags:
                resp.close()
                info["exitcode"] = 22
                status = report(22, f"The requested URL returned error: {code}")
                if "write-out" in opts:
                    yield _write_out(opts["write-out"], info)
                continue
            head = _status_line(resp)
            info["size_header"] = len(head)
            if target is not None and target != "-":
                try:
                    out_file = _open(target, "wb")
                except OSError as e:
                    resp.close()
                    status = report(23, f"Failure writing output to destination ({target}: {_strerror(e)})")
                    continue

            def emit(chunk):
                if out_file is not None:
                    out_file.write(chunk)
                    return None
                return chunk

            if "include" in flags or "head" in flags:
                c = emit(head)
                if c:
                    yield c
            size = 0
            gz = None
            if "compressed" in flags and (resp.headers.get("Content-Encoding") or "").lower() in ("gzip", "deflate", "x-gzip"):
                import zlib

                gz = zlib.decompressobj(47)
            if m != "HEAD" and "head" not in flags:
                while True:
                    try:
                        chunk = resp.read(65536)
                    except (OSError, ValueError) as e:
                        info["exitcode"] = 56
                        status = report(56, f"Failure when receiving data from the peer ({e})")
                        break
                    if not chunk:
                        break
                    size += len(chunk)
                    if gz is not None:
                        chunk = gz.decompress(chunk)
                    c = emit(chunk)
                    if c:
                        yield c
                if gz is not None:
                    c = emit(gz.flush())
                    if c:
                        yield c
            resp.close()
            info["size_download"] = size
            info["time_total"] = "%.6f" % (time.time() - t0)
            if failed:
                info["exitcode"] = 22
                status = report(22, f"The requested URL returned error: {code}")
        finally:
            if out_file is not None:
                out_file.close()
        if "write-out" in opts:
            yield _write_out(opts["write-out"], info)
    return status


def wget(ctx, argv):
    import urllib.parse

    quiet = False
    out_name = None
    urls = []
    headers = []
    method = None
    body = None
    continue_ = False
    out_dir = None
    to_log = None
    args = argv[1:]
    k = 0
    while k < len(args):
        a = args[k]
        k += 1
        if not a.startswith("-") or a == "-":
            urls.append(a)
            continue
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            needs = name in ("output-document", "header", "user-agent", "post-data", "post-file",
                             "method", "body-data", "directory-prefix", "timeout", "tries",
                             "output-file", "append-output", "wait")
            if needs and not eq:
                if k >= len(args):
                    ctx.stderr.write(f"wget: option '--{name}' requires an argument\n".encode())
                    return 2
                val = args[k]
                k += 1
            if name == "quiet":
                quiet = True
            elif name == "output-document":
                out_name = val
            elif name == "header":
                n_, _, v_ = val.partition(":")
                headers.append((n_.strip(), v_.strip()))
            elif name == "user-agent":
                headers.append(("User-Agent", val))
            elif name == "post-data":
                body, method = val.encode("utf-8", "surrogateescape"), method or "POST"
            elif name == "post-file":
                try:
                    with _open(val, "rb") as f:
                        body, method = f.read(), method or "POST"
                except OSError as e:
                    ctx.stderr.write(f"wget: {val}: {_strerror(e)}\n".encode())
                    return 1
            elif name == "body-data":
                body = val.encode("utf-8", "surrogateescape")
            elif name == "method":
                method = val.upper()
            elif name == "directory-prefix":
                out_dir = val
            elif name in ("output-file", "append-output"):
                to_log = val
            elif name == "continue":
                continue_ = True
            elif name in ("timeout", "tries", "wait", "no-verbose", "no-check-certificate",
                          "show-progress", "no-clobber", "progress", "server-response",
                          "content-disposition", "https-only", "verbose", "no-cache"):
                pass
            elif name == "help":
                yield b"GNU Wget 1.21.3 (Vivarium guest shell), a non-interactive network retriever.\nUsage: wget [OPTION]... [URL]...\n"
                return 0
            elif name == "version":
                yield b"GNU Wget 1.21.3 (Vivarium guest shell; urllib.request through the sandbox's egress door)\n"
                return 0
            else:
                ctx.stderr.write(f"wget: unrecognized option '{a}'\nUsage: wget [OPTION]... [URL]...\n\nTry `wget --help' for more options.\n".encode())
                return 2
            continue
        j = 1
        while j < len(a):
            o = a[j]
            j += 1
            if o in "OUPTtao":
                val = a[j:]
                if not val:
                    if k >= len(args):
                        ctx.stderr.write(f"wget: option requires an argument -- '{o}'\n".encode())
                        return 2
                    val = args[k]
                    k += 1
                j = len(a)
                if o == "O":
                    out_name = val
                elif o == "U":
                    headers.append(("User-Agent", val))
                elif o == "P":
                    out_dir = val
                elif o in "oa":
                    to_log = val
            elif o == "q":
                quiet = True
            elif o in "nvcNSrkpmxb":
                if o == "c":
                    continue_ = True
            else:
                ctx.stderr.write(f"wget: invalid option -- '{o}'\nUsage: wget [OPTION]... [URL]...\n\nTry `wget --help' for more options.\n".encode())
                return 2
    if not urls:
        ctx.stderr.write(b"wget: missing URL\nUsage: wget [OPTION]... [URL]...\n\nTry `wget --help' for more options.\n")
        return 1
    if not any(h[0].lower() == "user-agent" for h in headers):
        headers.append(("User-Agent", "Wget/1.21.3"))
    headers.append(("Accept", "*/*"))
    if body is not None and not any(h[0].lower() == "content-type" for h in headers):
        headers.append(("Content-Type", "application/x-www-form-urlencoded"))
    log = ctx.stderr.write if not quiet and to_log is None else (lambda b: None)
    status = 0
    shared_out = None
    try:
        for url in urls:
            if "://" not in url:
                url = "http://" + url
            stamp = time.strftime("--%Y-%m-%d %H:%M:%S--  ")
            log(f"{stamp}{url}\n".encode())
            try:
                resp, eff, nred = _http_request(url, method or ("POST" if body is not None else "GET"), headers, body, True, 900.0, False, 20)
            except _CurlFail as e:
                host = urllib.parse.urlsplit(url).hostname or url
                if e.code == 6:
                    ctx.stderr.write(f"wget: unable to resolve host address '{host}'\n".encode())
                    status = 4
                else:
                    if not quiet:
                        ctx.stderr.write(f"failed: {e.msg}.\n".encode())
                    status = 4 if e.code != 1 else 1
                continue
            code = resp.status if getattr(resp, "status", None) is not None else resp.code
            reason = getattr(resp, "reason", "") or ""
            log(f"HTTP request sent, awaiting response... {code} {reason}\n".encode())
            if code >= 400:
                resp.close()
                ctx.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ERROR {code}: {reason}.\n\n".encode()) if not quiet else None
                status = 8
                continue
            length = resp.headers.get("Content-Length")
            ctype = resp.headers.get("Content-Type", "")
            log(f"Length: {length or 'unspecified'} [{ctype}]\n".encode())
            if out_name == "-":
                while True:
                    chunk = resp.read(65536)
                    if not chunk:
                        break
                    yield chunk
                resp.close()
                continue
            if out_name is not None:
                name = out_name
                if shared_out is None:
                    try:
                        shared_out = _open(name, "wb")
                    except OSError as e:
                        resp.close()
                        ctx.stderr.write(f"wget: {name}: {_strerror(e)}\n".encode())
                        return 3
                f = shared_out
            else:
                path = urllib.parse.urlsplit(eff).path
                base = urllib.parse.unquote(path.rsplit("/", 1)[-1]) or "index.html"
                name = os.path.join(out_dir, base) if out_dir else base
                if not continue_ and os.path.exists(name):
                    i = 1
                    while os.path.exists(f"{name}.{i}"):
                        i += 1
                    name = f"{name}.{i}"
                try:
                    if out_dir:
                        os.makedirs(out_dir, exist_ok=True)
                    f = _open(name, "wb")
                except OSError as e:
                    resp.close()
                    ctx.stderr.write(f"wget: {name}: {_strerror(e)}\n".encode())
                    status = 3
                    continue
            log(f"Saving to: \u2018{name}\u2019\n\n".encode())
            size = 0
            try:
                while True:
                    chunk = resp.read(65536)
                    if not chunk:
                        break
                    size += len(chunk)
                    f.write(chunk)
            except OSError as e:
                status = 4
                ctx.stderr.write(f"wget: read error: {e}\n".encode())
            finally:
                resp.close()
                if f is not shared_out:
                    f.close()
            log(f"{time.strftime('%Y-%m-%d %H:%M:%S')} - \u2018{name}\u2019 saved [{size}]\n\n".encode())
    finally:
        if shared_out is not None:
            shared_out.close()
    return status


COMMANDS = {"sed": sed, "awk": awk, "curl": curl, "wget": wget}
