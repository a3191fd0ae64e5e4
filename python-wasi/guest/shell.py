"""Vivarium's shell, loaded into every template as `vivarium_shell` (issue 49): a POSIX shell
that runs inside the sandbox, in Python, over the sandbox's own files.

No process is ever started: commands are Python generator functions (the registry merges the
`COMMANDS` of vivarium_shell_text, vivarium_shell_lang and vivarium_shell_files with the
builtins here), pipelines are lazy and pull-based (`yes | head -1` ends because head stops
pulling), `python` runs a script as its own `__main__` in this interpreter.

Entry points: `run(source, *, persist=True) -> int` (stdout and stderr to sys.stdout/sys.stderr;
persist=True keeps variables, functions, `cd` and `export` for the next call, as a terminal;
persist=False restores the working directory and environment after) and
`run_capture(source, *, persist=False) -> (status, stdout bytes)`.
A command is `def name(ctx, argv)` yielding stdout bytes and returning its status (None is 0);
ctx has stdin (a lazy reader), stderr, env, cwd, error(msg) and run(argv, stdin).
For development: `python3 tests/shell/run_host.py -c SCRIPT`; checks against bash:
tests/shell/test_shell_lang.py (also `--guest VIVARIUM`, in the guest's CPython).

Not supported (refused with `bash: line N: NAME: not supported in the sandbox (no processes)`
and status 2, there being no processes): background jobs `&` (the command is not run), `kill`,
`wait ID`, `jobs`, `fg`, `bg`, `disown`, `coproc`, `select`, and `>(..)`. Supported without a
process: `<(list)` (the list runs first, its output in a temporary file named by the word),
`exec CMD` (runs CMD, then the shell ends with its status), `exec >file 2>&1` (the redirections
stay), `trap ACTION EXIT` (signal traps are accepted and never fire).
Bounds: function nesting beyond FUNCNEST (at most 1000) ends the whole run, status 1; a glob
matching more than 100,000 names fails its command (`Argument list too long`, status 126); a
command substitution's output over 64 MiB is an error (status 1).
"""

import os
import re
import sys

ENC = "utf-8"
ERRS = "surrogateescape"


def b2s(b):
    return b.decode(ENC, ERRS)


def s2b(s):
    return s.encode(ENC, ERRS)


FUNCNEST_DEFAULT = 1000
GLOB_MAX = 100_000
BRACE_MAX = 4_000_000  # words one brace expansion may produce (bash has no bound; memory does)
BRACE_DEPTH = 1000  # brace groups handled in one word
CMDSUB_MAX = 64 << 20
PIPE_BUF = 65536  # what an upstream stage may still write once its reader is gone

# ---------------------------------------------------------------------------------------------
# control flow and errors


class ShellExit(BaseException):
    def __init__(self, status):
        self.status = status


class FuncReturn(BaseException):
    def __init__(self, status):
        self.status = status


class LoopBreak(BaseException):
    def __init__(self, n):
        self.n = n


class LoopContinue(BaseException):
    def __init__(self, n):
        self.n = n


class ShellError(Exception):
    """An expansion error: the message is printed and the (sub)shell exits with status."""

    def __init__(self, msg, status=1):
        Exception.__init__(self, msg)
        self.msg = msg
        self.status = status


class ShellAbort(BaseException):
    """Ends the whole run, past subshells and pipeline stages: function nesting beyond
    FUNCNEST (a recursive pipeline would otherwise fan out without bound)."""

    def __init__(self, msg, status=1):
        BaseException.__init__(self, msg)
        self.msg = msg
        self.status = status


class ParseError(Exception):
    def __init__(self, msg, line, eof=False):
        Exception.__init__(self, msg)
        self.msg = msg
        self.line = line
        self.eof = eof


# ---------------------------------------------------------------------------------------------
# I/O: readers pull lazily from an iterator of byte chunks; writers take bytes.


class _FileChunks:
    __slots__ = ("f",)

    def __init__(self, f):
        self.f = f

    def __iter__(self):
        return self

    def __next__(self):
        f = self.f
        if f is None:
            raise StopIteration
        b = f.read(65536)
        if not b:
            f.close()
            self.f = None
            raise StopIteration
        return b

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None


class Reader:
    """A command's stdin: read(n), readline(), iteration over lines, readlines()."""

    def __init__(self, src=b""):
        if isinstance(src, (bytes, bytearray)):
            self._buf = bytes(src)
            self._it = None
        else:
            self._buf = b""
            self._it = src if hasattr(src, "__next__") else iter(src)
        self._pos = 0

    def _fill(self):
        it = self._it
        if it is None:
            return False
        try:
            chunk = next(it)
        except StopIteration:
            self._it = None
            return False
        if self._pos:
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        else:
            self._buf += chunk
        return True

    def read(self, n=-1):
        if n is None or n < 0:
            parts = [self._buf[self._pos :]]
            self._buf = b""
            self._pos = 0
            it = self._it
            if it is not None:
                parts.extend(it)
                self._it = None
            return b"".join(parts)
        while len(self._buf) - self._pos < n and self._fill():
            pass
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def read1(self, n=-1):
        if self._pos >= len(self._buf):
            self._fill()
        if n is None or n < 0:
            n = len(self._buf) - self._pos
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def readline(self, limit=-1):
        start = self._pos
        while True:
            j = self._buf.find(b"\n", start)
            if j >= 0:
                out = self._buf[self._pos : j + 1]
                self._pos = j + 1
                return out
            start = len(self._buf)
            p0 = self._pos
            if not self._fill():
                out = self._buf[self._pos :]
                self._buf = b""
                self._pos = 0
                return out
            start -= p0 - self._pos  # the buffer was compacted

    def __iter__(self):
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def readlines(self):
        return list(self)

    def readable(self):
        return True

    def close(self):
        it = self._it
        self._it = None
        if it is not None and hasattr(it, "close"):
            it.close()


EMPTY = b""


class NullWriter:
    def write(self, b):
        return len(b)

    def flush(self):
        pass


class StreamWriter:
    """Writes to a binary stream (sys.stdout.buffer) or a text one."""

    def __init__(self, stream, text=False):
        self.stream = stream
        self.text = text

    def write(self, b):
        if self.text:
            self.stream.write(b2s(b))
        else:
            self.stream.write(b)
        return len(b)

    def flush(self):
        try:
            self.stream.flush()
        except Exception:
            pass


class FileWriter:
    def __init__(self, f):
        self.f = f

    def write(self, b):
        self.f.write(b)
        return len(b)

    def flush(self):
        self.f.flush()


class Channel:
    """The stdout stream of a generator (what it yields); writes to it (`2>&1`) wait in
    `pending` until the stream's owner emits them, in order, before its next chunk."""

    __slots__ = ("pending",)

    def __init__(self):
        self.pending = []

    def write(self, b):
        if b:
            self.pending.append(bytes(b))
        return len(b)

    def flush(self):
        pass

    def take(self):
        p = self.pending
        self.pending = []
        return b"".join(p)


class IO:
    __slots__ = ("fds", "chan")

    def __init__(self, fds, chan):
        self.fds = fds
        self.chan = chan


class OutputError(Exception):
    """A write of a command's stdout failed (disk full, ...): thrown into the generator that
    yielded the chunk, so that command fails (run_argv reports it) and the script goes on."""

    def __init__(self, err):
        Exception.__init__(self, _strerror(err) if isinstance(err, OSError) else str(err))
        self.err = err


def merge(gen, chan):
    """Yields what gen yields with the channel's pending writes in order; returns its value.
    An OutputError thrown in (a failed write downstream) is passed on to gen."""
    send = gen.send
    try:
        chunk = send(None)
        while True:
            try:
                if chan.pending:
                    yield chan.take()
                yield chunk
            except OutputError as e:
                chunk = gen.throw(e)
                continue
            chunk = send(None)
    except StopIteration as e:
        if chan.pending:
            yield chan.take()
        return e.value


def drain_to(gen, writer, report=None):
    """Runs gen writing what it yields to writer; returns its value. A failed write (OSError)
    is thrown into gen as OutputError: the command that yielded fails with a write error;
    one that reaches here is reported through report(msg) and gives status 1."""
    send = gen.send
    failed = False
    try:
        chunk = send(None)
        while True:
            try:
                writer.write(chunk)
            except OSError as e:
                failed = True
                chunk = gen.throw(OutputError(e))
                continue
            chunk = send(None)
    except StopIteration as e:
        status = e.value
    except OutputError as e:
        if report is not None:
            report("write error: %s" % e)
        status = 1
    if isinstance(writer, FileWriter):
        try:
            writer.flush()
        except OSError as e:
            # data still buffered when the command ended (echo x > f on a full disk)
            if not failed:
                if report is not None:
                    report("write error: %s" % _strerror(e))
                status = 1
    return status


def collect(gen, chan=None, limit=None, out=None):
    if out is None:
        out = []
    size = 0
    send = gen.send
    try:
        while True:
            chunk = send(None)
            if chan is not None and chan.pending:
                chunk = chan.take() + chunk
            out.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                gen.close()
                raise ShellError("command substitution: output too large (more than %d bytes)" % limit)
    except StopIteration as e:
        if chan is not None and chan.pending:
            out.append(chan.take())
        return e.value, b"".join(out)


# ---------------------------------------------------------------------------------------------
# AST


class Word:
    __slots__ = ("raw", "parts", "_braced", "_lit")

    def __init__(self, raw, parts):
        self.raw = raw
        self.parts = parts
        self._braced = None
        self._lit = None

    def __repr__(self):
        return "Word(%r)" % self.raw


class Redir:
    __slots__ = ("fd", "op", "target", "body", "delim", "quoted", "strip")

    def __init__(self, fd, op, target):
        self.fd = fd
        self.op = op
        self.target = target
        self.body = None
        self.delim = None
        self.quoted = False
        self.strip = False


class Node:
    __slots__ = ()
    kind = ""


class Simple(Node):
    __slots__ = ("assigns", "words", "redirs", "line")
    kind = "simple"

    def __init__(self, assigns, words, redirs, line):
        self.assigns = assigns
        self.words = words
        self.redirs = redirs
        self.line = line


class Pipeline(Node):
    __slots__ = ("cmds", "negate", "line")
    kind = "pipeline"

    def __init__(self, cmds, negate, line):
        self.cmds = cmds
        self.negate = negate
        self.line = line


class AndOr(Node):
    __slots__ = ("items", "ops")
    kind = "andor"

    def __init__(self, items, ops):
        self.items = items
        self.ops = ops


class ListNode(Node):
    __slots__ = ("items", "bg")
    kind = "list"

    def __init__(self, items, bg):
        self.items = items
        self.bg = bg


class Compound(Node):
    __slots__ = ("redirs", "line")

    def __init__(self, line):
        self.redirs = []
        self.line = line


class If(Compound):
    __slots__ = ("clauses", "orelse")
    kind = "if"


class For(Compound):
    __slots__ = ("var", "words", "body")
    kind = "for"


class ArithFor(Compound):
    __slots__ = ("init", "cond", "step", "body")
    kind = "arithfor"


class While(Compound):
    __slots__ = ("cond", "body", "until")
    kind = "while"


class Case(Compound):
    __slots__ = ("word", "items")
    kind = "case"


class Subshell(Compound):
    __slots__ = ("body",)
    kind = "subshell"


class Group(Compound):
    __slots__ = ("body",)
    kind = "group"


class FuncDef(Compound):
    __slots__ = ("name", "body")
    kind = "funcdef"


class ArithCmd(Compound):
    __slots__ = ("expr",)
    kind = "arith"


class CondCmd(Compound):
    __slots__ = ("expr",)
    kind = "cond"


# ---------------------------------------------------------------------------------------------
# lexer and parser

_OPS = ["&&", "||", ";;&", ";;", ";&", "|&", "<<<", "<<-", "<<", ">>", "<&", ">&", "<>", ">|",
        "&>>", "&>", "(", ")", ";", "&", "|", "<", ">"]
_OP_RE = re.compile("|".join(re.escape(o) for o in sorted(_OPS, key=len, reverse=True)))
_BLANK_RE = re.compile(r"(?:[ \t]+|\\\n)+")
_IONUM_RE = re.compile(r"[0-9]+(?=[<>])")
_COMMENT_RE = re.compile(r"#[^\n]*")
_LIT = {
    "word": re.compile(r"[^ \t\n;&|<>()\\'\"$`]+"),
    "dq": re.compile(r'[^"\\$`]+'),
    "hd": re.compile(r"[^\\$`]+"),
    "brace": re.compile(r"[^}\\'\"$`]+"),
    "dqbrace": re.compile(r'[^}\\"$`]+'),
    "pat": re.compile(r"[^/}\\'\"$`]+"),
    "dqpat": re.compile(r'[^/}\\"$`]+'),
    "arith": re.compile(r"[^\\$`\"']+"),
}
_STOPS = {
    "word": " \t\n;&|<>()",
    "dq": '"',
    "hd": "",
    "brace": "}",
    "dqbrace": "}",
    "pat": "/}",
    "dqpat": "/}",
    "arith": "",
}
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!\-]")
_BRACE_PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-]")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_BRACE_OPS = [":-", ":=", ":?", ":+", "-", "=", "?", "+", "##", "#", "%%", "%", "//", "/#", "/%",
              "/", "^^", "^", ",,", ",", "@", ":"]
_BRACE_OP_RE = re.compile("|".join(re.escape(o) for o in _BRACE_OPS))
_TILDE_RE = re.compile(r"~([A-Za-z0-9_.\-+]*)(?=/|$)")
RESERVED = frozenset(["if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while",
                      "until", "for", "in", "{", "}", "!", "function", "[[", "]]", "select",
                      "time", "coproc"])
_ANSI_ESC = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
             "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_RE = re.compile(r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})"
                      r"|U([0-9A-Fa-f]{1,8})|c(.)|(.))", re.S)


def ansi_c(text):
    def sub(m):
        if m.group(1):
            return _ANSI_ESC[m.group(1)]
        if m.group(2):
            return b2s(bytes([int(m.group(2), 8) & 0xFF]))
        if m.group(3):
            return b2s(bytes([int(m.group(3), 16)]))
        if m.group(4) or m.group(5):
            return chr(int(m.group(4) or m.group(5), 16))
        if m.group(6):
            return chr(ord(m.group(6)) & 0x1F)
        return "\\" + m.group(7)

    return _ANSI_RE.sub(sub, text)


class Lexer:
    def __init__(self, src, pos=0, line=1):
        self.src = src
        self.pos = pos
        self.line = line
        self._lpos = pos
        self.heredocs = []
        self.peeked = None

    def lineno(self, pos=None):
        if pos is None:
            pos = self.pos
        if pos >= self._lpos:
            self.line += self.src.count("\n", self._lpos, pos)
        else:
            self.line -= self.src.count("\n", pos, self._lpos)
        self._lpos = pos
        return self.line

    def err(self, msg, pos=None, eof=False):
        return ParseError(msg, self.lineno(self.pos if pos is None else pos), eof)

    # tokens: ("W", Word) ("O", op) ("N", None) ("E", None) ("I", fdnumber)
    def peek(self):
        if self.peeked is None:
            self.peeked = self._next()
        return self.peeked

    def next(self):
        t = self.peek()
        self.peeked = None
        return t

    def _next(self):
        src = self.src
        n = len(src)
        i = self.pos
        while True:
            m = _BLANK_RE.match(src, i)
            if m:
                i = m.end()
            if i < n and src[i] == "#":
                i = _COMMENT_RE.match(src, i).end()
                continue
            break
        self.tokpos = i
        if i >= n:
            self.pos = n
            if self.heredocs:
                self.read_heredocs()
            return ("E", None)
        c = src[i]
        if c == "\n":
            self.pos = i + 1
            if self.heredocs:
                self.read_heredocs()
            return ("N", None)
        if c in ";&|<>()":
            if (c == "<" or c == ">") and i + 1 < n and src[i + 1] == "(":
                p = Parser(src, i + 2, self.lineno(i))
                node = p.parse_list_until(")")
                if p.lex.next() != ("O", ")"):
                    raise self.err("unexpected EOF while looking for matching `)'", eof=True)
                j = p.lex.pos
                parts = [("p", node, c)]
                if j < n and src[j] not in " \t\n;&|<>()":
                    more, j = self.scan(j, "word")
                    parts.extend(more)
                self.pos = j
                return ("W", Word(src[i:j], parts))
            m = _OP_RE.match(src, i)
            self.pos = m.end()
            return ("O", m.group())
        m = _IONUM_RE.match(src, i)
        if m:
            self.pos = m.end()
            return ("I", int(m.group()))
        parts, j = self.scan(i, "word")
        self.pos = j
        return ("W", Word(src[i:j], parts))

    def read_heredocs(self):
        src = self.src
        i = self.pos
        for r in self.heredocs:
            lines = []
            n = len(src)
            delim = r.delim
            while True:
                if i >= n:
                    break
                j = src.find("\n", i)
                if j < 0:
                    j = n
                line = src[i:j]
                i = j + 1
                if r.strip:
                    line = line.lstrip("\t")
                if line == delim:
                    break
                lines.append(line + "\n")
            body = "".join(lines)
            if r.quoted:
                r.body = Word(body, [("q", body)])
            else:
                parts, _ = Lexer(body).scan(0, "hd")
                r.body = Word(body, parts)
        self.heredocs = []
        self.pos = min(i, len(src))

    def scan(self, i, mode):
        """Scans a word from i in mode; returns (parts, end)."""
        src = self.src
        n = len(src)
        lit = _LIT[mode]
        stops = _STOPS[mode]
        parts = []
        add = parts.append
        dq = mode in ("dq", "hd", "dqbrace", "dqpat")
        start = i
        while i < n:
            m = lit.match(src, i)
            if m:
                text = m.group()
                if mode == "word" and i == start and text[0] == "~":
                    t = _TILDE_RE.match(text)
                    if t:
                        add(("t", t.group(1)))
                        text = text[t.end():]
                        if not text:
                            i = m.end()
                            continue
                add(("q" if dq else "s", text))
                i = m.end()
                continue
            c = src[i]
            if c in stops:
                break
            if c == "\\":
                if i + 1 >= n:
                    add(("s" if not dq else "q", "\\"))
                    i += 1
                    continue
                d = src[i + 1]
                if d == "\n":
                    i += 2
                    continue
                if dq:
                    if d in '$`"\\' and (d != '"' or mode != "hd"):
                        add(("q", d))
                    elif d == "}" and mode in ("dqbrace", "dqpat"):
                        add(("q", d))
                    else:
                        add(("q", "\\" + d))
                else:
                    add(("q", d))
                i += 2
                continue
            if c == "'" and not dq:
                j = src.find("'", i + 1)
                if j < 0:
                    raise self.err("unexpected EOF while looking for matching `''", eof=True)
                add(("q", src[i + 1 : j]))
                i = j + 1
                continue
            if c == '"' and (not dq or mode in ("dqbrace", "dqpat")):
                sub, j = self.scan(i + 1, "dq")
                if j >= n or src[j] != '"':
                    raise self.err('unexpected EOF while looking for matching `"\'', eof=True)
                add(("dq", sub))
                i = j + 1
                continue
            if c == '"' and mode == "hd":
                add(("q", '"'))
                i += 1
                continue
            if c == "'" or c == '"':  # inside "${x:-'a'}": literal
                add(("q", c))
                i += 1
                continue
            if c == "`":
                j = i + 1
                buf = []
                while True:
                    if j >= n:
                        raise self.err("unexpected EOF while looking for matching ``'", eof=True)
                    d = src[j]
                    if d == "\\" and j + 1 < n and src[j + 1] in "$`\\":
                        buf.append(src[j + 1])
                        j += 2
                        continue
                    if d == "`":
                        break
                    buf.append(d)
                    j += 1
                inner = "".join(buf)
                node = Parser(inner, line=self.lineno(i)).parse_all()
                add(("c", node))
                i = j + 1
                continue
            if c == "$":
                i = self.scan_dollar(i, add, dq, mode)
                continue
            # a stop char of an enclosing mode that is not ours, e.g. "(" in word mode handled
            add(("q" if dq else "s", c))
            i += 1
        return parts, i

    def scan_dollar(self, i, add, dq, mode):
        src = self.src
        n = len(src)
        if i + 1 >= n:
            add(("q" if dq else "s", "$"))
            return i + 1
        d = src[i + 1]
        if d == "(":
            if i + 2 < n and src[i + 2] == "(":
                j = self.match_arith(i + 3)
                if j is not None:
                    inner = src[i + 3 : j]
                    parts, _ = Lexer(inner).scan(0, "arith")
                    add(("a", parts, inner))
                    return j + 2
            p = Parser(src, i + 2, self.lineno(i))
            node = p.parse_list_until(")")
            t = p.lex.next()
            if t != ("O", ")"):
                raise self.err("unexpected EOF while looking for matching `)'", eof=True)
            add(("c", node))
            return p.lex.pos
        if d == "{":
            return self.scan_brace(i + 2, add, dq)
        if d == "'" and not dq:
            j = i + 2
            while True:
                k = src.find("'", j)
                if k < 0:
                    raise self.err("unexpected EOF while looking for matching `''", eof=True)
                # an escaped quote \' does not end it
                bs = 0
                t = k - 1
                while t >= i + 2 and src[t] == "\\":
                    bs += 1
                    t -= 1
                if bs % 2 == 0:
                    break
                j = k + 1
            add(("q", ansi_c(src[i + 2 : k])))
            return k + 1
        if d == '"' and not dq:
            return i + 1  # $"..." is "..."
        m = _PARAM_RE.match(src, i + 1)
        if m:
            add(("v", m.group(), None, None, dq))
            return m.end()
        add(("q" if dq else "s", "$"))
        return i + 1

    def match_arith(self, i):
        src = self.src
        n = len(src)
        depth = 0
        while i < n:
            c = src[i]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    if i + 1 < n and src[i + 1] == ")":
                        return i
                    return None
                depth -= 1
            i += 1
        return None

    def scan_brace(self, i, add, dq):
        src = self.src
        n = len(src)
        op = None
        arg = None
        if src.startswith("#", i) and i + 1 < n and src[i + 1] != "}":
            m = _BRACE_PARAM_RE.match(src, i + 1)
            if m and m.end() < n and (src[m.end()] == "}" or src[m.end()] == "["):
                name, j = self._subscript(m.group(), m.end())
                if j < n and src[j] == "}":
                    add(("v", name, "len", None, dq))
                    return j + 1
        indirect = False
        if src.startswith("!", i) and i + 1 < n and src[i + 1] not in "}":
            m = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)([*@])\}").match(src, i + 1)
            if m:
                add(("v", "!" + m.group(1) + m.group(2), "names", None, dq))
                return m.end()
            indirect = True
            i += 1
        m = _BRACE_PARAM_RE.match(src, i)
        if not m:
            raise ShellError("${%s}: bad substitution" % src[i : src.find("}", i) if "}" in src[i:] else n], 1)
        name, j = self._subscript(m.group(), m.end())
        if indirect:
            name = "!" + name
        if j < n and src[j] == "}":
            add(("v", name, None, None, dq))
            return j + 1
        m = _BRACE_OP_RE.match(src, j)
        if not m:
            k = src.find("}", j)
            raise ShellError("${%s}: bad substitution" % src[i:k if k >= 0 else n], 1)
        op = m.group()
        j = m.end()
        bmode = "dqbrace" if dq else "brace"
        if op in ("/", "//", "/#", "/%"):
            pat, j = self.scan(j, "dqpat" if dq else "pat")
            rep = []
            if j < n and src[j] == "/":
                rep, j = self.scan(j + 1, bmode)
            arg = (pat, rep)
        elif op == ":":
            body, j = self.scan(j, bmode)
            raw = "".join(p[1] if p[0] in ("s", "q") else "\x00" for p in body)
            # offset and length: split the raw text at its first top-level ':'
            k = self.src.find("}", m.end())
            text = self.src[m.end():k] if k >= 0 else ""
            if ":" in text:
                off, ln = text.split(":", 1)
            else:
                off, ln = text, None
            arg = (off, ln)
            del raw
        elif op == "@":
            arg = src[j] if j < n else ""
            j += 1
        else:
            arg, j = self.scan(j, bmode)
        if j >= n or src[j] != "}":
            raise self.err("unexpected EOF while looking for matching `}'", eof=True)
        add(("v", name, op, arg, dq))
        return j + 1

    def _subscript(self, name, j):
        src = self.src
        if j < len(src) and src[j] == "[" and _NAME_RE.fullmatch(name):
            depth = 0
            k = j
            while k < len(src):
                if src[k] == "[":
                    depth += 1
                elif src[k] == "]":
                    depth -= 1
                    if depth == 0:
                        return name + src[j : k + 1], k + 1
                k += 1
        return name, j


_DECL = frozenset(["local", "declare", "typeset", "readonly", "export"])
_REDIR_OPS = frozenset(["<", ">", ">>", ">|", "<>", "<&", ">&", "&>", "&>>", "<<", "<<-", "<<<"])


class Parser:
    def __init__(self, src, pos=0, line=1):
        self.lex = Lexer(src, pos, line)
        self.src = src

    def syntax(self, tok):
        kind, val = tok
        if kind == "E":
            return self.lex.err("syntax error: unexpected end of file", eof=True)
        if kind == "N":
            text = "newline"
        elif kind == "W":
            text = val.raw
        elif kind == "I":
            text = str(val)
        else:
            text = val
        return self.lex.err("syntax error near unexpected token `%s'" % text, self.lex.tokpos)

    def parse_all(self):
        items = []
        while True:
            node = self.next_command()
            if node is None:
                break
            items.extend(node.items)
        return ListNode(items, [False] * len(items)) if items else ListNode([], [])

    def next_command(self):
        """The next complete command (up to a newline) or None at the end."""
        lex = self.lex
        while lex.peek()[0] == "N":
            lex.next()
        if lex.peek()[0] == "E":
            return None
        items = []
        bg = []
        while True:
            t = lex.peek()
            if t[0] in ("N", "E"):
                if t[0] == "N":
                    lex.next()
                break
            items.append(self.and_or())
            t = lex.peek()
            if t == ("O", ";") or t == ("O", "&"):
                lex.next()
                bg.append(t[1] == "&")
                continue
            bg.append(False)
            if t[0] in ("N", "E"):
                continue
            raise self.syntax(t)
        return ListNode(items, bg)

    def at_end(self, t, terms):
        kind, val = t
        if kind == "E":
            return True
        if kind == "O":
            return val in terms
        if kind == "W":
            return val.raw in terms and not any(p[0] != "s" for p in val.parts)
        return False

    def parse_list_until(self, *terms):
        """A compound list ending before one of terms (reserved words or operators)."""
        lex = self.lex
        items = []
        bg = []
        while True:
            while lex.peek()[0] == "N":
                lex.next()
            t = lex.peek()
            if self.at_end(t, terms):
                break
            items.append(self.and_or())
            t = lex.peek()
            if t == ("O", ";") or t == ("O", "&"):
                lex.next()
                bg.append(t[1] == "&")
            elif t[0] == "N":
                bg.append(False)
            elif self.at_end(t, terms):
                bg.append(False)
                break
            else:
                raise self.syntax(t)
        if not items:
            raise self.syntax(lex.peek())
        return ListNode(items, bg)

    def expect_word(self, word):
        t = self.lex.next()
        if t[0] == "W" and t[1].raw == word:
            return
        raise self.syntax(t)

    def and_or(self):
        lex = self.lex
        items = [self.pipeline()]
        ops = []
        while True:
            t = lex.peek()
            if t == ("O", "&&") or t == ("O", "||"):
                lex.next()
                while lex.peek()[0] == "N":
                    lex.next()
                ops.append(t[1])
                items.append(self.pipeline())
            else:
                break
        if not ops:
            return items[0]
        return AndOr(items, ops)

    def pipeline(self):
        lex = self.lex
        negate = False
        line = lex.lineno(lex.tokpos if lex.peeked else lex.pos)
        t = lex.peek()
        while t[0] == "W" and t[1].raw in ("!", "time") and t[1].parts == [("s", t[1].raw)]:
            lex.next()
            if t[1].raw == "!":
                negate = not negate
            t = lex.peek()
        cmds = [self.command()]
        while True:
            t = lex.peek()
            if t == ("O", "|") or t == ("O", "|&"):
                lex.next()
                if t[1] == "|&":
                    cmds[-1].redirs.append(Redir(2, ">&", Word("1", [("s", "1")])))
                while lex.peek()[0] == "N":
                    lex.next()
                cmds.append(self.command())
            else:
                break
        if len(cmds) == 1 and not negate:
            return cmds[0]
        return Pipeline(cmds, negate, line)

    def command(self):
        lex = self.lex
        t = lex.peek()
        line = lex.lineno(lex.tokpos)
        if t[0] == "W" and len(t[1].parts) == 1 and t[1].parts[0][0] == "s":
            w = t[1].raw
            node = None
            if w == "if":
                node = self.if_clause(line)
            elif w == "while" or w == "until":
                lex.next()
                node = While(line)
                node.until = w == "until"
                node.cond = self.parse_list_until("do")
                self.expect_word("do")
                node.body = self.parse_list_until("done")
                self.expect_word("done")
            elif w == "for":
                node = self.for_clause(line)
            elif w == "case":
                node = self.case_clause(line)
            elif w == "{":
                lex.next()
                node = Group(line)
                node.body = self.parse_list_until("}")
                self.expect_word("}")
            elif w == "[[":
                lex.next()
                node = CondCmd(line)
                node.expr = self.cond_expr()
            elif w == "function":
                lex.next()
                t = lex.next()
                if t[0] != "W":
                    raise self.syntax(t)
                name = t[1].raw
                if lex.peek() == ("O", "("):
                    lex.next()
                    t = lex.next()
                    if t != ("O", ")"):
                        raise self.syntax(t)
                return self.func_body(name, line)
            elif w == "coproc" or w == "select":
                raise ShellError("%s: not supported in the sandbox (no processes)" % w, 2)
            elif w in ("then", "else", "elif", "fi", "do", "done", "esac", "}", "in", "]]"):
                raise self.syntax(t)
            if node is not None:
                self.redirects(node.redirs)
                return node
        if t == ("O", "("):
            lex.next()
            if lex.src.startswith("(", lex.pos) and lex.pos == lex.tokpos + 1:
                j = lex.match_arith(lex.pos + 1)
                if j is not None:
                    node = ArithCmd(line)
                    inner = lex.src[lex.pos + 1 : j]
                    node.expr = (Lexer(inner).scan(0, "arith")[0], inner)
                    lex.pos = j + 2
                    self.redirects(node.redirs)
                    return node
            node = Subshell(line)
            node.body = self.parse_list_until(")")
            t = lex.next()
            if t != ("O", ")"):
                raise self.syntax(t)
            self.redirects(node.redirs)
            return node
        return self.simple(line)

    def redirects(self, redirs):
        lex = self.lex
        while True:
            t = lex.peek()
            if t[0] == "I":
                lex.next()
                op = lex.next()
                if op[0] != "O" or op[1] not in _REDIR_OPS:
                    raise self.syntax(op)
                self.redirect(t[1], op[1], redirs)
            elif t[0] == "O" and t[1] in _REDIR_OPS:
                lex.next()
                self.redirect(None, t[1], redirs)
            else:
                return

    def redirect(self, fd, op, redirs):
        lex = self.lex
        t = lex.next()
        if t[0] != "W":
            raise self.syntax(t)
        w = t[1]
        if fd is None:
            fd = 0 if op in ("<", "<&", "<>", "<<", "<<-", "<<<") else 1
        r = Redir(fd, op, w)
        if op in ("<<", "<<-"):
            raw = w.raw
            r.quoted = any(p[0] != "s" for p in w.parts)
            r.delim = "".join(p[1] if p[0] in ("s", "q") else "" for p in w.parts) if r.quoted else raw
            if r.quoted:
                r.delim = re.sub(r"""['"\\]""", "", raw) if "$" not in raw else r.delim
            r.strip = op == "<<-"
            lex.heredocs.append(r)
        redirs.append(r)

    def simple(self, line):
        lex = self.lex
        assigns = []
        words = []
        redirs = []
        while True:
            t = lex.peek()
            kind = t[0]
            if kind == "W":
                lex.next()
                w = t[1]
                if not words:
                    m = _ASSIGN_RE.match(w.raw)
                    if m and w.parts[0][0] == "s" and w.parts[0][1].startswith(m.group()):
                        value = w.raw[m.end():]
                        if not value and not m.group(2) and lex.peek() == ("O", "(") and lex.tokpos == lex.pos - 1 \
                                and lex.src[lex.tokpos - 1] == "=":
                            lex.next()
                            assigns.append((m.group(1), self.array_literal(), m.group(3) == "+", "()"))
                            continue
                        vparts, _ = Lexer(value).scan(0, "word") if value else ([], 0)
                        vparts = _assign_tilde(vparts)
                        assigns.append((m.group(1), Word(value, vparts), m.group(3) == "+", m.group(2)))
                        continue
                    if lex.peek() == ("O", "(") and _NAME_RE.fullmatch(w.raw or "-") is not None or (
                            lex.peek() == ("O", "(") and re.fullmatch(r"[^\s$`'\"\\/]+", w.raw)):
                        lex.next()
                        t2 = lex.next()
                        if t2 != ("O", ")"):
                            raise self.syntax(t2)
                        return self.func_body(w.raw, line)
                elif words[0].raw in _DECL and w.raw.endswith("=") and lex.peek() == ("O", "(") and \
                        lex.tokpos == lex.pos - 1 and _ASSIGN_RE.fullmatch(w.raw):
                    start = lex.tokpos
                    lex.next()
                    self.array_literal()
                    raw = w.raw + lex.src[start : lex.pos]
                    w = Word(raw, [("q", raw)])
                words.append(w)
            elif kind == "I" or (kind == "O" and t[1] in _REDIR_OPS):
                self.redirects(redirs)
            else:
                break
        if not assigns and not words and not redirs:
            raise self.syntax(lex.peek())
        return Simple(assigns, words, redirs, line)

    def array_literal(self):
        """NAME=( ... ): the words up to ')'."""
        lex = self.lex
        words = []
        while True:
            t = lex.next()
            if t[0] == "N":
                continue
            if t == ("O", ")"):
                return words
            if t[0] != "W":
                raise self.syntax(t)
            words.append(t[1])

    def func_body(self, name, line):
        lex = self.lex
        while lex.peek()[0] == "N":
            lex.next()
        body = self.command()
        if isinstance(body, Simple):
            raise self.syntax(("W", body.words[0]) if body.words else lex.peek())
        node = FuncDef(line)
        node.name = name
        node.body = body
        return node

    def if_clause(self, line):
        lex = self.lex
        lex.next()
        node = If(line)
        node.clauses = []
        node.orelse = None
        while True:
            cond = self.parse_list_until("then")
            self.expect_word("then")
            body = self.parse_list_until("elif", "else", "fi")
            node.clauses.append((cond, body))
            t = lex.next()
            w = t[1].raw if t[0] == "W" else None
            if w == "elif":
                continue
            if w == "else":
                node.orelse = self.parse_list_until("fi")
                self.expect_word("fi")
                return node
            if w == "fi":
                return node
            raise self.syntax(t)

    def for_clause(self, line):
        lex = self.lex
        lex.next()
        t = lex.peek()
        if t == ("O", "(") and lex.src.startswith("(", lex.pos):
            lex.next()
            j = lex.match_arith(lex.pos + 1)
            if j is None:
                raise self.syntax(t)
            inner = lex.src[lex.pos + 1 : j]
            lex.pos = j + 2
            exprs = inner.split(";")
            if len(exprs) != 3:
                raise ShellError("syntax error: arithmetic expression required", 1)
            node = ArithFor(line)
            node.init, node.cond, node.step = [(Lexer(e).scan(0, "arith")[0], e) for e in exprs]
            t = lex.peek()
            if t == ("O", ";"):
                lex.next()
            while lex.peek()[0] == "N":
                lex.next()
            node.body = self.do_group()
            return node
        t = lex.next()
        if t[0] != "W" or not _NAME_RE.fullmatch(t[1].raw):
            raise self.syntax(t)
        node = For(line)
        node.var = t[1].raw
        node.words = None
        while lex.peek()[0] == "N":
            lex.next()
        t = lex.peek()
        if t[0] == "W" and t[1].raw == "in":
            lex.next()
            words = []
            while True:
                t = lex.peek()
                if t[0] == "W":
                    lex.next()
                    words.append(t[1])
                else:
                    break
            node.words = words
            t = lex.next()
            if t != ("O", ";") and t[0] != "N":
                raise self.syntax(t)
        elif t == ("O", ";"):
            lex.next()
        while lex.peek()[0] == "N":
            lex.next()
        node.body = self.do_group()
        return node

    def do_group(self):
        lex = self.lex
        t = lex.peek()
        if t[0] == "W" and t[1].raw == "{":
            lex.next()
            body = self.parse_list_until("}")
            self.expect_word("}")
            return body
        self.expect_word("do")
        body = self.parse_list_until("done")
        self.expect_word("done")
        return body

    def case_clause(self, line):
        lex = self.lex
        lex.next()
        t = lex.next()
        if t[0] != "W":
            raise self.syntax(t)
        node = Case(line)
        node.word = t[1]
        node.items = []
        while lex.peek()[0] == "N":
            lex.next()
        self.expect_word("in")
        while True:
            while lex.peek()[0] == "N":
                lex.next()
            t = lex.next()
            if t[0] == "W" and t[1].raw == "esac":
                break
            if t == ("O", "("):
                t = lex.next()
            pats = []
            while True:
                if t[0] != "W":
                    raise self.syntax(t)
                pats.append(t[1])
                t = lex.next()
                if t == ("O", "|"):
                    t = lex.next()
                    continue
                if t == ("O", ")"):
                    break
                raise self.syntax(t)
            while lex.peek()[0] == "N":
                lex.next()
            t = lex.peek()
            if t[0] == "O" and t[1] in (";;", ";&", ";;&"):
                body = None
            elif t[0] == "W" and t[1].raw == "esac":
                body = None
            else:
                body = self.parse_list_until(";;", ";&", ";;&", "esac")
            t = lex.peek()
            term = ";;"
            if t[0] == "O" and t[1] in (";;", ";&", ";;&"):
                lex.next()
                term = t[1]
            elif not (t[0] == "W" and t[1].raw == "esac"):
                raise self.syntax(t)
            node.items.append((pats, body, term))
        return node

    # [[ ... ]]: a tree of ("and", a, b) ("or", a, b) ("not", a) ("un", op, w) ("bin", op, l, r) ("word", w)
    def cond_expr(self):
        lex = self.lex

        def nxt():
            t = lex.next()
            if t[0] == "N":
                return nxt()
            return t

        def peek():
            while lex.peek()[0] == "N":
                lex.next()
            return lex.peek()

        def primary():
            t = nxt()
            if t[0] == "W" and t[1].raw == "!":
                return ("not", primary())
            if t == ("O", "("):
                e = orx()
                t2 = nxt()
                if t2 != ("O", ")"):
                    raise self.syntax(t2)
                return e
            if t[0] == "I":
                t = ("W", Word(str(t[1]), [("s", str(t[1]))]))
            if t[0] != "W":
                raise self.syntax(t)
            w = t[1]
            if w.raw.startswith("-") and len(w.raw) == 2 and w.raw[1] in _UNARY_TESTS:
                t2 = peek()
                if t2[0] == "W" and t2[1].raw != "]]":
                    lex.next()
                    return ("un", w.raw, t2[1])
            t2 = peek()
            if t2[0] == "O" and t2[1] in ("<", ">"):
                lex.next()
                r = nxt()
                return ("bin", t2[1], w, r[1])
            if t2[0] == "W" and t2[1].raw in ("==", "=", "!=", "=~", "-eq", "-ne", "-lt", "-le", "-gt",
                                               "-ge", "-nt", "-ot", "-ef"):
                lex.next()
                op = t2[1].raw
                if op == "=~":
                    r = self.regex_word()
                else:
                    r = nxt()
                    if r[0] != "W":
                        raise self.syntax(r)
                    r = r[1]
                return ("bin", op, w, r)
            return ("word", w)

        def andx():
            e = primary()
            while peek() == ("O", "&&"):
                lex.next()
                e = ("and", e, primary())
            return e

        def orx():
            e = andx()
            while peek() == ("O", "||"):
                lex.next()
                e = ("or", e, andx())
            return e

        e = orx()
        t = nxt()
        if not (t[0] == "W" and t[1].raw == "]]"):
            raise self.syntax(t)
        return e

    def regex_word(self):
        """The right side of =~: read raw up to blanks outside parens/quotes."""
        lex = self.lex
        lex.peeked = None
        src = lex.src
        i = _BLANK_RE.match(src, lex.pos)
        i = i.end() if i else lex.pos
        start = i
        depth = 0
        parts = []
        buf = []
        n = len(src)
        while i < n:
            c = src[i]
            if c in " \t\n" and depth == 0:
                break
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            if c in "'\"$\\":
                if buf:
                    parts.append(("s", "".join(buf)))
                    buf = []
                sub, j = lex.scan(i, "word") if c != "$" else (None, None)
                if c == "$":
                    j = lex.scan_dollar(i, parts.append, False, "word")
                else:
                    # one quoted unit
                    one, j = _scan_one_quoted(lex, i)
                    parts.extend(one)
                i = j
                continue
            buf.append(c)
            i += 1
        if buf:
            parts.append(("s", "".join(buf)))
        lex.pos = i
        return Word(src[start:i], parts)


def _scan_one_quoted(lex, i):
    src = lex.src
    c = src[i]
    if c == "\\":
        return [("q", src[i + 1 : i + 2])], i + 2
    if c == "'":
        j = src.find("'", i + 1)
        return [("q", src[i + 1 : j])], j + 1
    sub, j = lex.scan(i + 1, "dq")
    return [("dq", sub)], j + 1


def _assign_tilde(parts):
    if parts and parts[0][0] == "s" and parts[0][1].startswith("~"):
        t = _TILDE_RE.match(parts[0][1].split(":", 1)[0])
        if t:
            rest = parts[0][1][t.end():]
            return [("t", t.group(1))] + ([("s", rest)] if rest else []) + parts[1:]
    return parts


_UNARY_TESTS = frozenset("abcdefghknprstuwxzGLNOSov")


# ---------------------------------------------------------------------------------------------
# patterns and globbing

_pat_cache = {}
_PAT_SPLIT = re.compile(r"(\\.|\*+|\?|\[)", re.S)
_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
            "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
            "xdigit": "0-9A-Fa-f", "cntrl": "\\x00-\\x1f\\x7f", "print": "\\x20-\\x7e", "graph": "\\x21-\\x7e",
            "word": "a-zA-Z0-9_"}
GLOB_MAGIC = re.compile(r"[*?[]")


def _bracket(pat, i):
    """Translates a bracket expression starting after '['; returns (regex, end) or None."""
    n = len(pat)
    j = i
    neg = False
    if j < n and pat[j] in "!^":
        neg = True
        j += 1
    out = []
    first = True
    while j < n:
        c = pat[j]
        if c == "]" and not first:
            body = "".join(out)
            return ("[^" if neg else "[") + body + "]", j + 1
        first = False
        if c == "[" and j + 1 < n and pat[j + 1] == ":":
            k = pat.find(":]", j + 2)
            if k >= 0 and pat[j + 2 : k] in _CLASSES:
                out.append(_CLASSES[pat[j + 2 : k]])
                j = k + 2
                continue
        if c == "\\" and j + 1 < n:
            out.append(re.escape(pat[j + 1]))
            j += 2
            continue
        if c == "-" and out and j + 1 < n and pat[j + 1] != "]":
            out.append("-")
            j += 1
            continue
        out.append(re.escape(c) if c not in "-" else "\\-")
        j += 1
    return None


def pattern_regex(pat, anchored=True):
    """A shell pattern (quoted characters escaped with backslashes) as a compiled regex."""
    key = (pat, anchored)
    r = _pat_cache.get(key)
    if r is not None:
        return r
    out = []
    i = 0
    n = len(pat)
    while i < n:
        c = pat[i]
        if c == "\\":
            if i + 1 < n:
                out.append(re.escape(pat[i + 1]))
                i += 2
            else:
                out.append("\\\\")
                i += 1
        elif c == "*":
            while i < n and pat[i] == "*":
                i += 1
            out.append(".*")
        elif c == "?":
            out.append(".")
            i += 1
        elif c == "[":
            b = _bracket(pat, i + 1)
            if b is None:
                out.append("\\[")
                i += 1
            else:
                out.append(b[0])
                i = b[1]
        else:
            j = i
            while j < n and pat[j] not in "\\*?[":
                j += 1
            out.append(re.escape(pat[i:j]))
            i = j
    rx = "".join(out)
    r = re.compile(rx if not anchored else "(?:" + rx + r")\Z", re.S)
    if len(_pat_cache) > 2000:
        _pat_cache.clear()
    _pat_cache[key] = r
    return r


def pattern_match(pat, s):
    return pattern_regex(pat).match(s) is not None


def _unescape(pat):
    return re.sub(r"\\(.)", r"\1", pat, flags=re.S) if "\\" in pat else pat


def has_magic(pat):
    i = 0
    n = len(pat)
    while i < n:
        c = pat[i]
        if c == "\\":
            i += 2
            continue
        if c in "*?":
            return True
        if c == "[" and _bracket(pat, i + 1) is not None:
            return True
        i += 1
    return False


class GlobTooMany(Exception):
    pass


def glob(pat):
    """Expands an escaped pattern over the file system: sorted matches (C order) or []."""
    comps = pat.split("/")
    if pat.startswith("/"):
        paths = ["/"]
        comps = comps[1:]
    else:
        paths = [""]
    total = 0
    for k, comp in enumerate(comps):
        last = k == len(comps) - 1
        if comp == "":
            if last:
                paths = [p for p in paths if os.path.isdir(p or ".")]
                paths = [p if p.endswith("/") or not p else p for p in paths]
                if pat.endswith("/"):
                    paths = [p + "" for p in paths]
            continue
        if not has_magic(comp):
            lit = _unescape(comp)
            new = []
            for p in paths:
                q = (p + "/" + lit) if p and not p.endswith("/") else p + lit
                if last:
                    if os.path.lexists(q):
                        new.append(q)
                else:
                    new.append(q)
            paths = new
            continue
        rx = pattern_regex(comp)
        dot = comp.startswith(".") or comp.startswith("\\.")
        new = []
        for p in paths:
            try:
                names = os.listdir(p or ".")
            except OSError:
                continue
            for name in names:
                if name[0] == "." and not dot:
                    continue
                if rx.match(name):
                    q = (p + "/" + name) if p and not p.endswith("/") else p + name
                    if not last and not os.path.isdir(q):
                        continue
                    new.append(q)
                    total += 1
                    if total > GLOB_MAX:
                        raise GlobTooMany()
        paths = new
        if not paths:
            return []
    if pat.endswith("/"):
        paths = [p + "/" if not p.endswith("/") else p for p in paths if os.path.isdir(p)]
    return sorted(paths, key=s2b)


# ---------------------------------------------------------------------------------------------
# brace expansion

_SEQ_RE = re.compile(r"(-?[0-9]+)\.\.(-?[0-9]+)(?:\.\.(-?[0-9]+))?\Z|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?[0-9]+))?\Z")


def brace_expand(parts, strings=False):
    """Brace expansion over a word's parts: a list of part lists. With strings=True, a word
    made only of plain text gives a list of str instead (a million words stay compact)."""
    # flatten to items: structural chars "{", ",", "}" as ("B", c), other text as parts
    items = []
    for p in parts:
        if p[0] == "s" and ("{" in p[1] or "," in p[1] or "}" in p[1]):
            for piece in re.split(r"([{},])", p[1]):
                if piece in ("{", ",", "}"):
                    items.append(("B", piece))
                elif piece:
                    items.append(("s", piece))
        else:
            items.append(p)
    if all(it[0] in ("s", "B") for it in items):
        words = _brace_str([it[1] for it in items], 0)
        return words if strings else [[("s", w)] for w in words]
    out = []
    _brace_items(items, out, 0)
    return [_join_s(x) for x in out]


def _brace_str(items, depth):
    """Brace expansion of plain text split into pieces ("{", ",", "}" and text): a list of
    str, the count checked against BRACE_MAX before each product is built."""
    if depth > BRACE_DEPTH:
        raise CmdError("brace expansion: too many brace groups in one word (more than %d)" % BRACE_DEPTH, 1)
    n = len(items)
    for i in range(n):
        if items[i] != "{":
            continue
        level = 0
        commas = []
        for j in range(i + 1, n):
            it = items[j]
            if it == "{":
                level += 1
            elif it == "}":
                if level == 0:
                    break
                level -= 1
            elif it == "," and level == 0:
                commas.append(j)
        else:
            continue
        pre = "".join(items[:i])
        if commas:
            heads = []
            start = i + 1
            for c in commas + [j]:
                heads.extend(_brace_str(items[start:c], depth + 1))
                if len(heads) > BRACE_MAX:
                    _brace_too_many()
                start = c + 1
        else:
            inner = items[i + 1 : j]
            m = _SEQ_RE.match(inner[0]) if len(inner) == 1 else None
            if m is None:
                # not an expansion: keep this brace literally and look further
                pre = "".join(items[: i + 1])
                return [pre + r for r in _brace_str(items[i + 1 :], depth + 1)]
            heads = _brace_seq(m)
        tails = _brace_str(items[j + 1 :], depth + 1)
        if len(heads) * len(tails) > BRACE_MAX:
            _brace_too_many()
        if len(tails) == 1:
            t = tails[0]
            return [pre + h + t for h in heads]
        return [pre + h + t for h in heads for t in tails]
    return ["".join(items)]


def _join_s(items):
    res = []
    for it in items:
        if it[0] == "B":
            it = ("s", it[1])
        if it[0] == "s" and res and res[-1][0] == "s":
            res[-1] = ("s", res[-1][1] + it[1])
        else:
            res.append(it)
    return res


def _brace_too_many():
    raise CmdError("brace expansion: too many words (more than %d)" % BRACE_MAX, 1)


def _brace_items(items, out, depth):
    if len(out) > BRACE_MAX:
        _brace_too_many()
    if depth > BRACE_DEPTH:
        raise CmdError("brace expansion: too many brace groups in one word (more than %d)" % BRACE_DEPTH, 1)
    n = len(items)
    for i in range(n):
        if items[i] != ("B", "{"):
            continue
        # find the matching close and top-level commas
        level = 0
        commas = []
        for j in range(i + 1, n):
            it = items[j]
            if it == ("B", "{"):
                level += 1
            elif it == ("B", "}"):
                if level == 0:
                    break
                level -= 1
            elif it == ("B", ",") and level == 0:
                commas.append(j)
        else:
            continue
        pre = items[:i]
        post = items[j + 1 :]
        if commas:
            alts = []
            start = i + 1
            for c in commas + [j]:
                alts.append(items[start:c])
                start = c + 1
            for alt in alts:
                _brace_items(pre + alt + post, out, depth + 1)
            return
        inner = items[i + 1 : j]
        if len(inner) == 1 and inner[0][0] == "s":
            m = _SEQ_RE.match(inner[0][1])
            if m:
                for v in _brace_seq(m):
                    _brace_items(pre + [("s", v)] + post, out, depth + 1)
                return
        # not an expansion: keep this brace literally and look further
        rest = []
        _brace_items(items[i + 1 :], rest, depth + 1)
        if len(out) + len(rest) > BRACE_MAX:
            _brace_too_many()
        for r in rest:
            out.append(items[: i + 1] + r)
        return
    out.append(items)


def _brace_seq(m):
    if m.group(1) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        width = 0
        for t in (m.group(1), m.group(2)):
            if len(t.lstrip("-")) > 1 and t.lstrip("-").startswith("0"):
                width = max(len(m.group(1)), len(m.group(2)))
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        if len(rng) > BRACE_MAX:
            _brace_too_many()
        if width:
            return [("-" if v < 0 else "") + str(abs(v)).zfill(width - (1 if v < 0 else 0)) for v in rng]
        return [str(v) for v in rng]
    a, b = ord(m.group(4)), ord(m.group(5))
    step = abs(int(m.group(6) or 1)) or 1
    rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    return [chr(v) for v in rng]


# ---------------------------------------------------------------------------------------------
# arithmetic

_ARITH_TOK = re.compile(
    r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+#[0-9a-zA-Z@_]+|[0-9]+)|([A-Za-z_][A-Za-z0-9_]*)"
    r"|(\*\*=|<<=|>>=|&&|\|\||\*\*|<<|>>|<=|>=|==|!=|\+\+|--|[-+*/%&^|]=|[-+*/%<>=!~&^|?:,()\[\]]))")
_ASSIGN_OPS = frozenset(["=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|=", "**="])
_BINARY = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
    ("+", "-"), ("*", "/", "%"),
]


def _wrap(v):
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v & (1 << 63) else v


class ArithError(Exception):
    pass


class Arith:
    """Evaluates one expression over tokens; ev False skips side effects (short circuits)."""

    def __init__(self, shell, text):
        self.shell = shell
        self.text = text
        toks = []
        pos = 0
        n = len(text)
        while True:
            m = _ARITH_TOK.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip():
                    raise ArithError("syntax error: invalid arithmetic operator (error token is \"%s\")" % text[pos:].strip())
                break
            pos = m.end()
            if m.group(1):
                toks.append(("n", m.group(1)))
            elif m.group(2):
                toks.append(("v", m.group(2)))
            else:
                toks.append(("o", m.group(3)))
            if pos >= n:
                break
        self.toks = toks
        self.i = 0

    def run(self):
        if not self.toks:
            return 0
        v = self.comma(True)
        if self.i < len(self.toks):
            raise ArithError("syntax error in expression (error token is \"%s\")" % self.rest())
        return v

    def rest(self):
        return " ".join(t[1] for t in self.toks[self.i :])

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("e", "")

    def comma(self, ev):
        v = self.assign(ev)
        while self.peek() == ("o", ","):
            self.i += 1
            v = self.assign(ev)
        return v

    def assign(self, ev):
        t = self.peek()
        if t[0] == "v" and self.i + 1 < len(self.toks):
            nt = self.toks[self.i + 1]
            sub = None
            j = self.i + 1
            if nt == ("o", "["):
                # name[expr] op
                depth = 0
                k = j
                while k < len(self.toks):
                    if self.toks[k] == ("o", "["):
                        depth += 1
                    elif self.toks[k] == ("o", "]"):
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                if k + 1 < len(self.toks) and self.toks[k + 1][0] == "o" and self.toks[k + 1][1] in _ASSIGN_OPS:
                    save = self.i
                    self.i = j + 1
                    sub = self.comma(ev)
                    self.i = k + 1
                    nt = self.toks[k + 1]
                    j = k + 1
                    del save
            if nt[0] == "o" and nt[1] in _ASSIGN_OPS:
                self.i = j + 1
                rhs = self.assign(ev)
                if not ev:
                    return 0
                name = t[1]
                op = nt[1]
                if op != "=":
                    cur = self.var(name, sub)
                    rhs = self.binop(op[:-1], cur, rhs)
                rhs = _wrap(rhs)
                self.shell.assign_arith(name, sub, rhs)
                return rhs
        return self.ternary(ev)

    def ternary(self, ev):
        c = self.binary(0, ev)
        if self.peek() == ("o", "?"):
            self.i += 1
            a = self.assign(ev and c != 0)
            if self.peek() != ("o", ":"):
                raise ArithError("syntax error in expression (error token is \"%s\")" % self.rest())
            self.i += 1
            b = self.assign(ev and c == 0)
            return a if c else b
        return c

    def binary(self, level, ev):
        if level >= len(_BINARY):
            return self.power(ev)
        ops = _BINARY[level]
        left = self.binary(level + 1, ev)
        while True:
            t = self.peek()
            if t[0] != "o" or t[1] not in ops:
                return left
            self.i += 1
            op = t[1]
            if op == "&&":
                right = self.binary(level + 1, ev and left != 0)
                left = 1 if (left and right) else 0
            elif op == "||":
                right = self.binary(level + 1, ev and left == 0)
                left = 1 if (left or right) else 0
            else:
                right = self.binary(level + 1, ev)
                left = self.binop(op, left, right) if ev else 0

    def binop(self, op, a, b):
        if op == "+":
            return _wrap(a + b)
        if op == "-":
            return _wrap(a - b)
        if op == "*":
            return _wrap(a * b)
        if op in ("/", "%"):
            if b == 0:
                raise ArithError("division by 0 (error token is \"%s\")" % self.rest_after())
            q = abs(a) // abs(b)
            if (a < 0) != (b < 0):
                q = -q
            return _wrap(q) if op == "/" else _wrap(a - b * q)
        if op == "**":
            if b < 0:
                raise ArithError("exponent less than 0 (error token is \"%s\")" % self.rest_after())
            return _wrap(pow(a, b, 1 << 64))
        if op == "<<":
            return _wrap(a << (b & 63))
        if op == ">>":
            return a >> (b & 63)
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "==":
            return int(a == b)
        if op == "!=":
            return int(a != b)
        if op == "<":
            return int(a < b)
        if op == ">":
            return int(a > b)
        if op == "<=":
            return int(a <= b)
        if op == ">=":
            return int(a >= b)
        raise ArithError("syntax error: invalid arithmetic operator (error token is \"%s\")" % op)

    def rest_after(self):
        return " ".join(t[1] for t in self.toks[self.i - 1 :]) if self.i else ""

    def power(self, ev):
        base = self.unary(ev)
        if self.peek() == ("o", "**"):
            self.i += 1
            exp = self.power(ev)
            return self.binop("**", base, exp) if ev else 0
        return base

    def unary(self, ev):
        t = self.peek()
        if t[0] == "o":
            op = t[1]
            if op in ("-", "+", "!", "~"):
                self.i += 1
                v = self.unary(ev)
                if op == "-":
                    return _wrap(-v)
                if op == "+":
                    return v
                if op == "!":
                    return int(v == 0)
                return ~v
            if op in ("++", "--"):
                self.i += 1
                t2 = self.peek()
                if t2[0] != "v":
                    raise ArithError("syntax error: operand expected (error token is \"%s\")" % self.rest())
                self.i += 1
                sub = self.subscript(ev)
                if not ev:
                    return 0
                v = _wrap(self.var(t2[1], sub) + (1 if op == "++" else -1))
                self.shell.assign_arith(t2[1], sub, v)
                return v
        return self.postfix(ev)

    def subscript(self, ev):
        if self.peek() == ("o", "["):
            self.i += 1
            v = self.comma(ev)
            if self.peek() != ("o", "]"):
                raise ArithError("syntax error: `]' expected")
            self.i += 1
            return v
        return None

    def postfix(self, ev):
        t = self.peek()
        if t[0] == "v":
            self.i += 1
            sub = self.subscript(ev)
            nt = self.peek()
            if nt == ("o", "++") or nt == ("o", "--"):
                self.i += 1
                if not ev:
                    return 0
                v = self.var(t[1], sub)
                self.shell.assign_arith(t[1], sub, _wrap(v + (1 if nt[1] == "++" else -1)))
                return v
            return self.var(t[1], sub) if ev else 0
        if t[0] == "n":
            self.i += 1
            return _wrap(self.number(t[1]))
        if t == ("o", "("):
            self.i += 1
            v = self.comma(ev)
            if self.peek() != ("o", ")"):
                raise ArithError("syntax error: `)' expected (error token is \"%s\")" % self.rest())
            self.i += 1
            return v
        if t[0] == "e":
            raise ArithError("syntax error: operand expected (error token is \"%s\")" % self.rest_after())
        raise ArithError("syntax error: operand expected (error token is \"%s\")" % self.rest())

    def number(self, s):
        try:
            if "#" in s:
                base, digits = s.split("#", 1)
                base = int(base)
                if not 2 <= base <= 64:
                    raise ArithError("invalid arithmetic base (error token is \"%s\")" % s)
                v = 0
                for ch in digits:
                    if ch.isdigit():
                        d = ord(ch) - 48
                    elif "a" <= ch <= "z":
                        d = ord(ch) - 87
                    elif "A" <= ch <= "Z":
                        d = ord(ch) - 29 if base > 36 else ord(ch) - 55
                    elif ch == "@":
                        d = 62
                    else:
                        d = 63
                    if d >= base:
                        raise ArithError("value too great for base (error token is \"%s\")" % s)
                    v = v * base + d
                return v
            if s[:2] in ("0x", "0X"):
                return int(s, 16)
            if len(s) > 1 and s[0] == "0":
                return int(s, 8)
            return int(s)
        except ValueError:
            raise ArithError("value too great for base (error token is \"%s\")" % s)

    def var(self, name, sub):
        sh = self.shell
        v = sh.get_scalar(name, sub)
        if v is None or v == "":
            if v is None and sh.opts.get("u"):
                raise ShellError("%s: unbound variable" % name, 127)
            return 0
        v = v.strip()
        try:
            return _wrap(int(v)) if v.isdigit() else self.number(v) if _NUM_RE.fullmatch(v) else sh.arith(v)
        except ArithError:
            raise


_NUM_RE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+#[0-9a-zA-Z@_]+|[0-9]+)")


# ---------------------------------------------------------------------------------------------
# the command context handed to commands


class Ctx:
    __slots__ = ("shell", "io", "argv", "stdin", "stderr", "env", "name")

    def __init__(self, shell, io, argv):
        self.shell = shell
        self.io = io
        self.argv = argv
        self.name = argv[0] if argv else "bash"
        self.stdin = io.fds.get(0) or Reader(b"")
        self.stderr = io.fds.get(2) or NullWriter()
        self.env = os.environ

    @property
    def cwd(self):
        return os.getcwd()

    def error(self, msg):
        self.stderr.write(s2b("%s: %s\n" % (self.name, msg)))

    def interrupted(self):
        return False

    def run(self, argv, stdin=b""):
        """Runs a command (function, builtin or registered) to completion: (status, stdout)."""
        sh = self.shell
        chan = Channel()
        reader = stdin if isinstance(stdin, Reader) else Reader(stdin)
        io = IO({0: reader, 1: chan, 2: self.stderr}, chan)
        try:
            status, out = collect(sh.run_argv(list(argv), io), chan, CMDSUB_MAX)
        except ShellExit as e:
            return e.status, b""
        return status or 0, out


_DYNAMIC = frozenset(["RANDOM", "SECONDS", "LINENO", "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID", "BASH_VERSION",
                      "BASH", "HOSTNAME", "UID", "EUID", "SHLVL", "OSTYPE", "HOSTTYPE", "MACHTYPE", "PPID"])
_STATIC_VARS = {"BASH_VERSION": "5.2.15(1)-release", "BASH": "/bin/bash", "HOSTNAME": "sandbox", "UID": "0",
                "EUID": "0", "SHLVL": "1", "OSTYPE": "linux-gnu", "HOSTTYPE": "x86_64",
                "MACHTYPE": "x86_64-pc-linux-gnu", "PPID": "1"}
_BREAK = None  # a field break in expansion segments ("$@")
_GeneratorType = type((lambda: (yield))())
_SPECIAL_BUILTINS = frozenset([":", ".", "break", "continue", "eval", "exec", "exit", "export", "readonly",
                               "return", "set", "shift", "source", "trap", "unset", "times"])


def _status_of(v):
    return 0 if v is None else v


class Shell:
    def __init__(self):
        self.vars = {}
        self.locals = []
        self.localcount = {}
        self.exported = set()
        self.functions = {}
        self.pos = []
        self.arg0 = "bash"
        self.opts = {}
        self.last_status = 0
        self.lineno = 1
        self.cond_depth = 0
        self.loop_depth = 0
        self.funcnest = 0
        self.env_changes = 0
        self.registry = None
        self.readonly = set()
        self.cmdsub_status = None
        self.traps = {}
        self.env_log = []
        self.temp_files = []
        self.list_depth = 0
        self.exec_files = []
        self.start_time = __import__("time").time()
        self.import_env()
        v = self.vars
        v.setdefault("IFS", " \t\n")
        v.setdefault("PS4", "+ ")
        v.setdefault("OPTIND", "1")
        if "PWD" not in v or not _same_dir(v.get("PWD"), os.getcwd()):
            self.set_var("PWD", os.getcwd())

    # --- variables
    def import_env(self):
        env = os.environ
        vars_ = self.vars
        for k in list(self.exported):
            if k not in env:
                self.exported.discard(k)
                vars_.pop(k, None)
        for k, val in env.items():
            if vars_.get(k) != val:
                vars_[k] = val
            self.exported.add(k)

    def get_var(self, name):
        if name in self.localcount:
            for sc in reversed(self.locals):
                if name in sc:
                    return sc[name]
        return self.vars.get(name)

    def declare_local(self, name, value):
        sc = self.locals[-1]
        if name not in sc:
            self.localcount[name] = self.localcount.get(name, 0) + 1
        sc[name] = value

    def pop_scope(self):
        sc = self.locals.pop()
        lc = self.localcount
        for name in sc:
            n = lc.get(name, 0) - 1
            if n > 0:
                lc[name] = n
            else:
                lc.pop(name, None)

    def count_locals(self):
        lc = {}
        for sc in self.locals:
            for name in sc:
                lc[name] = lc.get(name, 0) + 1
        self.localcount = lc

    def set_var(self, name, value, local=False):
        if name in self.readonly:
            raise ShellError("%s: readonly variable" % name, 1)
        if local and self.locals:
            self.declare_local(name, value)
            return
        if name in self.localcount:
            for sc in reversed(self.locals):
                if name in sc:
                    sc[name] = value
                    return
        self.vars[name] = value
        if name in self.exported:
            self._putenv(name, value)

    def _putenv(self, name, value):
        if isinstance(value, list):
            value = value[0] if value else ""
        elif isinstance(value, dict):
            value = value.get("0", "")
        if value is None:
            return
        old = os.environ.get(name)
        if old != value:
            self.env_log.append((name, old))
            os.environ[name] = value
            self.env_changes += 1

    def unset_var(self, name):
        if name in self.readonly:
            raise ShellError("%s: cannot unset: readonly variable" % name, 1)
        if name in self.localcount:
            for sc in reversed(self.locals):
                if name in sc:
                    sc[name] = None
                    return
        self.vars.pop(name, None)
        if name in self.exported:
            self.exported.discard(name)
            self._delenv(name)

    def _delenv(self, name):
        old = os.environ.get(name)
        if old is not None:
            self.env_log.append((name, old))
            del os.environ[name]
            self.env_changes += 1

    def export(self, name, value=None):
        if value is not None:
            self.set_var(name, value)
        self.exported.add(name)
        v = self.get_var(name)
        if v is not None:
            self._putenv(name, v)

    def get_scalar(self, name, sub=None):
        """The value of name (or name[sub]) as a string, None when unset."""
        v = self.get_var(name)
        if sub is None:
            if isinstance(v, list):
                return v[0] if v else None
            if isinstance(v, dict):
                return v.get("0")
            return v
        if isinstance(v, dict):
            return v.get(str(sub))
        if v is None:
            return None
        if not isinstance(v, list):
            return v if sub == 0 else None
        if isinstance(sub, str):
            sub = self.arith(sub)
        if sub < 0:
            sub += len(v)
        if 0 <= sub < len(v):
            return v[sub]
        return None

    def assign_arith(self, name, sub, value):
        if sub is None:
            self.set_var(name, str(value))
        else:
            self.set_index(name, sub, str(value))

    def set_index(self, name, sub, value):
        v = self.get_var(name)
        if isinstance(v, dict):
            v = dict(v)
            v[str(sub)] = value
            self.set_var(name, v)
            return
        if isinstance(sub, str):
            sub = self.arith(sub)
        if v is None:
            v = []
        elif not isinstance(v, list):
            v = [v]
        else:
            v = list(v)
        if sub < 0:
            sub += len(v)
            if sub < 0:
                raise ShellError("%s[%d]: bad array subscript" % (name, sub - len(v)), 1)
        while len(v) <= sub:
            v.append(None)
        v[sub] = value
        self.set_var(name, v)

    def arith(self, text):
        text = text.strip()
        if text.isdigit() and (text[0] != "0" or len(text) == 1):
            return int(text)
        try:
            return Arith(self, text).run()
        except ArithError as e:
            raise ShellError("%s: %s" % (text, e), 1)
        except RecursionError:
            raise ShellError("%s: expression recursion level exceeded" % text, 1)

    # --- state for subshells
    def save(self):
        return (dict(self.vars), [dict(s) for s in self.locals], dict(self.functions), list(self.pos),
                set(self.exported), dict(self.opts), os.getcwd(), self.env_changes, len(self.env_log),
                self.loop_depth, set(self.readonly))

    def restore(self, st):
        (self.vars, self.locals, self.functions, self.pos, self.exported, self.opts, cwd, changes,
         logged, self.loop_depth, self.readonly) = st
        self.count_locals()
        if self.env_changes != changes:
            # undo the shell's own changes of os.environ since the save, newest first
            log = self.env_log
            cur = os.environ
            while len(log) > logged:
                k, v = log.pop()
                if v is None:
                    cur.pop(k, None)
                else:
                    cur[k] = v
            self.env_changes += 1
        try:
            if os.getcwd() != cwd:
                os.chdir(cwd)
        except OSError:
            try:
                os.chdir(cwd)
            except OSError:
                pass

    # --- errors
    def err(self, io, msg):
        io.fds.get(2, NullWriter()).write(s2b("bash: line %d: %s\n" % (self.lineno, msg)))

    # --- expansion
    def special(self, name):
        if name == "?":
            return str(self.last_status)
        if name == "#":
            return str(len(self.pos))
        if name == "$":
            return str(os.getpid())
        if name == "!":
            return ""
        if name == "-":
            return "".join(sorted(k for k, v in self.opts.items() if v and len(k) == 1)) + "hB"
        if name == "0":
            return self.arg0
        if name.isdigit():
            k = int(name)
            return self.pos[k - 1] if k <= len(self.pos) else None
        return None

    def param(self, name, io, quoted):
        """A parameter's value: str, None (unset), or a list (for @, * and arrays[@])."""
        c = name[0]
        if c == "!":
            if name.endswith("[@]") or name.endswith("[*]"):
                v = self.get_var(name[1:-3])
                if isinstance(v, list):
                    return [str(i) for i, x in enumerate(v) if x is not None]
                if isinstance(v, dict):
                    return list(v)
                return [] if v is None else ["0"]
            ref = self.param(name[1:], io, quoted)
            if isinstance(ref, list):
                return ref
            if ref is None or ref == "":
                return None
            return self.param(ref, io, quoted)
        if c == "@" or c == "*":
            return list(self.pos)
        if not (c.isalpha() or c == "_"):
            return self.special(name)
        if name in _DYNAMIC:
            d = self.dynamic(name)
            if d is not None:
                return d
        if name[-1] == "]":
            k = name.index("[")
            base = name[:k]
            sub = name[k + 1 : -1]
            v = self.get_var(base)
            if sub in ("@", "*"):
                if v is None:
                    return []
                if isinstance(v, list):
                    return [x for x in v if x is not None]
                if isinstance(v, dict):
                    return list(v.values())
                return [v]
            if isinstance(v, dict):
                return v.get(self.expand_str(_word_of(sub), io))
            subv = self.expand_str(_word_of(sub), io) if ("$" in sub or "`" in sub) else sub
            return self.get_scalar(base, self.arith(subv))
        v = self.get_var(name)
        if isinstance(v, list):
            return v[0] if v else None
        if isinstance(v, dict):
            return v.get("0")
        return v

    def dynamic(self, name):
        v = self.get_var(name)
        if name == "LINENO":
            return str(self.lineno)
        if v is not None and name not in ("RANDOM", "SECONDS"):
            return None
        import time
        if name == "RANDOM":
            import random
            return str(random.randrange(32768))
        if name == "SECONDS":
            return str(int(time.time() - self.start_time))
        if name == "EPOCHSECONDS":
            return str(int(time.time()))
        if name == "EPOCHREALTIME":
            return "%.6f" % time.time()
        if name == "BASHPID":
            return str(os.getpid())
        if name == "FUNCNAME":
            return None
        return _STATIC_VARS.get(name)

    def expand_param(self, part, io, out, quoted):
        _, name, op, arg, _dq = part
        if op is None:
            v = self.param(name, io, quoted)
            if v is None and self.opts.get("u") and name not in ("@", "*") and not name.startswith("!"):
                raise ShellError("%s: unbound variable" % name, 127)
            self.emit_value(name, v, out, quoted)
            return
        if op == "names":
            prefix = name[1:-1]
            names = sorted(set(k for k in self.vars if k.startswith(prefix) and not k.startswith("__")) |
                           set(k for sc in self.locals for k in sc if k.startswith(prefix)), key=s2b)
            self.emit_value(name[-1], names, out, quoted)
            return
        if op == "len":
            v = self.param(name, io, quoted)
            if isinstance(v, list):
                n = len(v)
            else:
                if v is None and self.opts.get("u"):
                    raise ShellError("%s: unbound variable" % name, 127)
                n = len(v or "")
            out.append((str(n), 1 if quoted else 2))
            return
        v = self.param(name, io, quoted)
        if op in (":-", "-", ":=", "=", ":?", "?", ":+", "+"):
            if isinstance(v, list):
                isset = bool(v) if op[0] == ":" else (bool(v) or name[0] in "@*")
                null = not v or (len(v) == 1 and v[0] == "")
            else:
                isset = v is not None
                null = not v
            use_default = (not isset) or (op[0] == ":" and null)
            base = op[-1]
            if base == "-":
                if use_default:
                    self.expand_parts(arg, io, out, quoted)
                else:
                    self.emit_value(name, v, out, quoted)
            elif base == "=":
                if use_default:
                    val = self.expand_str(Word("", arg), io)
                    if not (name[0].isalpha() or name[0] == "_"):
                        raise ShellError("$%s: cannot assign in this way" % name, 1)
                    self.set_var(name, val)
                    out.append((val, 1 if quoted else 2))
                else:
                    self.emit_value(name, v, out, quoted)
            elif base == "?":
                if use_default:
                    msg = self.expand_str(Word("", arg), io) if arg else (
                        "parameter null or not set" if op[0] == ":" else "parameter not set")
                    raise ShellError("%s: %s" % (name, msg), 127)
                self.emit_value(name, v, out, quoted)
            else:  # +
                if not use_default:
                    self.expand_parts(arg, io, out, quoted)
            return
        if v is None and self.opts.get("u"):
            raise ShellError("%s: unbound variable" % name, 127)
        if op == ":" and isinstance(v, list):
            off_s, len_s = arg
            off = self.arith(self.expand_str(_word_of(off_s), io)) if off_s.strip() else 0
            items = v
            if name in ("@", "*"):
                items = [self.arg0] + v
            if off < 0:
                off = max(0, len(v) + off) + (1 if name in ("@", "*") else 0)
            if len_s is None:
                vals = items[off:]
            else:
                ln = self.arith(self.expand_str(_word_of(len_s), io)) if len_s.strip() else 0
                if ln < 0:
                    raise ShellError("%s: substring expression < 0" % len_s, 1)
                vals = items[off : off + ln]
            self.emit_value(name, vals, out, quoted)
            return
        if isinstance(v, list):
            vals = [self.op_value(x, op, arg, io) for x in v]
            self.emit_value(name, vals, out, quoted)
        else:
            self.emit_value(name, self.op_value(v or "", op, arg, io), out, quoted)

    def op_value(self, v, op, arg, io):
        if op in ("#", "##", "%", "%%"):
            pat = self.expand_pattern(arg, io)
            if not pat:
                return v
            if op[0] == "#":
                rx = pattern_regex(pat, False)
                if op == "#":
                    # shortest prefix
                    for k in range(0, len(v) + 1):
                        if rx.fullmatch(v, 0, k):
                            return v[k:]
                    return v
                for k in range(len(v), -1, -1):
                    if rx.fullmatch(v, 0, k):
                        return v[k:]
                return v
            rx = pattern_regex(pat, False)
            if op == "%":
                for k in range(len(v), -1, -1):
                    if rx.fullmatch(v, k):
                        return v[:k]
                return v
            for k in range(0, len(v) + 1):
                if rx.fullmatch(v, k):
                    return v[:k]
            return v
        if op in ("/", "//", "/#", "/%"):
            pat_parts, rep_parts = arg
            pat = self.expand_pattern(pat_parts, io)
            rep = self.expand_str(Word("", rep_parts), io) if rep_parts else ""
            if not pat:
                return v
            rx = pattern_regex(pat, False)
            if op == "/#":
                for k in range(len(v), -1, -1):
                    if rx.fullmatch(v, 0, k):
                        return rep + v[k:]
                return v
            if op == "/%":
                for k in range(0, len(v) + 1):
                    if rx.fullmatch(v, k):
                        return v[:k] + rep
                return v
            out = []
            i = 0
            n = len(v)
            while i <= n:
                found = -1
                for k in range(n, i - 1, -1):
                    if k > i and rx.fullmatch(v, i, k):
                        found = k
                        break
                if found < 0:
                    if i < n:
                        out.append(v[i])
                    i += 1
                    continue
                out.append(rep)
                i = found
                if op == "/":
                    out.append(v[i:])
                    return "".join(out)
            return "".join(out)
        if op == ":":
            off_s, len_s = arg
            off = self.arith(self.expand_str(_word_of(off_s), io)) if off_s.strip() else 0
            if off < 0:
                off = max(0, len(v) + off)
            if len_s is None:
                return v[off:]
            ln = self.arith(self.expand_str(_word_of(len_s), io)) if len_s.strip() else 0
            if ln < 0:
                end = len(v) + ln
                if end < off:
                    raise ShellError("%s: substring expression < 0" % len_s, 1)
                return v[off:end]
            return v[off : off + ln]
        if op in ("^", "^^", ",", ",,"):
            pat = self.expand_pattern(arg, io) if arg else ""
            f = str.upper if op[0] == "^" else str.lower
            if op in ("^", ","):
                if v and (not pat or pattern_match(pat, v[0])):
                    return f(v[0]) + v[1:]
                return v
            if not pat:
                return f(v)
            return "".join(f(ch) if pattern_match(pat, ch) else ch for ch in v)
        if op == "@":
            if arg == "Q":
                if any(c < " " or c == "\x7f" for c in v):
                    return shell_quote(v)
                return "'" + v.replace("'", "'\\''") + "'"
            if arg == "U":
                return v.upper()
            if arg == "L":
                return v.lower()
            if arg == "E":
                return ansi_c(v)
            return v
        raise ShellError("bad substitution", 1)

    def emit_value(self, name, v, out, quoted):
        if isinstance(v, list):
            star = name == "*" or name.endswith("[*]")
            if quoted and star:
                ifs = self.get_var("IFS")
                sep = " " if ifs is None else ifs[:1]
                out.append((sep.join(v), 1))
                return
            if not quoted and star:
                # unquoted $*: each element split separately, like $@
                pass
            for k, x in enumerate(v):
                if k:
                    out.append(_BREAK)
                out.append((x, 1 if quoted else 2))
            return
        if v is None:
            v = ""
        out.append((v, 1 if quoted else 2))

    def expand_parts(self, parts, io, out, quoted=False):
        for p in parts:
            k = p[0]
            if k == "s":
                out.append((p[1], 1 if quoted else 0))
            elif k == "q":
                out.append((p[1], 1))
            elif k == "v":
                self.expand_param(p, io, out, quoted or p[4])
            elif k == "dq":
                sub = p[1]
                if not (len(sub) == 1 and sub[0][0] == "v" and sub[0][1] in ("@",) or
                        len(sub) == 1 and sub[0][0] == "v" and sub[0][1].endswith("[@]")):
                    out.append(("", 1))
                self.expand_parts(sub, io, out, True)
            elif k == "c":
                out.append((self.command_subst(p[1], io), 1 if quoted else 2))
            elif k == "a":
                text = self.expand_str(Word(p[2], p[1]), io) if len(p[1]) != 1 or p[1][0][0] != "q" else p[1][0][1]
                out.append((str(self.arith(text)), 1 if quoted else 2))
            elif k == "t":
                out.append((self.tilde(p[1]), 1))
            elif k == "p":
                out.append((self.process_subst(p[1], p[2], io), 1))

    def tilde(self, user):
        if not user:
            h = self.get_var("HOME")
            return h if h is not None else os.path.expanduser("~")
        if user == "+":
            return self.get_var("PWD") or os.getcwd()
        if user == "-":
            return self.get_var("OLDPWD") or "~-"
        r = os.path.expanduser("~" + user)
        return r

    def command_subst(self, node, io):
        st = self.save()
        saved = (self.cond_depth, self.funcnest, self.lineno)
        chan = Channel()
        sio = IO({0: io.fds.get(0), 1: chan, 2: io.fds.get(2)}, chan)
        errexit = self.opts.get("e")
        self.opts["e"] = False
        got = []
        try:
            status, out = collect(self.exec_node(node, sio), chan, CMDSUB_MAX, got)
        except ShellExit as e:
            status, out = e.status, b"".join(got) + chan.take()
        except (LoopBreak, LoopContinue):
            status, out = 0, b"".join(got) + chan.take()
        except FuncReturn as e:
            status, out = e.status, b"".join(got) + chan.take()
        except ShellError as e:
            if "output too large" in e.msg:
                self.restore(st)
                raise
            self.err(sio, e.msg)
            status, out = e.status, b"".join(got) + chan.take()
        finally:
            self.restore(st)
            self.opts["e"] = errexit
            self.cond_depth, self.funcnest, self.lineno = saved
        self.cmdsub_status = _status_of(status)
        self.last_status = self.cmdsub_status
        return b2s(out.rstrip(b"\n"))

    def process_subst(self, node, direction, io):
        """<(list): the list runs to completion first, its output in a temporary file whose path
        is the word (removed when the statement ends); >(list) needs a process: refused."""
        if direction == ">":
            raise CmdError(">(...): process substitution for writing is not supported in the sandbox "
                           "(no processes)", 2)
        import tempfile
        st = self.save()
        chan = Channel()
        sio = IO({0: io.fds.get(0), 1: chan, 2: io.fds.get(2)}, chan)
        got = []
        try:
            collect(self.exec_node(node, sio), chan, CMDSUB_MAX, got)
        except (ShellExit, FuncReturn, LoopBreak, LoopContinue):
            pass
        except ShellError as e:
            if "output too large" in e.msg:
                raise
            self.err(sio, e.msg)
        finally:
            self.restore(st)
        got.append(chan.take())
        fd, path = tempfile.mkstemp(prefix="procsub-")
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(got))
        self.temp_files.append((self.list_depth, path))
        return path

    def segments(self, parts, io):
        out = []
        self.expand_parts(parts, io, out)
        return out

    def expand_str(self, word, io):
        """A word expanded to one string: no field splitting, no globbing."""
        parts = word.parts
        if len(parts) == 1 and parts[0][0] in ("s", "q"):
            return parts[0][1]
        segs = self.segments(parts, io)
        return "".join(s[0] if s is not _BREAK else " " for s in segs)

    def expand_pattern(self, parts, io):
        """Parts expanded to a pattern: quoted text escaped."""
        segs = self.segments(parts, io)
        out = []
        for s in segs:
            if s is _BREAK:
                out.append(" ")
            elif s[1] == 1:
                out.append(re.sub(r"([\\*?\[\]])", r"\\\1", s[0]))
            else:
                out.append(s[0])
        return "".join(out)

    def expand_words(self, words, io):
        argv = []
        for w in words:
            lit = w._lit
            if lit is not None:
                argv.append(lit)
                continue
            parts = w.parts
            if len(parts) == 1 and parts[0][0] == "s" and not GLOB_MAGIC.search(parts[0][1]) and \
                    "{" not in parts[0][1]:
                w._lit = parts[0][1]
                argv.append(w._lit)
                continue
            if len(parts) == 1 and parts[0][0] == "q":
                w._lit = parts[0][1]
                argv.append(w._lit)
                continue
            braced = w._braced
            if braced is None:
                if any(p[0] == "s" and "{" in p[1] for p in parts):
                    braced = brace_expand(parts, strings=True)
                else:
                    braced = [parts]
                if len(braced) <= 10000:  # a big expansion is not kept on the word
                    w._braced = braced
            for ps in braced:
                if type(ps) is str:
                    ps = [("s", ps)]
                self.fields(self.segments(ps, io), argv)
        return argv

    def fields(self, segs, argv):
        """Field splitting and globbing of expansion segments, appending to argv."""
        fields = []
        cur = []
        started = False
        ifs = None
        for seg in segs:
            if seg is _BREAK:
                if started or cur:
                    fields.append(cur)
                cur = []
                started = False
                continue
            text, kind = seg
            if kind == 2:
                if ifs is None:
                    ifs = self.get_var("IFS")
                    if ifs is None:
                        ifs = " \t\n"
                if not text:
                    continue
                if not ifs:
                    cur.append((text, True))
                    started = True
                    continue
                rx = _ifs_regex(ifs)
                m = rx.match(text)
                if m:
                    if not m.group().strip(" \t\n") or started:
                        if started:
                            fields.append(cur)
                    else:
                        fields.append(cur)
                    cur = []
                    started = False
                    text = text[m.end():]
                pos = 0
                for m in rx.finditer(text):
                    cur.append((text[pos : m.start()], True))
                    fields.append(cur)
                    cur = []
                    started = False
                    pos = m.end()
                rest = text[pos:]
                if rest:
                    cur.append((rest, True))
                    started = True
            elif kind == 1:
                cur.append((text, False))
                started = True
            else:
                if text:
                    cur.append((text, True))
                    started = True
        if started:
            fields.append(cur)
        noglob = self.opts.get("f")
        for f in fields:
            if not noglob and any(active and GLOB_MAGIC.search(t) for t, active in f):
                pat = "".join(t if active else re.sub(r"([\\*?\[\]])", r"\\\1", t) for t, active in f)
                if has_magic(pat):
                    try:
                        matches = glob(pat)
                    except GlobTooMany:
                        raise CmdError("Argument list too long", 126)
                    if matches:
                        argv.extend(matches)
                        continue
                    if self.opts.get("nullglob"):
                        continue
                    if self.opts.get("failglob"):
                        raise CmdError("no match: %s" % "".join(t for t, _ in f), 1)
            argv.append("".join(t for t, _ in f))

    # --- execution
    def exec_node(self, node, io):
        return _EXEC[node.kind](self, node, io)

    def exec_list(self, node, io):
        status = 0
        items = node.items
        bg = node.bg
        self.list_depth += 1
        try:
            for k in range(len(items)):
                item = items[k]
                if bg[k]:
                    self.lineno = getattr(item, "line", self.lineno)
                    self.err(io, "background jobs (&): not supported in the sandbox (no processes)")
                    status = self.last_status = 2
                    continue
                status = yield from _EXEC[item.kind](self, item, io)
                self.last_status = status
                if self.temp_files:
                    self.remove_temp_files(self.list_depth)
                if status and self.opts.get("e") and not self.cond_depth:
                    if item.kind == "andor" or (item.kind == "pipeline" and item.negate):
                        continue
                    raise ShellExit(status)
        finally:
            self.list_depth -= 1
        return status

    def exec_andor(self, node, io):
        items = node.items
        ops = node.ops
        self.cond_depth += 1
        try:
            status = yield from _EXEC[items[0].kind](self, items[0], io)
        finally:
            self.cond_depth -= 1
        self.last_status = status
        last = len(items) - 1
        for k, op in enumerate(ops):
            if (op == "&&") == (status == 0):
                item = items[k + 1]
                if k + 1 == last:
                    status = yield from _EXEC[item.kind](self, item, io)
                    self.last_status = status
                    if status and self.opts.get("e") and not self.cond_depth and not (
                            item.kind == "pipeline" and item.negate):
                        raise ShellExit(status)
                else:
                    self.cond_depth += 1
                    try:
                        status = yield from _EXEC[item.kind](self, item, io)
                    finally:
                        self.cond_depth -= 1
                    self.last_status = status
        return status

    def exec_pipeline(self, node, io):
        cmds = node.cmds
        self.lineno = node.line
        if node.negate:
            self.cond_depth += 1
        try:
            if len(cmds) == 1:
                status = yield from _EXEC[cmds[0].kind](self, cmds[0], io)
                statuses = [status]
            else:
                statuses = yield from self.run_pipeline(cmds, io)
                status = statuses[-1]
                if self.opts.get("pipefail"):
                    for s in statuses:
                        if s:
                            status = s
        finally:
            if node.negate:
                self.cond_depth -= 1
        self.vars["PIPESTATUS"] = [str(s) for s in statuses]
        if node.negate:
            status = 0 if status else 1
        return status

    def run_pipeline(self, cmds, io):
        st = self.save()
        n = len(cmds)
        statuses = [0] * n
        readers = []
        prev = io.fds.get(0)
        try:
            for k in range(n - 1):
                chan = Channel()
                fds = dict(io.fds)
                fds[0] = prev
                fds[1] = chan
                prev = Reader(self.stage(cmds[k], IO(fds, chan), statuses, k))
                readers.append(prev)
            fds = dict(io.fds)
            fds[0] = prev
            try:
                statuses[-1] = yield from _EXEC[cmds[-1].kind](self, cmds[-1], IO(fds, io.chan))
            except ShellExit as e:
                statuses[-1] = e.status
            except ShellError as e:
                self.err(io, e.msg)
                statuses[-1] = e.status
            for r in reversed(readers):
                it = r._it
                if it is None:
                    continue
                r._it = None
                got = 0
                try:
                    while got < PIPE_BUF:
                        got += len(next(it))
                except StopIteration:
                    continue
                except ShellAbort:
                    # what a stage still does once its reader is gone ends as SIGPIPE would
                    statuses[readers.index(r)] = 141
                    continue
                it.close()
        finally:
            for r in readers:
                r.close()
            self.restore(st)
        return statuses

    def stage(self, node, io, statuses, k):
        try:
            st = yield from merge(_EXEC[node.kind](self, node, io), io.chan)
        except GeneratorExit:
            statuses[k] = 141
            raise
        except ShellExit as e:
            st = e.status
        except ShellError as e:
            self.err(io, e.msg)
            st = e.status
        except FuncReturn as e:
            st = e.status
        except (LoopBreak, LoopContinue):
            st = 0
        statuses[k] = st
        return st

    def redirect(self, redirs, io):
        """A new IO for redirections and the files to close after; raises CmdError."""
        fds = dict(io.fds)
        opened = []
        try:
            for r in redirs:
                op = r.op
                fd = r.fd
                if op in ("<<", "<<-"):
                    body = r.body
                    text = "" if body is None else (body.parts[0][1] if body.parts and len(body.parts) == 1 and body.parts[0][0] == "q" else self.expand_str(body, io))
                    fds[fd] = Reader(s2b(text))
                    continue
                if op == "<<<":
                    text = self.expand_str(r.target, io)
                    fds[fd] = Reader(s2b(text + "\n"))
                    continue
                target = self.redir_target(r.target, io)
                if op in (">&", "<&") and (target.isdigit() or target == "-" or (target.endswith("-") and target[:-1].isdigit())):
                    if target == "-":
                        fds.pop(fd, None)
                        continue
                    move = target.endswith("-")
                    src = int(target.rstrip("-"))
                    if src not in fds:
                        raise CmdError("%s: Bad file descriptor" % src, 1)
                    fds[fd] = fds[src]
                    if move:
                        fds.pop(src, None)
                    continue
                if op in ("&>", "&>>") or (op == ">&" and fd == 1):
                    w = self.open_out(target, op in (">>", "&>>"), opened)
                    fds[1] = w
                    fds[2] = w
                    continue
                if op in (">", ">|", ">>"):
                    fds[fd] = self.open_out(target, op == ">>", opened)
                elif op in ("<", "<&"):
                    fds[fd] = self.open_in(target, opened)
                elif op == "<>":
                    fds[fd] = self.open_in(target, opened, create=True)
                else:
                    raise CmdError("%s: ambiguous redirect" % target, 1)
        except BaseException:
            for f in opened:
                try:
                    f.close()
                except Exception:
                    pass
            raise
        return IO(fds, io.chan), opened

    def redir_target(self, word, io):
        parts = word.parts
        if len(parts) == 1 and parts[0][0] in ("s", "q") and not (parts[0][0] == "s" and GLOB_MAGIC.search(parts[0][1])):
            return parts[0][1]
        fields = []
        braced = brace_expand(parts) if any(p[0] == "s" and "{" in p[1] for p in parts) else [parts]
        for ps in braced:
            self.fields(self.segments(ps, io), fields)
        if len(fields) != 1:
            raise CmdError("%s: ambiguous redirect" % word.raw, 1)
        return fields[0]

    def open_out(self, path, append, opened):
        if path in ("/dev/null",):
            return NullWriter()
        if path in ("/dev/stdout", "/dev/fd/1"):
            return None
        if path in ("/dev/stderr", "/dev/fd/2"):
            return None
        if self.opts.get("C") and not append and os.path.exists(path) and not os.path.isdir(path):
            raise CmdError("%s: cannot overwrite existing file" % path, 1)
        try:
            f = open(path, "ab" if append else "wb")
        except OSError as e:
            raise CmdError("%s: %s" % (path, _strerror(e)), 1)
        opened.append(f)
        return FileWriter(f)

    def open_in(self, path, opened, create=False):
        if path in ("/dev/null",) or path in ("/dev/zero",):
            return Reader(b"")
        if path in ("/dev/stdin", "/dev/fd/0"):
            return None
        try:
            if create:
                f = open(path, "r+b" if os.path.exists(path) else "w+b")
            else:
                f = open(path, "rb")
            if os.path.isdir(path):
                f.close()
                raise IsADirectoryError(21, "Is a directory")
        except OSError as e:
            raise CmdError("%s: %s" % (path, _strerror(e)), 1)
        chunks = _FileChunks(f)
        opened.append(chunks)
        return Reader(chunks)

    def with_redirs(self, node, io, body):
        """Runs body(io) (a generator function) under node's redirections."""
        try:
            nio, opened = self.redirect(node.redirs, io)
        except CmdError as e:
            self.err(io, e.msg)
            return e.status
        _fix_std(nio, io)
        try:
            gen = body(nio)
            out = nio.fds.get(1)
            if out is io.chan:
                return (yield from gen)
            return drain_to(gen, out if out is not None else NullWriter(), lambda m: self.err(io, m))
        finally:
            for f in opened:
                try:
                    f.close()
                except Exception:
                    pass

    def _write_error(self, io, name, msg):
        if name in BUILTINS or name in self.functions:
            self.err(io, "%s: %s" % (name, msg))
        else:
            io.fds.get(2, NullWriter()).write(s2b("%s: %s\n" % (name, msg)))

    def exec_simple(self, node, io):
        self.lineno = node.line
        self.cmdsub_status = None
        try:
            argv = self.expand_words(node.words, io) if node.words else []
        except CmdError as e:
            self.err(io, "%s: %s" % (node.words[0].raw, e.msg) if e.status == 126 else e.msg)
            return e.status
        if argv == ["exec"] and node.redirs and not node.assigns:
            # exec >file 2>&1: the redirections stay for the rest of the shell (this IO)
            try:
                nio, opened = self.redirect(node.redirs, io)
            except CmdError as e:
                self.err(io, e.msg)
                return e.status
            _fix_std(nio, io)
            io.fds.update(nio.fds)
            for k in [k for k in io.fds if k not in nio.fds]:
                del io.fds[k]
            self.exec_files.extend(opened)
            return 0
        if not argv:
            try:
                for name, w, append, sub in node.assigns:
                    self.do_assign(name, w, append, sub, io)
            except CmdError as e:
                self.err(io, e.msg)
                return e.status
            status = self.cmdsub_status or 0
            if node.redirs:
                try:
                    nio, opened = self.redirect(node.redirs, io)
                except CmdError as e:
                    self.err(io, e.msg)
                    return e.status
                for f in opened:
                    f.close()
            return status
        if self.opts.get("x"):
            io.fds.get(2, NullWriter()).write(s2b((self.get_var("PS4") or "+ ") + " ".join(shell_quote(a) for a in argv) + "\n"))
        saved_env = None
        if node.assigns:
            saved_env = []
            for name, w, append, sub in node.assigns:
                old = (name, self.get_var(name), name in self.exported)
                saved_env.append(old)
                self.do_assign(name, w, append, sub, io)
                self.export(name)
        try:
            if node.redirs:
                try:
                    nio, opened = self.redirect(node.redirs, io)
                except CmdError as e:
                    self.err(io, e.msg)
                    return e.status
                _fix_std(nio, io)
                try:
                    out = nio.fds.get(1)
                    if out is io.chan:
                        return (yield from self.run_argv(argv, nio))
                    return drain_to(self.run_argv(argv, nio), out if out is not None else NullWriter(),
                                    lambda m: self._write_error(nio, argv[0], m))
                finally:
                    for f in opened:
                        try:
                            f.close()
                        except Exception:
                            pass
            return (yield from self.run_argv(argv, io))
        finally:
            if saved_env is not None and argv[0] not in _SPECIAL_BUILTINS:
                for name, old, exp in reversed(saved_env):
                    if old is None:
                        self.unset_var(name)
                    else:
                        self.set_var(name, old)
                        if not exp:
                            self.exported.discard(name)
                            self._delenv(name)

    def do_assign(self, name, w, append, sub, io):
        if sub == "()":
            vals = self.expand_words(w, io)
            cur = self.get_var(name)
            if isinstance(cur, dict):
                d = {} if not append else dict(cur)
                k = 0
                for x in vals:
                    m = re.match(r"\[(.*?)\]=(.*)", x, re.S)
                    if m:
                        d[m.group(1)] = m.group(2)
                    else:
                        d[str(k)] = x
                        k += 1
                self.set_var(name, d)
                return
            if append:
                base = cur if isinstance(cur, list) else ([] if cur is None else [cur])
                vals = base + vals
            self.set_var(name, list(vals))
            return
        value = self.expand_str(w, io)
        if sub:
            key = sub[1:-1]
            cur = self.get_var(name)
            if isinstance(cur, dict):
                key = self.expand_str(_word_of(key), io)
                if append:
                    value = (cur.get(key) or "") + value
                self.set_index(name, key, value)
                return
            idx = self.arith(self.expand_str(_word_of(key), io))
            if append:
                value = (self.get_scalar(name, idx) or "") + value
            self.set_index(name, idx, value)
            return
        if append:
            cur = self.get_var(name)
            if isinstance(cur, list):
                cur = list(cur)
                if cur:
                    cur[0] = (cur[0] or "") + value
                else:
                    cur = [value]
                self.set_var(name, cur)
                return
            value = (cur or "") + value
        if self.vars.get("__integer__" + name):
            value = str(self.arith(value))
        self.set_var(name, value)

    def lookup(self, name):
        reg = self.registry
        if reg is None:
            reg = self.registry = load_registry()
        return reg.get(name)

    def run_argv(self, argv, io):
        """Runs a command by name: function, builtin, registered command, or a path."""
        name = argv[0]
        fn = self.functions.get(name)
        if fn is not None:
            return (yield from self.call_function(fn, argv, io))
        cmd = BUILTINS.get(name)
        if cmd is None:
            cmd = self.lookup(name)
        if cmd is None:
            if "/" in name:
                return (yield from self.run_path(argv, io))
            self.err(io, "%s: command not found" % name)
            return 127
        ctx = Ctx(self, io, argv)
        try:
            r = cmd(ctx, argv)
            if type(r) is _GeneratorType:
                r = yield from r
        except (ShellExit, FuncReturn, LoopBreak, LoopContinue, GeneratorExit, ShellError, KeyboardInterrupt,
                ShellAbort):
            raise
        except RecursionError:
            raise
        except BrokenPipeError:
            return 141
        except OutputError as e:
            if name == "yes":
                ctx.stderr.write(s2b("%s: standard output: %s\n" % (name, e)))
            elif name in BUILTINS:
                self.err(io, "%s: write error: %s" % (name, e))
            else:
                ctx.stderr.write(s2b("%s: write error: %s\n" % (name, e)))
            return 1
        except Exception as e:
            if os.environ.get("VIVARIUM_SHELL_DEBUG"):
                import traceback
                ctx.stderr.write(s2b(traceback.format_exc()))
            ctx.stderr.write(s2b("%s: internal error: %s: %s\n" % (name, type(e).__name__, e)))
            return 1
        if r is None:
            return 0
        if r is True:
            return 0
        if r is False:
            return 1
        return int(r) & 0xFF

    def run_path(self, argv, io):
        path = argv[0]
        if os.path.isdir(path):
            self.err(io, "%s: Is a directory" % path)
            return 126
        if not os.path.exists(path):
            self.err(io, "%s: No such file or directory" % path)
            return 127
        if not os.access(path, os.X_OK):
            self.err(io, "%s: Permission denied" % path)
            return 126
        try:
            with open(path, "rb") as f:
                head = f.readline(256)
        except OSError as e:
            self.err(io, "%s: %s" % (path, _strerror(e)))
            return 126
        if head.startswith(b"#!") and b"python" in head:
            return (yield from self.run_argv(["python3"] + argv, io))
        if head.startswith(b"#!") and not (b"sh" in head):
            self.err(io, "%s: cannot execute: interpreter %s not available in the sandbox" % (path, b2s(head[2:].strip())))
            return 126
        return (yield from self.run_argv(["bash"] + argv, io))

    def call_function(self, fn, argv, io):
        limit = self.vars.get("FUNCNEST")
        try:
            limit = int(limit) if limit else FUNCNEST_DEFAULT
        except ValueError:
            limit = FUNCNEST_DEFAULT
        if limit <= 0 or limit > FUNCNEST_DEFAULT:
            limit = FUNCNEST_DEFAULT
        if self.funcnest >= limit:
            raise ShellAbort("%s: maximum function nesting level exceeded (%d)" % (argv[0], limit), 1)
        saved_pos = self.pos
        self.pos = argv[1:]
        self.locals.append({})
        self.funcnest += 1
        loop = self.loop_depth
        self.loop_depth = 0
        try:
            status = yield from _EXEC[fn.body.kind](self, fn.body, io)
        except FuncReturn as r:
            status = r.status
        finally:
            self.funcnest -= 1
            self.loop_depth = loop
            self.pop_scope()
            self.pos = saved_pos
        return status

    def exec_group(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self.exec_list(node.body, nio)))
        return (yield from self.exec_list(node.body, io))

    def exec_subshell(self, node, io):
        st = self.save()
        saved = (self.cond_depth, self.funcnest, self.traps)
        self.traps = {}
        try:
            if node.redirs:
                status = yield from self.with_redirs(node, io, lambda nio: self.exec_list(node.body, nio))
            else:
                status = yield from self.exec_list(node.body, io)
        except ShellExit as e:
            status = e.status
        except ShellError as e:
            self.err(io, e.msg)
            status = e.status
        try:
            status = yield from self.exit_trap(status, io)
        finally:
            self.restore(st)
            self.cond_depth, self.funcnest, self.traps = saved
        return status

    def remove_temp_files(self, depth=0):
        """Removes the process substitutions' files made by statements at depth or deeper."""
        keep = []
        for d, path in self.temp_files:
            if d < depth:
                keep.append((d, path))
                continue
            try:
                os.unlink(path)
            except OSError:
                pass
        self.temp_files = keep

    def exit_trap(self, status, io):
        """Runs the EXIT trap if one is set; returns the status (exit in the trap changes it)."""
        action = self.traps.pop("EXIT", None)
        if not action:
            return status
        self.last_status = status
        try:
            yield from self.run_source(action, io)
        except ShellExit as e:
            status = e.status
        except ShellError as e:
            self.err(io, e.msg)
        except (FuncReturn, LoopBreak, LoopContinue):
            pass
        return status

    def exec_if(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self._if(node, nio)))
        return (yield from self._if(node, io))

    def _if(self, node, io):
        for cond, body in node.clauses:
            self.cond_depth += 1
            try:
                c = yield from self.exec_list(cond, io)
            finally:
                self.cond_depth -= 1
            if c == 0:
                return (yield from self.exec_list(body, io))
        if node.orelse is not None:
            return (yield from self.exec_list(node.orelse, io))
        return 0

    def exec_while(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self._while(node, nio)))
        return (yield from self._while(node, io))

    def _while(self, node, io):
        status = 0
        self.loop_depth += 1
        try:
            while True:
                self.cond_depth += 1
                try:
                    c = yield from self.exec_list(node.cond, io)
                finally:
                    self.cond_depth -= 1
                if (c == 0) == node.until:
                    break
                try:
                    status = yield from self.exec_list(node.body, io)
                except LoopBreak as b:
                    if b.n > 1:
                        b.n -= 1
                        raise
                    status = 0
                    break
                except LoopContinue as c2:
                    if c2.n > 1:
                        c2.n -= 1
                        raise
                    continue
        finally:
            self.loop_depth -= 1
        return status

    def exec_for(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self._for(node, nio)))
        return (yield from self._for(node, io))

    def _for(self, node, io):
        if node.words is None:
            items = list(self.pos)
        else:
            try:
                items = self.expand_words(node.words, io)
            except CmdError as e:
                self.err(io, e.msg)
                return e.status
        status = 0
        self.loop_depth += 1
        try:
            for x in items:
                self.set_var(node.var, x)
                try:
                    status = yield from self.exec_list(node.body, io)
                except LoopBreak as b:
                    if b.n > 1:
                        b.n -= 1
                        raise
                    break
                except LoopContinue as c2:
                    if c2.n > 1:
                        c2.n -= 1
                        raise
                    continue
        finally:
            self.loop_depth -= 1
        return status

    def exec_arithfor(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self._arithfor(node, nio)))
        return (yield from self._arithfor(node, io))

    def _arith_of(self, pair, io):
        parts, text = pair
        if not text.strip():
            return None
        return self.arith(self.expand_str(Word(text, parts), io))

    def _arithfor(self, node, io):
        status = 0
        self._arith_of(node.init, io)
        self.loop_depth += 1
        try:
            while True:
                c = self._arith_of(node.cond, io)
                if c is not None and c == 0:
                    break
                try:
                    status = yield from self.exec_list(node.body, io)
                except LoopBreak as b:
                    if b.n > 1:
                        b.n -= 1
                        raise
                    break
                except LoopContinue as c2:
                    if c2.n > 1:
                        c2.n -= 1
                        raise
                self._arith_of(node.step, io)
        finally:
            self.loop_depth -= 1
        return status

    def exec_case(self, node, io):
        if node.redirs:
            return (yield from self.with_redirs(node, io, lambda nio: self._case(node, nio)))
        return (yield from self._case(node, io))

    def _case(self, node, io):
        subject = self.expand_str(node.word, io)
        status = 0
        items = node.items
        k = 0
        n = len(items)
        while k < n:
            pats, body, term = items[k]
            matched = False
            for p in pats:
                if pattern_match(self.expand_pattern(p.parts, io), subject):
                    matched = True
                    break
            if not matched:
                k += 1
                continue
            while True:
                status = (yield from self.exec_list(body, io)) if body is not None else 0
                if term == ";&" and k + 1 < n:
                    k += 1
                    pats, body, term = items[k]
                    continue
                break
            if term == ";;&":
                k += 1
                continue
            return status
        return status

    def exec_funcdef(self, node, io):
        self.functions[node.name] = node
        return 0
        yield

    def exec_arith(self, node, io):
        v = self._arith_of(node.expr, io)
        return 0 if v else 1
        yield

    def exec_cond(self, node, io):
        self.lineno = node.line
        try:
            return 0 if self.cond_eval(node.expr, io) else 1
        except CmdError as e:
            self.err(io, e.msg)
            return 2
        yield

    def cond_eval(self, e, io):
        k = e[0]
        if k == "and":
            return self.cond_eval(e[1], io) and self.cond_eval(e[2], io)
        if k == "or":
            return self.cond_eval(e[1], io) or self.cond_eval(e[2], io)
        if k == "not":
            return not self.cond_eval(e[1], io)
        if k == "word":
            return self.expand_str(e[1], io) != ""
        if k == "un":
            return test_unary(e[1], self.expand_str(e[2], io), self)
        op = e[1]
        left = self.expand_str(e[2], io)
        if op in ("==", "=", "!="):
            r = pattern_match(self.expand_pattern(e[3].parts, io), left)
            return r if op != "!=" else not r
        if op == "=~":
            rx = self.expand_pattern_regex(e[3], io)
            try:
                m = re.search(rx, left)
            except re.error:
                raise CmdError("invalid regular expression", 2)
            if m:
                self.vars["BASH_REMATCH"] = [m.group(0)] + [g or "" for g in m.groups()]
                return True
            self.vars["BASH_REMATCH"] = []
            return False
        right = self.expand_str(e[3], io)
        if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            a = self.arith(left) if left.strip() else 0
            b = self.arith(right) if right.strip() else 0
            return _int_cmp(op, a, b)
        return test_binary(op, left, right)

    def expand_pattern_regex(self, word, io):
        segs = self.segments(word.parts, io)
        return "".join(re.escape(s[0]) if s[1] == 1 else s[0] for s in segs if s is not _BREAK)

    def run_source(self, source, io, name="-c"):
        """Parses and runs source command by command; returns the status."""
        p = Parser(source)
        status = 0
        while True:
            try:
                node = p.next_command()
            except ParseError as e:
                w = io.fds.get(2)
                lines = source.split("\n")
                line = lines[e.line - 1] if 0 < e.line <= len(lines) else ""
                if e.eof and "unexpected EOF" in e.msg:
                    w.write(s2b("bash: %s: line %d: %s\n" % (name, e.line, e.msg)))
                    w.write(s2b("bash: %s: line %d: syntax error: unexpected end of file\n" % (name, len(lines))))
                else:
                    w.write(s2b("bash: %s: line %d: %s\n" % (name, e.line, e.msg)))
                    if not e.eof:
                        w.write(s2b("bash: %s: line %d: `%s'\n" % (name, e.line, line)))
                self.last_status = 2
                return 2
            except ShellError as e:
                self.err(io, e.msg)
                self.last_status = e.status
                return e.status
            if node is None:
                return status
            status = yield from self.exec_list(node, io)
            self.last_status = status


class CmdError(Exception):
    def __init__(self, msg, status=1):
        Exception.__init__(self, msg)
        self.msg = msg
        self.status = status


def _fix_std(nio, io):
    fds = nio.fds
    for k in (1, 2):
        if k in fds and fds[k] is None:
            pass
    if fds.get(1, 0) is None:
        fds[1] = io.fds.get(1)
    if fds.get(2, 0) is None:
        fds[2] = io.fds.get(2)
    if fds.get(0, 0) is None:
        fds[0] = io.fds.get(0)


def _strerror(e):
    if getattr(e, "errno", None):
        return os.strerror(e.errno)
    return str(e)


def _same_dir(a, b):
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


_ifs_cache = {}


def _ifs_regex(ifs):
    r = _ifs_cache.get(ifs)
    if r is None:
        ws = "".join(c for c in ifs if c in " \t\n")
        nws = "".join(c for c in ifs if c not in " \t\n")
        if nws and ws:
            rx = "[%s]*[%s][%s]*|[%s]+" % (re.escape(ws), re.escape(nws), re.escape(ws), re.escape(ws))
        elif nws:
            rx = "[%s]" % re.escape(nws)
        else:
            rx = "[%s]+" % re.escape(ws)
        r = _ifs_cache[ifs] = re.compile(rx)
    return r


def _word_of(text):
    parts, _ = Lexer(text).scan(0, "hd")
    return Word(text, parts)


_Q_SPECIAL = re.compile(r"([ \t'\"\\|&;()<>!{}*?\[\]^$`,])")


def printf_q(s):
    """bash's printf %q: backslashes, or $'..' when there are control characters."""
    if not s:
        return "''"
    if any(c < " " or c == "\x7f" for c in s):
        return shell_quote(s)
    s = _Q_SPECIAL.sub(r"\\\1", s)
    if s[0] in "#~":
        s = "\\" + s
    return s


_SAFE_RE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")


def shell_quote(s):
    if s and _SAFE_RE.match(s):
        return s
    if not s:
        return "''"
    if any(c < " " or c == "\x7f" for c in s):
        out = []
        for c in s:
            if c == "'":
                out.append("\\'")
            elif c == "\\":
                out.append("\\\\")
            elif c == "\n":
                out.append("\\n")
            elif c == "\t":
                out.append("\\t")
            elif c < " " or c == "\x7f":
                out.append("\\%03o" % ord(c))
            else:
                out.append(c)
        return "$'" + "".join(out) + "'"
    return "'" + s.replace("'", "'\\''") + "'"


_EXEC = {
    "list": Shell.exec_list,
    "andor": Shell.exec_andor,
    "pipeline": Shell.exec_pipeline,
    "simple": Shell.exec_simple,
    "group": Shell.exec_group,
    "subshell": Shell.exec_subshell,
    "if": Shell.exec_if,
    "while": Shell.exec_while,
    "for": Shell.exec_for,
    "arithfor": Shell.exec_arithfor,
    "case": Shell.exec_case,
    "funcdef": Shell.exec_funcdef,
    "arith": Shell.exec_arith,
    "cond": Shell.exec_cond,
}


def _int_cmp(op, a, b):
    if op == "-eq":
        return a == b
    if op == "-ne":
        return a != b
    if op == "-lt":
        return a < b
    if op == "-le":
        return a <= b
    if op == "-gt":
        return a > b
    return a >= b


# ---------------------------------------------------------------------------------------------
# test / [

def _stat(path, follow=True):
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None


def test_unary(op, arg, shell=None):
    import stat as st_
    if op == "-n":
        return arg != ""
    if op == "-z":
        return arg == ""
    if op == "-v":
        return shell is not None and shell.get_var(arg) is not None
    if op == "-o":
        return bool(shell and shell.opts.get(arg))
    if op == "-t":
        return False
    if op == "-h" or op == "-L":
        s = _stat(arg, False)
        return s is not None and st_.S_ISLNK(s.st_mode)
    if arg == "/dev/null" and op in ("-e", "-a", "-c"):
        return True
    s = _stat(arg)
    if s is None:
        return False
    m = s.st_mode
    if op in ("-e", "-a"):
        return True
    if op == "-f":
        return st_.S_ISREG(m)
    if op == "-d":
        return st_.S_ISDIR(m)
    if op == "-s":
        return s.st_size > 0
    if op == "-r":
        return os.access(arg, os.R_OK)
    if op == "-w":
        return os.access(arg, os.W_OK)
    if op == "-x":
        return os.access(arg, os.X_OK)
    if op == "-b":
        return st_.S_ISBLK(m)
    if op == "-c":
        return st_.S_ISCHR(m)
    if op == "-p":
        return st_.S_ISFIFO(m)
    if op == "-S":
        return st_.S_ISSOCK(m)
    if op == "-g":
        return bool(m & st_.S_ISGID)
    if op == "-u":
        return bool(m & st_.S_ISUID)
    if op == "-k":
        return bool(m & st_.S_ISVTX)
    if op == "-O":
        return s.st_uid == os.geteuid() if hasattr(os, "geteuid") else True
    if op == "-G":
        return s.st_gid == os.getegid() if hasattr(os, "getegid") else True
    if op == "-N":
        return s.st_mtime >= s.st_atime
    return False


def test_binary(op, a, b):
    if op in ("=", "=="):
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return s2b(a) < s2b(b)
    if op == ">":
        return s2b(a) > s2b(b)
    if op in ("-nt", "-ot"):
        sa, sb = _stat(a), _stat(b)
        if op == "-nt":
            return (sa is not None and sb is None) or (sa is not None and sb is not None and sa.st_mtime > sb.st_mtime)
        return (sb is not None and sa is None) or (sa is not None and sb is not None and sa.st_mtime < sb.st_mtime)
    if op == "-ef":
        sa, sb = _stat(a), _stat(b)
        return sa is not None and sb is not None and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
    raise CmdError("%s: binary operator expected" % op, 2)


_TEST_BINOPS = frozenset(["=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"])
_TEST_UNOPS = frozenset("-" + c for c in _UNARY_TESTS)


def _test_int(s):
    t = s.strip()
    if re.fullmatch(r"[+-]?[0-9]+", t):
        return int(t)
    raise CmdError("%s: integer expression expected" % s, 2)


class _Test:
    def __init__(self, args):
        self.a = args
        self.i = 0

    def run(self):
        a = self.a
        n = len(a)
        # POSIX rules by argument count
        if n == 0:
            return False
        if n == 1:
            return a[0] != ""
        if n == 2:
            if a[0] == "!":
                return a[1] == ""
            if a[0] in _TEST_UNOPS:
                return test_unary(a[0], a[1])
            raise CmdError("%s: unary operator expected" % a[0], 2)
        if n == 3:
            if a[1] in _TEST_BINOPS:
                return self.binary(a[0], a[1], a[2])
            if a[0] == "!":
                return not _Test(a[1:]).run()
            if a[0] == "(" and a[2] == ")":
                return a[1] != ""
            if a[1] in ("-a", "-o"):
                pass
            else:
                raise CmdError("%s: binary operator expected" % a[1], 2)
        if n == 4 and a[0] == "!":
            return not _Test(a[1:]).run()
        if n == 4 and a[0] == "(" and a[3] == ")":
            return _Test(a[1:3]).run()
        v = self.orx()
        if self.i < n:
            raise CmdError("too many arguments", 2)
        return v

    def binary(self, l, op, r):
        if op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            return _int_cmp(op, _test_int(l), _test_int(r))
        return test_binary(op, l, r)

    def orx(self):
        v = self.andx()
        while self.i < len(self.a) and self.a[self.i] == "-o":
            self.i += 1
            r = self.andx()
            v = v or r
        return v

    def andx(self):
        v = self.notx()
        while self.i < len(self.a) and self.a[self.i] == "-a":
            self.i += 1
            r = self.notx()
            v = v and r
        return v

    def notx(self):
        if self.i < len(self.a) and self.a[self.i] == "!":
            self.i += 1
            return not self.notx()
        return self.prim()

    def prim(self):
        a = self.a
        n = len(a)
        if self.i >= n:
            raise CmdError("argument expected", 2)
        t = a[self.i]
        if t == "(":
            self.i += 1
            v = self.orx()
            if self.i >= n or a[self.i] != ")":
                raise CmdError("`)' expected", 2)
            self.i += 1
            return v
        if self.i + 2 < n + 0 and a[self.i + 1] in _TEST_BINOPS:
            self.i += 3
            return self.binary(t, a[self.i - 2], a[self.i - 1])
        if self.i + 2 <= n - 0 and self.i + 2 < n + 1 and self.i + 1 < n and a[self.i + 1] in _TEST_BINOPS and self.i + 2 < n:
            self.i += 3
            return self.binary(t, a[self.i - 2], a[self.i - 1])
        if t in _TEST_UNOPS and self.i + 1 < n:
            self.i += 2
            return test_unary(t, a[self.i - 1])
        self.i += 1
        return t != ""


# ---------------------------------------------------------------------------------------------
# builtins: generator functions (ctx, argv) like every command; ctx.shell is the shell

BUILTINS = {}


def builtin(*names):
    def deco(f):
        for n in names:
            BUILTINS[n] = f
        return f

    return deco


@builtin(":", "true")
def b_true(ctx, argv):
    return 0


@builtin("false")
def b_false(ctx, argv):
    return 1


@builtin("echo")
def b_echo(ctx, argv):
    args = argv[1:]
    newline = True
    esc = False
    while args and len(args[0]) > 1 and args[0][0] == "-" and all(c in "neE" for c in args[0][1:]):
        for c in args[0][1:]:
            if c == "n":
                newline = False
            elif c == "e":
                esc = True
            else:
                esc = False
        args = args[1:]
    s = " ".join(args)
    if esc and "\\" in s:
        s, stop = _echo_escapes(s)
        if stop:
            yield s2b(s)
            return 0
    yield s2b(s + "\n" if newline else s)
    return 0


_ECHO_RE = re.compile(r"\\(?:([abefnrtv\\])|0([0-7]{0,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|(c)|([0-7]{1,3}))", re.S)


def _echo_escapes(s, printf_b=False):
    stop = [False]
    out = []
    pos = 0
    for m in _ECHO_RE.finditer(s):
        out.append(s[pos : m.start()])
        pos = m.end()
        if m.group(1):
            out.append(_ANSI_ESC[m.group(1)])
        elif m.group(2) is not None:
            out.append(b2s(bytes([int(m.group(2) or "0", 8) & 0xFF])))
        elif m.group(3):
            out.append(b2s(bytes([int(m.group(3), 16)])))
        elif m.group(4) or m.group(5):
            out.append(chr(int(m.group(4) or m.group(5), 16)))
        elif m.group(6):
            stop[0] = True
            break
        elif m.group(7):
            if printf_b:
                out.append(b2s(bytes([int(m.group(7), 8) & 0xFF])))
            else:
                out.append(m.group())
    else:
        out.append(s[pos:])
    return "".join(out), stop[0]


_PRINTF_RE = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|[0-9]+)?(?:\.(?P<prec>\*|[0-9]*))?(?P<conv>[diouxXfFeEgGcsbqaA%])|%(?P<bad>.?)|\\(?P<esc>[\\abefnrtv\"']|[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|c)?", re.S)


def _printf_num(ctx, s, errors):
    t = s.strip()
    if not t:
        return 0
    if t[0] in "'\"":
        return ord(t[1]) if len(t) > 1 else 0
    try:
        if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", t):
            return int(t, 16)
        if re.fullmatch(r"[+-]?0[0-7]+", t):
            return int(t, 8)
        return int(t)
    except ValueError:
        m = re.match(r"[+-]?[0-9]+", t)
        ctx.error("%s: invalid number" % s)
        errors[0] = 1
        return int(m.group()) if m else 0


def _printf_float(ctx, s, errors):
    t = s.strip()
    if not t:
        return 0.0
    if t[0] in "'\"":
        return float(ord(t[1])) if len(t) > 1 else 0.0
    try:
        return float(t)
    except ValueError:
        try:
            return float(int(t, 0))
        except ValueError:
            ctx.error("%s: invalid number" % s)
            errors[0] = 1
            return 0.0


def printf_format(ctx, fmt, args):
    """bash's printf: returns (text, status)."""
    out = []
    errors = [0]
    ai = 0
    first = True
    while first or ai < len(args):
        first = False
        consumed = False
        pos = 0
        stop = False
        for m in _PRINTF_RE.finditer(fmt):
            out.append(fmt[pos : m.start()])
            pos = m.end()
            if m.group(0).startswith("\\"):
                e = m.group("esc")
                if e is None:
                    out.append("\\")
                elif e == "c":
                    stop = True
                    break
                elif e in _ANSI_ESC:
                    out.append(_ANSI_ESC[e])
                elif e[0] in "01234567":
                    out.append(b2s(bytes([int(e, 8) & 0xFF])))
                elif e[0] == "x":
                    out.append(b2s(bytes([int(e[1:], 16)])))
                else:
                    out.append(chr(int(e[1:], 16)))
                continue
            if m.group("bad") is not None:
                b = m.group("bad")
                if b == "":
                    out.append("%")
                    continue
                ctx.error("%%%s: invalid format character" % b)
                return "".join(out), 1
            conv = m.group("conv")
            if conv == "%":
                out.append("%")
                continue
            flags = m.group("flags").replace("'", "")
            width = m.group("width")
            prec = m.group("prec")
            if width == "*":
                width = str(_printf_num(ctx, args[ai], errors)) if ai < len(args) else "0"
                ai += 1
                consumed = True
                if width.startswith("-"):
                    flags += "-"
                    width = width[1:]
            if prec == "*":
                prec = str(_printf_num(ctx, args[ai], errors)) if ai < len(args) else "0"
                ai += 1
                consumed = True
            arg = args[ai] if ai < len(args) else None
            if ai < len(args):
                consumed = True
            ai += 1
            spec = "%" + flags + (width or "") + ("." + prec if prec is not None else "")
            if conv in "di":
                v = _printf_num(ctx, arg, errors) if arg is not None else 0
                out.append((spec + "d") % v)
            elif conv in "ouxX":
                v = _printf_num(ctx, arg, errors) if arg is not None else 0
                if v < 0:
                    v &= 0xFFFFFFFFFFFFFFFF
                out.append((spec + conv) % v)
            elif conv in "fFeEgGaA":
                v = _printf_float(ctx, arg, errors) if arg is not None else 0.0
                if conv in "aA":
                    out.append(float.hex(v))
                else:
                    out.append((spec + conv) % v)
            elif conv == "c":
                v = (arg or "")[:1]
                out.append((spec.split(".")[0] + "s") % v)
            elif conv == "s":
                out.append((spec + "s") % (arg if arg is not None else ""))
            elif conv == "b":
                v, st = _echo_escapes(arg or "", True)
                out.append((spec + "s") % v)
                if st:
                    stop = True
                    break
            elif conv == "q":
                out.append((spec.split(".")[0] + "s") % printf_q(arg if arg is not None else ""))
        if stop:
            return "".join(out), errors[0]
        out.append(fmt[pos:])
        if not consumed:
            break
    return "".join(out), errors[0]


@builtin("printf")
def b_printf(ctx, argv):
    args = argv[1:]
    var = None
    if args and args[0] == "-v" and len(args) > 1:
        var = args[1]
        args = args[2:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        ctx.stderr.write(b"printf: usage: printf [-v var] format [arguments]\n")
        return 2
    text, status = printf_format(ctx, args[0], args[1:])
    if var:
        ctx.shell.set_var(var, text)
        return status
    if text:
        yield s2b(text)
    return status


@builtin("pwd")
def b_pwd(ctx, argv):
    physical = "-P" in argv[1:]
    cwd = os.getcwd()
    pwd = ctx.shell.get_var("PWD")
    if not physical and pwd and _same_dir(pwd, cwd):
        cwd = pwd
    yield s2b(cwd + "\n")
    return 0


def _logical_path(path):
    """Normalises an absolute path lexically: "." dropped, ".." removes the previous
    component (never going above "/"), repeated slashes collapsed."""
    parts = []
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if parts:
                parts.pop()
            continue
        parts.append(comp)
    root = "//" if path.startswith("//") and not path.startswith("///") else "/"
    return root + "/".join(parts)


@builtin("cd")
def b_cd(ctx, argv):
    sh = ctx.shell
    args = [a for a in argv[1:] if a not in ("-L", "-P", "-e", "--")] if len(argv) > 1 else []
    if len(args) > 1:
        sh.err(ctx.io, "cd: too many arguments")
        return 1
    printit = False
    if not args:
        target = sh.get_var("HOME")
        if not target:
            sh.err(ctx.io, "cd: HOME not set")
            return 1
    elif args[0] == "-":
        target = sh.get_var("OLDPWD")
        if not target:
            sh.err(ctx.io, "cd: OLDPWD not set")
            return 1
        printit = True
    else:
        target = args[0]
    old = sh.get_var("PWD") or os.getcwd()
    if not target.startswith("/") and not target.startswith(".") and sh.get_var("CDPATH"):
        for d in sh.get_var("CDPATH").split(":"):
            cand = os.path.join(d or ".", target)
            if os.path.isdir(cand):
                target = cand
                printit = printit or bool(d)
                break
    opts = []
    for a in argv[1:]:
        if a == "--" or not a.startswith("-") or a == "-":
            break
        opts.append(a)
    physical = "-P" in opts
    # bash's logical cd: PWD joined with the operand, "." and ".." resolved lexically (never
    # above "/"), before the chdir (the sandbox refuses a chdir through ".." above its root)
    logical = _logical_path(target if target.startswith("/") else old.rstrip("/") + "/" + target)
    try:
        if physical:
            os.chdir(target)
        else:
            try:
                os.chdir(logical)
            except OSError:
                os.chdir(target)
    except OSError as e:
        sh.err(ctx.io, "cd: %s: %s" % (args[0] if args else target, _strerror(e)))
        return 1
    new = logical
    if physical or not _same_dir(new, "."):
        new = os.getcwd()
    sh.set_var("OLDPWD", old)
    sh.set_var("PWD", new)
    if printit:
        yield s2b(new + "\n")
    return 0


@builtin("export")
def b_export(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    unexport = False
    while args and args[0].startswith("-") and args[0] != "-":
        if args[0] == "--":
            args = args[1:]
            break
        if "n" in args[0]:
            unexport = True
        args = args[1:]
    if not args:
        for k in sorted(sh.exported, key=s2b):
            v = sh.get_var(k)
            if v is None:
                yield s2b("declare -x %s\n" % k)
            else:
                yield s2b('declare -x %s="%s"\n' % (k, _dq_escape(v if isinstance(v, str) else str(v))))
        return 0
    status = 0
    for a in args:
        m = _ASSIGN_RE.match(a)
        if m and not m.group(2):
            name = m.group(1)
            value = a[m.end():]
            if m.group(3):
                value = (sh.get_var(name) or "") + value
            if unexport:
                sh.set_var(name, value)
            else:
                sh.export(name, value)
        elif _NAME_RE.fullmatch(a):
            if unexport:
                sh.exported.discard(a)
                sh._delenv(a)
            else:
                sh.export(a)
        else:
            sh.err(ctx.io, "export: `%s': not a valid identifier" % a)
            status = 1
    return status


def _dq_escape(v):
    return re.sub(r'([\\"$`])', r"\\\1", v)


@builtin("unset")
def b_unset(ctx, argv):
    sh = ctx.shell
    mode = "v"
    status = 0
    for a in argv[1:]:
        if a == "-f":
            mode = "f"
            continue
        if a == "-v":
            mode = "v"
            continue
        if mode == "f":
            sh.functions.pop(a, None)
        else:
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]", a)
            if m:
                v = sh.get_var(m.group(1))
                if isinstance(v, list):
                    i = sh.arith(m.group(2))
                    if 0 <= i < len(v):
                        v = list(v)
                        v[i] = None
                        sh.set_var(m.group(1), v)
                elif isinstance(v, dict):
                    v = dict(v)
                    v.pop(m.group(2), None)
                    sh.set_var(m.group(1), v)
                continue
            if not _NAME_RE.fullmatch(a):
                sh.err(ctx.io, "unset: `%s': not a valid identifier" % a)
                status = 1
                continue
            if a in sh.functions and sh.get_var(a) is None:
                sh.functions.pop(a)
                continue
            sh.unset_var(a)
    return status


_SET_LONG = {"errexit": "e", "nounset": "u", "xtrace": "x", "noglob": "f", "noclobber": "C",
             "verbose": "v", "noexec": "n", "allexport": "a", "pipefail": "pipefail", "posix": "posix",
             "errtrace": "E", "functrace": "T", "hashall": "h", "braceexpand": "B", "monitor": "m",
             "notify": "b", "ignoreeof": "ignoreeof", "vi": "vi", "emacs": "emacs", "history": "history",
             "interactive-comments": "ic", "keyword": "k", "onecmd": "t", "physical": "P", "privileged": "p"}


@builtin("set")
def b_set(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    if not args:
        for k in sorted(set(sh.vars), key=s2b):
            v = sh.vars[k]
            if v is None or k.startswith("__"):
                continue
            if isinstance(v, list):
                yield s2b("%s=(%s)\n" % (k, " ".join('[%d]="%s"' % (i, _dq_escape(x)) for i, x in enumerate(v) if x is not None)))
            elif isinstance(v, dict):
                yield s2b("%s=(%s)\n" % (k, " ".join('[%s]="%s"' % (i, _dq_escape(x)) for i, x in v.items())))
            else:
                yield s2b("%s=%s\n" % (k, shell_quote(v)))
        return 0
    while args:
        a = args[0]
        if a == "--":
            args = args[1:]
            sh.pos = list(args)
            return 0
        if a in ("-o", "+o"):
            on = a[0] == "-"
            if len(args) < 2:
                for name in sorted(_SET_LONG):
                    flag = _SET_LONG[name]
                    if on:
                        yield s2b("%-15s\t%s\n" % (name, "on" if sh.opts.get(flag) else "off"))
                    else:
                        yield s2b("set %so %s\n" % ("-" if sh.opts.get(flag) else "+", name))
                return 0
            name = args[1]
            if name not in _SET_LONG:
                sh.err(ctx.io, "set: %s: invalid option name" % name)
                return 1
            sh.opts[_SET_LONG[name]] = on
            args = args[2:]
            continue
        if a[:1] in ("-", "+") and len(a) > 1:
            on = a[0] == "-"
            for c in a[1:]:
                if c not in "euxfCvnaEThBmbkPptH":
                    sh.err(ctx.io, "set: %s%s: invalid option" % (a[0], c))
                    ctx.stderr.write(b"set: usage: set [-abefhkmnptuvxBCEHPT] [-o option-name] [--] [-] [arg ...]\n")
                    return 2
                sh.opts[c] = on
            args = args[1:]
            continue
        if a == "-":
            sh.opts["x"] = sh.opts["v"] = False
            args = args[1:]
        sh.pos = list(args)
        return 0
    return 0


@builtin("shopt")
def b_shopt(ctx, argv):
    sh = ctx.shell
    on = None
    names = []
    for a in argv[1:]:
        if a == "-s":
            on = True
        elif a == "-u":
            on = False
        elif a in ("-q", "-o", "-p"):
            pass
        else:
            names.append(a)
    for n in names:
        if on is None:
            yield s2b("%-15s\t%s\n" % (n, "on" if sh.opts.get(n) else "off"))
        else:
            sh.opts[n] = on
    return 0


@builtin("shift")
def b_shift(ctx, argv):
    sh = ctx.shell
    n = 1
    if len(argv) > 1:
        try:
            n = int(argv[1])
        except ValueError:
            sh.err(ctx.io, "shift: %s: numeric argument required" % argv[1])
            return 1
    if n > len(sh.pos) or n < 0:
        return 1
    sh.pos = sh.pos[n:]
    return 0


def _declare_assign(sh, ctx, args, local, flags=""):
    status = 0
    for a in args:
        m = _ASSIGN_RE.match(a)
        if m:
            name = m.group(1)
            value = a[m.end():]
            if m.group(2):
                sh.set_index(name, sh.arith(m.group(2)[1:-1]) if "A" not in flags else m.group(2)[1:-1], value)
                continue
            if value.startswith("(") and value.endswith(")"):
                inner = value[1:-1]
                words = Parser(inner).lex
                vals = []
                while True:
                    t = words.next()
                    if t[0] == "E":
                        break
                    if t[0] == "W":
                        vals.append(t[1])
                fields = sh.expand_words(vals, ctx.io)
                if "A" in flags:
                    d = {}
                    for x in fields:
                        mm = re.match(r"\[(.*?)\]=(.*)", x, re.S)
                        if mm:
                            d[mm.group(1)] = mm.group(2)
                    sh.set_var(name, d, local=local)
                else:
                    sh.set_var(name, fields, local=local)
            else:
                if m.group(3):
                    value = (sh.get_var(name) or "") + value
                if "i" in flags:
                    value = str(sh.arith(value))
                if "l" in flags:
                    value = value.lower()
                if "u" in flags:
                    value = value.upper()
                sh.set_var(name, value, local=local)
            if "x" in flags:
                sh.export(name)
            if "r" in flags:
                sh.readonly.add(name)
        elif _NAME_RE.fullmatch(a):
            if local:
                cur = None
                sh.declare_local(a, {} if "A" in flags else ([] if "a" in flags else cur))
            elif "A" in flags and not isinstance(sh.get_var(a), dict):
                sh.set_var(a, {})
            elif "a" in flags and sh.get_var(a) is None:
                sh.set_var(a, [])
            if "x" in flags:
                sh.export(a)
            if "r" in flags:
                sh.readonly.add(a)
        else:
            sh.err(ctx.io, "%s: `%s': not a valid identifier" % (ctx.name, a))
            status = 1
    return status


@builtin("local")
def b_local(ctx, argv):
    sh = ctx.shell
    if not sh.locals:
        sh.err(ctx.io, "local: can only be used in a function")
        return 1
    flags = ""
    args = []
    for a in argv[1:]:
        if a.startswith("-") and len(a) > 1 and not args:
            flags += a[1:]
        else:
            args.append(a)
    return _declare_assign(sh, ctx, args, True, flags)


@builtin("declare", "typeset")
def b_declare(ctx, argv):
    sh = ctx.shell
    flags = ""
    args = []
    for a in argv[1:]:
        if a[:1] in ("-", "+") and len(a) > 1 and not args:
            if a[0] == "-":
                flags += a[1:]
        else:
            args.append(a)
    if "f" in flags or "F" in flags:
        for n in (args or sorted(sh.functions)):
            if n in sh.functions:
                yield s2b((n if "F" in flags else "%s ()" % n) + "\n")
        return 0
    if not args:
        if "p" in flags or not flags or "x" in flags:
            names = sorted(sh.exported if "x" in flags else sh.vars, key=s2b)
            for k in names:
                v = sh.get_var(k)
                if v is None or k.startswith("__"):
                    continue
                if isinstance(v, list):
                    yield s2b("declare -a %s=(%s)\n" % (k, " ".join('[%d]="%s"' % (i, _dq_escape(x)) for i, x in enumerate(v) if x is not None)))
                elif isinstance(v, dict):
                    yield s2b("declare -A %s=(%s)\n" % (k, " ".join('[%s]="%s" ' % (i, _dq_escape(x)) for i, x in v.items())))
                else:
                    yield s2b('declare -%s %s="%s"\n' % ("x" if k in sh.exported else "-", k, _dq_escape(v)))
        return 0
    if "p" in flags:
        status = 0
        for k in args:
            v = sh.get_var(k)
            if v is None:
                sh.err(ctx.io, "declare: %s: not found" % k)
                status = 1
                continue
            if isinstance(v, list):
                yield s2b("declare -a %s=(%s)\n" % (k, " ".join('[%d]="%s"' % (i, _dq_escape(x)) for i, x in enumerate(v) if x is not None)))
            elif isinstance(v, dict):
                yield s2b("declare -A %s=(%s)\n" % (k, " ".join('[%s]="%s" ' % (i, _dq_escape(x)) for i, x in v.items())))
            else:
                yield s2b('declare -%s %s="%s"\n' % ("x" if k in sh.exported else "-", k, _dq_escape(v)))
        return status
    local = bool(sh.locals) and "g" not in flags
    return _declare_assign(sh, ctx, args, local, flags)


@builtin("readonly")
def b_readonly(ctx, argv):
    sh = ctx.shell
    args = [a for a in argv[1:] if not a.startswith("-")]
    for a in args:
        m = _ASSIGN_RE.match(a)
        name = m.group(1) if m else a
        if m:
            sh.set_var(name, a[m.end():])
        sh.readonly.add(name)
    return 0


@builtin("return")
def b_return(ctx, argv):
    sh = ctx.shell
    status = sh.last_status
    if len(argv) > 1:
        try:
            status = int(argv[1]) & 0xFF
        except ValueError:
            sh.err(ctx.io, "return: %s: numeric argument required" % argv[1])
            status = 2
    if not sh.funcnest and not getattr(sh, "sourcing", 0):
        sh.err(ctx.io, "return: can only `return' from a function or sourced script")
        return 1
    raise FuncReturn(status)


@builtin("exit")
def b_exit(ctx, argv):
    sh = ctx.shell
    status = sh.last_status
    if len(argv) > 1:
        try:
            status = int(argv[1]) & 0xFF
        except ValueError:
            sh.err(ctx.io, "exit: %s: numeric argument required" % argv[1])
            status = 2
    raise ShellExit(status)


@builtin("break", "continue")
def b_break(ctx, argv):
    sh = ctx.shell
    n = 1
    if len(argv) > 1:
        try:
            n = int(argv[1])
        except ValueError:
            sh.err(ctx.io, "%s: %s: numeric argument required" % (argv[0], argv[1]))
            raise ShellExit(128)
        if n < 1:
            sh.err(ctx.io, "%s: %s: loop count out of range" % (argv[0], argv[1]))
            return 1
    if not sh.loop_depth:
        sh.err(ctx.io, "%s: only meaningful in a `for', `while', or `until' loop" % argv[0])
        return 0
    n = min(n, sh.loop_depth)
    if argv[0] == "break":
        raise LoopBreak(n)
    raise LoopContinue(n)


@builtin("read")
def b_read(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    raw = False
    delim = "\n"
    nchars = None
    array = None
    prompt = None
    names = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not names:
            j = 1
            while j < len(a):
                c = a[j]
                if c in "rs":
                    raw = raw or c == "r"
                    j += 1
                    continue
                if c in "dnNapt u":
                    val = a[j + 1 :]
                    if not val:
                        i += 1
                        val = args[i] if i < len(args) else ""
                    if c == "d":
                        delim = val[:1] if val else "\x00"
                    elif c in "nN":
                        nchars = int(val)
                    elif c == "a":
                        array = val
                    elif c == "p":
                        prompt = val
                    break
                sh.err(ctx.io, "read: -%s: invalid option" % c)
                return 2
        else:
            names.append(a)
        i += 1
    del prompt
    stdin = ctx.stdin
    dl = s2b(delim)
    if nchars is not None:
        data = stdin.read(nchars)
        got = bool(data)
        line = b2s(data)
        eof = len(data) < nchars
    elif dl == b"\n":
        data = stdin.readline()
        eof = not data.endswith(b"\n")
        got = bool(data)
        line = b2s(data[:-1] if not eof else data)
        if not raw:
            while line.endswith("\\") and not eof and not line.endswith("\\\\"):
                more = stdin.readline()
                eof = not more.endswith(b"\n")
                line = line[:-1] + b2s(more[:-1] if not eof else more)
    else:
        buf = []
        eof = True
        while True:
            c = stdin.read(1)
            if not c:
                break
            if c == dl:
                eof = False
                break
            buf.append(c)
        data = b"".join(buf)
        got = bool(data) or not eof
        line = b2s(data)
    if not raw:
        line = re.sub(r"\\(.)", r"\1", line, flags=re.S)
    ifs = sh.get_var("IFS")
    if ifs is None:
        ifs = " \t\n"
    if array is not None:
        fields = _split_ifs(line, ifs, None)
        sh.set_var(array, fields)
        return 0 if got and not eof else (1 if eof else 0) if not got else 1 if eof else 0
    if not names:
        sh.set_var("REPLY", line)
    else:
        fields = _split_ifs(line, ifs, len(names))
        for k, name in enumerate(names):
            sh.set_var(name, fields[k] if k < len(fields) else "")
    return 1 if eof else 0


def _split_ifs(line, ifs, n):
    """read's splitting: at most n fields, the last taking the rest (IFS whitespace trimmed)."""
    if not ifs:
        return [line]
    ws = "".join(c for c in ifs if c in " \t\n")
    rx = _ifs_regex(ifs)
    s = line.strip(ws) if ws else line
    fields = []
    pos = 0
    while True:
        if n is not None and len(fields) == n - 1:
            rest = s[pos:]
            if ws:
                rest = rest.rstrip(ws)
            # a trailing single non-whitespace delimiter is dropped
            nws = [c for c in ifs if c not in " \t\n"]
            if nws and rest and rest[-1] in nws and len(rest) >= 1:
                m = rx.search(rest)
                if m and m.end() == len(rest) and m.start() > 0 and rx.search(rest[:m.start()]) is None:
                    rest = rest[: m.start()]
            fields.append(rest)
            break
        m = rx.search(s, pos)
        if not m:
            if pos < len(s) or (fields and pos <= len(s) and s[pos:] != "") :
                fields.append(s[pos:])
            elif pos < len(s):
                fields.append(s[pos:])
            break
        fields.append(s[pos : m.start()])
        pos = m.end()
        if pos >= len(s):
            break
    return fields


@builtin("eval")
def b_eval(ctx, argv):
    sh = ctx.shell
    src = " ".join(argv[1:])
    if not src.strip():
        return 0
    chan = ctx.io.chan
    line = sh.lineno
    try:
        p = Parser(src, line=line)
        status = 0
        while True:
            try:
                node = p.next_command()
            except ParseError as e:
                sh.err(ctx.io, "%s" % e.msg)
                return 2
            if node is None:
                break
            status = yield from sh.exec_list(node, ctx.io)
        return status
    finally:
        del chan


@builtin(".", "source")
def b_source(ctx, argv):
    sh = ctx.shell
    if len(argv) < 2:
        sh.err(ctx.io, "%s: filename argument required" % argv[0])
        return 2
    path = argv[1]
    if "/" not in path and not os.path.exists(path):
        for d in (sh.get_var("PATH") or "").split(":"):
            if d and os.path.isfile(os.path.join(d, path)):
                path = os.path.join(d, path)
                break
    try:
        with open(path, "rb") as f:
            src = b2s(f.read())
    except OSError as e:
        sh.err(ctx.io, "%s: %s" % (argv[1], _strerror(e)))
        return 1
    saved_pos = sh.pos
    if len(argv) > 2:
        sh.pos = argv[2:]
    sh.sourcing = getattr(sh, "sourcing", 0) + 1
    try:
        p = Parser(src)
        status = 0
        while True:
            try:
                node = p.next_command()
            except ParseError as e:
                ctx.stderr.write(s2b("%s: line %d: %s\n" % (argv[1], e.line, e.msg)))
                return 2
            if node is None:
                break
            status = yield from sh.exec_list(node, ctx.io)
        return status
    except FuncReturn as r:
        return r.status
    finally:
        sh.sourcing -= 1
        if len(argv) > 2:
            sh.pos = saved_pos


def _kind_of(sh, name):
    if name in RESERVED and name not in ("!",):
        return "keyword"
    if name in sh.functions:
        return "function"
    if name in BUILTINS and name not in _NOT_BUILTIN:
        return "builtin"
    if sh.lookup(name) is not None or name in BUILTINS:
        return "file"
    if "/" in name and os.path.isfile(name) and os.access(name, os.X_OK):
        return "path"
    return None


_NOT_BUILTIN = frozenset(["python", "python3", "pip", "pip3", "which", "env", "sleep", "yes", "bash", "sh",
                          "printenv"])


def _cmd_path(name):
    return "/usr/bin/" + name


@builtin("type")
def b_type(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    flag = ""
    while args and args[0].startswith("-"):
        flag += args[0][1:]
        args = args[1:]
    status = 0
    for n in args:
        k = _kind_of(sh, n)
        if k is None:
            if "t" not in flag and "p" not in flag:
                sh.err(ctx.io, "type: %s: not found" % n)
            status = 1
            continue
        if "t" in flag:
            yield s2b(k + "\n")
        elif "p" in flag or "P" in flag:
            if k == "file":
                yield s2b(_cmd_path(n) + "\n")
        elif k == "keyword":
            yield s2b("%s is a shell keyword\n" % n)
        elif k == "function":
            yield s2b("%s is a function\n" % n)
        elif k == "builtin":
            yield s2b("%s is a shell builtin\n" % n)
        elif k == "path":
            yield s2b("%s is %s\n" % (n, n))
        else:
            yield s2b("%s is %s\n" % (n, _cmd_path(n)))
    return status


@builtin("command")
def b_command(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    flag = ""
    while args and args[0].startswith("-") and len(args[0]) > 1:
        flag += args[0][1:]
        args = args[1:]
    if "v" in flag or "V" in flag:
        status = 0
        for n in args:
            k = _kind_of(sh, n)
            if k is None:
                if "V" in flag:
                    sh.err(ctx.io, "command: %s: not found" % n)
                status = 1
                continue
            if "V" in flag:
                yield s2b({"keyword": "%s is a shell keyword", "function": "%s is a function",
                           "builtin": "%s is a shell builtin"}.get(k, "%s is " + _cmd_path(n)).replace("%s", n, 1) + "\n")
            elif k == "file":
                yield s2b(_cmd_path(n) + "\n")
            else:
                yield s2b(n + "\n")
        return status
    if not args:
        return 0
    name = args[0]
    cmd = BUILTINS.get(name) or sh.lookup(name)
    if cmd is None:
        return (yield from sh.run_argv(args, ctx.io)) if "/" in name else _not_found(sh, ctx, name)
    saved = sh.functions
    sh.functions = {}
    try:
        gen = sh.run_argv(args, ctx.io)
    finally:
        sh.functions = saved
    return (yield from gen)


def _not_found(sh, ctx, name):
    sh.err(ctx.io, "%s: command not found" % name)
    return 127


@builtin("builtin")
def b_builtin(ctx, argv):
    if len(argv) < 2:
        return 0
    f = BUILTINS.get(argv[1])
    if f is None or argv[1] in _NOT_BUILTIN:
        ctx.shell.err(ctx.io, "builtin: %s: not a shell builtin" % argv[1])
        return 1
    r = f(ctx, argv[1:])
    if type(r) is _GeneratorType:
        r = yield from r
    return r


@builtin("which")
def b_which(ctx, argv):
    sh = ctx.shell
    status = 0
    names = [a for a in argv[1:] if not a.startswith("-")]
    if not names:
        return 1
    for n in names:
        if "/" in n:
            if os.path.isfile(n) and os.access(n, os.X_OK):
                yield s2b(n + "\n")
            else:
                status = 1
            continue
        if n in _NOT_BUILTIN or (n in BUILTINS and n in _WHICH_FILES) or sh.lookup(n) is not None:
            yield s2b(_cmd_path(n) + "\n")
        else:
            status = 1
    return status


_WHICH_FILES = frozenset(["echo", "printf", "pwd", "test", "[", "true", "false", "kill", "sleep", "env"])


@builtin("env", "printenv")
def b_env(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    if argv[0] == "printenv":
        if not args:
            for k, v in os.environ.items():
                yield s2b("%s=%s\n" % (k, v))
            return 0
        status = 0
        for n in args:
            v = os.environ.get(n)
            if v is None:
                status = 1
            else:
                yield s2b(v + "\n")
        return status
    unset = []
    clear = False
    while args and args[0].startswith("-") and args[0] != "-":
        a = args.pop(0)
        if a in ("-i", "--ignore-environment"):
            clear = True
        elif a in ("-u", "--unset"):
            unset.append(args.pop(0) if args else "")
        elif a.startswith("-u"):
            unset.append(a[2:])
        elif a == "--":
            break
        else:
            ctx.error("invalid option -- '%s'" % a.lstrip("-")[:1])
            ctx.stderr.write(b"Try 'env --help' for more information.\n")
            return 125
    if args and args[0] == "-":
        clear = True
        args = args[1:]
    sets = []
    while args and "=" in args[0] and not args[0].startswith("="):
        k, v = args.pop(0).split("=", 1)
        sets.append((k, v))
    if not args:
        env = {} if clear else dict(os.environ)
        for n in unset:
            env.pop(n, None)
        for k, v in sets:
            env[k] = v
        for k, v in env.items():
            yield s2b("%s=%s\n" % (k, v))
        return 0
    # run the command with the changed environment
    st = sh.save()
    try:
        if clear:
            for k in list(sh.exported):
                sh.unset_var(k)
        for n in unset:
            sh.unset_var(n)
        for k, v in sets:
            sh.export(k, v)
        saved_fn = sh.functions
        sh.functions = {}
        try:
            gen = sh.run_argv(args, ctx.io)
        finally:
            sh.functions = saved_fn
        name = args[0]
        if BUILTINS.get(name) is None and sh.lookup(name) is None and "/" not in name:
            ctx.stderr.write(s2b("env: '%s': No such file or directory\n" % name))
            gen.close()
            return 127
        return (yield from gen)
    finally:
        sh.restore(st)


@builtin("sleep")
def b_sleep(ctx, argv):
    import time
    total = 0.0
    if len(argv) < 2:
        ctx.error("missing operand")
        ctx.stderr.write(b"Try 'sleep --help' for more information.\n")
        return 1
    for a in argv[1:]:
        m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([smhd]?)", a)
        if not m:
            ctx.error("invalid time interval '%s'" % a)
            ctx.stderr.write(b"Try 'sleep --help' for more information.\n")
            return 1
        total += float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    time.sleep(total)
    return 0


@builtin("yes")
def b_yes(ctx, argv):
    text = " ".join(argv[1:]) if len(argv) > 1 else "y"
    line = s2b(text + "\n")
    block = line * max(1, 8192 // len(line))
    while True:
        yield block


@builtin("test", "[")
def b_test(ctx, argv):
    args = argv[1:]
    if argv[0] == "[":
        if not args or args[-1] != "]":
            ctx.shell.err(ctx.io, "[: missing `]'")
            return 2
        args = args[:-1]
    try:
        return 0 if _Test(args).run() else 1
    except CmdError as e:
        ctx.shell.err(ctx.io, "%s: %s" % (argv[0], e.msg))
        return 2


@builtin("let")
def b_let(ctx, argv):
    v = 0
    for a in argv[1:]:
        v = ctx.shell.arith(a)
    return 0 if v else 1


@builtin("umask")
def b_umask(ctx, argv):
    if len(argv) > 1:
        try:
            os.umask(int(argv[1], 8))
        except (ValueError, OSError):
            return 1
        return 0
    try:
        m = os.umask(0o22)
        os.umask(m)
    except OSError:
        m = 0o22
    yield s2b("%04o\n" % m)
    return 0


@builtin("hash", "times", "ulimit", "suspend", "bind", "history", "alias", "unalias", "enable",
         "caller", "dirs", "pushd", "popd", "fc", "help", "logout", "compgen", "complete")
def b_noop(ctx, argv):
    if argv[0] == "ulimit":
        yield b"unlimited\n"
    return 0


@builtin("trap")
def b_trap(ctx, argv):
    """EXIT runs when the script (or subshell) ends; signal traps are accepted and never fire,
    nothing in the sandbox sending signals to the shell."""
    sh = ctx.shell
    args = argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0] in ("-p", "-l"):
        if not args or args[0] == "-p":
            for k, v in sorted(sh.traps.items()):
                yield s2b("trap -- %s %s\n" % (shell_quote(v), k))
        return 0
    if len(args) == 1:
        action, sigs = "-", args
    else:
        action, sigs = args[0], args[1:]
    for sig in sigs:
        name = sig.upper()
        if name.startswith("SIG"):
            name = name[3:]
        if name in ("0", "EXIT"):
            name = "EXIT"
        if action == "-":
            sh.traps.pop(name, None)
        else:
            sh.traps[name] = action
    return 0


@builtin("exec")
def b_exec(ctx, argv):
    """exec CMD: runs CMD, then the shell ends with its status (no process to replace);
    exec with redirections only is handled by exec_simple (they stay for the shell)."""
    args = argv[1:]
    while args and args[0].startswith("-") and args[0] != "--":
        args = args[1:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        return 0
    status = yield from ctx.shell.run_argv(args, ctx.io)
    raise ShellExit(status)


@builtin("kill", "wait", "jobs", "fg", "bg", "coproc", "disown")
def b_refused(ctx, argv):
    if argv[0] == "wait" and len(argv) == 1:
        return 0
    ctx.shell.err(ctx.io, "%s: not supported in the sandbox (no processes)" % argv[0])
    return 2


@builtin("mapfile", "readarray")
def b_mapfile(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    strip = False
    name = "MAPFILE"
    delim = b"\n"
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-t":
            strip = True
        elif a == "-d":
            i += 1
            delim = s2b(args[i][:1]) if i < len(args) and args[i] else b"\x00"
        elif a.startswith("-"):
            i += 1
        else:
            name = a
        i += 1
    data = ctx.stdin.read()
    items = []
    pos = 0
    while pos < len(data):
        j = data.find(delim, pos)
        if j < 0:
            items.append(data[pos:])
            break
        items.append(data[pos : j if strip else j + 1])
        pos = j + 1
    sh.set_var(name, [b2s(x) for x in items])
    return 0


@builtin("getopts")
def b_getopts(ctx, argv):
    sh = ctx.shell
    if len(argv) < 3:
        sh.err(ctx.io, "getopts: usage: getopts optstring name [arg ...]")
        return 2
    spec, name = argv[1], argv[2]
    args = argv[3:] if len(argv) > 3 else list(sh.pos)
    silent = spec.startswith(":")
    try:
        optind = int(sh.get_var("OPTIND") or "1")
    except ValueError:
        optind = 1
    sub = getattr(sh, "_optsub", 1)
    if optind != getattr(sh, "_optlast", None):
        sub = 1
    if optind > len(args):
        sh.set_var(name, "?")
        return 1
    a = args[optind - 1]
    if a == "--" and sub == 1:
        sh.set_var("OPTIND", str(optind + 1))
        sh.set_var(name, "?")
        return 1
    if not a.startswith("-") or a == "-":
        sh.set_var(name, "?")
        return 1
    c = a[sub]
    sub += 1
    if sub >= len(a):
        optind += 1
        sub = 1
    k = spec.find(c)
    if k < 0 or c == ":":
        if silent:
            sh.set_var("OPTARG", c)
        else:
            ctx.stderr.write(s2b("bash: illegal option -- %s\n" % c))
            sh.unset_var("OPTARG")
        sh.set_var(name, "?")
    elif k + 1 < len(spec) and spec[k + 1] == ":":
        if sub > 1:
            sh.set_var("OPTARG", a[sub:])
            optind += 1
            sub = 1
        elif optind <= len(args):
            sh.set_var("OPTARG", args[optind - 1])
            optind += 1
        else:
            if silent:
                sh.set_var(name, ":")
                sh.set_var("OPTARG", c)
            else:
                ctx.stderr.write(s2b("bash: option requires an argument -- %s\n" % c))
                sh.set_var(name, "?")
            sh.set_var("OPTIND", str(optind))
            sh._optsub, sh._optlast = sub, optind
            return 0
        sh.set_var(name, c)
    else:
        sh.unset_var("OPTARG")
        sh.set_var(name, c)
    sh.set_var("OPTIND", str(optind))
    sh._optsub, sh._optlast = sub, optind
    return 0


@builtin("bash", "sh")
def b_bash(ctx, argv):
    sh = ctx.shell
    args = argv[1:]
    opts = []
    src = None
    name = "-c"
    while args and args[0].startswith("-") and args[0] not in ("-", "--"):
        a = args.pop(0)
        if a == "-c":
            if not args:
                sh.err(ctx.io, "-c: option requires an argument")
                return 2
            src = args.pop(0)
            break
        if a in ("-e", "-u", "-x", "-o"):
            opts.append(a)
            if a == "-o" and args:
                opts.append(args.pop(0))
        elif "c" in a[1:]:
            opts.append("-" + a[1:].replace("c", ""))
            src = args.pop(0) if args else ""
            break
        elif a in ("-l", "--login", "-i", "--norc", "--noprofile", "-s"):
            pass
        else:
            opts.append(a)
    if args and args[0] == "--":
        args = args[1:]
    arg0 = sh.arg0
    if src is None:
        if args:
            path = args[0]
            try:
                with open(path, "rb") as f:
                    src = b2s(f.read())
            except OSError as e:
                ctx.stderr.write(s2b("bash: %s: %s\n" % (path, _strerror(e))))
                return 127
            arg0 = path
            pos = args[1:]
            name = path
        else:
            src = b2s(ctx.stdin.read())
            pos = []
    else:
        if args:
            arg0 = args[0]
            pos = args[1:]
        else:
            pos = []
    st = sh.save()
    saved = (sh.arg0, sh.funcnest, sh.cond_depth, sh.loop_depth)
    sh.locals = []
    sh.localcount = {}
    sh.pos = pos
    sh.arg0 = arg0
    sh.funcnest = 0
    sh.cond_depth = 0
    sh.loop_depth = 0
    # a new shell: non-exported variables and functions are not inherited
    sh.vars = {k: v for k, v in sh.vars.items() if k in sh.exported or k in ("IFS", "PS4", "OPTIND", "PWD")}
    sh.functions = {}
    sh.opts = {}
    if opts:
        try:
            list(b_set(ctx, ["set"] + opts))
        except Exception:
            pass
    try:
        status = yield from sh.run_source(src, ctx.io, name)
    except ShellExit as e:
        status = e.status
    except ShellError as e:
        sh.err(ctx.io, e.msg)
        status = e.status
    except FuncReturn as e:
        status = e.status
    finally:
        sh.restore(st)
        sh.arg0, sh.funcnest, sh.cond_depth, sh.loop_depth = saved
    return status


# ---------------------------------------------------------------------------------------------
# python and pip


@builtin("python", "python3", "python3.15")
def b_python(ctx, argv):
    import io as _io
    import types as _types
    sh = ctx.shell
    args = argv[1:]
    code = None
    module = None
    path = None
    unbuffered = False
    flags = []
    while args:
        a = args[0]
        if a == "-c":
            if len(args) < 2:
                ctx.stderr.write(b"Argument expected for the -c option\n")
                return 2
            code = args[1]
            args = ["-c"] + args[2:]
            break
        if a.startswith("-c") and len(a) > 2:
            code = a[2:]
            args = ["-c"] + args[1:]
            break
        if a == "-m":
            if len(args) < 2:
                ctx.stderr.write(b"Argument expected for the -m option\n")
                return 2
            module = args[1]
            args = [module] + args[2:]
            break
        if a in ("-V", "--version"):
            yield s2b("Python %d.%d.%d\n" % sys.version_info[:3])
            return 0
        if a == "-":
            args = ["-"] + args[1:]
            break
        if a.startswith("-") and len(a) > 1:
            if a in ("-W", "-X"):
                args = args[2:]
                continue
            flags.append(a)
            unbuffered = unbuffered or "u" in a
            args = args[1:]
            continue
        path = a
        break
    if module in ("pip", "pip3"):
        return (yield from b_pip(ctx, ["pip"] + args[1:]))
    if code is None and module is None:
        if path is not None:
            try:
                with open(path, "rb") as f:
                    code = f.read()
            except OSError as e:
                ctx.stderr.write(s2b("python3: can't open file %r: [Errno %d] %s\n" % (
                    os.path.abspath(path), e.errno or 2, _strerror(e))))
                return 2
            if code.startswith(b"#!"):
                code = b"#" + code[1:]
        else:
            code = ctx.stdin.read()
            args = ["-"] + args[1:] if args else [""]
    filename = "<string>" if args and args[0] == "-c" else (path or "<stdin>")
    if module is None:
        try:
            compiled = compile(code, filename, "exec", dont_inherit=True)
        except SyntaxError:
            import traceback
            ctx.stderr.write(s2b("".join(traceback.format_exception_only(*sys.exc_info()[:2]))))
            return 1
        except ValueError as e:
            ctx.stderr.write(s2b("python3: %s\n" % e))
            return 1
    # the run: a fresh __main__, argv, stdio over the pipeline
    main = _types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    if module is None:
        main.__file__ = path if path is not None else None
        if main.__file__ is None:
            del main.__file__
    saved = (sys.modules.get("__main__"), sys.argv, sys.stdin, sys.stdout, sys.stderr, list(sys.path))
    out_buf = _KeepOpenBytesIO()
    err_w = _StreamToWriter(ctx.stderr)
    out_text = _io.TextIOWrapper(out_buf, encoding="utf-8", errors="backslashreplace", write_through=True)
    err_text = _io.TextIOWrapper(err_w, encoding="utf-8", errors="backslashreplace", write_through=True,
                                 line_buffering=True)
    in_text = _io.TextIOWrapper(_io.BufferedReader(_StdinRawIO(ctx.stdin)), encoding="utf-8",
                                errors="surrogateescape")
    status = 0
    env_before = dict(os.environ)
    try:
        sys.modules["__main__"] = main
        sys.argv = list(args) if args else [""]
        sys.stdin = in_text
        sys.stdout = out_text
        sys.stderr = err_text
        if path is not None:
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        elif module is not None or code is not None:
            sys.path.insert(0, os.getcwd() if module is not None else "")
        try:
            if module is not None:
                import runpy
                sys.modules["__main__"] = saved[0] if saved[0] is not None else main
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                exec(compiled, main.__dict__)
        except SystemExit as e:
            c = e.code
            if c is None:
                status = 0
            elif isinstance(c, int):
                status = c & 0xFF
            else:
                try:
                    print(c, file=sys.stderr)
                except Exception:
                    pass
                status = 1
        except (ShellExit, GeneratorExit, KeyboardInterrupt):
            raise
        except BaseException:
            import traceback
            etype, value, tb = sys.exc_info()
            tb = tb.tb_next if tb is not None else tb  # drop this builtin's own frame
            try:
                ctx.stderr.write(s2b("".join(traceback.format_exception(etype, value, tb))))
            except Exception:
                pass
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
    finally:
        main_mod, sys.argv, sys.stdin, sys.stdout, sys.stderr, path_saved = saved
        if main_mod is not None:
            sys.modules["__main__"] = main_mod
        else:
            sys.modules.pop("__main__", None)
        sys.path[:] = path_saved
        if dict(os.environ) != env_before:
            # a script's os.environ changes are its own process's
            for k in list(os.environ):
                if k not in env_before:
                    del os.environ[k]
            for k, v in env_before.items():
                if os.environ.get(k) != v:
                    os.environ[k] = v
    data = out_buf.getvalue()
    if data:
        yield data
    return status


def _mk_raw():
    import io as _io

    class StdinRawIO(_io.RawIOBase):
        def __init__(self, reader):
            self.reader = reader

        def readable(self):
            return True

        def readinto(self, b):
            data = self.reader.read1(len(b))
            n = len(data)
            b[:n] = data
            return n

    class WriterRawIO(_io.RawIOBase):
        def __init__(self, w):
            self.w = w

        def close(self):
            pass

        @property
        def closed(self):
            return False

        def writable(self):
            return True

        def write(self, b):
            self.w.write(bytes(b))
            return len(b)

    class KeepOpenBytesIO(_io.BytesIO):
        """sys.stdout's buffer inside `python`: a script closing sys.stdout (json.tool does)
        must not lose what it wrote."""

        def close(self):
            pass

    return StdinRawIO, WriterRawIO, KeepOpenBytesIO


_StdinRawIO, _WriterRawIO, _KeepOpenBytesIO = _mk_raw()
_StreamToWriter = _WriterRawIO

_PIP_MSG = ("ERROR: pip install %s: packages are installed by the host before the run; ask for them with "
            "the request's \"packages\" (or a `%%pip install` / `pip install` line, which the host reads "
            "before running)\n")


@builtin("pip", "pip3")
def b_pip(ctx, argv):
    import importlib.util
    args = argv[1:]
    while args and args[0] in ("-q", "--quiet", "-v", "--verbose", "--disable-pip-version-check", "--no-cache-dir"):
        args = args[1:]
    if not args:
        yield b"\nUsage:   \n  pip <command> [options]\n"
        return 0
    cmd = args[0]
    rest = args[1:]
    if cmd == "install":
        names = []
        skip = False
        for a in rest:
            if skip:
                skip = False
                continue
            if a in ("-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
                     "-t", "--target", "-f", "--find-links"):
                skip = True
                continue
            if a.startswith("-"):
                continue
            names.append(a)
        if not names:
            ctx.stderr.write(b"ERROR: You must give at least one requirement to install (see \"pip help install\")\n")
            return 1
        status = 0
        for n in names:
            base = re.split(r"[\[<>=!~; ]", n, 1)[0]
            mod = _IMPORT_NAMES.get(base.lower(), base.replace("-", "_"))
            found = False
            try:
                found = importlib.util.find_spec(mod) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                try:
                    import importlib.metadata as md
                    md.distribution(base)
                    found = True
                except Exception:
                    found = False
            if found:
                yield s2b("Requirement already satisfied: %s\n" % n)
            else:
                ctx.stderr.write(s2b(_PIP_MSG % n))
                status = 1
        return status
    if cmd in ("list", "freeze"):
        import importlib.metadata as md
        dists = {}
        for d in md.distributions():
            try:
                name = d.metadata["Name"]
            except Exception:
                name = None
            if name and name not in dists:
                dists[name] = d.version
        items = sorted(dists.items(), key=lambda kv: kv[0].lower())
        if cmd == "freeze":
            for k, v in items:
                yield s2b("%s==%s\n" % (k, v))
        else:
            w = max([len("Package")] + [len(k) for k in dists])
            vw = max([len("Version")] + [len(v) for v in dists.values()])
            yield s2b("%s %s\n%s %s\n" % ("Package".ljust(w), "Version".ljust(vw), "-" * w, "-" * vw))
            for k, v in items:
                yield s2b("%s %s\n" % (k.ljust(w), v))
        return 0
    if cmd == "show":
        import importlib.metadata as md
        status = 0
        for n in rest:
            try:
                d = md.distribution(n)
            except Exception:
                ctx.stderr.write(s2b("WARNING: Package(s) not found: %s\n" % n))
                status = 1
                continue
            meta = d.metadata
            yield s2b("Name: %s\nVersion: %s\nSummary: %s\n" % (meta["Name"], d.version, meta.get("Summary", "")))
        return status
    if cmd in ("--version", "-V"):
        yield b"pip (sandbox)\n"
        return 0
    if cmd == "uninstall":
        ctx.stderr.write(b"ERROR: pip uninstall: packages cannot be removed inside the sandbox\n")
        return 1
    ctx.stderr.write(s2b("ERROR: unknown command \"%s\"\n" % cmd))
    return 1


_IMPORT_NAMES = {"scikit-learn": "sklearn", "pillow": "PIL", "beautifulsoup4": "bs4", "pyyaml": "yaml",
                 "opencv-python": "cv2", "python-dateutil": "dateutil", "scikit-image": "skimage"}


# ---------------------------------------------------------------------------------------------
# the registry and the entry points


def load_registry():
    import importlib
    reg = {}
    for mod in ("vivarium_shell_text", "vivarium_shell_lang", "vivarium_shell_files"):
        try:
            m = sys.modules.get(mod) or importlib.import_module(mod)
        except ImportError:
            continue
        except Exception:
            continue
        cmds = getattr(m, "COMMANDS", None)
        if isinstance(cmds, dict):
            for k, v in cmds.items():
                if k not in BUILTINS or k in ("which", "env", "sleep", "yes", "printenv") and False:
                    reg[k] = v
    return reg


COMMANDS = {}
_STATE = None
_DEPTH = 0


def _stream_writer(stream):
    b = getattr(stream, "buffer", None)
    if b is not None:
        return StreamWriter(b), b
    return StreamWriter(stream, text=True), stream


def _run(source, persist, capture):
    global _STATE
    if isinstance(source, (bytes, bytearray)):
        source = b2s(bytes(source))
    out_w, out_stream = _stream_writer(sys.stdout)
    err_w, err_stream = _stream_writer(sys.stderr)
    try:
        sys.stdout.flush()
    except Exception:
        pass
    chunks = []
    global _DEPTH
    if _DEPTH:
        # a run inside a run (Python run by the shell calling run() again): its own shell
        sh = Shell()
        st = None if persist else (os.getcwd(), dict(os.environ))
    elif persist:
        if _STATE is None:
            _STATE = Shell()
        sh = _STATE
        sh.import_env()
        if not _same_dir(sh.get_var("PWD"), "."):
            sh.vars["PWD"] = os.getcwd()
        st = None
    else:
        sh = Shell()
        st = (os.getcwd(), dict(os.environ))
    chan = Channel()
    io = IO({0: Reader(b""), 1: chan, 2: err_w}, chan)
    sh.cond_depth = sh.loop_depth = sh.funcnest = 0
    sh.locals = []
    sh.localcount = {}
    sh.env_log = []
    limit = sys.getrecursionlimit()
    want = 20000 if sys.version_info >= (3, 12) else 12000
    if limit < want:
        sys.setrecursionlimit(want)
    else:
        limit = None
    status = 0
    _DEPTH += 1
    try:
        gen = merge(_program(sh, source, io), chan)
        try:
            if capture:
                for chunk in gen:
                    chunks.append(chunk)
            else:
                n = 0
                send = gen.send
                try:
                    chunk = send(None)
                    while True:
                        try:
                            out_w.write(chunk)
                            n += len(chunk)
                            if n > 1 << 20:
                                n = 0
                                out_w.stream.flush()
                        except OSError as e:
                            # the command that yielded this chunk fails with a write error
                            chunk = gen.throw(OutputError(e))
                            continue
                        chunk = send(None)
                except StopIteration:
                    pass
            status = sh.last_status
        except OutputError as e:
            sh.err(io, "write error: %s" % e)
            status = 1
        except ShellExit as e:
            status = e.status
        except ShellError as e:
            sh.err(io, e.msg)
            status = e.status
        except FuncReturn as e:
            status = e.status
        except (LoopBreak, LoopContinue):
            status = 0
        except RecursionError:
            err_w.write(s2b("bash: line %d: maximum recursion depth exceeded (functions nested too deeply "
                            "for the sandbox's stack)\n" % sh.lineno))
            status = 1
        except Exception as e:
            if os.environ.get("VIVARIUM_SHELL_DEBUG"):
                import traceback
                err_w.write(s2b(traceback.format_exc()))
            err_w.write(s2b("bash: internal error: %s: %s\n" % (type(e).__name__, e)))
            status = 2
    finally:
        _DEPTH -= 1
        if limit is not None:
            sys.setrecursionlimit(limit)
        if st is not None:
            cwd, env = st
            try:
                os.chdir(cwd)
            except OSError:
                pass
            if dict(os.environ) != env:
                for k in list(os.environ):
                    if k not in env:
                        del os.environ[k]
                for k, v in env.items():
                    if os.environ.get(k) != v:
                        os.environ[k] = v
        out_w.flush()
        err_w.flush()
    sh.last_status = status
    return status, b"".join(chunks)


def _program(sh, source, io):
    try:
        status = yield from sh.run_source(source, io)
    except ShellAbort as e:
        sh.err(io, e.msg)
        status = e.status
    except ShellExit as e:
        status = e.status
    except ShellError as e:
        sh.err(io, e.msg)
        status = e.status
    except FuncReturn as e:
        status = e.status
    except (LoopBreak, LoopContinue):
        status = 0
    status = yield from sh.exit_trap(status, io)
    sh.last_status = status
    for f in sh.exec_files:
        try:
            f.close()
        except Exception:
            pass
    sh.exec_files = []
    if sh.temp_files:
        sh.remove_temp_files()
    return status


def run(source, *, persist=True):
    """Runs a shell script; stdout and stderr go to sys.stdout/sys.stderr; returns the status."""
    try:
        return _run(source, persist, False)[0]
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        try:
            sys.stderr.write("bash: internal error: %s: %s\n" % (type(e).__name__, e))
        except Exception:
            pass
        return 2


def command(line, cwd):
    """Runs a command line as a new process would (E2B's `commands.run`): in `cwd`, nothing
    of its `cd` or `export` kept; returns its exit status, 0-255, an `exit` included (never
    raised: it is a status, not the session's end)."""
    here = os.getcwd()
    try:
        os.chdir(cwd)
    except OSError as e:
        sys.stderr.write("bash: line 1: cd: %s: %s\n" % (cwd, e.strerror))
        return 1
    try:
        status = run(line, persist=False)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(here)
        sys.stdout.flush()
        sys.stderr.flush()
    return (status or 0) & 0xFF if isinstance(status, int) else 1


def run_capture(source, *, persist=False):
    """Runs a script capturing its stdout: (status, stdout bytes); stderr goes to sys.stderr."""
    try:
        return _run(source, persist, True)
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        try:
            sys.stderr.write("bash: internal error: %s: %s\n" % (type(e).__name__, e))
        except Exception:
            pass
        return 2, b""
