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


def _escape_name(ctx, name, fname):
    return _b(fname)


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
    results = []
    status = 0
    totals = [0, 0, 0, 0]
    for fname in names:
        try:
            f = _open(ctx, fname)
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
        results.append(counts)
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


def _compile_posix(patterns, extended=False, fixed=False, icase=False, word=False, line=False):
    """One compiled bytes regex matching any of the patterns (str, GNU syntax)."""
    pieces = []
    offset = 0
    for p in patterns:
        if fixed:
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
            mode = "E" if k == "P" else k
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
        rx = _compile_posix(patterns, mode == "E", mode == "F", icase, word, line)
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


def _grep_records(f, eol):
    """Yields (chunk, binary) with chunk made of whole records (the last may lack `eol`)."""
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
        yield data[: cut + 1], binary
    if carry:
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
    for chunk, binary in _grep_records(f, eol):
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
                if m is None:
                    break
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
                        if mm.end() == mm.start():
                            continue
                        p2 = pre + (b"%d:" % (off + s + mm.start()) if g.boffset else b"")
                        if out.add(p2 + mm.group() + b"\n"):
                            yield out.take()
                else:
                    if g.boffset:
                        pre += b"%d:" % (off + s)
                    if out.add(pre + lineb + b"\n"):
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
                        out.add(_grep_prefix(g, prefix_name_ctx, bl, bo, b"-") + bline + b"\n")
                    last_out = before[-1][0]
                    before.clear()
                if ctxmode and (last_out and lnum > last_out + 1 or not last_out and g.printed_any):
                    out.add(b"--\n")
                if g.only:
                    if not g.invert:
                        for mm in g.rx.finditer(lineb):
                            if mm.end() == mm.start():
                                continue
                            out.add(_grep_prefix(g, prefix_name, lnum, off + s + mm.start(), sep_m)
                                    + mm.group() + b"\n")
                else:
                    out.add(_grep_prefix(g, prefix_name, lnum, off + s, sep_m) + lineb + b"\n")
                g.printed_any = True
                last_out = lnum
                after_left = g.after
                if out.size >= _OUT:
                    yield out.take()
            elif ctxmode:
                if after_left > 0:
                    after_left -= 1
                    if not g.only:
                        out.add(_grep_prefix(g, prefix_name_ctx, lnum, off + s, b"-") + lineb + b"\n")
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
# The registry
# ---------------------------------------------------------------------------------------------

COMMANDS = {
    "cat": _command(_cat),
    "head": _command(_head),
    "tail": _command(_tail),
    "wc": _command(_wc),
    "grep": _command(_grep, 2),
}
