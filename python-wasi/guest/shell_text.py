"""Text commands of Vivarium's guest shell, loaded into every template as `vivarium_shell_text`
(issue 49; the command API is described in `vivarium_shell`): cat head tail wc grep sort uniq
cut tr paste tee xargs seq diff cmp base64 sha256sum md5sum (and the other sha*sum).

Every command is a generator `fn(ctx, argv)` that yields stdout bytes and returns its exit
status; input is pulled lazily from `ctx.stdin` or files, so `yes | head -1` stops early.
GNU coreutils / grep / diffutils under LC_ALL=C are the reference: options, output formats
byte for byte, messages and exit statuses. Everything is bytes; comparisons are byte order."""

import os
import re
import time
import fnmatch
import warnings
import hashlib
import binascii
from collections import deque
from decimal import Decimal, InvalidOperation

BLOCK = 1 << 16
_OUT = 1 << 15  # batch output into chunks of about this size


# ---------------------------------------------------------------------------------------------
# Common machinery: errors, GNU-style option parsing, opening inputs
# ---------------------------------------------------------------------------------------------


class _Usage(Exception):
    """A command-line error: message, then the 'Try --help' hint."""


class _Fatal(Exception):
    """An error that ends the command with `status` after printing `name: msg`."""

    def __init__(self, msg, status=1):
        super().__init__(msg)
        self.msg = msg
        self.status = status


def _b(s):
    if isinstance(s, bytes):
        return s
    return os.fsencode(s)


def _s(b):
    if isinstance(b, str):
        return b
    return os.fsdecode(b)


def _err(ctx, name, msg):
    ctx.stderr.write(_b(name) + b": " + _b(msg) + b"\n")


def _oserr(ctx, name, fname, e):
    msg = os.strerror(e.errno) if getattr(e, "errno", None) else str(e)
    _err(ctx, name, f"{_s(fname)}: {msg}")


_USAGE_LINES = {
    "grep": "Usage: grep [OPTION]... PATTERNS [FILE]...\n",
}
_DIFF_STYLE = {"diff", "cmp"}


def _usage_text(name, msg):
    out = ""
    if msg:
        out = f"{name}: {msg}\n"
    out += _USAGE_LINES.get(name, "")
    if name in _DIFF_STYLE:
        out += f"{name}: Try '{name} --help' for more information.\n"
    else:
        out += f"Try '{name} --help' for more information.\n"
    return out


def _command(fn, status=1):
    """Wraps a command body: usage errors and fatal errors become GNU's messages and status."""

    def cmd(ctx, argv):
        name = os.path.basename(argv[0]) if argv else fn.__name__
        try:
            r = yield from fn(ctx, [name] + list(argv[1:]))
        except _Usage as u:
            ctx.stderr.write(_b(_usage_text(name, str(u))))
            return status
        except _Fatal as f:
            if f.msg:
                _err(ctx, name, f.msg)
            return f.status
        return r if r is not None else 0

    cmd.__name__ = fn.__name__
    cmd.__doc__ = fn.__doc__
    return cmd


def _getopt(argv, short, longs=None, permute=True, digits=False):
    """GNU getopt_long: `short` like "nk:t:" (':' takes an argument, '::' optional);
    `longs` maps a long name to (key, 0|1|2) (no/required/optional argument). Returns
    ([(key, value)], operands). With digits=True, `-15` gives ('#', '15')."""
    shorts = {}
    i = 0
    while i < len(short):
        c = short[i]
        i += 1
        n = 0
        while i < len(short) and short[i] == ":":
            n += 1
            i += 1
        shorts[c] = n
    longs = longs or {}
    opts = []
    ops = []
    args = argv[1:]
    k = 0
    while k < len(args):
        a = args[k]
        k += 1
        if a == "--":
            ops.extend(args[k:])
            break
        if a.startswith("--"):
            nm, eq, val = a[2:].partition("=")
            if nm in longs:
                full = nm
            else:
                cands = [ln for ln in longs if ln.startswith(nm)]
                if not cands:
                    raise _Usage(f"unrecognized option '{a}'")
                if len({longs[c] for c in cands}) > 1:
                    poss = " ".join(f"'--{c}'" for c in cands)
                    raise _Usage(f"option '--{nm}' is ambiguous; possibilities: {poss}")
                full = cands[0]
            key, n = longs[full]
            if n == 0:
                if eq:
                    raise _Usage(f"option '--{full}' doesn't allow an argument")
                opts.append((key, None))
            elif n == 1:
                if not eq:
                    if k < len(args):
                        val = args[k]
                        k += 1
                    else:
                        raise _Usage(f"option '--{full}' requires an argument")
                opts.append((key, val))
            else:
                opts.append((key, val if eq else None))
            continue
        if a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                c = a[j]
                j += 1
                if digits and c.isdigit():
                    m = j
                    while m < len(a) and a[m].isdigit():
                        m += 1
                    opts.append(("#", a[j - 1 : m]))
                    j = m
                    continue
                n = shorts.get(c)
                if n is None:
                    raise _Usage(f"invalid option -- '{c}'")
                if n == 0:
                    opts.append((c, None))
                    continue
                if j < len(a):
                    opts.append((c, a[j:]))
                elif n == 2:
                    opts.append((c, None))
                elif k < len(args):
                    opts.append((c, args[k]))
                    k += 1
                else:
                    raise _Usage(f"option requires an argument -- '{c}'")
                break
            continue
        if permute:
            ops.append(a)
        else:
            ops.extend(args[k - 1 :])
            break
    return opts, ops


def _open(ctx, fname):
    if fname == "-":
        return ctx.stdin
    return open(fname, "rb")


def _close(ctx, f):
    if f is not ctx.stdin:
        try:
            f.close()
        except OSError:
            pass


def _read_all(f):
    data = f.read()
    return data if data is not None else b""


def _blocks(f, size=BLOCK):
    while True:
        b = f.read(size)
        if not b:
            return
        yield b


class _Batch:
    """Collects output pieces; `take()` returns a chunk once enough is gathered."""

    __slots__ = ("parts", "size")

    def __init__(self):
        self.parts = []
        self.size = 0

    def add(self, b):
        self.parts.append(b)
        self.size += len(b)
        return self.size >= _OUT

    def take(self):
        out = b"".join(self.parts)
        self.parts = []
        self.size = 0
        return out


_SUFFIXES = {
    "": 1,
    "b": 512,
    "c": 1,
    "w": 2,
    "kB": 1000,
    "K": 1024,
    "k": 1024,
    "KiB": 1024,
    "KB": 1000,
    "MB": 1000**2,
    "M": 1024**2,
    "MiB": 1024**2,
    "GB": 1000**3,
    "G": 1024**3,
    "GiB": 1024**3,
    "TB": 1000**4,
    "T": 1024**4,
    "TiB": 1024**4,
    "PB": 1000**5,
    "P": 1024**5,
    "PiB": 1024**5,
    "EB": 1000**6,
    "E": 1024**6,
    "EiB": 1024**6,
}


def _size(text):
    """A count with an optional multiplier suffix (head -c 1K); None if invalid."""
    m = re.fullmatch(r"\s*(\d+)([A-Za-z]*)", text)
    if not m or m.group(2) not in _SUFFIXES:
        return None
    return int(m.group(1)) * _SUFFIXES[m.group(2)]


# ---------------------------------------------------------------------------------------------
# cat
# ---------------------------------------------------------------------------------------------


def _nonprinting_table(show_tabs):
    table = []
    for c in range(256):
        if c >= 128:
            prefix = b"M-"
            c2 = c - 128
        else:
            prefix = b""
            c2 = c
        if c2 < 32:
            if c == 9 and not show_tabs:
                s = b"\t"
            elif c == 10:
                s = b"\n"
            else:
                s = prefix + b"^" + bytes([c2 + 64])
        elif c2 == 127:
            s = prefix + b"^?"
        else:
            s = prefix + bytes([c2])
        table.append(s)
    return table


def _cat(ctx, argv):
    opts, files = _getopt(
        argv,
        "AbeEnstTuv",
        {
            "show-all": ("A", 0),
            "number-nonblank": ("b", 0),
            "show-ends": ("E", 0),
            "number": ("n", 0),
            "squeeze-blank": ("s", 0),
            "show-tabs": ("T", 0),
            "show-nonprinting": ("v", 0),
        },
    )
    number = nonblank = ends = squeeze = tabs = nonprint = False
    for k, _ in opts:
        if k == "A":
            nonprint = ends = tabs = True
        elif k == "b":
            number = nonblank = True
        elif k == "e":
            nonprint = ends = True
        elif k == "E":
            ends = True
        elif k == "n":
            number = True
        elif k == "s":
            squeeze = True
        elif k == "t":
            nonprint = tabs = True
        elif k == "T":
            tabs = True
        elif k == "v":
            nonprint = True
    files = files or ["-"]
    plain = not (number or ends or squeeze or tabs or nonprint)
    table = None
    if nonprint:
        table = _nonprinting_table(tabs)
    status = 0
    lineno = 0
    at_line_start = True
    blank_run = 0
    for fname in files:
        try:
            f = _open(ctx, fname)
        except OSError as e:
            _oserr(ctx, "cat", fname, e)
            status = 1
            continue
        try:
            if plain:
                while True:
                    b = f.read(BLOCK)
                    if not b:
                        break
                    yield b
                continue
            batch = _Batch()
            for line in f:
                has_nl = line.endswith(b"\n")
                body = line[:-1] if has_nl else line
                if at_line_start:
                    if body == b"" and has_nl:
                        blank_run += 1
                        if squeeze and blank_run > 1:
                            continue
                    else:
                        blank_run = 0
                    if number and not (nonblank and body == b""):
                        lineno += 1
                        batch.add(b"%6d\t" % lineno)
                if table is not None:
                    body = b"".join([table[c] for c in body])
                elif tabs:
                    body = body.replace(b"\t", b"^I")
                if has_nl:
                    body += b"$\n" if ends else b"\n"
                at_line_start = has_nl
                if batch.add(body):
                    yield batch.take()
            if batch.size:
                yield batch.take()
        except OSError as e:
            _oserr(ctx, "cat", fname, e)
            status = 1
        finally:
            _close(ctx, f)
    return status


# ---------------------------------------------------------------------------------------------
# head, tail
# ---------------------------------------------------------------------------------------------


def _header_name(fname):
    return b"standard input" if fname == "-" else _b(fname)


def _head(ctx, argv):
    args = list(argv)
    # Obsolete `head -5` / `-5c`: GNU accepts -NUM as the first option.
    if len(args) > 1 and re.fullmatch(r"-\d+[bkmcl]?", args[1]):
        a = args[1]
        unit = a[-1] if a[-1] in "bkmcl" else ""
        num = a[1:-1] if unit else a[1:]
        if unit in ("", "l"):
            args[1:2] = ["-n", num]
        else:
            args[1:2] = ["-c", num + {"b": "b", "k": "K", "m": "M", "c": ""}[unit]]
    opts, files = _getopt(
        args,
        "c:n:qvz",
        {
            "bytes": ("c", 1),
            "lines": ("n", 1),
            "quiet": ("q", 0),
            "silent": ("q", 0),
            "verbose": ("v", 0),
            "zero-terminated": ("z", 0),
        },
    )
    mode = "n"
    count = 10
    neg = False
    headers = None
    for k, v in opts:
        if k in ("c", "n"):
            mode = k
            t = v.strip()
            neg = t.startswith("-")
            if neg or t.startswith("+"):
                t = t[1:]
            count = _size(t)
            if count is None:
                what = "bytes" if k == "c" else "lines"
                raise _Fatal(f"invalid number of {what}: '{v}'")
        elif k == "q":
            headers = False
        elif k == "v":
            headers = True
        elif k == "z":
            pass
    files = files or ["-"]
    if headers is None:
        headers = len(files) > 1
    status = 0
    first = True
    for fname in files:
        try:
            f = _open(ctx, fname)
        except OSError as e:
            _err(ctx, "head", f"cannot open '{_s(fname)}' for reading: {os.strerror(e.errno)}")
            status = 1
            continue
        try:
            if headers:
                yield (b"" if first else b"\n") + b"==> " + _header_name(fname) + b" <==\n"
            first = False
            if mode == "n" and not neg:
                if count == 0:
                    continue
                n = 0
                batch = _Batch()
                for line in f:
                    n += 1
                    if n >= count:
                        batch.add(line)
                        break
                    if batch.add(line):
                        yield batch.take()
                if batch.size:
                    yield batch.take()
            elif mode == "n":
                buf = deque()
                batch = _Batch()
                for line in f:
                    buf.append(line)
                    if len(buf) > count:
                        if batch.add(buf.popleft()):
                            yield batch.take()
                if batch.size:
                    yield batch.take()
            elif not neg:
                left = count
                while left > 0:
                    b = f.read(min(left, BLOCK))
                    if not b:
                        break
                    left -= len(b)
                    yield b
            else:
                keep = b""
                while True:
                    b = f.read(BLOCK)
                    if not b:
                        break
                    keep += b
                    if len(keep) > count:
                        cut = len(keep) - count
                        yield keep[:cut]
                        keep = keep[cut:]
        except OSError as e:
            _err(ctx, "head", f"error reading '{_s(fname)}': {os.strerror(e.errno)}")
            status = 1
        finally:
            _close(ctx, f)
    return status


def _tail(ctx, argv):
    args = list(argv)
    # Obsolete forms: `tail -5`, `tail +5`, `tail -5c` as the first operand.
    if len(args) > 1 and re.fullmatch(r"[-+]\d+[bcl]?f?", args[1]):
        a = args[1]
        sign = a[0]
        body = a[1:].rstrip("f")
        unit = body[-1] if body and body[-1] in "bcl" else ""
        num = body[:-1] if unit else body
        if num or unit:
            num = num or "10"
            spec = ("+" if sign == "+" else "") + num
            if unit == "c":
                args[1:2] = ["-c", spec]
            elif unit == "b":
                args[1:2] = ["-c", spec + "b"]
            else:
                args[1:2] = ["-n", spec]
    opts, files = _getopt(
        args,
        "c:n:fFqvzs:",
        {
            "bytes": ("c", 1),
            "lines": ("n", 1),
            "follow": ("f", 2),
            "quiet": ("q", 0),
            "silent": ("q", 0),
            "verbose": ("v", 0),
            "zero-terminated": ("z", 0),
            "sleep-interval": ("s", 1),
            "retry": ("r", 0),
            "pid": ("p", 1),
        },
    )
    mode = "n"
    count = 10
    from_start = False
    headers = None
    for k, v in opts:
        if k in ("c", "n"):
            mode = k
            t = v.strip()
            from_start = t.startswith("+")
            if from_start or t.startswith("-"):
                t = t[1:]
            count = _size(t)
            if count is None:
                what = "bytes" if k == "c" else "lines"
                raise _Fatal(f"invalid number of {what}: '{v}'")
        elif k == "q":
            headers = False
        elif k == "v":
            headers = True
    files = files or ["-"]
    if headers is None:
        headers = len(files) > 1
    status = 0
    first = True
    for fname in files:
        try:
            f = _open(ctx, fname)
        except OSError as e:
            _err(ctx, "tail", f"cannot open '{_s(fname)}' for reading: {os.strerror(e.errno)}")
            status = 1
            continue
        try:
            if headers:
                yield (b"" if first else b"\n") + b"==> " + _header_name(fname) + b" <==\n"
            first = False
            if mode == "n" and from_start:
                n = 0
                batch = _Batch()
                for line in f:
                    n += 1
                    if n >= count:
                        if batch.add(line):
                            yield batch.take()
                if batch.size:
                    yield batch.take()
            elif mode == "n":
                if count == 0:
                    for _ in _blocks(f):
                        pass
                    continue
                yield b"".join(_last_lines(f, count, f is not ctx.stdin))
            elif from_start:
                skip = max(count - 1, 0)
                while skip > 0:
                    b = f.read(min(skip, BLOCK))
                    if not b:
                        break
                    skip -= len(b)
                for b in _blocks(f):
                    yield b
            else:
                keep = b""
                for b in _blocks(f):
                    keep = (keep + b)[-count:] if count else b""
                yield keep
        except OSError as e:
            _err(ctx, "tail", f"error reading '{_s(fname)}': {os.strerror(e.errno)}")
            status = 1
        finally:
            _close(ctx, f)
    return status


def _last_lines(f, count, seekable):
    """The last `count` lines of f; regular files are read backwards from the end."""
    if seekable:
        try:
            end = f.seek(0, 2)
        except (OSError, AttributeError, ValueError):
            end = None
        if end is not None:
            pos = end
            data = b""
            while pos > 0:
                step = min(BLOCK, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
                # Newlines needed: count, plus one more if the file ends with one.
                need = count + (1 if data.endswith(b"\n") else 0)
                if data.count(b"\n") >= need:
                    break
            lines = data.splitlines(keepends=True) if b"\r" not in data else _split_keep(data)
            return lines[-count:]
    buf = deque(maxlen=count)
    for line in f:
        buf.append(line)
    return list(buf)


def _split_keep(data):
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


# ---------------------------------------------------------------------------------------------
# wc
# ---------------------------------------------------------------------------------------------

_WS = b" \t\n\v\f\r"
_PRINTABLE = bytes(range(0x21, 0x7F))
_NOT_WORDY = bytes(c for c in range(256) if not (0x21 <= c < 0x7F))
_NOT_PRINT_SP = bytes(c for c in range(256) if not (0x20 <= c < 0x7F))


def _count_words(tokens):
    """Words as GNU wc 9 counts them in the C locale: whitespace-separated runs that hold at
    least one printable character."""
    n = len(tokens)
    if n:
        joined = b"".join(tokens)
        if joined.translate(None, _PRINTABLE):
            n = sum(1 for t in tokens if t.translate(None, _NOT_WORDY))
    return n


def _wc_counts(f, want_words, want_max):
    lines = words = nbytes = maxlen = 0
    carry = b""
    cur = 0  # length of the current (unfinished) line, for -L
    for b in _blocks(f):
        nbytes += len(b)
        lines += b.count(b"\n")
        if want_words:
            data = carry + b if carry else b
            toks = data.split()
            if toks and data[-1:] not in (b" ", b"\t", b"\n", b"\v", b"\f", b"\r"):
                carry = toks.pop()
            else:
                carry = b""
            words += _count_words(toks)
        if want_max:
            parts = b.split(b"\n")
            for i, p in enumerate(parts):
                w = cur + _display_width(p) if i == 0 else _display_width(p)
                if i < len(parts) - 1:
                    maxlen = max(maxlen, w)
                    cur = 0
                else:
                    cur = w
    if carry:
        words += _count_words([carry])
    if want_max:
        maxlen = max(maxlen, cur)
    return lines, words, nbytes, maxlen


def _display_width(p):
    """Width of a line for wc -L: tabs to the next multiple of 8, unprintable bytes 0."""
    if b"\t" not in p:
        return len(p.translate(None, _NOT_PRINT_SP))
    w = 0
    for c in p:
        if c == 9:
            w = (w // 8 + 1) * 8
        elif 0x20 <= c < 0x7F:
            w += 1
    return w


def _wc(ctx, argv):
    opts, files = _getopt(
        argv,
        "clLmw",
        {
            "bytes": ("c", 0),
            "chars": ("m", 0),
            "lines": ("l", 0),
            "words": ("w", 0),
            "max-line-length": ("L", 0),
            "total": ("T", 1),
            "files0-from": ("F", 1),
        },
    )
    sel = set()
    total_mode = "auto"
    for k, v in opts:
        if k == "T":
            if v not in ("auto", "always", "only", "never"):
                raise _Usage(f"invalid argument '{v}' for '--total'")
            total_mode = v
        elif k == "F":
            raise _Fatal("--files0-from is not supported here")
        else:
            sel.add(k)
    if not sel:
        sel = {"l", "w", "c"}
    order = [k for k in ("l", "w", "m", "c", "L") if k in sel]
    names = files or ["-"]
    # Column width, as GNU computes it: one count of one input is not padded; otherwise the
    # digits of the total size of the regular files, at least 7 if any input is not regular.
    width = 1
    if not (len(names) == 1 and len(order) == 1):
        stats = []
        for n in names:
            try:
                stats.append(os.stat(n) if n != "-" else _stdin_stat(ctx))
            except OSError:
                stats.append(False)
        if stats and stats[0] is not False:
            minimum = 1
            total = 0
            for st in stats:
                if st is False:
                    continue
                if st is None or not _is_reg(st):
                    minimum = 7
                else:
                    total += st.st_size
            width = max(len(str(total)), minimum)
    status = 0
    totals = [0, 0, 0, 0]
    for fname in names:
        try:
            f = _open(ctx, fname)
        except IsADirectoryError as e:
            # GNU opens a directory, fails to read it and prints its (zero) counts.
            _oserr(ctx, "wc", fname, e)
            status = 1
            f = _EMPTY()
        except OSError as e:
            _oserr(ctx, "wc", fname, e)
            status = 1
            continue
        try:
            counts = _wc_counts(f, "w" in sel, "L" in sel)
        except OSError as e:
            _oserr(ctx, "wc", fname, e)
            status = 1
            continue
        finally:
            _close(ctx, f)
        for i in range(3):
            totals[i] += counts[i]
        totals[3] = max(totals[3], counts[3])
        if total_mode != "only":
            yield _wc_line(order, counts, width, None if not files else fname)
    if total_mode == "always" or (total_mode == "auto" and len(names) > 1):
        yield _wc_line(order, totals, width, "total")
    elif total_mode == "only":
        yield _wc_line(order, totals, 1, None)
    return status


def _stdin_stat(ctx):
    """os.stat_result of stdin when it is a redirected file, else None (a pipe)."""
    f = ctx.stdin
    for _ in range(3):
        fileno = getattr(f, "fileno", None)
        if fileno is not None:
            try:
                return os.fstat(fileno())
            except (OSError, ValueError, AttributeError, TypeError):
                return None
        f = getattr(f, "_it", None) or getattr(f, "f", None)
        if f is None:
            return None
    return None


class _EMPTY:
    """An input with nothing in it: what GNU tools read from a directory after the error."""

    def read(self, n=-1):
        return b""

    def __iter__(self):
        return iter(())

    def close(self):
        pass


def _is_reg(st):
    return (st.st_mode & 0o170000) == 0o100000


def _wc_line(order, counts, width, name):
    vals = {"l": counts[0], "w": counts[1], "c": counts[2], "m": counts[2], "L": counts[3]}
    out = " ".join(str(vals[k]).rjust(width) for k in order)
    if name is not None:
        out += " " + _s(name)
    return _b(out) + b"\n"


# ---------------------------------------------------------------------------------------------
# Regular expressions: POSIX BRE / ERE to Python's re
# ---------------------------------------------------------------------------------------------

_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "0-9a-zA-Z",
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


class _RegexError(Exception):
    pass


def _bracket(p, i):
    """Parses a bracket expression starting after '['; returns (python_class, next_index)."""
    n = len(p)
    out = ["["]
    if i < n and p[i] == "^":
        out.append("^")
        i += 1
    first = True
    while True:
        if i >= n:
            raise _RegexError("Unmatched [, [^, [:, [., or [=")
        c = p[i]
        if c == "]" and not first:
            i += 1
            out.append("]")
            break
        first = False
        if c == "[" and i + 1 < n and p[i + 1] in ":.=" and p.find(p[i + 1] + "]", i + 2) >= 0:
            kind = p[i + 1]
            end = p.find(kind + "]", i + 2)
            if end < 0:
                raise _RegexError("Unmatched [, [^, [:, [., or [=")
            name = p[i + 2 : end]
            i = end + 2
            if kind == ":":
                if name not in _CLASSES:
                    raise _RegexError("Invalid character class name")
                out.append(_CLASSES[name])
            else:
                out.append(re.escape(name))
            continue
        if c in "\\[]^&~|-" and not (c == "-" and _range_dash(p, i, out)):
            out.append("\\" + c)
        else:
            out.append(c)
        i += 1
    return "".join(out), i


def _range_dash(p, i, out):
    """A '-' inside brackets is a range operator between two characters."""
    return len(out) > 1 and out[-1] not in ("[", "^") and i + 1 < len(p) and p[i + 1] != "]"


def _posix_to_py(p, extended, group_offset=0):
    """Converts a POSIX regex (GNU flavour) to Python re syntax. Returns (pattern, ngroups)."""
    out = []  # list of pieces; atom_start tracks where the last atom began for quantifiers
    n = len(p)
    i = 0
    groups = 0
    stack = []  # out-index where each open group begins
    last_atom = None  # index in out of last atom (None if nothing quantifiable)
    last_was_quant = False

    def at_start():
        # start of RE, after an open group or after alternation
        return not out or out[-1] in ("(", "|")

    def quant(q):
        nonlocal last_atom, last_was_quant
        if last_atom is None:
            # A quantifier with nothing before it is literal (GNU).
            out.append(re.escape(q.replace("\\", "")))
            last_atom = len(out) - 1
            last_was_quant = False
            return
        if last_was_quant:
            out[last_atom] = "(?:" + out[last_atom]
            out.append(")")
        out.append(q)
        last_was_quant = True

    while i < n:
        c = p[i]
        if c == "\\":
            if i + 1 >= n:
                raise _RegexError("Trailing backslash")
            d = p[i + 1]
            i += 2
            if not extended and d == "(":
                stack.append(len(out))
                out.append("(")
                groups += 1
                last_atom = None
                last_was_quant = False
                continue
            if not extended and d == ")":
                if not stack:
                    raise _RegexError("Unmatched ) or \\)")
                start = stack.pop()
                out.append(")")
                out[start:] = ["".join(out[start:])]
                last_atom = start
                last_was_quant = False
                continue
            if not extended and d == "|":
                out.append("|")
                last_atom = None
                last_was_quant = False
                continue
            if not extended and d == "{":
                end = p.find("\\}", i)
                if end < 0:
                    raise _RegexError("Unmatched \\{")
                body = p[i:end]
                if not re.fullmatch(r"\d*(,\d*)?", body) or body in ("", ","):
                    raise _RegexError("Invalid content of \\{\\}")
                i = end + 2
                quant("{" + (body if not body.startswith(",") else "0" + body) + "}")
                continue
            if not extended and d in "+?":
                quant(d)
                continue
            if d.isdigit() and d != "0":
                if int(d) > groups:
                    raise _RegexError("Invalid back reference")
                out.append("(?:\\%d)" % (int(d) + group_offset))
                last_atom = len(out) - 1
                last_was_quant = False
                continue
            if d == "<":
                out.append(r"\b(?=\w)")
                last_atom = None
                continue
            if d == ">":
                out.append(r"\b(?<=\w)")
                last_atom = None
                continue
            if d in "bB":
                out.append("\\" + d)
                last_atom = None
                continue
            if d in "wWsS":
                out.append("\\" + d)
            elif d == "`":
                out.append(r"\A")
                last_atom = None
                continue
            elif d == "'":
                out.append(r"\Z")
                last_atom = None
                continue
            elif d == "n":
                out.append("\\n")
            elif d == "t":
                out.append("t")
            else:
                out.append(re.escape(d))
            last_atom = len(out) - 1
            last_was_quant = False
            continue
        if c == "[":
            cls, i = _bracket(p, i + 1)
            out.append(cls)
            last_atom = len(out) - 1
            last_was_quant = False
            continue
        i += 1
        if c == "*":
            quant("*")
            continue
        if extended and c in "+?":
            quant(c)
            continue
        if extended and c == "{":
            m = re.match(r"(\d*)(,(\d*))?\}", p[i:])
            if m and (m.group(1) or m.group(3)):
                i += m.end()
                body = m.group(0)[:-1]
                quant("{" + (body if not body.startswith(",") else "0" + body) + "}")
                continue
            out.append("\\{")
            last_atom = len(out) - 1
            last_was_quant = False
            continue
        if extended and c == "(":
            stack.append(len(out))
            out.append("(")
            groups += 1
            last_atom = None
            last_was_quant = False
            continue
        if extended and c == ")":
            if not stack:
                out.append("\\)")
                last_atom = len(out) - 1
                last_was_quant = False
                continue
            start = stack.pop()
            out.append(")")
            out[start:] = ["".join(out[start:])]
            last_atom = start
            last_was_quant = False
            continue
        if extended and c == "|":
            out.append("|")
            last_atom = None
            last_was_quant = False
            continue
        if c == "^":
            if extended or at_start():
                out.append("^")
                last_atom = None
                last_was_quant = False
                continue
            out.append("\\^")
        elif c == "$":
            rest = p[i:]
            if extended or rest == "" or rest.startswith("\\)") or rest.startswith("\\|"):
                out.append("$")
                last_atom = None
                last_was_quant = False
                continue
            out.append("\\$")
        elif c == ".":
            out.append(".")
        else:
            out.append(re.escape(c))
        last_atom = len(out) - 1
        last_was_quant = False
    if stack:
        raise _RegexError("Unmatched ( or \\(")
    return "".join(out), groups


def _compile_posix(patterns, extended=False, fixed=False, icase=False, word=False, line=False,
                   perl=False):
    """One compiled bytes regex matching any of the patterns (str, GNU syntax; with perl,
    Python's own syntax, close to PCRE, with `\\K` as a group named K)."""
    pieces = []
    offset = 0
    for p in patterns:
        if perl:
            m = re.search(r"(?<!\\)((?:\\\\)*)\\K", p) if len(patterns) == 1 else None
            if m:
                p = "(?:" + p[: m.start()] + m.group(1) + ")(?P<K>" + p[m.end():] + ")"
            py = p
            ng = 0
        elif fixed:
            py = re.escape(p)
            ng = 0
        else:
            py, ng = _posix_to_py(p, extended, offset)
        if word:
            py = r"(?<![0-9A-Za-z_])(?:%s)(?![0-9A-Za-z_])" % py
        if line:
            py = r"^(?:%s)$" % py
        pieces.append(py)
        offset += ng
    src = pieces[0] if len(pieces) == 1 else "|".join("(?:%s)" % x for x in pieces)
    flags = re.MULTILINE
    if icase:
        flags |= re.IGNORECASE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarnings about sets must not reach stderr
            return re.compile(os.fsencode(src), flags)
    except re.error as e:
        raise _RegexError(str(e))


# ---------------------------------------------------------------------------------------------
# grep
# ---------------------------------------------------------------------------------------------

_GREP_LONGS = {
    "extended-regexp": ("E", 0),
    "fixed-strings": ("F", 0),
    "basic-regexp": ("G", 0),
    "perl-regexp": ("P", 0),
    "regexp": ("e", 1),
    "file": ("f", 1),
    "ignore-case": ("i", 0),
    "no-ignore-case": ("noi", 0),
    "word-regexp": ("w", 0),
    "line-regexp": ("x", 0),
    "null-data": ("z", 0),
    "no-messages": ("s", 0),
    "invert-match": ("v", 0),
    "version": ("V", 0),
    "help": ("help", 0),
    "max-count": ("m", 1),
    "byte-offset": ("b", 0),
    "line-number": ("n", 0),
    "no-line-number": ("non", 0),
    "line-buffered": ("lb", 0),
    "with-filename": ("H", 0),
    "no-filename": ("h", 0),
    "label": ("label", 1),
    "only-matching": ("o", 0),
    "quiet": ("q", 0),
    "silent": ("q", 0),
    "binary-files": ("binary-files", 1),
    "text": ("a", 0),
    "directories": ("d", 1),
    "devices": ("D", 1),
    "recursive": ("r", 0),
    "dereference-recursive": ("R", 0),
    "include": ("include", 1),
    "exclude": ("exclude", 1),
    "exclude-from": ("exclude-from", 1),
    "exclude-dir": ("exclude-dir", 1),
    "files-without-match": ("L", 0),
    "files-with-matches": ("l", 0),
    "count": ("c", 0),
    "initial-tab": ("T", 0),
    "null": ("Z", 0),
    "before-context": ("B", 1),
    "after-context": ("A", 1),
    "context": ("C", 1),
    "color": ("color", 2),
    "colour": ("color", 2),
    "binary": ("U", 0),
}


class _GrepState:
    pass


def _context_num(v):
    if not re.fullmatch(r"\d+", v.strip()):
        raise _Fatal(f"{v}: invalid context length argument", 2)
    return int(v)


def _grep(ctx, argv):
    opts, ops = _getopt(argv, "A:B:C:D:EFGHILPRTUVZabcd:e:f:hilLm:noqrRsuvwxyz", _GREP_LONGS, digits=True)
    g = _GrepState()
    mode = "G"
    patterns = None
    icase = invert = word = line = count = False
    files_with = files_without = only = quiet = nomsg = False
    lineno = boffset = False
    with_name = None
    label = "(standard input)"
    maxcount = -1
    before = after = 0
    recursive = deref = False
    binary_mode = "binary"
    directories = "read"
    null = nulldata = False
    includes, excludes, exclude_dirs = [], [], []
    for k, v in opts:
        if k in "EFGP" and len(k) == 1:
            mode = k
        elif k == "e":
            patterns = (patterns or []) + v.split("\n")
        elif k == "f":
            try:
                with (ctx.stdin if v == "-" else open(v, "rb")) as pf:
                    text = _read_all(pf)
            except OSError as e:
                raise _Fatal(f"{v}: {os.strerror(e.errno)}", 2)
            lines = text.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            patterns = (patterns or []) + [os.fsdecode(x) for x in lines]
        elif k in ("i", "y"):
            icase = True
        elif k == "noi":
            icase = False
        elif k == "v":
            invert = True
        elif k == "w":
            word = True
        elif k == "x":
            line = True
        elif k == "c":
            count = True
        elif k == "l":
            files_with, files_without = True, False
        elif k == "L":
            files_without, files_with = True, False
        elif k == "o":
            only = True
        elif k == "q":
            quiet = True
        elif k == "s":
            nomsg = True
        elif k == "n":
            lineno = True
        elif k == "non":
            lineno = False
        elif k == "b":
            boffset = True
        elif k == "H":
            with_name = True
        elif k == "h":
            with_name = False
        elif k == "label":
            label = v
        elif k == "m":
            try:
                maxcount = int(v)
            except ValueError:
                raise _Fatal("invalid max count", 2)
        elif k == "A":
            after = _context_num(v)
        elif k == "B":
            before = _context_num(v)
        elif k in ("C", "#"):
            before = after = _context_num(v)
        elif k == "r":
            recursive = True
        elif k == "R":
            recursive = deref = True
        elif k == "a":
            binary_mode = "text"
        elif k == "I":
            binary_mode = "without-match"
        elif k == "binary-files":
            if v not in ("binary", "text", "without-match"):
                raise _Fatal("unknown binary-files type", 2)
            binary_mode = v
        elif k == "d":
            if v not in ("read", "skip", "recurse"):
                raise _Fatal("invalid argument '%s' for '--directories'" % v, 2)
            directories = v
            if v == "recurse":
                recursive = True
        elif k == "include":
            includes.append(v)
        elif k == "exclude":
            excludes.append(v)
        elif k == "exclude-dir":
            exclude_dirs.append(v)
        elif k == "exclude-from":
            try:
                with open(v, "rb") as xf:
                    excludes.extend(os.fsdecode(x) for x in xf.read().split(b"\n") if x)
            except OSError as e:
                raise _Fatal(f"{v}: {os.strerror(e.errno)}", 2)
        elif k == "Z":
            null = True
        elif k == "z":
            nulldata = True
        elif k == "V":
            yield b"grep (GNU grep) 3.8\n"
            return 0
        elif k == "help":
            yield _b(_USAGE_LINES["grep"]) + b"Search for PATTERNS in each FILE.\n"
            return 0
    if patterns is None:
        if not ops:
            raise _Usage("")
        patterns = ops.pop(0).split("\n")
    try:
        rx = _compile_posix(patterns, mode == "E", mode == "F", icase, word, line, mode == "P")
    except _RegexError as e:
        raise _Fatal(str(e), 2)
    files = ops
    if not files:
        files = ["."] if recursive else ["-"]
        g.strip_dot = recursive
    else:
        g.strip_dot = False
    if with_name is None:
        with_name = recursive or len(files) > 1
    g.ctx = ctx
    g.rx = rx
    g.search = rx.search
    g.invert = invert
    g.count = count
    g.files_with = files_with
    g.files_without = files_without
    g.only = only
    g.quiet = quiet
    g.nomsg = nomsg
    g.lineno = lineno
    g.boffset = boffset
    g.with_name = with_name
    g.label = label
    g.maxcount = maxcount
    g.before = before
    g.after = after
    g.binary_mode = binary_mode
    g.null = null
    g.eol = b"\0" if nulldata else b"\n"
    g.printed_any = False  # for the "--" group separator
    g.matched = False
    g.error = False
    g.done = False
    src = rx.pattern
    g.prefilter = not invert and not (before or after) and b"\\A" not in src and b"\\Z" not in src
    g.prefilter = g.prefilter and not nulldata
    for fname in files:
        if g.done:
            break
        if fname == "-":
            yield from _grep_file(g, ctx.stdin, label)
            continue
        try:
            st = os.stat(fname)
        except OSError as e:
            if not (recursive and os.path.islink(fname)):
                if not nomsg:
                    _oserr(ctx, "grep", fname, e)
                g.error = True
            continue
        if (st.st_mode & 0o170000) == 0o040000:
            if recursive:
                if exclude_dirs and _grep_excluded(fname, exclude_dirs, True):
                    continue
                yield from _grep_tree(g, fname, deref, includes, excludes, exclude_dirs)
                continue
            if directories == "skip":
                continue
            if not nomsg:
                _err(ctx, "grep", f"{fname}: Is a directory")
            g.error = True
            # GNU reads the directory as an input that fails at once (grep -c prints d:0).
            yield from _grep_file(g, _EMPTY(), fname)
            continue
        if excludes and _grep_excluded(fname, excludes, False):
            continue
        if includes and not _grep_included(fname, includes):
            continue
        yield from _grep_path(g, fname, fname)
    if g.error and not (quiet and g.matched):
        return 2
    return 0 if g.matched else 1


def _grep_excluded(path, globs, is_dir):
    base = os.path.basename(path.rstrip("/")) or path
    for gl in globs:
        if fnmatch.fnmatchcase(base, gl) or fnmatch.fnmatchcase(path, gl):
            return True
    return False


def _grep_included(path, globs):
    base = os.path.basename(path)
    return any(fnmatch.fnmatchcase(base, gl) or fnmatch.fnmatchcase(path, gl) for gl in globs)


def _grep_tree(g, top, deref, includes, excludes, exclude_dirs):
    try:
        entries = list(os.scandir(top))
    except OSError as e:
        if not g.nomsg:
            _oserr(g.ctx, "grep", top, e)
        g.error = True
        return
    for ent in entries:
        if g.done:
            return
        if g.strip_dot and top == ".":
            path = ent.name
        else:
            path = top + ent.name if top.endswith("/") else top + "/" + ent.name
        try:
            is_link = ent.is_symlink()
            if is_link and not deref:
                continue
            is_dir = ent.is_dir(follow_symlinks=deref)
        except OSError:
            continue
        if is_dir:
            if exclude_dirs and _grep_excluded(path, exclude_dirs, True):
                continue
            yield from _grep_tree(g, path, deref, includes, excludes, exclude_dirs)
            continue
        try:
            if not ent.is_file(follow_symlinks=deref):
                continue  # devices, fifos, sockets: skipped when recursing, as GNU does
        except OSError:
            continue
        if excludes and _grep_excluded(ent.name, excludes, False):
            continue
        if includes and not _grep_included(ent.name, includes):
            continue
        yield from _grep_path(g, path, path)


def _grep_path(g, path, shown):
    try:
        f = open(path, "rb")
    except OSError as e:
        if not g.nomsg:
            _oserr(g.ctx, "grep", path, e)
        g.error = True
        return
    try:
        yield from _grep_file(g, f, shown)
    except OSError as e:
        if not g.nomsg:
            _oserr(g.ctx, "grep", path, e)
        g.error = True
    finally:
        f.close()


def _grep_records(f, eol, nul_lines=False):
    """Yields (chunk, binary) with chunk made of whole records (the last may lack `eol`).
    With nul_lines, NULs of binary data end lines too, as GNU grep treats them."""
    carry = b""
    binary = False
    while True:
        b = f.read(BLOCK)
        if not b:
            break
        if not binary and b"\0" in b and eol == b"\n":
            binary = True
        data = carry + b if carry else b
        cut = data.rfind(eol)
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        chunk = data[: cut + 1]
        if binary and nul_lines:
            chunk = chunk.replace(b"\0", b"\n")
        yield chunk, binary
    if carry:
        if binary and nul_lines:
            carry = carry.replace(b"\0", b"\n")
        yield carry, binary


def _grep_file(g, f, name):
    """Searches one input; yields output, updates g.matched / g.done."""
    nm = _b(name)
    sep_m = b"\0" if g.null else b":"
    prefix_name = (nm + sep_m) if g.with_name else b""
    prefix_name_ctx = (nm + (b"\0" if g.null else b"-")) if g.with_name else b""
    eol = g.eol
    search = g.search
    nmatch = 0
    lines_only = not (g.count or g.files_with or g.files_without or g.quiet)
    out = _Batch()
    lnum = 0  # line number of the last line consumed
    off = 0  # byte offset of the start of the current chunk
    maxc = g.maxcount
    if maxc == 0:
        if g.count:
            yield prefix_name + b"0\n" if g.with_name else b"0\n"
        elif g.files_without:
            yield nm + (b"\0" if g.null else b"\n")
        return
    stop = False
    binary_hit = False
    # context state
    ctxmode = bool(g.before or g.after) and lines_only
    before = deque(maxlen=g.before) if g.before else None
    after_left = 0
    last_out = 0  # line number of the last line printed, 0 = none in this file
    kgroup = "K" in g.rx.groupindex
    for chunk, binary in _grep_records(f, eol, g.binary_mode == "binary"):
        if binary and g.binary_mode == "without-match":
            return
        suppress = binary and g.binary_mode == "binary"
        if g.prefilter and not ctxmode:
            # Jump from match to match through the chunk; verify each candidate line alone.
            pos = 0
            n = len(chunk)
            lstart_prev = 0
            while pos < n:
                m = search(chunk, pos)
                if m is None or (m.start() == n and chunk.endswith(eol)):
                    break  # (an empty match after the last line's end is no line)
                s = chunk.rfind(eol, 0, m.start()) + 1
                if s < pos:
                    s = pos
                e = chunk.find(eol, s)
                if e < 0:
                    e = n
                lineb = chunk[s:e]
                if m.end() > e or m.start() < s:
                    if search(lineb) is None:
                        pos = e + 1
                        continue
                nmatch += 1
                g.matched = True
                if not lines_only:
                    if g.quiet:
                        g.done = True
                        return
                    if g.files_with or g.files_without:
                        stop = True
                        break
                    if maxc > 0 and nmatch >= maxc:
                        stop = True
                        break
                    pos = e + 1
                    continue
                if suppress:
                    binary_hit = True
                    stop = True
                    break
                if g.lineno:
                    lnum += chunk.count(eol, lstart_prev, s) + 1
                    lstart_prev = e + 1
                pre = prefix_name
                if g.lineno:
                    pre += b"%d:" % lnum
                if g.only:
                    for mm in g.rx.finditer(lineb):
                        ms = mm.start("K") if kgroup else mm.start()
                        if mm.end() == ms:
                            continue
                        p2 = pre + (b"%d:" % (off + s + ms) if g.boffset else b"")
                        if out.add(p2 + lineb[ms : mm.end()] + eol):
                            yield out.take()
                else:
                    if g.boffset:
                        pre += b"%d:" % (off + s)
                    if out.add(pre + lineb + eol):
                        yield out.take()
                if maxc > 0 and nmatch >= maxc:
                    stop = True
                    break
                pos = e + 1
            if g.lineno and not stop:
                lnum += chunk.count(eol, lstart_prev)
            off += len(chunk)
            if stop:
                break
            continue
        # Line by line: -v, context.
        lines = chunk.split(eol)
        if lines[-1] == b"":
            lines.pop()
        s = 0
        for lineb in lines:
            lnum += 1
            hit = (search(lineb) is not None) != g.invert
            if hit and not (maxc > 0 and nmatch >= maxc):
                nmatch += 1
                g.matched = True
                if not lines_only:
                    if g.quiet:
                        g.done = True
                        return
                    if g.files_with or g.files_without:
                        stop = True
                        break
                    if maxc > 0 and nmatch >= maxc:
                        stop = True
                        break
                    s += len(lineb) + 1
                    continue
                if suppress:
                    binary_hit = True
                    stop = True
                    break
                if before:
                    if last_out and before[0][0] > last_out + 1 or not last_out and g.printed_any:
                        out.add(b"--\n")
                    for bl, bo, bline in before if not g.only else ():
                        out.add(_grep_prefix(g, prefix_name_ctx, bl, bo, b"-") + bline + eol)
                    last_out = before[-1][0]
                    before.clear()
                if ctxmode and (last_out and lnum > last_out + 1 or not last_out and g.printed_any):
                    out.add(b"--\n")
                if g.only:
                    if not g.invert:
                        for mm in g.rx.finditer(lineb):
                            ms = mm.start("K") if kgroup else mm.start()
                            if mm.end() == ms:
                                continue
                            out.add(_grep_prefix(g, prefix_name, lnum, off + s + ms, sep_m)
                                    + lineb[ms : mm.end()] + eol)
                else:
                    out.add(_grep_prefix(g, prefix_name, lnum, off + s, sep_m) + lineb + eol)
                g.printed_any = True
                last_out = lnum
                after_left = g.after
                if out.size >= _OUT:
                    yield out.take()
            elif ctxmode:
                if after_left > 0:
                    after_left -= 1
                    if not g.only:
                        out.add(_grep_prefix(g, prefix_name_ctx, lnum, off + s, b"-") + lineb + eol)
                    last_out = lnum
                    g.printed_any = True
                elif maxc > 0 and nmatch >= maxc:
                    stop = True
                    break
                elif before is not None:
                    before.append((lnum, off + s, lineb))
            elif maxc > 0 and nmatch >= maxc:
                stop = True
                break
            s += len(lineb) + 1
        off += len(chunk)
        if out.size:
            yield out.take()
        if stop:
            break
    if out.size:
        yield out.take()
    if binary_hit:
        g.ctx.stderr.write(b"grep: " + nm + b": binary file matches\n")
    if g.count:
        if g.with_name:
            yield prefix_name + b"%d\n" % nmatch
        else:
            yield b"%d\n" % nmatch
    if g.files_with and nmatch:
        yield nm + (b"\0" if g.null else b"\n")
    elif g.files_without and not nmatch:
        yield nm + (b"\0" if g.null else b"\n")


def _grep_prefix(g, name_pre, lnum, offset, sep):
    pre = name_pre
    if g.lineno:
        pre += b"%d" % lnum + sep
    if g.boffset:
        pre += b"%d" % offset + sep
    return pre


# ---------------------------------------------------------------------------------------------
# sort
# ---------------------------------------------------------------------------------------------

_SORT_LONGS = {
    "ignore-leading-blanks": ("b", 0),
    "dictionary-order": ("d", 0),
    "ignore-case": ("f", 0),
    "general-numeric-sort": ("g", 0),
    "ignore-nonprinting": ("i", 0),
    "month-sort": ("M", 0),
    "human-numeric-sort": ("h", 0),
    "numeric-sort": ("n", 0),
    "random-sort": ("R", 0),
    "reverse": ("r", 0),
    "version-sort": ("V", 0),
    "sort": ("sort", 1),
    "check": ("c", 2),
    "merge": ("m", 0),
    "key": ("k", 1),
    "output": ("o", 1),
    "stable": ("s", 0),
    "field-separator": ("t", 1),
    "unique": ("u", 0),
    "zero-terminated": ("z", 0),
    "buffer-size": ("S", 1),
    "temporary-directory": ("T", 1),
    "parallel": ("parallel", 1),
    "random-source": ("random-source", 1),
    "debug": ("debug", 0),
    "files0-from": ("files0-from", 1),
    "compress-program": ("compress-program", 1),
}

_ORDER_FLAGS = "bdfgiMhnRrV"
_MONTHS = {m: i + 1 for i, m in enumerate(
    [b"JAN", b"FEB", b"MAR", b"APR", b"MAY", b"JUN", b"JUL", b"AUG", b"SEP", b"OCT", b"NOV", b"DEC"])}
_NUM_RE = re.compile(rb"[ \t]*(-?)(\d*)(?:\.(\d*))?")
_HUM_RE = re.compile(rb"[ \t]*(-?)(\d*)(?:\.(\d*))?([KMGTPEZYRQk]?)")
_GNUM_RE = re.compile(
    rb"[ \t\n\v\f\r]*([-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?|nan))", re.I)
_HUMAN_RANK = {b"": 0, b"k": 1, b"K": 1, b"M": 2, b"G": 3, b"T": 4, b"P": 5, b"E": 6, b"Z": 7,
               b"Y": 8, b"R": 9, b"Q": 10}
_NOT_DICT = bytes(c for c in range(256) if not (chr(c).isalnum() and c < 128 or c in (9, 32)))
_NOT_PRINT = bytes(c for c in range(256) if not (0x20 <= c < 0x7F))


class _SortKey:
    __slots__ = ("sword", "schar", "eword", "echar", "skipsb", "skipeb", "flags", "beg_rx", "end_rx")

    def __init__(self):
        self.sword = 0
        self.schar = 0
        self.eword = None
        self.echar = 0
        self.skipsb = False
        self.skipeb = False
        self.flags = ""


class _Rev:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return other.v < self.v

    def __eq__(self, other):
        return self.v == other.v


def _num_value(b):
    m = _NUM_RE.match(b)
    ip, fp = m.group(2), m.group(3) or b""
    if not ip and not fp:
        return 0
    if len(ip) + len(fp) <= 15:
        v = float(ip + b"." + fp) if fp else int(ip)
    else:
        v = Decimal((ip or b"0").decode() + "." + (fp or b"0").decode())
    return -v if m.group(1) else v


def _human_value(b):
    m = _HUM_RE.match(b)
    ip, fp = m.group(2), m.group(3) or b""
    if not ip and not fp:
        return (0, 0, 0)
    v = float((ip or b"0") + b"." + (fp or b"0"))
    rank = _HUMAN_RANK.get(m.group(4), 0)
    if m.group(1) and v:
        return (-1, -rank, -v)
    return (1 if v else 0, rank if v else 0, v)


def _general_value(b):
    m = _GNUM_RE.match(b)
    if not m:
        return (0, 0.0)
    v = float(m.group(1))
    if v != v:
        return (1, 0.0)
    return (2, v)


def _version_key(b):
    out = []
    i = 0
    n = len(b)
    while i < n:
        j = i
        orders = []
        while j < n and not (48 <= b[j] <= 57):
            c = b[j]
            if 65 <= c <= 90 or 97 <= c <= 122:
                orders.append(c)
            elif c == 126:
                orders.append(-1)
            else:
                orders.append(c + 256)
            j += 1
        orders.append(0)
        k = j
        while k < n and 48 <= b[k] <= 57:
            k += 1
        out.append(tuple(orders))
        out.append(int(b[j:k]) if k > j else 0)
        i = k
    return tuple(out)


def _month_value(b):
    return _MONTHS.get(b.lstrip(b" \t")[:3].upper(), 0)


def _key_value(b, flags, salt):
    """The comparable value of a key's text under its ordering flags."""
    if "d" in flags:
        b = b.translate(None, _NOT_DICT)
    elif "i" in flags:
        b = b.translate(None, _NOT_PRINT)
    if "f" in flags:
        b = b.upper()
    if "n" in flags:
        return _num_value(b)
    if "h" in flags:
        return _human_value(b)
    if "g" in flags:
        return _general_value(b)
    if "M" in flags:
        return _month_value(b)
    if "V" in flags:
        return _version_key(b)
    if "R" in flags:
        return hashlib.md5(salt + b).digest()
    return b


def _parse_keyspec(spec, global_flags):
    key = _SortKey()
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?([%s]*)(?:,(\d+)(?:\.(\d+))?([%s]*))?" % (_ORDER_FLAGS, _ORDER_FLAGS), spec)
    if not m:
        bad = re.match(r"\d*", spec).group()
        if not bad:
            raise _Fatal(f"invalid number at field start: invalid count at start of '{spec}'", 2)
        raise _Fatal(f"stray character in field spec: invalid field specification '{spec}'", 2)
    f1 = int(m.group(1))
    if f1 == 0:
        raise _Fatal(f"field number is zero: invalid field specification '{spec}'", 2)
    key.sword = f1 - 1
    if m.group(2) is not None:
        c1 = int(m.group(2))
        if c1 == 0:
            raise _Fatal(f"character offset is zero: invalid field specification '{spec}'", 2)
        key.schar = c1 - 1
    opts1 = m.group(3) or ""
    opts2 = m.group(6) or ""
    if m.group(4) is not None:
        f2 = int(m.group(4))
        if f2 == 0:
            raise _Fatal(f"field number is zero: invalid field specification '{spec}'", 2)
        key.eword = f2 - 1
        key.echar = int(m.group(5)) if m.group(5) is not None else 0
    allopts = opts1 + opts2
    if allopts.replace("b", "") or "b" in allopts:
        key.flags = allopts.replace("b", "")
        key.skipsb = "b" in opts1
        key.skipeb = "b" in opts2
    if not allopts:
        key.flags = global_flags.replace("b", "")
        key.skipsb = key.skipeb = "b" in global_flags
    return key


def _key_regexes(key, tab):
    """Compiled regexes locating a key's start and end fields (GNU's begfield / limfield)."""
    if tab is None:
        beg = re.compile(rb"(?:[ \t]*[^ \t]*){%d}" % key.sword) if key.sword else None
    else:
        t = re.escape(tab)
        beg = re.compile(rb"(?:[^%s]*%s){%d}" % (t, t, key.sword)) if key.sword else None
    end = None
    if key.eword is not None:
        eword = key.eword + (1 if key.echar == 0 else 0)
        if tab is None:
            end = re.compile(rb"(?:[ \t]*[^ \t]*){%d}" % eword)
        elif eword:
            t = re.escape(tab)
            tail = rb"%s?" % t if key.echar else b""
            end = re.compile(rb"(?:[^%s]*%s){%d}[^%s]*%s" % (t, t, eword - 1, t, tail))
    key.beg_rx = beg
    key.end_rx = end


def _extract(line, key, tab):
    n = len(line)
    if key.sword:
        m = key.beg_rx.match(line)
        ptr = m.end() if m else n
    else:
        ptr = 0
    if key.skipsb:
        while ptr < n and (line[ptr] == 32 or line[ptr] == 9):
            ptr += 1
    beg = min(n, ptr + key.schar)
    if key.eword is None:
        return line[beg:]
    echar = key.echar
    if key.end_rx is None:
        ptr = 0
    else:
        m = key.end_rx.match(line)
        ptr = m.end() if m else n
    if echar:
        if key.skipeb:
            while ptr < n and (line[ptr] == 32 or line[ptr] == 9):
                ptr += 1
        ptr = min(n, ptr + echar)
    if ptr <= beg:
        return b""
    return line[beg:ptr]


def _read_records(ctx, name, files, eol, status_box, errfmt="{}: {}"):
    chunks = []
    for fname in files:
        try:
            f = _open(ctx, fname)
        except OSError as e:
            _err(ctx, name, errfmt.format(_s(fname), os.strerror(e.errno)))
            status_box[0] = 2
            return None
        try:
            chunks.append(_read_all(f))
        except OSError as e:
            _err(ctx, name, errfmt.format(_s(fname), os.strerror(e.errno)))
            status_box[0] = 2
            return None
        finally:
            _close(ctx, f)
        if chunks[-1] and not chunks[-1].endswith(eol):
            chunks[-1] += eol
    data = b"".join(chunks)
    recs = data.split(eol)
    recs.pop()
    return recs


def _sort(ctx, argv):
    opts, files = _getopt(argv, "bcCdfghik:mMno:rRsS:t:T:uVz", _SORT_LONGS)
    gflags = ""
    keys = []
    keyspecs = []
    check = None
    output = None
    stable = unique = False
    tab = None
    eol = b"\n"
    for k, v in opts:
        if len(k) == 1 and k in _ORDER_FLAGS:
            gflags += k
        elif k == "sort":
            mp = {"general-numeric": "g", "human-numeric": "h", "month": "M", "numeric": "n",
                  "random": "R", "version": "V"}
            if v not in mp:
                raise _Usage(f"invalid argument '{v}' for '--sort'")
            gflags += mp[v]
        elif k == "c":
            check = "C" if v in ("quiet", "silent") else "c"
        elif k == "C":
            check = "C"
        elif k == "k":
            keyspecs.append(v)
        elif k == "o":
            output = v
        elif k == "s":
            stable = True
        elif k == "u":
            unique = True
        elif k == "t":
            tb = _b(v)
            if tb == b"\\0":
                tb = b"\0"
            if len(tb) != 1:
                if not tb:
                    raise _Fatal("empty tab", 2)
                raise _Fatal(f"multi-character tab '{v}'", 2)
            if tab is not None and tb != tab:
                raise _Fatal("incompatible tabs", 2)
            tab = tb
        elif k == "z":
            eol = b"\0"
        elif k == "files0-from":
            raise _Fatal("--files0-from is not supported here", 2)
    for spec in keyspecs:
        keys.append(_parse_keyspec(spec, gflags))
    reverse = "r" in gflags
    files = files or ["-"]
    if check and len(files) > 1:
        raise _Usage(f"extra operand '{files[1]}' not allowed with -{check}")
    box = [0]
    lines = _read_records(ctx, "sort", files, eol, box, "cannot read: {}: {}")
    if lines is None:
        return box[0]
    salt = os.urandom(8) if ("R" in gflags or any("R" in kk.flags for kk in keys)) else b""
    if not keys:
        kk = _SortKey()
        kk.flags = gflags.replace("b", "")
        kk.skipsb = "b" in gflags
        if kk.flags.replace("r", "") or kk.skipsb:
            keys = [kk]
    simple = not keys
    last_resort = not (stable or unique)

    if simple:
        keyfn = None
    else:
        specs = []
        for kk in keys:
            _key_regexes(kk, tab)
            flags = kk.flags
            whole = kk.sword == 0 and kk.schar == 0 and kk.eword is None and not kk.skipsb
            wrap = ("r" in flags) != reverse
            specs.append((kk, flags.replace("r", ""), whole, wrap))

        def keyfn(line):
            vals = []
            for kk, flags, whole, wrap in specs:
                t = line if whole else _extract(line, kk, tab)
                if kk.skipsb and whole:
                    t = t.lstrip(b" \t")
                v = _key_value(t, flags, salt) if flags else t
                vals.append(_Rev(v) if wrap else v)
            if last_resort:
                vals.append(line)
            return tuple(vals)

    if check:
        prev = None
        for i, line in enumerate(lines):
            cur = keyfn(line) if keyfn else line
            if prev is not None:
                bad = (cur > prev if reverse else cur < prev) or (unique and cur == prev)
                if bad:
                    if check == "c":
                        _err(ctx, "sort", f"{_s(files[0])}:{i + 1}: disorder: " + _s(line))
                    return 1
            prev = cur
        return 0
    if simple:
        lines.sort(reverse=reverse)
        if unique:
            lines = [x for i, x in enumerate(lines) if i == 0 or x != lines[i - 1]]
    else:
        decorated = [(keyfn(x), x) for x in lines] if unique else None
        if unique:
            decorated.sort(key=lambda p: p[0], reverse=reverse)
            out = []
            prevk = None
            for kv, x in decorated:
                if not out or kv != prevk:
                    out.append(x)
                prevk = kv
            lines = out
        else:
            lines.sort(key=keyfn, reverse=reverse)
    if output is not None:
        try:
            with open(output, "wb") as f:
                if lines:
                    f.write(eol.join(lines) + eol)
        except OSError as e:
            raise _Fatal(f"open failed: {output}: {os.strerror(e.errno)}", 2)
        return 0
    for i in range(0, len(lines), 4096):
        part = lines[i : i + 4096]
        yield eol.join(part) + eol
    return 0


# ---------------------------------------------------------------------------------------------
# uniq
# ---------------------------------------------------------------------------------------------


def _uniq(ctx, argv):
    args = list(argv)
    opts, ops = _getopt(
        args,
        "cdDf:is:uw:z",
        {
            "count": ("c", 0),
            "repeated": ("d", 0),
            "all-repeated": ("D", 2),
            "skip-fields": ("f", 1),
            "ignore-case": ("i", 0),
            "skip-chars": ("s", 1),
            "unique": ("u", 0),
            "check-chars": ("w", 1),
            "zero-terminated": ("z", 0),
            "group": ("group", 2),
        },
    )
    count = repeated = alldup = uniq_only = icase = False
    skipf = skips = 0
    width = None
    eol = b"\n"
    for k, v in opts:
        if k == "c":
            count = True
        elif k == "d":
            repeated = True
        elif k == "D":
            alldup = True
        elif k == "u":
            uniq_only = True
        elif k == "i":
            icase = True
        elif k in ("f", "s", "w"):
            if not re.fullmatch(r"\d+", v):
                what = {"f": "number of fields to skip", "s": "number of bytes to skip",
                        "w": "number of bytes to compare"}[k]
                raise _Fatal(f"{v}: invalid {what}")
            if k == "f":
                skipf = int(v)
            elif k == "s":
                skips = int(v)
            else:
                width = int(v)
        elif k == "z":
            eol = b"\0"
        elif k == "group":
            raise _Fatal("--group is not supported here")
    if len(ops) > 2:
        raise _Usage(f"extra operand '{ops[2]}'")
    if count and alldup:
        raise _Usage("printing all duplicated lines and repeat counts is meaningless")
    infile = ops[0] if ops else "-"
    outfile = ops[1] if len(ops) > 1 else None
    try:
        f = _open(ctx, infile)
    except OSError as e:
        raise _Fatal(f"{_s(infile)}: {os.strerror(e.errno)}")
    plain = not (skipf or skips or width is not None or icase)

    def keyof(line):
        t = line
        if skipf:
            p = 0
            n = len(t)
            for _ in range(skipf):
                while p < n and t[p] in (32, 9):
                    p += 1
                while p < n and t[p] not in (32, 9):
                    p += 1
            t = t[p:]
        if skips:
            t = t[skips:]
        if width is not None:
            t = t[:width]
        if icase:
            t = t.lower()
        return t

    def records():
        if eol == b"\n":
            for line in f:
                yield line[:-1] if line.endswith(b"\n") else line
        else:
            data = _read_all(f)
            recs = data.split(eol)
            if recs and recs[-1] == b"":
                recs.pop()
            yield from recs

    def groups():
        curkey = None
        members = []
        for line in records():
            k = line if plain else keyof(line)
            if members and k == curkey:
                members.append(line)
                continue
            if members:
                yield members
            members = [line]
            curkey = k
        if members:
            yield members

    def produce():
        out = _Batch()
        for members in groups():
            n = len(members)
            if repeated and n < 2 and not alldup:
                continue
            if uniq_only and n > 1:
                continue
            if alldup:
                if n < 2 or uniq_only:
                    continue
                for m in members:
                    out.add(m + eol)
            elif count:
                out.add(b"%7d " % n + members[0] + eol)
            else:
                out.add(members[0] + eol)
            if out.size >= _OUT:
                yield out.take()
        if out.size:
            yield out.take()

    try:
        if outfile is None:
            yield from produce()
        else:
            try:
                with open(outfile, "wb") as of:
                    for chunk in produce():
                        of.write(chunk)
            except OSError as e:
                raise _Fatal(f"{_s(outfile)}: {os.strerror(e.errno)}")
    finally:
        _close(ctx, f)
    return 0


# ---------------------------------------------------------------------------------------------
# cut
# ---------------------------------------------------------------------------------------------


def _parse_list(spec, fields):
    ranges = []
    for part in spec.split(","):
        if part == "":
            raise _Usage("fields are numbered from 1" if fields else "byte/character positions are numbered from 1")
        m = re.fullmatch(r"(\d*)(-?)(\d*)", part)
        if not m or (not m.group(1) and not m.group(3)):
            if part == "-":
                raise _Usage("invalid range with no endpoint: -")
            kind = "field" if fields else "byte/character position"
            raise _Usage(f"invalid {kind} value '{part}'" if fields else f"invalid byte/character position '{part}'")
        lo = int(m.group(1)) if m.group(1) else 1
        if m.group(2):
            hi = int(m.group(3)) if m.group(3) else None
        else:
            hi = lo
        if (m.group(1) and lo == 0) or (hi == 0):
            raise _Usage("fields are numbered from 1" if fields else "byte/character positions are numbered from 1")
        if hi is not None and hi < lo:
            raise _Usage("invalid decreasing range")
        ranges.append((lo, hi))
    ranges.sort(key=lambda r: (r[0], r[1] if r[1] is not None else float("inf")))
    merged = []
    for lo, hi in ranges:
        if merged:
            plo, phi = merged[-1]
            if phi is None or lo <= phi + 1:
                if phi is not None and (hi is None or hi > phi):
                    merged[-1] = (plo, hi)
                continue
        merged.append((lo, hi))
    return merged


def _complement(ranges):
    out = []
    nxt = 1
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        if hi is None:
            return out
        nxt = hi + 1
    out.append((nxt, None))
    return out


def _cut(ctx, argv):
    opts, files = _getopt(
        argv,
        "b:c:d:f:nsz",
        {
            "bytes": ("b", 1),
            "characters": ("c", 1),
            "delimiter": ("d", 1),
            "fields": ("f", 1),
            "only-delimited": ("s", 0),
            "complement": ("complement", 0),
            "output-delimiter": ("od", 1),
            "zero-terminated": ("z", 0),
        },
    )
    mode = spec = None
    delim = None
    only_delim = complement = False
    outdelim = None
    eol = b"\n"
    for k, v in opts:
        if k in ("b", "c", "f"):
            if mode is not None:
                raise _Usage("only one list may be specified")
            mode, spec = k, v
        elif k == "d":
            delim = _b(v)
        elif k == "s":
            only_delim = True
        elif k == "complement":
            complement = True
        elif k == "od":
            outdelim = _b(v)
        elif k == "z":
            eol = b"\0"
    if mode is None:
        raise _Usage("you must specify a list of bytes, characters, or fields")
    if delim is not None and mode != "f":
        raise _Usage("an input delimiter may be specified only when operating on fields")
    if only_delim and mode != "f":
        raise _Usage("suppressing non-delimited lines makes sense\n\tonly when operating on fields")
    if delim is None:
        delim = b"\t"
    elif len(delim) != 1:
        if delim == b"":
            delim = b"\0"
        else:
            raise _Usage("the delimiter must be a single character")
    ranges = _parse_list(spec, mode == "f")
    if complement:
        ranges = _complement(ranges)
    files = files or ["-"]
    status = 0
    if mode == "f":
        od = delim if outdelim is None else outdelim
        finite = [(lo, hi) for lo, hi in ranges if hi is not None]
        open_from = next((lo for lo, hi in ranges if hi is None), None)
        maxfin = max((hi for lo, hi in finite), default=0)
        idx = []
        for lo, hi in finite:
            idx.extend(range(lo - 1, hi))
        idx = sorted(set(idx))
        single = idx[0] if len(idx) == 1 and open_from is None else None
    for fname in files:
        try:
            f = _open(ctx, fname)
        except OSError as e:
            _oserr(ctx, "cut", fname, e)
            status = 1
            continue
        try:
            out = _Batch()
            recs = f if eol == b"\n" else _split_keep(_read_all(f).replace(b"\0", b"\n"))
            for line in recs:
                body = line[:-1] if line.endswith(b"\n") else line
                if mode == "f":
                    if delim not in body:
                        if only_delim:
                            continue
                        out.add(body + eol)
                    else:
                        parts = body.split(delim)
                        if single is not None:
                            sel = parts[single : single + 1]
                        else:
                            np = len(parts)
                            sel = [parts[i] for i in idx if i < np]
                            if open_from is not None:
                                start = max(open_from - 1, maxfin if maxfin >= open_from else 0)
                                sel.extend(parts[start:])
                        out.add(od.join(sel) + eol)
                else:
                    pieces = []
                    for lo, hi in ranges:
                        if lo > len(body):
                            break
                        pieces.append(body[lo - 1 : hi])
                    if outdelim is not None:
                        out.add(outdelim.join(pieces) + eol)
                    else:
                        out.add(b"".join(pieces) + eol)
                if out.size >= _OUT:
                    yield out.take()
            if out.size:
                yield out.take()
        except OSError as e:
            _oserr(ctx, "cut", fname, e)
            status = 1
        finally:
            _close(ctx, f)
    return status


# ---------------------------------------------------------------------------------------------
# tr
# ---------------------------------------------------------------------------------------------

_TR_CLASSES = {
    "alpha": bytes(c for c in range(256) if (65 <= c <= 90 or 97 <= c <= 122)),
    "digit": b"0123456789",
    "alnum": bytes(c for c in range(256) if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122)),
    "upper": bytes(range(65, 91)),
    "lower": bytes(range(97, 123)),
    "space": b"\t\n\v\f\r ",
    "blank": b"\t ",
    "punct": bytes(c for c in range(33, 127) if not chr(c).isalnum()),
    "print": bytes(range(32, 127)),
    "graph": bytes(range(33, 127)),
    "cntrl": bytes(list(range(0, 32)) + [127]),
    "xdigit": b"0123456789ABCDEFabcdef",
}
_TR_ESC = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}


def _tr_set(spec, is_set2=False, set1_len=0):
    """Expands a tr SET into bytes; [c*n] repeats (SET2) with n empty meaning 'fill'."""
    b = _b(spec)
    toks = []  # list of ints, or ("fill", c) placeholder
    i = 0
    n = len(b)

    def char_at(i):
        c = b[i]
        if c == 92 and i + 1 < n:
            d = chr(b[i + 1])
            if d in "01234567":
                j = i + 1
                v = 0
                while j < n and j < i + 4 and chr(b[j]) in "01234567":
                    nv = v * 8 + b[j] - 48
                    if nv > 255:
                        break
                    v = nv
                    j += 1
                return v, j
            if d in _TR_ESC:
                return _TR_ESC[d], i + 2
            return b[i + 1], i + 2
        return c, i + 1

    while i < n:
        if b[i] == 91 and i + 1 < n and b[i + 1] in (58, 61):  # [: or [=
            kind = b[i + 1]
            end = b.find(bytes([kind, 93]), i + 2)
            if end > 0:
                name = b[i + 2 : end].decode("latin-1")
                if kind == 58:
                    if name not in _TR_CLASSES:
                        raise _Fatal(f"invalid character class '{name}'")
                    toks.extend(_TR_CLASSES[name])
                else:
                    toks.extend(b[i + 2 : end][:1])
                i = end + 2
                continue
        if b[i] == 91 and not is_set2 and re.match(rb"\[\\?.\*\d*\]", b[i:]):
            raise _Fatal("the [c*] repeat construct may not appear in string1")
        if b[i] == 91 and is_set2:
            # [c*n] or [c*]
            c, j = char_at(i + 1) if i + 1 < n else (None, i)
            if c is not None and j < n and b[j] == 42:
                end = b.find(b"]", j + 1)
                if end > 0 and re.fullmatch(rb"\d*", b[j + 1 : end]):
                    cnt = b[j + 1 : end]
                    if not cnt or int(cnt.decode(), 8 if cnt.startswith(b"0") else 10) == 0:
                        toks.append(("fill", c))
                    else:
                        toks.extend([c] * int(cnt.decode(), 8 if cnt.startswith(b"0") else 10))
                    i = end + 1
                    continue
        c, j = char_at(i)
        if j < n and b[j] == 45 and j + 1 < n:  # range c-d
            d, k = char_at(j + 1)
            if d < c:
                raise _Fatal(
                    "range-endpoints of '%s-%s' are in reverse collating sequence order"
                    % (_s(bytes([c])), _s(bytes([d]))))
            toks.extend(range(c, d + 1))
            i = k
            continue
        toks.append(c)
        i = j
    if is_set2:
        fills = [t for t in toks if isinstance(t, tuple)]
        if fills:
            fixed = sum(1 for t in toks if not isinstance(t, tuple))
            room = max(set1_len - fixed, 0)
            out = []
            for t in toks:
                if isinstance(t, tuple):
                    out.extend([t[1]] * room)
                    room = 0
                else:
                    out.append(t)
            toks = out
    return bytes(toks)


def _tr(ctx, argv):
    opts, ops = _getopt(
        argv,
        "cCdst",
        {
            "complement": ("c", 0),
            "delete": ("d", 0),
            "squeeze-repeats": ("s", 0),
            "truncate-set1": ("t", 0),
        },
    )
    comp = delete = squeeze = trunc = False
    for k, _ in opts:
        if k in ("c", "C"):
            comp = True
        elif k == "d":
            delete = True
        elif k == "s":
            squeeze = True
        elif k == "t":
            trunc = True
    if not ops:
        raise _Usage("missing operand")
    need = 2 if (not delete and not squeeze) or (delete and squeeze) else 1
    maxops = 2 if not delete or squeeze else 1
    if len(ops) < need:
        if need == 2 and delete:
            raise _Usage(f"missing operand after '{ops[0]}'\nTwo strings must be given when both deleting and squeezing repeats.")
        raise _Usage(f"missing operand after '{ops[0]}'\nTwo strings must be given when translating.")
    if len(ops) > maxops:
        extra = f"extra operand '{ops[maxops]}'"
        if delete and not squeeze:
            extra += "\nOnly one string may be given when deleting without squeezing repeats."
        raise _Usage(extra)
    set1 = _tr_set(ops[0])
    if comp:
        present = set(set1)
        set1 = bytes(c for c in range(256) if c not in present)
    set2 = _tr_set(ops[1], True, len(set1)) if len(ops) > 1 else None
    table = None
    delete_bytes = None
    squeeze_set = None
    if delete:
        delete_bytes = set1
        if squeeze:
            squeeze_set = set2
    elif set2 is not None:
        if not set2:
            if set1:
                raise _Fatal("when not truncating set1, string2 must be non-empty")
        if trunc:
            set1 = set1[: len(set2)]
        elif len(set2) < len(set1):
            set2 = set2 + set2[-1:] * (len(set1) - len(set2))
        mapping = list(range(256))
        for a, b2 in zip(set1, set2):
            mapping[a] = b2
        table = bytes(mapping)
        if squeeze:
            squeeze_set = set2
    else:
        squeeze_set = set1
    sq_rx = None
    if squeeze_set:
        cls = b"".join(re.escape(bytes([c])) for c in sorted(set(squeeze_set)))
        sq_rx = re.compile(b"([" + cls + b"])\\1+")
    last = -1
    while True:
        b = ctx.stdin.read(BLOCK)
        if not b:
            break
        if delete_bytes is not None:
            b = b.translate(None, delete_bytes)
        if table is not None:
            b = b.translate(table)
        if sq_rx is not None and b:
            b = sq_rx.sub(rb"\1", b)
            if last >= 0 and b[0] == last and last in squeeze_set:
                b = b.lstrip(bytes([last]))
        if b:
            last = b[-1]
            yield b
    return 0


# ---------------------------------------------------------------------------------------------
# paste, tee
# ---------------------------------------------------------------------------------------------


def _unescape_delims(text):
    b = _b(text)
    out = []
    i = 0
    while i < len(b):
        c = b[i : i + 1]
        if c == b"\\" and i + 1 < len(b):
            d = b[i + 1 : i + 2]
            out.append({b"n": b"\n", b"t": b"\t", b"\\": b"\\", b"0": b"", b"b": b"\b",
                        b"f": b"\f", b"r": b"\r", b"v": b"\v"}.get(d, d))
            i += 2
        else:
            out.append(c)
            i += 1
    return out


def _paste(ctx, argv):
    opts, files = _getopt(argv, "d:sz", {"delimiters": ("d", 1), "serial": ("s", 0),
                                          "zero-terminated": ("z", 0)})
    delims = [b"\t"]
    serial = False
    eol = b"\n"
    for k, v in opts:
        if k == "d":
            if v.endswith("\\") and not v.endswith("\\\\"):
                raise _Fatal(f"delimiter list ends with an unescaped backslash: {v}")
            delims = _unescape_delims(v) or [b""]
        elif k == "s":
            serial = True
        elif k == "z":
            eol = b"\0"
    files = files or ["-"]
    handles = []
    status = 0
    for fname in files:
        try:
            handles.append(_open(ctx, fname))
        except IsADirectoryError as e:
            _oserr(ctx, "paste", fname, e)
            status = 1
            handles.append(_EMPTY())
        except OSError as e:
            for h in handles:
                _close(ctx, h)
            raise _Fatal(f"{_s(fname)}: {os.strerror(e.errno)}")
    nd = len(delims)

    def strip(line):
        return line[:-1] if line.endswith(eol) else line

    try:
        if serial:
            for h in handles:
                data = _read_all(h)
                if not data:
                    continue
                recs = data.split(eol)
                if recs[-1] == b"":
                    recs.pop()
                out = [recs[0]] if recs else []
                for i, r in enumerate(recs[1:]):
                    out.append(delims[i % nd])
                    out.append(r)
                yield b"".join(out) + eol
        else:
            iters = [iter(h) if eol == b"\n" else iter(_split_keep(_read_all(h).replace(b"\0", b"\n"))) for h in handles]
            # The same stdin named several times reads successive lines.
            live = [True] * len(iters)
            batch = _Batch()
            while True:
                parts = []
                any_line = False
                for i, it in enumerate(iters):
                    line = None
                    if live[i]:
                        line = next(it, None)
                        if line is None:
                            live[i] = False
                    if line is not None:
                        any_line = True
                        parts.append(strip(line))
                    else:
                        parts.append(b"")
                if not any_line:
                    break
                out = [parts[0]]
                for i in range(1, len(parts)):
                    out.append(delims[(i - 1) % nd])
                    out.append(parts[i])
                if batch.add(b"".join(out) + eol):
                    yield batch.take()
            if batch.size:
                yield batch.take()
    finally:
        for h in handles:
            _close(ctx, h)
    return status


def _tee(ctx, argv):
    opts, files = _getopt(argv, "aip", {"append": ("a", 0), "ignore-interrupts": ("i", 0),
                                        "output-error": ("p", 2)})
    append = any(k == "a" for k, _ in opts)
    outs = []
    status = 0
    for fname in files:
        if fname == "-":
            continue
        try:
            outs.append(open(fname, "ab" if append else "wb"))
        except OSError as e:
            _oserr(ctx, "tee", fname, e)
            status = 1
    read = getattr(ctx.stdin, "read1", None) or ctx.stdin.read
    try:
        while True:
            b = read(BLOCK)
            if not b:
                break
            for f in outs:
                f.write(b)
                f.flush()
            yield b
    finally:
        for f in outs:
            f.close()
    return status


# ---------------------------------------------------------------------------------------------
# seq
# ---------------------------------------------------------------------------------------------

_SEQ_NUM = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _seq_parse(text):
    if not _SEQ_NUM.fullmatch(text):
        if text.strip().lower() in ("inf", "+inf", "-inf", "infinity", "nan"):
            return Decimal(text.strip()), 0, False
        raise _Usage(f"invalid floating point argument: '{text}'")
    t = text.strip()
    is_int = re.fullmatch(r"[-+]?\d+", t) is not None
    mant, _, exp = t.lower().partition("e")
    frac = len(mant.partition(".")[2])
    prec = max(frac - (int(exp) if exp else 0), 0)
    return Decimal(t), prec, is_int


def _seq(ctx, argv):
    args = list(argv)
    # Negative numbers are operands, not options: option parsing stops at the first operand.
    i = 1
    while i < len(args):
        a = args[i]
        if a == "--" or a == "-" or not a.startswith("-") or re.fullmatch(r"-(\d|\.\d).*", a):
            break
        if a.startswith("--"):
            i += 1
            if "=" not in a and any(x.startswith(a) for x in ("--format", "--separator")):
                i += 1
            continue
        j = 1
        while j < len(a) and a[j] not in "fs":
            j += 1
        i += 2 if j == len(a) - 1 else 1
    opts, ops = _getopt(args[:i], "f:s:w",
                        {"format": ("f", 1), "separator": ("s", 1), "equal-width": ("w", 0)})
    rest = args[i:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    ops = ops + rest
    fmt = None
    sep = b"\n"
    width = False
    for k, v in opts:
        if k == "f":
            fmt = v
        elif k == "s":
            sep = _b(v)
        elif k == "w":
            width = True
    if not ops:
        raise _Usage("missing operand")
    if len(ops) > 3:
        raise _Usage(f"extra operand '{ops[3]}'")
    nums = [_seq_parse(x) for x in ops]
    if len(nums) == 1:
        first, inc, last = (Decimal(1), 0, True), (Decimal(1), 0, True), nums[0]
    elif len(nums) == 2:
        first, inc, last = nums[0], (Decimal(1), 0, True), nums[1]
    else:
        first, inc, last = nums
    if inc[0] == 0:
        raise _Usage(f"invalid Zero increment value: '{ops[1]}'")
    if fmt is not None and width:
        raise _Fatal("format string may not be specified when printing equal width strings")
    if fmt is not None:
        nconv = len(re.findall(r"%[-+ #0']*\d*(?:\.\d*)?[eEfFgGaA]", fmt.replace("%%", "")))
        if nconv != 1:
            if nconv == 0:
                raise _Fatal(f"format '{fmt}' has no % directive")
            raise _Fatal(f"format '{fmt}' has too many % directives")
    a, step, z = first[0], inc[0], last[0]
    all_int = first[2] and inc[2] and last[2] and fmt is None
    if all_int:
        a, step, z = int(a), int(step), int(z)
        w = max(len(str(a)), len(str(z))) if width else 0
        stop = z + (1 if step > 0 else -1)
        started = False
        chunk = 2000
        cur = a
        while (step > 0 and cur < stop) or (step < 0 and cur > stop):
            end = cur + step * chunk
            if step > 0:
                end = min(end, stop)
            else:
                end = max(end, stop)
            r = range(cur, end, step)
            if not r:
                break
            if w:
                body = sep.join(b"%0*d" % (w, x) for x in r)
            else:
                body = sep.join(map(b"%d".__mod__, r))
            yield (sep if started else b"") + body
            started = True
            cur = r[-1] + step
        if started:
            yield b"\n"
        return 0
    prec = max(first[1], inc[1])
    if fmt is not None:
        def render(v):
            return _b(fmt % float(v))
    else:
        def render(v):
            return _b("%.*f" % (prec, v))
    if width and fmt is None:
        w = max(len(render(a)), len(render(z)))
        base = render

        def render(v):
            t = base(v)
            if len(t) < w:
                neg = t.startswith(b"-")
                t = (b"-" if neg else b"") + b"0" * (w - len(t)) + (t[1:] if neg else t)
            return t
    i = 0
    out = []
    started = False
    while True:
        v = a + step * i
        if (step > 0 and v > z) or (step < 0 and v < z):
            break
        out.append(render(v))
        i += 1
        if len(out) >= 1000:
            yield (sep if started else b"") + sep.join(out)
            started = True
            out = []
    if out:
        yield (sep if started else b"") + sep.join(out)
        started = True
    if started:
        yield b"\n"
    return 0


# ---------------------------------------------------------------------------------------------
# xargs
# ---------------------------------------------------------------------------------------------

_XARGS_MAX = 131072 - 2048


def _xargs_items(data, ctx):
    """Splits xargs input the default way: blanks and newlines, quotes, backslashes."""
    items = []
    i = 0
    n = len(data)
    cur = []
    have = False
    while i < n:
        c = data[i]
        if c in (32, 9, 10, 11, 12, 13):
            if have:
                items.append(b"".join(cur))
                cur = []
                have = False
            i += 1
            continue
        if c in (39, 34):
            j = i + 1
            while j < n and data[j] != c:
                if data[j] == 10:
                    break
                j += 1
            if j >= n or data[j] != c:
                kind = "single" if c == 39 else "double"
                raise _Fatal(f"unmatched {kind} quote; by default quotes are special to xargs "
                             "unless you use the -0 option")
            cur.append(data[i + 1 : j])
            have = True
            i = j + 1
            continue
        if c == 92 and i + 1 < n:
            cur.append(data[i + 1 : i + 2])
            have = True
            i += 2
            continue
        cur.append(data[i : i + 1])
        have = True
        i += 1
    if have:
        items.append(b"".join(cur))
    return items


def _xargs(ctx, argv):
    opts, cmd = _getopt(
        argv,
        "0a:d:E:e::I:i::L:l::n:oP:prs:tx",
        {
            "null": ("0", 0),
            "arg-file": ("a", 1),
            "delimiter": ("d", 1),
            "eof": ("e", 2),
            "replace": ("i", 2),
            "max-lines": ("l", 2),
            "max-args": ("n", 1),
            "open-tty": ("o", 0),
            "max-procs": ("P", 1),
            "interactive": ("p", 0),
            "no-run-if-empty": ("r", 0),
            "max-chars": ("s", 1),
            "verbose": ("t", 0),
            "exit": ("x", 0),
            "show-limits": ("show-limits", 0),
            "process-slot-var": ("psv", 1),
        },
        permute=False,
    )
    delim = None
    argfile = None
    eof = None
    repl = None
    maxlines = None
    maxargs = None
    norun = trace = False
    maxchars = _XARGS_MAX
    for k, v in opts:
        if k == "0":
            delim = b"\0"
        elif k == "a":
            argfile = v
        elif k == "d":
            d = _unescape_delims(v)
            if len(d) != 1 or len(d[0]) != 1:
                raise _Fatal(f"invalid input delimiter specification {v}: the delimiter must be "
                             "either a single character or an escape sequence starting with \\.")
            delim = d[0]
        elif k in ("E", "e"):
            eof = _b(v) if v else None
        elif k in ("I", "i"):
            repl = v if v is not None else "{}"
            maxlines = 1
            maxargs = None
        elif k in ("L", "l"):
            try:
                maxlines = int(v) if v is not None else 1
            except ValueError:
                raise _Fatal(f"invalid number \"{v}\" for -L option")
            maxargs = None
            repl = None
        elif k == "n":
            try:
                maxargs = int(v)
            except ValueError:
                raise _Fatal(f"invalid number \"{v}\" for -n option")
            if maxargs < 1:
                raise _Fatal(f"value {v} for -n option should be >= 1")
            maxlines = None if repl is None else maxlines
        elif k == "r":
            norun = True
        elif k == "t":
            trace = True
        elif k == "s":
            try:
                maxchars = int(v)
            except ValueError:
                raise _Fatal(f"invalid number \"{v}\" for -s option")
    cmd = cmd or ["echo"]
    if argfile is not None:
        try:
            src = open(argfile, "rb")
        except OSError as e:
            raise _Fatal(f"Cannot open input file '{argfile}': {os.strerror(e.errno)}")
    else:
        src = ctx.stdin
    cmd_b = [_b(c) for c in cmd]
    rb = _b(repl) if repl is not None else None

    def units():
        """The input, lazily: one list of items per input line (per item with -0/-d)."""
        if delim is not None:
            carry = b""
            while True:
                blk = src.read(BLOCK)
                if not blk:
                    break
                parts = (carry + blk).split(delim)
                carry = parts.pop()
                for x in parts:
                    yield [x]
            if carry:
                yield [carry]
            return
        pending = []
        for ln in src:
            if repl is not None:
                ln = ln.lstrip(b" \t")
                its = _xargs_items(ln, ctx)
                if its:
                    yield [b" ".join(its)]
                continue
            its = _xargs_items(ln, ctx)
            if eof is not None and eof in its:
                its = its[: its.index(eof)]
                if its:
                    pending.extend(its)
                if pending:
                    yield pending
                return
            if maxlines is None:
                if its:
                    yield its
                continue
            pending.extend(its)
            body = ln.rstrip(b"\n")
            if its and not body.endswith((b" ", b"\t")):
                yield pending
                pending = []
        if pending:
            yield pending

    def batches():
        if repl is not None:
            for ln in units():
                arg = ln[0] if ln else b""
                yield [c.replace(rb, arg) for c in cmd_b]
            return
        base_len = sum(len(c) + 1 for c in cmd_b)
        cur = []
        cur_lines = 0
        cur_len = base_len
        for ln in units():
            for it in ln:
                if cur and (maxargs is not None and len(cur) >= maxargs
                            or cur_len + len(it) + 1 > maxchars):
                    yield cmd_b + cur
                    cur = []
                    cur_lines = 0
                    cur_len = base_len
                cur.append(it)
                cur_len += len(it) + 1
            cur_lines += 1
            if maxlines is not None and cur_lines >= maxlines:
                yield cmd_b + cur
                cur = []
                cur_lines = 0
                cur_len = base_len
        if cur:
            yield cmd_b + cur

    status = 0
    ran = False
    try:
        for b in batches():
            ran = True
            args = [_s(x) for x in b]
            if trace:
                ctx.stderr.write(b" ".join(b) + b"\n")
            st, out = ctx.run(args, stdin=b"")
            if out:
                yield out
            st = st or 0
            if st == 255:
                _err(ctx, "xargs", f"{args[0]}: exited with status 255; aborting")
                return 124
            if st in (126, 127):
                return st
            if st >= 128:
                return 125
            if st:
                status = 123
        if not ran and not norun and repl is None:
            st, out = ctx.run([_s(x) for x in cmd_b], stdin=b"")
            if out:
                yield out
            st = st or 0
            if st in (126, 127):
                return st
            if st == 255:
                return 124
            if st:
                status = 123
    finally:
        if src is not ctx.stdin:
            src.close()
    return status


# ---------------------------------------------------------------------------------------------
# base64, checksums
# ---------------------------------------------------------------------------------------------

_B64_ALPHABET = re.compile(rb"[A-Za-z0-9+/]*={0,2}")


def _base64(ctx, argv):
    opts, files = _getopt(argv, "diw:", {"decode": ("d", 0), "ignore-garbage": ("i", 0),
                                         "wrap": ("w", 1)})
    decode = garbage = False
    wrap = 76
    for k, v in opts:
        if k == "d":
            decode = True
        elif k == "i":
            garbage = True
        elif k == "w":
            if not re.fullmatch(r"\d+", v):
                raise _Fatal(f"invalid wrap size: '{v}'")
            wrap = int(v)
    if len(files) > 1:
        raise _Usage(f"extra operand '{files[1]}'")
    fname = files[0] if files else "-"
    try:
        f = _open(ctx, fname)
    except OSError as e:
        raise _Fatal(f"{_s(fname)}: {os.strerror(e.errno)}")
    try:
        if not decode:
            carry = b""
            col = 0
            for b in _blocks(f, 3 * 4096 * 19):
                data = carry + b
                cut = len(data) - len(data) % 3
                carry = data[cut:]
                enc = binascii.b2a_base64(data[:cut], newline=False)
                out, col = _wrap(enc, wrap, col)
                yield out
            enc = binascii.b2a_base64(carry, newline=False) if carry else b""
            out, col = _wrap(enc, wrap, col)
            if wrap and col:
                out += b"\n"
            elif not wrap and (out or enc):
                pass
            yield out
            return 0
        pending = b""
        for b in _blocks(f):
            b = b.replace(b"\n", b"")
            if garbage:
                b = re.sub(rb"[^A-Za-z0-9+/=]", b"", b)
            data = pending + b
            cut = len(data) - len(data) % 4
            if b"=" in data[:cut]:
                cut = len(data)  # padding: the end (or garbage after it)
            chunk, pending = data[:cut], data[cut:]
            if chunk:
                ok = _B64_ALPHABET.fullmatch(chunk) and len(chunk) % 4 == 0
                if not ok:
                    good = _B64_ALPHABET.match(chunk).end()
                    good -= good % 4
                    yield binascii.a2b_base64(chunk[:good])
                    raise _Fatal("invalid input")
                yield binascii.a2b_base64(chunk)
        if pending:
            if not _B64_ALPHABET.fullmatch(pending):
                raise _Fatal("invalid input")
            padded = pending + b"=" * (-len(pending) % 4)
            try:
                yield binascii.a2b_base64(padded)
            except binascii.Error:
                raise _Fatal("invalid input")
            raise _Fatal("invalid input")
        return 0
    finally:
        _close(ctx, f)


def _wrap(enc, wrap, col):
    if not wrap or not enc:
        return enc, col
    out = []
    i = 0
    first = wrap - col
    if first < len(enc):
        out.append(enc[:first] + b"\n")
        i = first
        while i + wrap <= len(enc):
            out.append(enc[i : i + wrap] + b"\n")
            i += wrap
        out.append(enc[i:])
        col = len(enc) - i
    else:
        out.append(enc)
        col += len(enc)
        if col == wrap:
            out.append(b"\n")
            col = 0
    return b"".join(out), col


def _hash_file(ctx, algo, fname):
    h = hashlib.new(algo)
    f = _open(ctx, fname)
    try:
        for b in _blocks(f):
            h.update(b)
    finally:
        _close(ctx, f)
    return h.hexdigest().encode()


def _escape_sum_name(name):
    b = _b(name)
    if b"\\" in b or b"\n" in b or b"\r" in b:
        return True, b.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\r", b"\\r")
    return False, b


def _unescape_sum_name(b):
    out = []
    i = 0
    while i < len(b):
        if b[i] == 92 and i + 1 < len(b):
            d = b[i + 1 : i + 2]
            out.append({b"\\": b"\\", b"n": b"\n", b"r": b"\r"}.get(d, b"\\" + d))
            i += 2
        else:
            out.append(b[i : i + 1])
            i += 1
    return b"".join(out)


def _make_sum(algo, tagname):
    hexlen = hashlib.new(algo).digest_size * 2

    def summer(ctx, argv):
        name = argv[0]
        opts, files = _getopt(
            argv,
            "bctwz",
            {
                "binary": ("b", 0),
                "check": ("c", 0),
                "tag": ("tag", 0),
                "text": ("t", 0),
                "zero": ("z", 0),
                "ignore-missing": ("ignore-missing", 0),
                "quiet": ("quiet", 0),
                "status": ("status", 0),
                "strict": ("strict", 0),
                "warn": ("w", 0),
            },
        )
        binary = check = tag = zero = False
        ignore_missing = quiet = status_only = strict = warn = False
        for k, _ in opts:
            if k == "b":
                binary = True
            elif k == "t":
                binary = False
            elif k == "c":
                check = True
            elif k == "tag":
                tag = True
            elif k == "z":
                zero = True
            elif k == "ignore-missing":
                ignore_missing = True
            elif k == "quiet":
                quiet = True
            elif k == "status":
                status_only = True
            elif k == "strict":
                strict = True
            elif k == "w":
                warn = True
        files = files or ["-"]
        status = 0
        if not check:
            for fname in files:
                try:
                    digest = _hash_file(ctx, algo, fname)
                except OSError as e:
                    _oserr(ctx, name, fname, e)
                    status = 1
                    continue
                esc, shown = _escape_sum_name(fname) if not zero else (False, _b(fname))
                if tag:
                    line = tagname.encode() + b" (" + shown + b") = " + digest
                else:
                    line = digest + (b" *" if binary else b"  ") + shown
                yield (b"\\" if esc else b"") + line + (b"\0" if zero else b"\n")
            return status
        line_rx = re.compile(rb"(\\?)([0-9a-fA-F]{%d}) ([ *])(.+)" % hexlen)
        tag_rx = re.compile(rb"(\\?)" + tagname.encode() + rb" \((.+)\) = ([0-9a-fA-F]{%d})" % hexlen)
        for listname in files:
            try:
                f = _open(ctx, listname)
                data = _read_all(f)
                _close(ctx, f)
            except OSError as e:
                _oserr(ctx, name, listname, e)
                status = 1
                continue
            shown_list = "standard input" if listname == "-" else _s(listname)
            bad_format = mismatched = unreadable = ok_lines = 0
            for lineno, ln in enumerate(data.split(b"\n")[: -1 if data.endswith(b"\n") else None], 1):
                if ln.endswith(b"\r"):
                    ln = ln[:-1]
                if not ln or ln.startswith(b"#"):
                    continue
                m = line_rx.fullmatch(ln)
                if m:
                    esc, want, fname = m.group(1), m.group(2), m.group(4)
                else:
                    m = tag_rx.fullmatch(ln)
                    if not m:
                        bad_format += 1
                        if warn:
                            _err(ctx, name, f"{shown_list}: {lineno}: improperly formatted {tagname} checksum line")
                        continue
                    esc, fname, want = m.group(1), m.group(2), m.group(3)
                if esc:
                    fname = _unescape_sum_name(fname)
                ok_lines += 1
                try:
                    got = _hash_file(ctx, algo, _s(fname))
                except OSError as e:
                    if ignore_missing and e.errno == 2:
                        ok_lines -= 1
                        continue
                    _oserr(ctx, name, fname, e)
                    unreadable += 1
                    if not status_only:
                        yield fname + b": FAILED open or read\n"
                    continue
                if got.lower() == want.lower():
                    if not (quiet or status_only):
                        yield fname + b": OK\n"
                else:
                    mismatched += 1
                    if not status_only:
                        yield fname + b": FAILED\n"
            if ok_lines == 0:
                _err(ctx, name, f"{shown_list}: no properly formatted checksum lines found")
                status = 1
                continue
            if not status_only:
                if bad_format:
                    _err(ctx, name, "WARNING: %d line%s improperly formatted"
                         % (bad_format, " is" if bad_format == 1 else "s are"))
                if unreadable:
                    _err(ctx, name, "WARNING: %d listed file%s could not be read"
                         % (unreadable, "" if unreadable == 1 else "s"))
                if mismatched:
                    _err(ctx, name, "WARNING: %d computed checksum%s did NOT match"
                         % (mismatched, "" if mismatched == 1 else "s"))
            if mismatched or unreadable or (strict and bad_format):
                status = 1
        return status

    summer.__name__ = algo + "sum"
    return summer


# ---------------------------------------------------------------------------------------------
# cmp
# ---------------------------------------------------------------------------------------------


def _cmp_skip(text):
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    if not m or m.group(2) not in _SUFFIXES:
        return None
    return int(m.group(1)) * _SUFFIXES[m.group(2)]


def _cmp(ctx, argv):
    opts, ops = _getopt(
        argv,
        "bi:ln:sv",
        {
            "print-bytes": ("b", 0),
            "ignore-initial": ("i", 1),
            "verbose": ("l", 0),
            "bytes": ("n", 1),
            "quiet": ("s", 0),
            "silent": ("s", 0),
            "version": ("v", 0),
        },
    )
    pbytes = listall = silent = False
    skip = [0, 0]
    limit = None
    for k, v in opts:
        if k == "b":
            pbytes = True
        elif k == "l":
            listall = True
        elif k == "s":
            silent = True
        elif k == "i":
            a, _, b = v.partition(":")
            sa = _cmp_skip(a)
            sb = _cmp_skip(b) if b else sa
            if sa is None or sb is None:
                raise _Fatal(f"invalid --ignore-initial value '{v}'", 2)
            skip = [sa, sb]
        elif k == "n":
            limit = _cmp_skip(v)
            if limit is None:
                raise _Fatal(f"invalid --bytes value '{v}'", 2)
        elif k == "v":
            yield b"cmp (GNU diffutils) 3.8\n"
            return 0
    if listall and silent:
        raise _Usage("options -l and -s are incompatible")
    if not ops:
        raise _Usage("missing operand after 'cmp'")
    if len(ops) > 4:
        raise _Usage(f"extra operand '{ops[4]}'")
    a = ops[0]
    b = ops[1] if len(ops) > 1 else "-"
    for i, extra in enumerate(ops[2:4]):
        val = _cmp_skip(extra)
        if val is None:
            raise _Fatal(f"invalid --ignore-initial value '{extra}'", 2)
        skip[i] = val
    handles = []
    for fname in (a, b):
        try:
            handles.append(_open(ctx, fname))
        except OSError as e:
            for h in handles:
                _close(ctx, h)
            _oserr(ctx, "cmp", fname, e)
            return 2
    fa, fb = handles
    try:
        if a == b and fa is not ctx.stdin and skip[0] == skip[1]:
            return 0
        for f, n in zip(handles, skip):
            while n > 0:
                got = f.read(min(n, BLOCK))
                if not got:
                    break
                n -= len(got)
        offset = 0
        line = 1
        differ = False
        width = None
        while limit is None or offset < limit:
            want = BLOCK if limit is None else min(BLOCK, limit - offset)
            ba = _read_exact(fa, want)
            bb = _read_exact(fb, want)
            n = min(len(ba), len(bb))
            if ba[:n] != bb[:n]:
                if not listall:
                    i = _first_diff(ba, bb, n)
                    if silent:
                        return 1
                    line += ba.count(b"\n", 0, i)
                    pos = offset + i + 1
                    if pbytes:
                        ca, cb = ba[i], bb[i]
                        yield b"%s %s differ: byte %d, line %d is %3o %s %3o %s\n" % (
                            _b(a), _b(b), pos, line, ca, _cmp_char(ca), cb, _cmp_char(cb))
                    else:
                        yield b"%s %s differ: char %d, line %d\n" % (_b(a), _b(b), pos, line)
                    return 1
                differ = True
                if width is None:
                    width = len(str(_cmp_width(fa, fb, skip, limit, ctx)))
                out = []
                for i in range(n):
                    if ba[i] != bb[i]:
                        if pbytes:
                            out.append(b"%*d %3o %-4s %3o %s\n" % (
                                width, offset + i + 1, ba[i], _cmp_char(ba[i]), bb[i], _cmp_char(bb[i])))
                        else:
                            out.append(b"%*d %3o %3o\n" % (width, offset + i + 1, ba[i], bb[i]))
                yield b"".join(out)
            line += ba.count(b"\n", 0, n)
            offset += n
            if len(ba) != len(bb):
                short = a if len(ba) < len(bb) else b
                if not silent:
                    if offset == 0 and not listall:
                        _err(ctx, "cmp", f"EOF on {_s(short)} which is empty")
                    elif listall:
                        _err(ctx, "cmp", f"EOF on {_s(short)} after byte {offset}")
                    else:
                        shown_line = line - (1 if ba[:n].endswith(b"\n") else 0)
                        _err(ctx, "cmp", f"EOF on {_s(short)} after byte {offset}, line {shown_line}")
                return 1
            if not ba:
                break
        return 1 if differ else 0
    finally:
        for h in handles:
            _close(ctx, h)


def _read_exact(f, n):
    out = f.read(n)
    while out and len(out) < n:
        more = f.read(n - len(out))
        if not more:
            break
        out += more
    return out


def _first_diff(a, b, n):
    lo, hi = 0, n
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if a[lo:mid] != b[lo:mid]:
            hi = mid
        else:
            lo = mid
    for i in range(lo, hi):
        if a[i] != b[i]:
            return i
    return hi


def _cmp_char(c):
    if c >= 128:
        s = b"M-"
        c -= 128
    else:
        s = b""
    if c < 32:
        return s + b"^" + bytes([c + 64])
    if c == 127:
        return s + b"^?"
    return s + bytes([c])


def _cmp_width(fa, fb, skip, limit, ctx):
    sizes = []
    for f, sk in zip((fa, fb), skip):
        try:
            st = os.fstat(f.fileno())
            sizes.append(max(st.st_size - sk, 0) if _is_reg(st) else None)
        except (OSError, AttributeError, ValueError):
            sizes.append(None)
    known = [x for x in sizes if x is not None]
    m = min(known) if len(known) == 2 else (2**63 - 1)
    if limit is not None:
        m = min(m, limit)
    return m


# ---------------------------------------------------------------------------------------------
# diff: a longest-common-subsequence edit script whose change boundaries are then shifted so
# that hunks mostly come out where GNU diff puts them; normal, unified (-u) and brief (-q)
# output, directories (-r).
# ---------------------------------------------------------------------------------------------


# Myers' O(ND) algorithm (1986), written from the paper; boundary shifting our own.
# The edit script comes from the linear-space variant: find the middle snake of an optimal
# path by running the greedy search forwards and backwards at once, then solve the two
# halves on either side of it (with an explicit stack, not recursion). Unless --minimal, a
# search that goes past _DIFF_COST_CAP edits splits at its furthest forward point instead,
# which bounds the time on very different inputs at the price of a longer script.

_DIFF_COST_CAP = 600


def _diff_middle(A, B, x0, x1, y0, y1, cap):
    """A split of A[x0:x1] against B[y0:y1] (both non-empty, first and last items differing):
    (xs, ys, xe, ye), a run of equal items from (xs, ys) to (xe, ye) on an optimal path."""
    n = x1 - x0
    m = y1 - y0
    delta = n - m
    odd = delta & 1
    off = m + 1
    fwd = [-1] * (n + m + 3)
    bwd = [-1] * (n + m + 3)
    fwd[off + 1] = 0
    bwd[off + 1] = 0
    d = 0
    while True:
        lo = -d
        while lo < -m:
            lo += 2
        hi = d
        while hi > n:
            hi -= 2
        for k in range(hi, lo - 1, -2):
            i = off + k
            if k == -d or (k != d and fwd[i - 1] < fwd[i + 1]):
                x = fwd[i + 1]
            else:
                x = fwd[i - 1] + 1
            y = x - k
            xs, ys = x, y
            while x < n and y < m and A[x0 + x] == B[y0 + y]:
                x += 1
                y += 1
            fwd[i] = x
            if odd:
                r = bwd[off + delta - k]
                if r >= 0 and x + r >= n:
                    return x0 + xs, y0 + ys, x0 + x, y0 + y
        for k in range(lo, hi + 1, 2):
            i = off + k
            if k == -d or (k != d and bwd[i - 1] < bwd[i + 1]):
                x = bwd[i + 1]
            else:
                x = bwd[i - 1] + 1
            y = x - k
            xs, ys = x, y
            while x < n and y < m and A[x1 - 1 - x] == B[y1 - 1 - y]:
                x += 1
                y += 1
            bwd[i] = x
            if not odd:
                f = fwd[off + delta - k]
                if f >= 0 and x + f >= n:
                    return x1 - x, y1 - y, x1 - xs, y1 - ys
        d += 1
        if cap and d > cap:
            best = -1
            bx = by = 0
            for k in range(lo, hi + 1, 2):
                x = fwd[off + k]
                if x >= 0 and 2 * x - k > best:
                    best = 2 * x - k
                    bx, by = x, x - k
            return x0 + bx, y0 + by, x0 + bx, y0 + by


def _diff_mark(A, B, cap, del_a, ins_b):
    """Flag, through del_a(i) and ins_b(j), the items of A and B outside a longest common
    subsequence (or, past the cost cap, outside a long one)."""
    todo = [(0, len(A), 0, len(B))]
    while todo:
        x0, x1, y0, y1 = todo.pop()
        while x0 < x1 and y0 < y1 and A[x0] == B[y0]:
            x0 += 1
            y0 += 1
        while x0 < x1 and y0 < y1 and A[x1 - 1] == B[y1 - 1]:
            x1 -= 1
            y1 -= 1
        if x0 == x1:
            for j in range(y0, y1):
                ins_b(j)
        elif y0 == y1:
            for i in range(x0, x1):
                del_a(i)
        else:
            xs, ys, xe, ye = _diff_middle(A, B, x0, x1, y0, y1, cap)
            todo.append((xe, x1, ye, y1))
            todo.append((x0, xs, y0, ys))


def _diff_shift(eq, ch, eq_o, ch_o):
    """Slide each run of changed lines in one file (eq, ch) up as far as equal lines allow,
    then down as far as they allow, joining runs that come to touch; it then rests at the
    lowest place where its end meets the end of a run in the other file (eq_o, ch_o), so the
    two make one hunk, or else at the lowest place of all."""
    n = len(eq)
    paired = [j for j in range(len(eq_o)) if not ch_o[j]]
    paired.append(len(eq_o))

    def meets(u):
        j = paired[u]
        return j > 0 and ch_o[j - 1]

    i = 0
    u = 0
    while True:
        while i < n and not ch[i]:
            i += 1
            u += 1
        if i >= n:
            break
        start = i
        while i < n and ch[i]:
            i += 1
        end = i
        while True:
            size = end - start
            while start > 0 and eq[start - 1] == eq[end - 1]:
                start -= 1
                end -= 1
                u -= 1
                ch[start] = True
                ch[end] = False
                while start > 0 and ch[start - 1]:
                    start -= 1
            best = end if meets(u) else -1
            while end < n and eq[start] == eq[end]:
                ch[start] = False
                ch[end] = True
                start += 1
                end += 1
                u += 1
                while end < n and ch[end]:
                    end += 1
                if meets(u):
                    best = end
            if end - start == size:
                break
        if best >= 0:
            while end > best:
                start -= 1
                end -= 1
                u -= 1
                ch[start] = True
                ch[end] = False
        i = end


def _diff_script(a, b, keyfn, horizon, minimal):
    """The edit script between line lists a and b: [(line0, line1, deleted, inserted)]."""
    ids = {}
    ea = [ids.setdefault(keyfn(ln) if keyfn else ln, len(ids)) for ln in a]
    eb = [ids.setdefault(keyfn(ln) if keyfn else ln, len(ids)) for ln in b]
    n0, n1 = len(ea), len(eb)
    p = 0
    lim = min(n0, n1)
    while p < lim and ea[p] == eb[p]:
        p += 1
    p = max(p - horizon, 0)
    sfx = 0
    slim = lim - p
    while sfx < slim and ea[n0 - 1 - sfx] == eb[n1 - 1 - sfx]:
        sfx += 1
    sfx = max(sfx - horizon, 0)
    e0 = ea[p : n0 - sfx]
    e1 = eb[p : n1 - sfx]
    l0, l1 = len(e0), len(e1)
    ch0 = [False] * (l0 + 1)
    ch1 = [False] * (l1 + 1)
    # A line with no equal in the other file is in no common subsequence: flag it now and
    # leave it out of the search.
    in0 = set(e0)
    in1 = set(e1)
    r0 = []
    r1 = []
    for i, e in enumerate(e0):
        if e in in1:
            r0.append(i)
        else:
            ch0[i] = True
    for j, e in enumerate(e1):
        if e in in0:
            r1.append(j)
        else:
            ch1[j] = True

    def del_a(x):
        ch0[r0[x]] = True

    def ins_b(y):
        ch1[r1[y]] = True

    _diff_mark([e0[i] for i in r0], [e1[j] for j in r1], 0 if minimal else _DIFF_COST_CAP,
               del_a, ins_b)
    _diff_shift(e0, ch0, e1, ch1)
    _diff_shift(e1, ch1, e0, ch0)
    script = []
    i0 = i1 = 0
    while i0 < l0 or i1 < l1:
        if ch0[i0] or ch1[i1]:
            s0, s1 = i0, i1
            while ch0[i0]:
                i0 += 1
            while ch1[i1]:
                i1 += 1
            script.append((s0 + p, s1 + p, i0 - s0, i1 - s1))
        i0 += 1
        i1 += 1
    return script


def _nl(line):
    if line.endswith(b"\n"):
        return line
    return line + b"\n\\ No newline at end of file\n"


def _range(a, b):
    """GNU's normal-format range of 1-based lines a..b."""
    return b"%d,%d" % (a, b) if a < b else b"%d" % b


def _normal_output(script, a, b):
    out = []
    for l0, l1, d, ins in script:
        if d and ins:
            out.append(_range(l0 + 1, l0 + d) + b"c" + _range(l1 + 1, l1 + ins) + b"\n")
        elif d:
            out.append(_range(l0 + 1, l0 + d) + b"d" + b"%d" % l1 + b"\n")
        else:
            out.append(b"%d" % l0 + b"a" + _range(l1 + 1, l1 + ins) + b"\n")
        for k in range(l0, l0 + d):
            out.append(b"< " + _nl(a[k]))
        if d and ins:
            out.append(b"---\n")
        for k in range(l1, l1 + ins):
            out.append(b"> " + _nl(b[k]))
    return b"".join(out)


def _uni_range(first, last):
    ta, tb = first + 1, last + 1
    if tb < ta:
        return b"%d,0" % tb
    if tb == ta:
        return b"%d" % tb
    return b"%d,%d" % (ta, tb - ta + 1)


def _hunks(script, context):
    hunks = []
    cur = []
    for ch in script:
        if cur:
            prev = cur[-1]
            if ch[0] - (prev[0] + prev[2]) < 2 * context + 1:
                cur.append(ch)
                continue
            hunks.append(cur)
        cur = [ch]
    if cur:
        hunks.append(cur)
    return hunks


def _unified_output(script, a, b, context):
    out = []
    n0, n1 = len(a), len(b)
    for hunk in _hunks(script, context):
        f0 = max(hunk[0][0] - context, 0)
        f1 = max(hunk[0][1] - context, 0)
        last = hunk[-1]
        e0 = min(last[0] + last[2] - 1 + context, n0 - 1)
        e1 = min(last[1] + last[3] - 1 + context, n1 - 1)
        out.append(b"@@ -" + _uni_range(f0, e0) + b" +" + _uni_range(f1, e1) + b" @@\n")
        i = f0
        for l0, l1, d, ins in hunk:
            while i < l0:
                out.append(b" " + _nl(a[i]))
                i += 1
            for k in range(l0, l0 + d):
                out.append(b"-" + _nl(a[k]))
            for k in range(l1, l1 + ins):
                out.append(b"+" + _nl(b[k]))
            i = l0 + d
        while i <= e0:
            out.append(b" " + _nl(a[i]))
            i += 1
    return b"".join(out)


def _ctx_range(first, last):
    ta, tb = first + 1, last + 1
    if tb <= ta:
        return b"%d" % tb if tb == ta else b"%d" % tb
    return b"%d,%d" % (ta, tb)


def _context_output(script, a, b, context):
    out = []
    n0, n1 = len(a), len(b)
    for hunk in _hunks(script, context):
        f0 = max(hunk[0][0] - context, 0)
        f1 = max(hunk[0][1] - context, 0)
        last = hunk[-1]
        e0 = min(last[0] + last[2] - 1 + context, n0 - 1)
        e1 = min(last[1] + last[3] - 1 + context, n1 - 1)
        out.append(b"***************\n")
        out.append(b"*** " + _ctx_range(f0, e0) + b" ****\n")
        if any(d for _, _, d, _ in hunk):
            marks = {}
            for l0, l1, d, ins in hunk:
                for k in range(l0, l0 + d):
                    marks[k] = b"! " if ins else b"- "
            for k in range(f0, e0 + 1):
                out.append(marks.get(k, b"  ") + _nl(a[k]))
        out.append(b"--- " + _ctx_range(f1, e1) + b" ----\n")
        if any(ins for _, _, _, ins in hunk):
            marks = {}
            for l0, l1, d, ins in hunk:
                for k in range(l1, l1 + ins):
                    marks[k] = b"! " if d else b"+ "
            for k in range(f1, e1 + 1):
                out.append(marks.get(k, b"  ") + _nl(b[k]))
    return b"".join(out)


def _mtime_label(path, st, style="u"):
    if st is None:
        t = time.time()
        sec, ns = int(t), int((t % 1) * 1e9)
    else:
        sec, ns = divmod(st.st_mtime_ns, 10**9)
    lt = time.localtime(sec)
    if style == "c":
        return _b(time.strftime("%a %b %e %H:%M:%S %Y", lt))
    return _b(time.strftime("%Y-%m-%d %H:%M:%S", lt) + ".%09d " % ns + time.strftime("%z", lt))


class _DiffOpts:
    pass


def _diff_read(ctx, path):
    if path == "-":
        return _read_all(ctx.stdin)
    with open(path, "rb") as f:
        return f.read()


def _diff_files(ctx, o, pa, pb, la, lb, sta, stb, header):
    """Compares two files; yields output; returns 0/1/2."""
    try:
        da = b"" if sta is False else _diff_read(ctx, pa)
        db = b"" if stb is False else _diff_read(ctx, pb)
    except OSError as e:
        _oserr(ctx, "diff", e.filename or pa, e)
        return 2
    if da == db:
        if o.report_same:
            yield b"Files %s and %s are identical\n" % (_b(la), _b(lb))
        return 0
    if not o.text and (b"\0" in da[:32768] or b"\0" in db[:32768]):
        if header:
            yield header
        if o.brief:
            yield b"Files %s and %s differ\n" % (_b(la), _b(lb))
        else:
            yield b"Binary files %s and %s differ\n" % (_b(la), _b(lb))
        return 1
    if o.strip_cr:
        da = da.replace(b"\r\n", b"\n")
        db = db.replace(b"\r\n", b"\n")
    a = _split_keep(da)
    b = _split_keep(db)
    horizon = o.context if o.style in ("u", "c") else 0
    script = _diff_script(a, b, o.keyfn, horizon, o.minimal)
    if o.ignore_blank and script:
        script = [c for c in script if any(x.strip() for x in a[c[0] : c[0] + c[2]])
                  or any(x.strip() for x in b[c[1] : c[1] + c[3]])]
    if not script:
        if o.report_same:
            yield b"Files %s and %s are identical\n" % (_b(la), _b(lb))
        return 0
    if o.brief:
        yield b"Files %s and %s differ\n" % (_b(la), _b(lb))
        return 1
    if header:
        yield header
    if o.style == "u":
        ta = _b(o.labels[0]) if o.labels[0] is not None else _b(la) + b"\t" + _mtime_label(pa, sta or None)
        tb = _b(o.labels[1]) if o.labels[1] is not None else _b(lb) + b"\t" + _mtime_label(pb, stb or None)
        if sta is False:
            ta = _b(la) + b"\t" + _epoch_label()
        if stb is False:
            tb = _b(lb) + b"\t" + _epoch_label()
        yield b"--- " + ta + b"\n+++ " + tb + b"\n"
        yield _unified_output(script, a, b, o.context)
    elif o.style == "c":
        ta = _b(o.labels[0]) if o.labels[0] is not None else _b(la) + b"\t" + _mtime_label(pa, sta or None, "c")
        tb = _b(o.labels[1]) if o.labels[1] is not None else _b(lb) + b"\t" + _mtime_label(pb, stb or None, "c")
        yield b"*** " + ta + b"\n--- " + tb + b"\n"
        yield _context_output(script, a, b, o.context)
    else:
        yield _normal_output(script, a, b)
    return 1


def _epoch_label():
    lt = time.localtime(0)
    return _b(time.strftime("%Y-%m-%d %H:%M:%S", lt) + ".000000000 " + time.strftime("%z", lt))


def _stat(path):
    try:
        return os.stat(path)
    except OSError:
        return None


def _isdir(st):
    return st is not None and (st.st_mode & 0o170000) == 0o040000


def _join(d, name):
    return d + name if d.endswith("/") else d + "/" + name


def _diff_dirs(ctx, o, da, db):
    try:
        na = set(os.listdir(da))
        nb = set(os.listdir(db))
    except OSError as e:
        _oserr(ctx, "diff", e.filename or da, e)
        return 2
    status = 0
    for name in sorted(na | nb, key=os.fsencode):
        if o.excludes and any(fnmatch.fnmatchcase(name, g) for g in o.excludes):
            continue
        pa, pb = _join(da, name), _join(db, name)
        if name not in nb or name not in na:
            if o.new_file:
                sta = _stat(pa) if name in na else False
                stb = _stat(pb) if name in nb else False
                if _isdir(sta) or _isdir(stb):
                    if o.recursive:
                        # a whole directory on one side: compare against nothing
                        st = yield from _diff_dirs_missing(ctx, o, pa, pb, sta is False)
                        status = max(status, st)
                    else:
                        yield b"Only in %s: %s\n" % (_b(da if name in na else db), _b(name))
                        status = max(status, 1)
                    continue
                hdr = b"diff " + _b(o.switches) + b" " + _b(pa) + b" " + _b(pb) + b"\n"
                st = yield from _diff_files(ctx, o, pa, pb, pa, pb, sta, stb, hdr)
                status = max(status, st)
                continue
            yield b"Only in %s: %s\n" % (_b(da if name in na else db), _b(name))
            status = max(status, 1)
            continue
        sta, stb = _stat(pa), _stat(pb)
        if _isdir(sta) and _isdir(stb):
            if o.recursive:
                st = yield from _diff_dirs(ctx, o, pa, pb)
                status = max(status, st)
            else:
                yield b"Common subdirectories: %s and %s\n" % (_b(pa), _b(pb))
            continue
        if _isdir(sta) != _isdir(stb):
            kind = lambda st: b"directory" if _isdir(st) else b"regular file"  # noqa: E731
            yield b"File %s is a %s while file %s is a %s\n" % (_b(pa), kind(sta), _b(pb), kind(stb))
            status = max(status, 1)
            continue
        hdr = b"diff " + _b(o.switches) + b" " + _b(pa) + b" " + _b(pb) + b"\n" if o.switches else \
            b"diff " + _b(pa) + b" " + _b(pb) + b"\n"
        st = yield from _diff_files(ctx, o, pa, pb, pa, pb, sta, stb, hdr)
        status = max(status, st)
    return status


def _diff_dirs_missing(ctx, o, pa, pb, a_missing):
    present = pb if a_missing else pa
    status = 0
    for name in sorted(os.listdir(present), key=os.fsencode):
        qa, qb = _join(pa, name), _join(pb, name)
        st = _stat(_join(present, name))
        if _isdir(st):
            s2 = yield from _diff_dirs_missing(ctx, o, qa, qb, a_missing)
        else:
            hdr = b"diff " + _b(o.switches) + b" " + _b(qa) + b" " + _b(qb) + b"\n"
            s2 = yield from _diff_files(ctx, o, qa, qb, qa, qb,
                                        False if a_missing else st, st if a_missing else False, hdr)
        status = max(status, s2)
    return status


def _diff(ctx, argv):
    opts, ops = _getopt(
        argv,
        "abBcC:dEiNqrsStTuU:wx:yZ",
        {
            "text": ("a", 0),
            "ignore-space-change": ("b", 0),
            "ignore-blank-lines": ("B", 0),
            "context": ("C", 2),
            "minimal": ("d", 0),
            "ignore-tab-expansion": ("E", 0),
            "ignore-case": ("i", 0),
            "new-file": ("N", 0),
            "brief": ("q", 0),
            "recursive": ("r", 0),
            "report-identical-files": ("s", 0),
            "unified": ("U", 2),
            "ignore-all-space": ("w", 0),
            "exclude": ("x", 1),
            "label": ("label", 1),
            "strip-trailing-cr": ("strip-trailing-cr", 0),
            "ignore-trailing-space": ("Z", 0),
            "color": ("color", 2),
            "no-dereference": ("no-dereference", 0),
            "normal": ("normal", 0),
            "side-by-side": ("y", 0),
            "expand-tabs": ("t", 0),
            "initial-tab": ("T", 0),
            "speed-large-files": ("H", 0),
            "unidirectional-new-file": ("N", 0),
        },
    )
    o = _DiffOpts()
    o.style = "n"
    o.context = 3
    o.brief = o.report_same = o.recursive = o.new_file = o.text = False
    o.minimal = o.ignore_blank = o.strip_cr = False
    o.labels = [None, None]
    o.excludes = []
    icase = allspace = spacechange = trailing = False
    nlabels = 0
    for k, v in opts:
        if k == "u":
            o.style = "u"
        elif k == "U":
            o.style = "u"
            if v is not None:
                if not re.fullmatch(r"\d+", v):
                    raise _Fatal(f"invalid context length '{v}'", 2)
                o.context = int(v)
        elif k == "c":
            o.style = "c"
        elif k == "C":
            o.style = "c"
            if v is not None:
                if not re.fullmatch(r"\d+", v):
                    raise _Fatal(f"invalid context length '{v}'", 2)
                o.context = int(v)
        elif k == "normal":
            o.style = "n"
        elif k == "q":
            o.brief = True
        elif k == "s":
            o.report_same = True
        elif k == "r":
            o.recursive = True
        elif k == "N":
            o.new_file = True
        elif k == "a":
            o.text = True
        elif k == "d":
            o.minimal = True
        elif k == "i":
            icase = True
        elif k == "w":
            allspace = True
        elif k == "b":
            spacechange = True
        elif k == "Z":
            trailing = True
        elif k == "B":
            o.ignore_blank = True
        elif k == "x":
            o.excludes.append(v)
        elif k == "label":
            if nlabels < 2:
                o.labels[nlabels] = v
            nlabels += 1
        elif k == "strip-trailing-cr":
            o.strip_cr = True
        elif k == "y":
            raise _Fatal("side-by-side output (-y) is not supported here", 2)
    # The options as given, for the "diff OPTIONS a/x b/x" lines of directory comparisons.
    raw = list(argv[1:])
    for op in ops:
        if op in raw:
            raw.remove(op)
    if "--" in raw:
        raw.remove("--")
    o.switches = " ".join(raw)
    if icase or allspace or spacechange or trailing:
        ws = re.compile(rb"[ \t\v\f\r]+")

        def keyfn(line):
            body = line[:-1] if line.endswith(b"\n") else line
            nl = line[len(body):]
            if allspace:
                body = ws.sub(b"", body)
            elif spacechange:
                body = ws.sub(b" ", body).rstrip(b" ")
            elif trailing:
                body = body.rstrip(b" \t\v\f\r")
            if icase:
                body = body.lower()
            return body + nl

        o.keyfn = keyfn
    else:
        o.keyfn = None
    if len(ops) < 2:
        if not ops:
            raise _Usage("missing operand after 'diff'")
        raise _Usage(f"missing operand after '{ops[-1]}'")
    if len(ops) > 2:
        raise _Usage(f"extra operand '{ops[2]}'")
    a, b = ops
    sta = None if a == "-" else _stat(a)
    stb = None if b == "-" else _stat(b)
    if a != "-" and sta is None and not (o.new_file and stb is not None):
        _err(ctx, "diff", f"{a}: No such file or directory")
        return 2
    if b != "-" and stb is None and not (o.new_file and sta is not None):
        _err(ctx, "diff", f"{b}: No such file or directory")
        return 2
    if _isdir(sta) and _isdir(stb):
        status = yield from _diff_dirs(ctx, o, a, b)
        return status
    if _isdir(sta) and b != "-":
        a = _join(a, os.path.basename(b))
        sta = _stat(a)
    elif _isdir(stb) and a != "-":
        b = _join(b, os.path.basename(a))
        stb = _stat(b)
    elif (_isdir(sta) or _isdir(stb)):
        raise _Fatal("cannot compare '-' to a directory", 2)
    for path, st in ((a, sta), (b, stb)):
        if path != "-" and st is None and not o.new_file:
            _err(ctx, "diff", f"{path}: No such file or directory")
            return 2
    if o.new_file:
        sta = False if (a != "-" and sta is None) else sta
        stb = False if (b != "-" and stb is None) else stb
    status = yield from _diff_files(ctx, o, a, b, a, b, sta, stb, None)
    return status


# ---------------------------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------------------------

COMMANDS = {
    "cat": _command(_cat),
    "head": _command(_head),
    "tail": _command(_tail),
    "wc": _command(_wc),
    "grep": _command(_grep, 2),
    "sort": _command(_sort, 2),
    "uniq": _command(_uniq),
    "cut": _command(_cut),
    "tr": _command(_tr),
    "paste": _command(_paste),
    "tee": _command(_tee),
    "seq": _command(_seq),
    "xargs": _command(_xargs),
    "base64": _command(_base64),
    "cmp": _command(_cmp, 2),
    "diff": _command(_diff, 2),
}
for _algo, _tag in (("md5", "MD5"), ("sha1", "SHA1"), ("sha224", "SHA224"), ("sha256", "SHA256"),
                    ("sha384", "SHA384"), ("sha512", "SHA512")):
    COMMANDS[_algo + "sum"] = _command(_make_sum(_algo, _tag))
