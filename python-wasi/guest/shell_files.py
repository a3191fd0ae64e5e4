"""File commands of Vivarium's guest shell, loaded into every template as
`vivarium_shell_files` (issue 49; the command API is described in `vivarium_shell`).

ls find stat du df mkdir rm cp mv touch ln basename dirname realpath file gzip gunzip tar
zip unzip date, after GNU coreutils / findutils / tar, Info-ZIP and file(1) in the C locale:
their output formats, messages and exit statuses.

Every command is a generator: it yields stdout as bytes and returns its exit status.

What the sandbox (WASI) changes, and what these commands do about it:
- There are no permission bits (st_mode holds the file type only, chmod does nothing): ls -l,
  stat and tar show 0644 for files, 0755 for directories and 0777 for links, as a fresh
  Linux tree would have with umask 022.
- There is no st_blocks (always 0): sizes in blocks (ls -s, ls -l's `total`, du, stat %b,
  find %b/%k) are estimated as ext4/tmpfs would allocate them: a file takes its size rounded
  up to 4 KiB, a directory 4 KiB, a symbolic link nothing.
- There are no users or groups (no pwd/grp modules, every file belongs to uid 0): owners and
  groups show as numbers, right-aligned as GNU ls shows ids it cannot name.
- df has no statvfs to ask: it reports one filesystem, `sandbox`, mounted on `/`, whose use
  is the sum of the sizes of the files under / and whose size is the sandbox's disk quota
  when the environment names it (VIVARIUM_DISK_LIMIT, bytes), else the use itself.
- Directory sizes (ls -l, stat %s) are what the WASI filesystem reports, not ext4's 4096.
Under the host's python3 (development, the differential tests) the real stat data is used.
"""

import os
import stat as _st
import sys

_WASI = sys.platform == "wasi"


# ---------------------------------------------------------------------------------------
# shared helpers


def _b(s):
    if isinstance(s, bytes):
        return s
    return str(s).encode("utf-8", "surrogateescape")


def _s(b):
    if isinstance(b, str):
        return b
    return b.decode("utf-8", "surrogateescape")


def _q(name):
    """GNU's quoting of a file name in diagnostics: 'name'."""
    name = _s(name)
    if "'" in name:
        if '"' not in name and "\\" not in name and "$" not in name and "`" not in name:
            return '"' + name + '"'
        return "'" + name.replace("'", "'\\''") + "'"
    return "'" + name + "'"


_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:,+@%=-^")


def _shq(name):
    """The shell-escape quoting style (stat %N): quote only when needed."""
    name = _s(name)
    if name and all(c in _SAFE for c in name) and name[0] != "~":
        return name
    return _q(name)


def _strerror(e):
    if isinstance(e, OSError) and e.errno is not None:
        return os.strerror(e.errno)
    return str(e)


class _Usage(Exception):
    def __init__(self, msg, hint=True):
        Exception.__init__(self, msg)
        self.msg = msg
        self.hint = hint


def _getopt(argv, short, longs=None, permute=True, numeric=False):
    """GNU getopt_long. `short` like "ab:c" (':' takes an argument); `longs` maps a long
    name to (key, argkind) with argkind 0 none, 1 required, 2 optional. Returns
    ([(key, value)], operands). With `numeric`, -5 style options come as ("#", "5")."""
    longs = longs or {}
    takes = {}
    i = 0
    while i < len(short):
        c = short[i]
        if i + 1 < len(short) and short[i + 1] == ":":
            takes[c] = 1
            i += 2
        else:
            takes[c] = 0
            i += 1
    opts, operands = [], []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            operands.extend(args[i:])
            break
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name in longs:
                cands = [name]
            else:
                cands = [k for k in longs if k.startswith(name)]
                if len(cands) > 1 and len({longs[k] for k in cands}) == 1:
                    cands = cands[:1]
            if not cands:
                raise _Usage(f"unrecognized option '--{name}'")
            if len(cands) > 1:
                poss = " ".join("'--%s'" % k for k in sorted(cands))
                raise _Usage(f"option '--{name}' is ambiguous; possibilities: {poss}")
            full = cands[0]
            key, kind = longs[full]
            if kind == 0 and eq:
                raise _Usage(f"option '--{full}' doesn't allow an argument")
            if kind == 1 and not eq:
                if i >= len(args):
                    raise _Usage(f"option '--{full}' requires an argument")
                val = args[i]
                i += 1
            opts.append((key, val if (eq or kind == 1) else None))
            continue
        if a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                c = a[j]
                if numeric and c.isdigit():
                    k = j
                    while k < len(a) and a[k].isdigit():
                        k += 1
                    opts.append(("#", a[j:k]))
                    j = k
                    continue
                if c not in takes:
                    raise _Usage(f"invalid option -- '{c}'")
                if takes[c]:
                    if j + 1 < len(a):
                        opts.append((c, a[j + 1 :]))
                    elif i < len(args):
                        opts.append((c, args[i]))
                        i += 1
                    else:
                        raise _Usage(f"option requires an argument -- '{c}'")
                    break
                opts.append((c, None))
                j += 1
            continue
        operands.append(a)
        if not permute:
            operands.extend(args[i:])
            break
    return opts, operands


def _usage(ctx, name, e, status=1):
    ctx.stderr.write(_b(f"{name}: {e.msg}\n"))
    if e.hint:
        ctx.stderr.write(_b(f"Try '{name} --help' for more information.\n"))
    return status


def _err(ctx, name, msg):
    ctx.stderr.write(_b(f"{name}: {msg}\n"))


def _help(name, text):
    return _b(f"Usage: {name} {text}\n(Vivarium's guest shell: see docs/guides/shell.md)\n")


def _perm(st):
    """st_mode with permission bits filled in where WASI has none."""
    m = st.st_mode
    if _WASI and _st.S_IMODE(m) == 0:
        if _st.S_ISDIR(m):
            m |= 0o755
        elif _st.S_ISLNK(m):
            m |= 0o777
        else:
            m |= 0o644
    return m


def _blocks(st):
    """512-byte blocks, estimated as ext4 would allocate them when WASI reports none."""
    b = getattr(st, "st_blocks", 0) or 0
    if b == 0 and _WASI:
        if _st.S_ISREG(st.st_mode):
            b = -(-st.st_size // 4096) * 8
        elif _st.S_ISDIR(st.st_mode):
            b = 8
    return b


def _blksize(st):
    return getattr(st, "st_blksize", 0) or 4096


try:  # absent in WASI
    import pwd as _pwd
    import grp as _grp
except ImportError:
    _pwd = _grp = None

_names = {}


def _user(uid):
    k = ("u", uid)
    if k not in _names:
        n = None
        if _pwd is not None:
            try:
                n = _pwd.getpwuid(uid).pw_name
            except (KeyError, OverflowError):
                n = None
        _names[k] = n
    return _names[k]


def _group(gid):
    k = ("g", gid)
    if k not in _names:
        n = None
        if _grp is not None:
            try:
                n = _grp.getgrgid(gid).gr_name
            except (KeyError, OverflowError):
                n = None
        _names[k] = n
    return _names[k]


def _ftype(m, size=None):
    if _st.S_ISREG(m):
        return "regular empty file" if size == 0 else "regular file"
    if _st.S_ISDIR(m):
        return "directory"
    if _st.S_ISLNK(m):
        return "symbolic link"
    if _st.S_ISFIFO(m):
        return "fifo"
    if _st.S_ISSOCK(m):
        return "socket"
    if _st.S_ISCHR(m):
        return "character special file"
    if _st.S_ISBLK(m):
        return "block special file"
    return "weird file"


def _human(n, si=False):
    """GNU human_readable with autoscale, rounding up: 1023, 1.0K, 9.9K, 10K, 1.1M."""
    base = 1000 if si else 1024
    if n < base:
        return str(n)
    units = "kMGTPEZY" if si else "KMGTPEZY"
    e = 0
    d = 1
    while n // (d * base) >= base and e < 7:
        d *= base
        e += 1
    d *= base
    # n / d is in [1, base)
    if n // d < 10:
        tenths = -(-n * 10 // d)
        if tenths < 100:
            return "%d.%d%s" % (tenths // 10, tenths % 10, units[e])
        v = 10
    else:
        v = -(-n // d)
    if v >= base and e < 7:
        return "1.0" + units[e + 1]
    return "%d%s" % (v, units[e])


def _parse_size(s, allow_suffix=True):
    """A GNU size with an optional K/M/G/... suffix (powers of 1024; KB: 1000)."""
    s = s.strip()
    num = ""
    i = 0
    while i < len(s) and s[i].isdigit():
        i += 1
    num, suf = s[:i], s[i:]
    mult = {"": 1, "b": 512, "c": 1, "w": 2}
    pw = "KMGTPEZY"
    if suf in mult:
        m = mult[suf]
    elif suf[:1].upper() in pw and suf[1:] in ("", "iB", "B"):
        p = pw.index(suf[:1].upper()) + 1
        m = (1000 if suf[1:] == "B" else 1024) ** p
    else:
        raise ValueError(s)
    return (int(num) if num else 1) * m


# ---------------------------------------------------------------------------------------
# time formatting (GNU strftime, independent of the C library: the guest's libc differs)

_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]


def _tz_for(ctx, utc=False):
    """A tzinfo for the command: UTC with -u or TZ=UTC, the zone TZ names, else local."""
    import datetime

    if utc:
        return datetime.timezone.utc
    tz = None
    try:
        tz = ctx.env.get("TZ") if ctx is not None and ctx.env is not None else None
    except Exception:
        tz = None
    if tz is None:
        tz = os.environ.get("TZ")
    if tz is None:
        return None
    t = tz.lstrip(":")
    if t in ("", "UTC", "UTC0", "GMT", "GMT0", "Z", "UTC+0", "UTC-0", "Etc/UTC"):
        return datetime.timezone.utc
    try:
        import zoneinfo

        return zoneinfo.ZoneInfo(t)
    except Exception:
        return None


class _When:
    __slots__ = ("d", "ns", "sec")

    def __init__(self, sec, ns, tz):
        import datetime

        self.sec = sec
        self.ns = ns
        try:
            if tz is None:
                self.d = datetime.datetime.fromtimestamp(sec).astimezone()
            else:
                self.d = datetime.datetime.fromtimestamp(sec, tz)
        except (OverflowError, OSError, ValueError):
            self.d = datetime.datetime(
                1970, 1, 1, tzinfo=datetime.timezone.utc
            ) + datetime.timedelta(seconds=sec)


def _when(t_ns, tz):
    sec, ns = divmod(int(t_ns), 10**9)
    return _When(sec, ns, tz)


def _iso_week(d):
    y, w, _ = d.isocalendar()
    return y, w


def _strftime(fmt, w):
    """GNU date's strftime over a _When (flags - _ 0 ^ #, widths, %N, %:z, %s...)."""
    d = w.d
    out = []
    i = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c != "%" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        j = i + 1
        flags = ""
        while j < n and fmt[j] in "-_0^#":
            flags += fmt[j]
            j += 1
        width = ""
        while j < n and fmt[j].isdigit():
            width += fmt[j]
            j += 1
        colons = 0
        while j < n and fmt[j] == ":":
            colons += 1
            j += 1
        while j < n and fmt[j] in "EO":
            j += 1
        if j >= n:
            out.append(fmt[i:])
            break
        k = fmt[j]
        i = j + 1
        num = None  # (value, default width, default pad)
        text = None
        if k == "a":
            text = _DAYS[d.weekday()][:3]
        elif k == "A":
            text = _DAYS[d.weekday()]
        elif k in "bh":
            text = _MONTHS[d.month - 1][:3]
        elif k == "B":
            text = _MONTHS[d.month - 1]
        elif k == "c":
            text = _strftime("%a %b %e %H:%M:%S %Y", w)
        elif k == "C":
            num = (d.year // 100, 2, "0")
        elif k == "d":
            num = (d.day, 2, "0")
        elif k == "D":
            text = _strftime("%m/%d/%y", w)
        elif k == "e":
            num = (d.day, 2, " ")
        elif k == "F":
            text = "%04d-%02d-%02d" % (d.year, d.month, d.day)
        elif k == "g":
            num = (_iso_week(d)[0] % 100, 2, "0")
        elif k == "G":
            num = (_iso_week(d)[0], 4, "0")
        elif k == "H":
            num = (d.hour, 2, "0")
        elif k == "I":
            num = ((d.hour % 12) or 12, 2, "0")
        elif k == "j":
            num = (d.timetuple().tm_yday, 3, "0")
        elif k == "k":
            num = (d.hour, 2, " ")
        elif k == "l":
            num = ((d.hour % 12) or 12, 2, " ")
        elif k == "m":
            num = (d.month, 2, "0")
        elif k == "M":
            num = (d.minute, 2, "0")
        elif k == "n":
            text = "\n"
        elif k == "N":
            digits = "%09d" % w.ns
            wd = int(width) if width else 9
            text = (digits + "0" * wd)[:wd] if wd <= 9 else digits + "0" * (wd - 9)
            width = ""
        elif k == "p":
            text = "AM" if d.hour < 12 else "PM"
            if "#" in flags:
                text = text.lower()
        elif k == "P":
            text = "am" if d.hour < 12 else "pm"
        elif k == "r":
            text = _strftime("%I:%M:%S %p", w)
        elif k == "R":
            text = _strftime("%H:%M", w)
        elif k == "s":
            num = (w.sec, 1, "0")
        elif k == "S":
            num = (d.second, 2, "0")
        elif k == "t":
            text = "\t"
        elif k == "T":
            text = _strftime("%H:%M:%S", w)
        elif k == "u":
            num = (d.isoweekday(), 1, "0")
        elif k == "U":
            yd = d.timetuple().tm_yday - 1
            num = ((yd + 7 - (d.isoweekday() % 7)) // 7, 2, "0")
        elif k == "V":
            num = (_iso_week(d)[1], 2, "0")
        elif k == "w":
            num = (d.isoweekday() % 7, 1, "0")
        elif k == "W":
            yd = d.timetuple().tm_yday - 1
            num = ((yd + 7 - ((d.weekday()) % 7)) // 7, 2, "0")
        elif k == "x":
            text = _strftime("%m/%d/%y", w)
        elif k == "X":
            text = _strftime("%H:%M:%S", w)
        elif k == "y":
            num = (d.year % 100, 2, "0")
        elif k == "Y":
            num = (d.year, 1, "0")
        elif k in "z":
            off = d.utcoffset()
            secs = int(off.total_seconds()) if off is not None else 0
            sign = "-" if secs < 0 else "+"
            secs = abs(secs)
            hh, mm, ss = secs // 3600, secs // 60 % 60, secs % 60
            if colons == 0:
                text = "%s%02d%02d" % (sign, hh, mm)
            elif colons == 1:
                text = "%s%02d:%02d" % (sign, hh, mm)
            elif colons == 2:
                text = "%s%02d:%02d:%02d" % (sign, hh, mm, ss)
            else:
                text = "%s%02d" % (sign, hh) + (":%02d" % mm if mm or ss else "") + (
                    ":%02d" % ss if ss else "")
        elif k == "Z":
            text = d.tzname() or ""
            if "#" in flags:
                text = text.lower()
        elif k == "%":
            text = "%"
        elif k == "+":
            text = _strftime("%a %b %e %H:%M:%S %Z %Y", w)
        else:
            out.append("%" + flags + width + k)
            continue
        if num is not None:
            val, dw, pad = num
            if "-" in flags:
                s = str(val)
            else:
                if "_" in flags:
                    pad = " "
                elif "0" in flags:
                    pad = "0"
                wd = int(width) if width else dw
                s = str(abs(val))
                if val < 0:
                    s = "-" + s.rjust(wd - 1, pad) if pad == "0" else ("-" + s).rjust(wd, pad)
                else:
                    s = s.rjust(wd, pad)
            out.append(s)
        else:
            if "^" in flags:
                text = text.upper()
            elif "#" in flags and k not in "pZ":
                text = text.swapcase() if text.isalpha() else text
            if width and "-" not in flags:
                pad = "0" if "0" in flags else " "
                text = text.rjust(int(width), pad)
            out.append(text)
    return "".join(out)


def _ns(st, which="m"):
    return getattr(st, f"st_{which}time_ns", None) or int(getattr(st, f"st_{which}time") * 1e9)


# ---------------------------------------------------------------------------------------
# ls


class _Ent:
    __slots__ = ("name", "path", "lst", "st", "err", "target", "tst", "cmdline")

    def __init__(self, name, path, cmdline=False):
        self.name = name
        self.path = path
        self.lst = None
        self.st = None
        self.err = None
        self.target = None
        self.tst = None
        self.cmdline = cmdline


def _ls_indicator(mode, style):
    if style == 0 or mode is None:
        return ""
    if _st.S_ISDIR(mode):
        return "/"
    if style == 1:
        return ""
    if _st.S_ISLNK(mode):
        return "@"
    if _st.S_ISFIFO(mode):
        return "|"
    if _st.S_ISSOCK(mode):
        return "="
    if style == 3 and _st.S_ISREG(mode) and mode & 0o111:
        return "*"
    return ""


def ls(ctx, argv):
    longs = {
        "all": ("a", 0), "almost-all": ("A", 0), "directory": ("d", 0),
        "classify": ("F", 2), "human-readable": ("h", 0), "si": ("si", 0),
        "recursive": ("R", 0), "reverse": ("r", 0), "size": ("s", 0),
        "inode": ("i", 0), "numeric-uid-gid": ("n", 0), "dereference": ("L", 0),
        "color": ("color", 2), "colour": ("color", 2), "file-type": ("file-type", 0),
        "full-time": ("full-time", 0), "time-style": ("time-style", 1),
        "sort": ("sort", 1), "time": ("time", 1), "format": ("format", 1),
        "group-directories-first": ("gdf", 0), "indicator-style": ("istyle", 1),
        "help": ("help", 0), "version": ("version", 0), "literal": ("N", 0),
        "quote-name": ("Q", 0), "ignore-backups": ("B", 0), "no-group": ("G", 0),
        "hide": ("hide", 1), "ignore": ("I", 1), "zero": ("zero", 0),
        "dereference-command-line": ("H", 0), "kibibytes": ("k", 0),
        "hyperlink": ("hyperlink", 2), "width": ("w", 1), "author": ("author", 0),
    }
    try:
        opts, args = _getopt(argv, "aAbBcCdfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1", longs)
        fmt = "one"
    except _Usage as e:
        return _usage(ctx, "ls", e, 2)
    all_, almost, dirs_self, long_, human, si = False, False, False, False, False, False
    recursive, reverse, show_size, show_ino, numeric = False, False, False, False, False
    deref, deref_cmd = None, False
    sort, timekey, istyle = "name", "m", 0
    no_owner, no_group, time_style, gdf, ignore = False, False, None, False, []
    fmt, zero, context = "one", False, False
    try:
        width = int(ctx.env.get("COLUMNS", "") or 80)
    except (ValueError, AttributeError):
        width = 80
    for k, v in opts:
        if k == "help":
            yield _help("ls", "[OPTION]... [FILE]...")
            return 0
        if k == "version":
            yield b"ls (GNU coreutils) 9.1\n"
            return 0
        if k == "a":
            all_, almost = True, False
        elif k == "A":
            almost, all_ = True, False
        elif k == "d":
            dirs_self = True
        elif k == "f":
            all_, sort = True, "none"
        elif k == "F":
            if v in (None, "always", "yes", "force"):
                istyle = 3
        elif k == "file-type":
            istyle = 2
        elif k == "p":
            istyle = 1
        elif k == "istyle":
            istyle = {"none": 0, "slash": 1, "file-type": 2, "classify": 3}.get(v, 0)
        elif k == "h":
            human = True
        elif k == "si":
            human, si = True, True
        elif k == "l":
            long_, fmt = True, "long"
        elif k in ("g", "o", "n"):
            long_, fmt = True, "long"
            if k == "g":
                no_owner = True
            elif k == "o":
                no_group = True
            else:
                numeric = True
        elif k == "G":
            no_group = True
        elif k == "full-time":
            long_, fmt, time_style = True, "long", "full-iso"
        elif k == "time-style":
            time_style = v.replace("posix-", "")
        elif k == "1":
            if fmt != "long":
                fmt = "one"
        elif k in ("C", "x", "m"):
            fmt = {"1": "one", "C": "vertical", "x": "horizontal", "m": "comma"}[k]
            long_ = False
        elif k == "format":
            fmt = {"long": "long", "verbose": "long", "commas": "comma", "across":
                   "horizontal", "horizontal": "horizontal", "vertical": "vertical",
                   "single-column": "one"}.get(v, "one")
            long_ = fmt == "long"
        elif k == "w":
            try:
                width = int(v)
            except ValueError:
                _err(ctx, "ls", f"invalid line width: {_q(v)}")
                return 2
        elif k == "Z":
            context = True
        elif k == "R":
            recursive = True
        elif k == "r":
            reverse = True
        elif k == "s":
            show_size = True
        elif k == "i":
            show_ino = True
        elif k == "L":
            deref = True
        elif k == "H":
            deref_cmd = True
        elif k == "S":
            sort = "size"
        elif k == "t":
            sort = "time"
        elif k == "U":
            sort = "none"
        elif k == "X":
            sort = "ext"
        elif k == "v":
            sort = "version"
        elif k == "sort":
            sort = {"none": "none", "size": "size", "time": "time", "extension": "ext",
                    "version": "version", "name": "name"}.get(v, "name")
        elif k == "c":
            timekey = "c"
        elif k == "u":
            timekey = "a"
        elif k == "time":
            timekey = {"atime": "a", "access": "a", "use": "a", "ctime": "c",
                       "status": "c", "birth": "m", "creation": "m"}.get(v, "m")
        elif k == "gdf":
            gdf = True
        elif k in ("I", "hide"):
            ignore.append(v)
        elif k == "B":
            ignore.extend(["*~", ".*~"])
        elif k == "zero":
            zero = True
    if sort == "name" and timekey != "m" and not long_:
        sort = "time"
    if deref is None:
        deref = False
        follow_cmd_dir = not (dirs_self or istyle == 3 or long_) or deref_cmd
    else:
        follow_cmd_dir = True
    eol = b"\0" if zero else b"\n"
    status = 0
    import time as _time

    now_ns = _time.time_ns()
    tz = _tz_for(ctx)
    ignore_pats = [_fn_regex(p) for p in ignore]

    def load(ent, follow):
        try:
            ent.lst = os.lstat(ent.path)
        except OSError as e:
            ent.err = e
            return False
        ent.st = ent.lst
        if _st.S_ISLNK(ent.lst.st_mode):
            try:
                ent.target = os.readlink(ent.path)
            except OSError:
                ent.target = "?"
            try:
                ent.tst = os.stat(ent.path)
            except OSError:
                ent.tst = None
            if (follow or deref) and ent.tst is not None:
                if deref or _st.S_ISDIR(ent.tst.st_mode):
                    ent.st = ent.tst
        return True

    def sortkey_list(ents):
        if sort == "none":
            return list(ents)
        if sort == "size":
            ents = sorted(ents, key=lambda e: (-e.st.st_size, _b(e.name)))
        elif sort == "time":
            ents = sorted(ents, key=lambda e: (-_ns(e.st, timekey), _b(e.name)))
        elif sort == "ext":
            def extkey(e):
                n = _b(e.name)
                dot = n.rfind(b".")
                return (n[dot:] if dot > 0 else b"", n)

            ents = sorted(ents, key=extkey)
        elif sort == "version":
            ents = sorted(ents, key=lambda e: _verkey(_b(e.name)))
        else:
            ents = sorted(ents, key=lambda e: _b(e.name))
        if reverse:
            ents.reverse()
        if gdf:
            ents = [e for e in ents if _st.S_ISDIR(e.st.st_mode)] + [
                e for e in ents if not _st.S_ISDIR(e.st.st_mode)]
        return ents

    def fmt_time(st):
        t = _ns(st, timekey)
        w = _when(t, tz)
        style = time_style or "locale"
        if style.startswith("+"):
            f = style[1:].split("\n")
            recent = now_ns - 15778476 * 10**9 < t <= now_ns
            return _strftime(f[1] if (len(f) > 1 and not recent) else f[0], w)
        if style == "full-iso":
            return _strftime("%Y-%m-%d %H:%M:%S.%N %z", w)
        if style == "long-iso":
            return _strftime("%Y-%m-%d %H:%M", w)
        if style == "iso":
            recent = now_ns - 15778476 * 10**9 < t <= now_ns
            return _strftime("%m-%d %H:%M" if recent else "%Y-%m-%d ", w)
        recent = now_ns - 15778476 * 10**9 < t <= now_ns
        return _strftime("%b %e %H:%M" if recent else "%b %e  %Y", w)

    def blocks_str(st):
        b = _blocks(st)
        if human:
            return _human(b * 512, si)
        return str(-(-b * 512 // 1024))

    def name_str(e, in_long):
        s = e.name
        if in_long and e.target is not None and _st.S_ISLNK(e.st.st_mode):
            s += " -> " + e.target
            if istyle and e.tst is not None:
                s += _ls_indicator(e.tst.st_mode, istyle)
            return s
        return s + _ls_indicator(e.st.st_mode, istyle)

    def render(ents, with_total, extra=()):
        if not ents and not with_total:
            return b""
        out = []
        if long_ or show_size:
            if with_total:
                tb = sum(_blocks(e.st) for e in ents)
                tot = _human(tb * 512, si) if human else str(-(-tb * 512 // 1024))
                out.append("total " + tot)
        if not long_:
            allents = list(ents) + list(extra)
            sw = max((len(blocks_str(e.st)) for e in allents), default=0)
            iw = max((len(str(e.st.st_ino)) for e in allents), default=0)
            names = []
            for e in ents:
                p = ""
                if show_ino:
                    p += str(e.st.st_ino).rjust(iw) + " "
                if show_size:
                    p += blocks_str(e.st).rjust(sw) + " "
                if context:
                    p += "? "
                names.append(p + name_str(e, False))
            if not names:
                return _b("\n".join(out)) + eol if out else b""
            body = _columns(names, fmt, width, eol)
            return (_b("\n".join(out)) + eol if out else b"") + body
        rows = []
        for e in list(ents) + list(extra):
            st = e.st
            mode = _st.filemode(_perm(st))
            nl = str(st.st_nlink)
            if numeric:
                ow = (str(st.st_uid), True)
                gr = (str(st.st_gid), True)
            else:
                u = _user(st.st_uid)
                g = _group(st.st_gid)
                ow = (u, False) if u is not None else (str(st.st_uid), True)
                gr = (g, False) if g is not None else (str(st.st_gid), True)
            if _st.S_ISCHR(st.st_mode) or _st.S_ISBLK(st.st_mode):
                sz = "%d, %d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
            else:
                sz = _human(st.st_size, si) if human else str(st.st_size)
            rows.append((e, str(st.st_ino), blocks_str(st), mode, nl, ow, gr, sz,
                         fmt_time(st), name_str(e, True)))
        w = [max((len(r[i]) if i not in (5, 6) else len(r[i][0])) for r in rows)
             for i in range(1, 9)]
        for r in rows[: len(ents)]:
            p = ""
            if show_ino:
                p += r[1].rjust(w[0]) + " "
            if show_size:
                p += r[2].rjust(w[1]) + " "
            p += r[3] + " " + r[4].rjust(w[3]) + " "
            if not no_owner:
                p += (r[5][0].rjust(w[4]) if r[5][1] else r[5][0].ljust(w[4])) + " "
            if not no_group:
                p += (r[6][0].rjust(w[5]) if r[6][1] else r[6][0].ljust(w[5])) + " "
            if context:
                p += "? "
            p += r[7].rjust(w[6]) + " " + r[8] + " " + r[9]
            out.append(p)
        return _b("\n".join(out)) + eol

    def visible(name):
        if name.startswith(".") and not (all_ or almost):
            return False
        for rx in ignore_pats:
            if rx.match(name) and not all_ and not almost:
                return False
        return True

    def read_dir(path):
        ents = []
        if all_:
            for n in (".", ".."):
                ents.append(_Ent(n, _join(path, n)))
        with os.scandir(path) as it:
            for de in it:
                if visible(de.name):
                    ents.append(_Ent(de.name, _join(path, de.name)))
        return ents

    # the command line
    files, dirs = [], []
    operands = args or ["."]
    for a in operands:
        e = _Ent(a, a, True)
        if not load(e, follow_cmd_dir):
            _err(ctx, "ls", f"cannot access {_q(a)}: {_strerror(e.err)}")
            status = 2
            continue
        if _st.S_ISDIR(e.st.st_mode) and not dirs_self:
            dirs.append(e)
        else:
            files.append(e)
    files = sortkey_list(files)
    dirs = sortkey_list(dirs)
    if gdf:
        pass
    first = True
    if files:
        yield render(files, False, dirs if long_ else ())
        first = False
    print_names = len(operands) > 1 or recursive or bool(files)
    # depth-first queue of directories, as GNU ls's pending list
    stack = [(e.name, e.path, True) for e in reversed(dirs)]
    if files and stack:
        yield b"\n"
        first = True
    seen = set()
    while stack:
        name, path, cmd = stack.pop()
        try:
            ents = read_dir(path)
        except OSError as ex:
            _err(ctx, "ls", f"cannot open directory {_q(name)}: {_strerror(ex)}")
            status = 2 if cmd else max(status, 1)
            continue
        if recursive:
            try:
                dst = os.stat(path)
                key = (dst.st_dev, dst.st_ino)
                if key in seen and dst.st_ino:
                    _err(ctx, "ls", f"{_q(name)}: not listing already-listed directory")
                    status = max(status, 2)
                    continue
                seen.add(key)
            except OSError:
                pass
        good = []
        for e in ents:
            if load(e, False):
                good.append(e)
            else:
                _err(ctx, "ls", f"cannot access {_q(e.path)}: {_strerror(e.err)}")
                status = max(status, 1)
        good = sortkey_list(good)
        head = b""
        if print_names:
            head = (b"" if first else b"\n") + _b(name) + b":\n"
        first = False
        yield head + render(good, True)
        if recursive:
            subs = []
            for e in good:
                if e.name in (".", "..") or not _st.S_ISDIR(e.st.st_mode):
                    continue
                subs.append((_concat(name, e.name), e.path, False))
            stack.extend(reversed(subs))
    return status


def _columns(names, fmt, width, eol):
    """GNU ls's one-per-line, -m, -C and -x layouts (tab stops of 8)."""
    n = len(names)
    if fmt in ("one", "long"):
        return _b("\n".join(names)) + eol
    lens = [len(x) for x in names]
    if fmt == "comma":
        out = [names[0]]
        pos = lens[0]
        for i in range(1, n):
            if width <= 0 or pos + lens[i] + 2 < width:
                out.append(", ")
                pos += 2
            else:
                out.append(",\n")
                pos = 0
            out.append(names[i])
            pos += lens[i]
        return _b("".join(out)) + eol
    vertical = fmt == "vertical"
    max_cols = max(1, min(width // 3 if width > 0 else n, n))
    info = [[True, (i + 1) * 3, [3] * (i + 1)] for i in range(max_cols)]
    for k in range(n):
        ln = lens[k]
        for i in range(max_cols):
            c = info[i]
            if not c[0]:
                continue
            idx = k // ((n + i) // (i + 1)) if vertical else k % (i + 1)
            real = ln + (0 if idx == i else 2)
            if c[2][idx] < real:
                c[1] += real - c[2][idx]
                c[2][idx] = real
                c[0] = width <= 0 or c[1] < width
    cols = 1
    for i in range(max_cols - 1, -1, -1):
        if info[i][0]:
            cols = i + 1
            break
    colw = info[cols - 1][2]
    out = []

    def indent(frm, to):
        while frm < to:
            if to // 8 > (frm + 1) // 8:
                out.append("\t")
                frm += 8 - frm % 8
            else:
                out.append(" ")
                frm += 1

    if vertical:
        rows = n // cols + (1 if n % cols else 0)
        for row in range(rows):
            col, k, pos = 0, row, 0
            while True:
                out.append(names[k])
                mw = colw[col]
                col += 1
                k += rows
                if k >= n:
                    break
                indent(pos + lens[k - rows], pos + mw)
                pos += mw
            out.append("\n")
    else:
        out.append(names[0])
        pos, ln, mw = 0, lens[0], colw[0]
        for k in range(1, n):
            col = k % cols
            if col == 0:
                out.append("\n")
                pos = 0
            else:
                indent(pos + ln, pos + mw)
                pos += mw
            out.append(names[k])
            ln, mw = lens[k], colw[col]
        out.append("\n")
    return _b("".join(out))


def _join(d, n):
    if d.endswith("/"):
        return d + n
    return d + "/" + n


def _concat(d, n):
    """gnulib's file_name_concat: no second slash if d ends with one."""
    if d.endswith("/"):
        return d + n
    return d + "/" + n


def _verkey(b):
    import re

    parts = re.split(rb"(\d+)", b)
    key = []
    for i, p in enumerate(parts):
        key.append((0, int(p), p) if i % 2 else (1, 0, p))
    return key


# ---------------------------------------------------------------------------------------
# glob patterns as fnmatch(3) reads them (backslash escapes, [!..] and [^..], [:class:])

_CLASSES = {
    "alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z",
    "lower": "a-z", "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct":
    "!-/:-@\\[-`{-~", "xdigit": "0-9A-Fa-f", "print": " -~", "graph": "!-~",
    "cntrl": "\\x00-\\x1f\\x7f",
}

_fn_cache = {}


def _fn_regex(pat, icase=False, star_slash=True):
    import re

    key = (pat, icase, star_slash)
    rx = _fn_cache.get(key)
    if rx is not None:
        return rx
    out = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        i += 1
        if c == "*":
            out.append(".*" if star_slash else "[^/]*")
        elif c == "?":
            out.append("." if star_slash else "[^/]")
        elif c == "\\" and i < n:
            out.append(re.escape(pat[i]))
            i += 1
        elif c == "[":
            j = i
            neg = False
            if j < n and pat[j] in "!^":
                neg = True
                j += 1
            items = []
            first = True
            ok = False
            while j < n:
                ch = pat[j]
                if ch == "]" and not first:
                    ok = True
                    j += 1
                    break
                first = False
                if ch == "[" and j + 1 < n and pat[j + 1] == ":":
                    end = pat.find(":]", j + 2)
                    if end != -1 and pat[j + 2:end] in _CLASSES:
                        items.append(_CLASSES[pat[j + 2:end]])
                        j = end + 2
                        continue
                if ch == "\\" and j + 1 < n:
                    j += 1
                    ch = pat[j]
                if j + 2 < n and pat[j + 1] == "-" and pat[j + 2] != "]":
                    hi = pat[j + 2]
                    if hi == "\\" and j + 3 < n:
                        hi = pat[j + 3]
                        j += 1
                    items.append(re.escape(ch) + "-" + re.escape(hi))
                    j += 3
                    continue
                items.append(re.escape(ch))
                j += 1
            if not ok:
                out.append("\\[")
                continue
            i = j
            out.append("[" + ("^" if neg else "") + "".join(items) + "]")
        else:
            out.append(re.escape(c))
    rx = re.compile("(?s:" + "".join(out) + r")\Z", re.IGNORECASE if icase else 0)
    _fn_cache[key] = rx
    return rx


COMMANDS = {
    "ls": ls,
}
