"""File commands of Vivarium's guest shell, loaded into every template as
`vivarium_shell_files` (issue 49; the command API is described in `vivarium_shell`).

ls find stat du df mkdir rm cp mv touch ln basename dirname realpath file gzip gunzip tar
zip unzip date, after GNU coreutils / findutils / tar, Info-ZIP and file(1) in the C locale:
their output formats, messages and exit statuses.

Every command is a generator: it yields stdout as bytes and returns its exit status.

What the sandbox (WASI) changes, and what these commands do about it:
- There are no permission bits (st_mode holds the file type only, the host's chmod does
  nothing): ls -l, stat, find -perm, tar and zip show 0644 for files, 0755 for directories
  and 0777 for links, as a fresh Linux tree would have with umask 022, unless chmod (mkdir -m,
  cp -p, tar x, unzip) set a mode in this sandbox: that is remembered by file identity for
  the interpreter's life (a session's turns, its snapshots and forks).
- There is no st_blocks (always 0): sizes in blocks (ls -s, ls -l's `total`, du, stat %b,
  find %b/%k) are estimated as ext4/tmpfs would allocate them: a file takes its size rounded
  up to 4 KiB, a directory 4 KiB, a symbolic link nothing.
- There are no users or groups (no pwd/grp modules, every file belongs to uid 0): uid and
  gid 0 are named root, as on every Linux; any other id shows as a number, right-aligned as
  GNU ls shows ids it cannot name.
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


# WASI keeps no permission bits: the modes chmod (and mkdir -m, cp -p, tar, unzip) set are
# remembered here, by file identity, for the life of the sandbox's interpreter (a session's
# turns, its snapshots and forks), so `chmod +x f; ls -l f` shows what was asked.
_MODES = {}


def _set_mode(p, mode, follow=True):
    os.chmod(p, mode) if follow else os.chmod(p, mode, follow_symlinks=False)
    if _WASI:
        try:
            st = os.stat(p) if follow else os.lstat(p)
        except OSError:
            return
        if st.st_ino:
            _MODES[(st.st_dev, st.st_ino)] = (_st.S_IFMT(st.st_mode), mode & 0o7777)


def _perm(st):
    """st_mode with permission bits filled in where WASI has none."""
    m = st.st_mode
    if _WASI and _st.S_IMODE(m) == 0:
        known = _MODES.get((st.st_dev, st.st_ino))
        if known is not None and known[0] == _st.S_IFMT(m):
            return m | known[1]
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
        # without a user database (WASI) uid 0 is still root, as on every Linux
        n = "root" if uid == 0 and _pwd is None else None
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
        n = "root" if gid == 0 and _grp is None else None
        if _grp is not None:
            try:
                n = _grp.getgrgid(gid).gr_name
            except (KeyError, OverflowError):
                n = None
        _names[k] = n
    return _names[k]


def _major(dev):
    return ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF)


def _minor(dev):
    return (dev & 0xFF) | ((dev >> 12) & ~0xFF)


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
                sz = "%d, %d" % (_major(st.st_rdev), _minor(st.st_rdev))
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


# ---------------------------------------------------------------------------------------
# basename dirname realpath


def _last_component(name):
    base = 0
    while base < len(name) and name[base] == "/":
        base += 1
    saw = False
    for p in range(base, len(name)):
        if name[p] == "/":
            saw = True
        elif saw:
            base = p
            saw = False
    return base


def _base_name(name):
    if name and name.strip("/") == "":
        return "/"
    b = name[_last_component(name):]
    return b.rstrip("/") if b.rstrip("/") else b


def _dir_name(name):
    prefix = 1 if name.startswith("/") else 0
    length = _last_component(name)
    while length > prefix and name[length - 1] == "/":
        length -= 1
    return name[:length] if length else "."


def basename(ctx, argv):
    longs = {"multiple": ("a", 0), "suffix": ("s", 1), "zero": ("z", 0), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "as:z", longs)
    except _Usage as e:
        return _usage(ctx, "basename", e)
    multi, suffix, eol = False, None, b"\n"
    for k, v in opts:
        if k == "help":
            yield _help("basename", "NAME [SUFFIX]\n  or:  basename OPTION... NAME...")
            return 0
        if k == "a":
            multi = True
        elif k == "s":
            multi, suffix = True, v
        elif k == "z":
            eol = b"\0"
    if not args:
        return _usage(ctx, "basename", _Usage("missing operand"))
    if not multi:
        if len(args) > 2:
            return _usage(ctx, "basename", _Usage(f"extra operand {_q(args[2])}"))
        if len(args) == 2:
            suffix = args[1]
        args = args[:1]
    out = []
    for a in args:
        b = _base_name(a)
        if suffix and b != suffix and b.endswith(suffix):
            b = b[: len(b) - len(suffix)]
        out.append(_b(b) + eol)
    yield b"".join(out)
    return 0


def dirname(ctx, argv):
    try:
        opts, args = _getopt(argv, "z", {"zero": ("z", 0), "help": ("help", 0)})
    except _Usage as e:
        return _usage(ctx, "dirname", e)
    eol = b"\n"
    for k, _v in opts:
        if k == "help":
            yield _help("dirname", "[OPTION] NAME...")
            return 0
        eol = b"\0"
    if not args:
        return _usage(ctx, "dirname", _Usage("missing operand"))
    yield b"".join(_b(_dir_name(a)) + eol for a in args)
    return 0


class _CanonError(Exception):
    def __init__(self, errno_):
        Exception.__init__(self, errno_)
        self.errno = errno_


def _canon(path, mode="last", follow=True):
    """canonicalize_filename_mode: mode 'all' (-e: everything exists), 'last' (all but the
    last component), 'missing' (-m: nothing needs to exist)."""
    import errno

    if path == "":
        raise _CanonError(errno.ENOENT)
    if not path.startswith("/"):
        cwd = os.getcwd()
        path = cwd.rstrip("/") + "/" + path
    todo = [c for c in path.split("/")][::-1]
    parts = []
    links = 0
    while todo:
        c = todo.pop()
        if c in ("", "."):
            continue
        if c == "..":
            if parts:
                parts.pop()
            continue
        cur = "/" + "/".join(parts + [c])
        rest = any(x not in ("", ".") for x in todo)
        try:
            lst = os.lstat(cur)
        except OSError as e:
            if mode == "missing":
                parts.append(c)
                continue
            if mode == "last" and not rest and e.errno == errno.ENOENT:
                parts.append(c)
                continue
            raise _CanonError(e.errno)
        if follow and _st.S_ISLNK(lst.st_mode):
            links += 1
            if links > 40:
                raise _CanonError(errno.ELOOP)
            try:
                t = os.readlink(cur)
            except OSError as e:
                raise _CanonError(e.errno)
            if t.startswith("/"):
                parts = []
            todo.extend(t.split("/")[::-1])
            continue
        if not _st.S_ISDIR(lst.st_mode) and rest and mode != "missing":
            raise _CanonError(errno.ENOTDIR)
        parts.append(c)
    return "/" + "/".join(parts)


def realpath(ctx, argv):
    longs = {
        "canonicalize-existing": ("e", 0), "canonicalize-missing": ("m", 0),
        "logical": ("L", 0), "physical": ("P", 0), "quiet": ("q", 0),
        "relative-to": ("relto", 1), "relative-base": ("relbase", 1),
        "strip": ("s", 0), "no-symlinks": ("s", 0), "zero": ("z", 0), "help": ("help", 0),
    }
    try:
        opts, args = _getopt(argv, "emLPqsz", longs)
    except _Usage as e:
        return _usage(ctx, "realpath", e)
    mode, follow, quiet, eol, relto, relbase, logical = "last", True, False, b"\n", None, None, False
    for k, v in opts:
        if k == "help":
            yield _help("realpath", "[OPTION]... FILE...")
            return 0
        if k == "e":
            mode = "all"
        elif k == "m":
            mode = "missing"
        elif k == "s":
            follow = False
        elif k == "L":
            logical = True
        elif k == "P":
            logical = False
        elif k == "q":
            quiet = True
        elif k == "z":
            eol = b"\0"
        elif k == "relto":
            relto = v
        elif k == "relbase":
            relbase = v
    if not args:
        return _usage(ctx, "realpath", _Usage("missing operand"))

    def canon(p):
        if not follow or logical:
            q = p if p.startswith("/") else os.getcwd().rstrip("/") + "/" + p
            q = os.path.normpath(q)
            if q.startswith("//"):
                q = "/" + q.lstrip("/")
            if follow:
                return _canon(q, mode, True)
            if mode != "missing":
                _canon(q, mode, True)  # existence check only
            return q
        return _canon(p, mode, follow)

    try:
        rt = canon(relto) if relto is not None else None
        rb = canon(relbase) if relbase is not None else None
    except _CanonError as e:
        _err(ctx, "realpath", f"{relto if relto is not None else relbase}: "
             f"{os.strerror(e.errno)}")
        return 1
    if rt is None and rb is not None:
        rt = rb
    status = 0
    out = []
    for a in args:
        try:
            r = canon(a)
        except _CanonError as e:
            if not quiet:
                _err(ctx, "realpath", f"{a}: {os.strerror(e.errno)}")
            status = 1
            continue
        if rt is not None:
            if rb is None or r == rb or r.startswith(rb.rstrip("/") + "/"):
                r = os.path.relpath(r, rt)
        out.append(_b(r) + eol)
    yield b"".join(out)
    return status


# ---------------------------------------------------------------------------------------
# mkdir rm touch ln


def mkdir(ctx, argv):
    longs = {"parents": ("p", 0), "verbose": ("v", 0), "mode": ("m", 1), "help": ("help", 0),
             "context": ("Z", 2)}
    try:
        opts, args = _getopt(argv, "pvm:Z", longs)
    except _Usage as e:
        return _usage(ctx, "mkdir", e)
    parents, verbose, mode = False, False, None
    for k, v in opts:
        if k == "help":
            yield _help("mkdir", "[OPTION]... DIRECTORY...")
            return 0
        if k == "p":
            parents = True
        elif k == "v":
            verbose = True
        elif k == "m":
            mode = _parse_mode(v, 0o777)
            if mode is None:
                _err(ctx, "mkdir", "invalid mode " + _q(v))
                return 1
    if not args:
        return _usage(ctx, "mkdir", _Usage("missing operand"))
    status = 0
    out = []
    for a in args:
        if parents:
            comps = []
            p = a
            while True:
                comps.append(p)
                d = _dir_name(p)
                if d == p or d in (".", "/"):
                    break
                p = d
            for p in reversed(comps):
                try:
                    os.mkdir(p, 0o777 if (mode is None or p != a) else mode)
                    if mode is not None and p == a:
                        _chmod_quiet(p, mode)
                    if verbose:
                        out.append(_b(f"mkdir: created directory {_q(p)}\n"))
                except FileExistsError:
                    if not os.path.isdir(p):
                        why = "File exists" if p == a else "Not a directory"
                        _err(ctx, "mkdir", f"cannot create directory {_q(p)}: {why}")
                        status = 1
                        break
                except OSError as e:
                    if os.path.isdir(p):
                        continue
                    _err(ctx, "mkdir", f"cannot create directory {_q(p)}: {_strerror(e)}")
                    status = 1
                    break
        else:
            try:
                os.mkdir(a, 0o777 if mode is None else mode)
                if mode is not None:
                    _chmod_quiet(a, mode)
                if verbose:
                    out.append(_b(f"mkdir: created directory {_q(a)}\n"))
            except OSError as e:
                _err(ctx, "mkdir", f"cannot create directory {_q(a)}: {_strerror(e)}")
                status = 1
        if out:
            yield b"".join(out)
            out = []
    return status


def _chmod_quiet(p, mode):
    try:
        _set_mode(p, mode)
    except OSError:
        pass


def _umask():
    try:
        m = os.umask(0o022)
        os.umask(m)
        return m
    except (AttributeError, OSError):
        return 0o022


def _parse_mode(s, base):
    """An octal mode or a symbolic one (u+x,go-w,a=r); None if invalid."""
    if s and all(c in "01234567" for c in s):
        return int(s, 8)
    mode = base
    for clause in s.split(","):
        i = 0
        who = 0
        while i < len(clause) and clause[i] in "ugoa":
            who |= {"u": 0o4700, "g": 0o2070, "o": 0o1007, "a": 0o7777}[clause[i]]
            i += 1
        if i >= len(clause):
            return None
        while i < len(clause):
            op = clause[i]
            if op not in "+-=":
                return None
            i += 1
            bits = 0
            while i < len(clause) and clause[i] in "rwxXst":
                c = clause[i]
                bits |= {"r": 0o444, "w": 0o222, "x": 0o111, "X": 0o111, "s": 0o6000,
                         "t": 0o1000}[c]
                i += 1
            mask = who if who else (0o7777 & ~_umask())
            bits &= mask
            if op == "+":
                mode |= bits
            elif op == "-":
                mode &= ~bits
            else:
                mode = (mode & ~(who or 0o7777)) | bits
    return mode


def rm(ctx, argv):
    longs = {
        "force": ("f", 0), "recursive": ("r", 0), "dir": ("d", 0), "verbose": ("v", 0),
        "interactive": ("interactive", 2), "preserve-root": ("pr", 2),
        "no-preserve-root": ("npr", 0), "one-file-system": ("ofs", 0), "help": ("help", 0),
    }
    try:
        opts, args = _getopt(argv, "fiIrRdv", longs)
    except _Usage as e:
        return _usage(ctx, "rm", e)
    force, recursive, dirs, verbose, interactive, preserve_root = (
        False, False, False, False, None, True)
    for k, v in opts:
        if k == "help":
            yield _help("rm", "[OPTION]... [FILE]...")
            return 0
        if k == "f":
            force, interactive = True, None
        elif k in ("r", "R"):
            recursive = True
        elif k == "d":
            dirs = True
        elif k == "v":
            verbose = True
        elif k == "i":
            interactive, force = "always", False
        elif k == "I":
            interactive, force = "once", False
        elif k == "interactive":
            interactive = {"never": None, "no": None, "none": None, "once": "once"}.get(
                v or "always", "always")
        elif k == "npr":
            preserve_root = False
    if not args:
        if force:
            return 0
        return _usage(ctx, "rm", _Usage("missing operand"))
    status = 0

    def ask(q):
        ctx.stderr.write(_b(q))
        line = ctx.stdin.readline()
        return line[:1] in (b"y", b"Y")

    if interactive == "once" and (recursive or len(args) > 3):
        what = "recursively " if recursive else ""
        n = len(args)
        if not ask(f"rm: remove {n} argument{'s' if n != 1 else ''} {what}? "):
            return 0
        interactive = None

    def remove(path, top):
        nonlocal status
        try:
            lst = os.lstat(path)
        except OSError as e:
            if not (force and top):
                _err(ctx, "rm", f"cannot remove {_q(path)}: {_strerror(e)}")
                status = 1
            return
        if _st.S_ISDIR(lst.st_mode):
            if not recursive:
                if dirs:
                    if interactive == "always" and not ask(
                            f"rm: remove directory {_q(path)}? "):
                        return
                    try:
                        os.rmdir(path)
                        if verbose:
                            yield _b(f"removed directory {_q(path)}\n")
                    except OSError as e:
                        _err(ctx, "rm", f"cannot remove {_q(path)}: {_strerror(e)}")
                        status = 1
                    return
                _err(ctx, "rm", f"cannot remove {_q(path)}: Is a directory")
                status = 1
                return
            if interactive == "always":
                try:
                    empty = not os.listdir(path)
                except OSError:
                    empty = False
                if not empty and not ask(f"rm: descend into directory {_q(path)}? "):
                    return
            try:
                names = [de.name for de in os.scandir(path)]
            except OSError as e:
                _err(ctx, "rm", f"cannot remove {_q(path)}: {_strerror(e)}")
                status = 1
                return
            for n in names:
                yield from remove(_concat(path, n), False)
            if interactive == "always" and not ask(f"rm: remove directory {_q(path)}? "):
                return
            try:
                os.rmdir(path)
                if verbose:
                    yield _b(f"removed directory {_q(path)}\n")
            except OSError as e:
                _err(ctx, "rm", f"cannot remove {_q(path)}: {_strerror(e)}")
                status = 1
            return
        if interactive == "always":
            kind = _ftype(lst.st_mode, lst.st_size)
            if _st.S_ISREG(lst.st_mode):
                kind = "regular empty file" if lst.st_size == 0 else "regular file"
            if not ask(f"rm: remove {kind} {_q(path)}? "):
                return
        try:
            os.unlink(path)
            if verbose:
                yield _b(f"removed {_q(path)}\n")
        except OSError as e:
            _err(ctx, "rm", f"cannot remove {_q(path)}: {_strerror(e)}")
            status = 1

    for a in args:
        stripped = a.rstrip("/")
        last = _base_name(a) if stripped else "/"
        if recursive and stripped == "" and a.startswith("/") and preserve_root:
            _err(ctx, "rm", "it is dangerous to operate recursively on '/'")
            _err(ctx, "rm", "use --no-preserve-root to override this failsafe")
            status = 1
            continue
        if last in (".", ".."):
            _err(ctx, "rm", f"refusing to remove '.' or '..' directory: skipping {_q(a)}")
            status = 1
            continue
        yield from remove(a, True)
    return status


def _parse_touch_stamp(s):
    """touch -t [[CC]YY]MMDDhhmm[.ss] -> (Y, m, d, H, M, S) or None."""
    sec = 0
    if "." in s:
        s, _, ss = s.partition(".")
        if len(ss) != 2 or not ss.isdigit():
            return None
        sec = int(ss)
    if not s.isdigit() or len(s) not in (8, 10, 12):
        return None
    import time as _time

    if len(s) == 12:
        year = int(s[:4])
        s = s[4:]
    elif len(s) == 10:
        yy = int(s[:2])
        year = 1900 + yy if yy >= 69 else 2000 + yy
        s = s[2:]
    else:
        year = _time.localtime().tm_year
    return (year, int(s[0:2]), int(s[2:4]), int(s[4:6]), int(s[6:8]), sec)


def touch(ctx, argv):
    longs = {"no-create": ("c", 0), "date": ("d", 1), "reference": ("r", 1), "time": ("time", 1),
             "no-dereference": ("h", 0), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "acd:fhmr:t:", longs)
    except _Usage as e:
        return _usage(ctx, "touch", e)
    import time as _time

    create, which, when, nofollow = True, set(), None, False
    for k, v in opts:
        if k == "help":
            yield _help("touch", "[OPTION]... FILE...")
            return 0
        if k == "c":
            create = False
        elif k == "a":
            which.add("a")
        elif k == "m":
            which.add("m")
        elif k == "time":
            which.add("a" if v in ("access", "atime", "use") else "m")
        elif k == "h":
            nofollow = True
        elif k == "d":
            t = _parse_date(v, ctx)
            if t is None:
                _err(ctx, "touch", f"invalid date format {_q(v)}")
                return 1
            when = (t, t)
        elif k == "t":
            p = _parse_touch_stamp(v)
            if p is None:
                _err(ctx, "touch", f"invalid date format {_q(v)}")
                return 1
            import datetime

            tz = _tz_for(ctx)
            d = datetime.datetime(*p, tzinfo=tz) if tz else datetime.datetime(*p).astimezone()
            t = int(d.timestamp()) * 10**9
            when = (t, t)
        elif k == "r":
            try:
                rst = os.stat(v)
            except OSError as e:
                _err(ctx, "touch", f"failed to get attributes of {_q(v)}: {_strerror(e)}")
                return 1
            when = (_ns(rst, "a"), _ns(rst, "m"))
    if not args:
        return _usage(ctx, "touch", _Usage("missing file operand"))
    if not which:
        which = {"a", "m"}
    status = 0
    for a in args:
        if a == "-":
            continue
        exists = os.path.lexists(a)
        if not exists:
            if not create or nofollow:
                continue
            try:
                fd = os.open(a, os.O_WRONLY | os.O_CREAT, 0o666)
                os.close(fd)
            except OSError as e:
                _err(ctx, "touch", f"cannot touch {_q(a)}: {_strerror(e)}")
                status = 1
                continue
            if when is None:
                continue
        try:
            now = _time.time_ns()
            at, mt = when if when is not None else (now, now)
            if which != {"a", "m"}:
                cur = os.stat(a)
                if "a" not in which:
                    at = _ns(cur, "a")
                if "m" not in which:
                    mt = _ns(cur, "m")
            if nofollow:
                os.utime(a, ns=(at, mt), follow_symlinks=False)
            else:
                os.utime(a, ns=(at, mt))
        except (OSError, NotImplementedError) as e:
            _err(ctx, "touch", f"setting times of {_q(a)}: {_strerror(e)}")
            status = 1
    return status


def _is_dir(p):
    try:
        return _st.S_ISDIR(os.stat(p).st_mode)
    except OSError:
        return False


def ln(ctx, argv):
    longs = {"symbolic": ("s", 0), "force": ("f", 0), "verbose": ("v", 0),
             "no-dereference": ("n", 0), "relative": ("r", 0), "target-directory": ("t", 1),
             "no-target-directory": ("T", 0), "logical": ("L", 0), "physical": ("P", 0),
             "interactive": ("i", 0), "backup": ("backup", 2), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "sfvnrt:TLPibS:", longs)
    except _Usage as e:
        return _usage(ctx, "ln", e)
    sym, force, verbose, nodir, rel, tdir, notdir = False, False, False, False, False, None, False
    for k, v in opts:
        if k == "help":
            yield _help("ln", "[OPTION]... [-T] TARGET LINK_NAME")
            return 0
        if k == "s":
            sym = True
        elif k == "f":
            force = True
        elif k == "v":
            verbose = True
        elif k == "n":
            nodir = True
        elif k == "r":
            rel = True
        elif k == "t":
            tdir = v
        elif k == "T":
            notdir = True
    if not args:
        return _usage(ctx, "ln", _Usage("missing file operand"))
    if tdir is not None:
        pairs = [(a, _concat(tdir, _base_name(a))) for a in args]
        if not _is_dir(tdir):
            _err(ctx, "ln", f"target {_q(tdir)} is not a directory")
            return 1
    elif len(args) == 1:
        pairs = [(args[0], _base_name(args[0]))]
    else:
        dest = args[-1]
        isdir = _is_dir(dest) and not notdir and not (nodir and os.path.islink(dest))
        if len(args) > 2 and not isdir:
            if notdir:
                return _usage(ctx, "ln", _Usage(f"extra operand {_q(args[2])}"))
            _err(ctx, "ln", f"target {_q(dest)}: {_notdir_why(dest)}")
            return 1
        if isdir:
            pairs = [(a, _concat(dest, _base_name(a))) for a in args[:-1]]
        else:
            pairs = [(args[0], dest)]
    status = 0
    out = []
    for target, link in pairs:
        if not sym:
            try:
                tst = os.stat(target)
            except OSError as e:
                _err(ctx, "ln", f"failed to access {_q(target)}: {_strerror(e)}")
                status = 1
                continue
            if _st.S_ISDIR(tst.st_mode):
                _err(ctx, "ln", f"{target}: hard link not allowed for directory")
                status = 1
                continue
        t = target
        if sym and rel:
            t = os.path.relpath(_canon(target, "missing"),
                                _canon(_dir_name(link), "missing"))
        if os.path.lexists(link):
            if force:
                try:
                    if not sym and os.path.samefile(target, link):
                        _err(ctx, "ln", f"{_q(target)} and {_q(link)} are the same file")
                        status = 1
                        continue
                except OSError:
                    pass
                try:
                    if _st.S_ISDIR(os.lstat(link).st_mode):
                        _err(ctx, "ln", f"{_q(link)}: cannot overwrite directory")
                        status = 1
                        continue
                    os.unlink(link)
                except OSError as e:
                    _err(ctx, "ln", f"cannot remove {_q(link)}: {_strerror(e)}")
                    status = 1
                    continue
        try:
            if sym:
                os.symlink(t, link)
            else:
                os.link(target, link)
        except OSError as e:
            what = "symbolic link" if sym else "hard link"
            extra = "" if sym else f" => {_q(target)}"
            msg = _strerror(e)
            if not sym and _WASI and e.errno not in (17, 2, 20):
                msg += " (the sandbox's filesystem has no hard links: use ln -s)"
            _err(ctx, "ln", f"failed to create {what} {_q(link)}{extra}: {msg}")
            status = 1
            continue
        if verbose:
            out.append(_b(f"{_q(link)} {'->' if sym else '=>'} {_q(t)}\n"))
    if out:
        yield b"".join(out)
    return status


# ---------------------------------------------------------------------------------------
# cp mv


def _notdir_why(p):
    return "Not a directory" if os.path.lexists(p) else "No such file or directory"


def _same(a, b):
    try:
        x, y = os.stat(a), os.stat(b)
    except OSError:
        return False
    return x.st_ino == y.st_ino and x.st_dev == y.st_dev and x.st_ino != 0


def _copy_data(src, dst, mode):
    with open(src, "rb") as f:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode & 0o7777 or 0o666)
        with os.fdopen(fd, "wb") as g:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                g.write(chunk)


def _preserve(st, dst, follow=True):
    try:
        os.utime(dst, ns=(_ns(st, "a"), _ns(st, "m")), follow_symlinks=follow)
    except (OSError, NotImplementedError):
        pass
    if follow:
        _chmod_quiet(dst, _st.S_IMODE(_perm(st)))


def _inside(src, dst):
    try:
        s = _canon(src, "missing")
        d = _canon(dst, "missing")
    except _CanonError:
        return False
    return d == s or d.startswith(s.rstrip("/") + "/")


def cp(ctx, argv):
    longs = {
        "archive": ("a", 0), "recursive": ("r", 0), "force": ("f", 0), "no-clobber": ("n", 0),
        "verbose": ("v", 0), "preserve": ("preserve", 2), "no-preserve": ("nopreserve", 1),
        "target-directory": ("t", 1), "no-target-directory": ("T", 0), "update": ("u", 2),
        "dereference": ("L", 0), "no-dereference": ("P", 0), "link": ("l", 0),
        "symbolic-link": ("s", 0), "interactive": ("i", 0), "parents": ("parents", 0),
        "remove-destination": ("rmdest", 0), "backup": ("backup", 2), "help": ("help", 0),
        "one-file-system": ("x", 0), "sparse": ("sparse", 1), "reflink": ("reflink", 2),
        "strip-trailing-slashes": ("sts", 0), "attributes-only": ("ao", 0),
    }
    try:
        opts, args = _getopt(argv, "adfHilLnPprRst:TuvxbS:", longs)
    except _Usage as e:
        return _usage(ctx, "cp", e)
    recursive, force, noclobber, verbose, preserve, tdir, notdir = (
        False, False, False, False, False, None, False)
    deref, update, hard, soft, interactive, parents, rmdest = (
        None, False, False, False, False, False, False)
    for k, v in opts:
        if k == "help":
            yield _help("cp", "[OPTION]... [-T] SOURCE DEST")
            return 0
        if k == "a":
            recursive, preserve, deref = True, True, False
        elif k in ("r", "R"):
            recursive = True
        elif k == "d":
            deref = False
        elif k == "f":
            force = True
        elif k == "n":
            noclobber, interactive = True, False
        elif k == "i":
            interactive, noclobber = True, False
        elif k == "v":
            verbose = True
        elif k == "p":
            preserve = True
        elif k == "preserve":
            preserve = True
        elif k == "nopreserve":
            preserve = False
        elif k == "t":
            tdir = v
        elif k == "T":
            notdir = True
        elif k == "u":
            update = v != "all"
        elif k in ("L", "H"):
            deref = True
        elif k == "P":
            deref = False
        elif k == "l":
            hard = True
        elif k == "s":
            soft = True
        elif k == "parents":
            parents = True
        elif k == "rmdest":
            rmdest = True
    if deref is None:
        deref = not recursive
    if not args:
        return _usage(ctx, "cp", _Usage("missing file operand"))
    if tdir is None and len(args) == 1:
        return _usage(ctx, "cp", _Usage(
            f"missing destination file operand after {_q(args[0])}"))
    if tdir is not None:
        dest, srcs = tdir, args
        if not _is_dir(dest):
            _err(ctx, "cp", f"target directory {_q(dest)}: "
                 f"{'Not a directory' if os.path.exists(dest) else 'No such file or directory'}")
            return 1
        into = True
    else:
        dest, srcs = args[-1], args[:-1]
        into = _is_dir(dest) and not notdir
        if len(srcs) > 1 and not into:
            if notdir:
                return _usage(ctx, "cp", _Usage(f"extra operand {_q(args[2])}"))
            _err(ctx, "cp", f"target {_q(dest)}: {_notdir_why(dest)}")
            return 1
    status = 0
    created = set()
    into_self = [False]
    tops = ["", ""]
    active = set()

    def fail(msg):
        nonlocal status
        _err(ctx, "cp", msg)
        status = 1

    def copy(src, dst, top):
        # yields -v lines
        try:
            sst = os.stat(src) if (deref or (top and deref is None)) else os.lstat(src)
        except OSError as e:
            fail(f"cannot stat {_q(src)}: {_strerror(e)}")
            return
        try:
            dlst = os.lstat(dst)
        except OSError:
            dlst = None
        dst_exists = dlst is not None
        if _st.S_ISDIR(sst.st_mode):
            if not recursive:
                fail(f"-r not specified; omitting directory {_q(src)}")
                return
            if (sst.st_dev, sst.st_ino) in created:
                fail(f"cannot copy a directory, {_q(tops[0])}, into itself, {_q(tops[1])}")
                into_self[0] = True
                return
            if (sst.st_dev, sst.st_ino) in active and sst.st_ino:
                fail(f"cannot copy {_q(src)}: a link back to a directory being copied")
                return
            if dst_exists and not _st.S_ISDIR(os.stat(dst).st_mode if _st.S_ISLNK(
                    dlst.st_mode) and os.path.exists(dst) else dlst.st_mode):
                fail(f"cannot overwrite non-directory {_q(dst)} with directory {_q(src)}")
                return
            if not dst_exists:
                try:
                    os.mkdir(dst, (_st.S_IMODE(_perm(sst)) or 0o755) | 0o700)
                except OSError as e:
                    fail(f"cannot create directory {_q(dst)}: {_strerror(e)}")
                    return
                try:
                    nst = os.stat(dst)
                    if nst.st_ino:
                        created.add((nst.st_dev, nst.st_ino))
                except OSError:
                    pass
                if verbose:
                    yield _b(f"{_q(src)} -> {_q(dst)}\n")
            try:
                # GNU cp reads a directory whole and copies in inode order (savedir)
                names = [de.name for de in sorted(os.scandir(src), key=lambda de: de.inode())]
            except OSError as e:
                fail(f"cannot access {_q(src)}: {_strerror(e)}")
                return
            active.add((sst.st_dev, sst.st_ino))
            for n in names:
                yield from copy(_concat(src, n), _concat(dst, n), False)
                if into_self[0]:
                    break
            active.discard((sst.st_dev, sst.st_ino))
            if preserve:
                _preserve(sst, dst)
            return
        if dst_exists:
            if _same(src, dst) and not (not deref and _st.S_ISLNK(sst.st_mode)):
                fail(f"{_q(src)} and {_q(dst)} are the same file")
                return
            if _st.S_ISDIR(dlst.st_mode):
                fail(f"cannot overwrite directory {_q(dst)} with non-directory")
                return
            if noclobber:
                return
            if interactive:
                ctx.stderr.write(_b(f"cp: overwrite {_q(dst)}? "))
                if ctx.stdin.readline()[:1] not in (b"y", b"Y"):
                    return
            if update:
                try:
                    if _ns(os.stat(dst), "m") >= _ns(sst, "m"):
                        return
                except OSError:
                    pass
            if rmdest or hard or soft or _st.S_ISLNK(sst.st_mode) or _st.S_ISLNK(dlst.st_mode):
                try:
                    os.unlink(dst)
                except OSError:
                    pass
        try:
            if soft:
                os.symlink(src, dst)
            elif hard:
                os.link(src, dst)
            elif _st.S_ISLNK(sst.st_mode):
                os.symlink(os.readlink(src), dst)
                if preserve:
                    _preserve(sst, dst, follow=False)
            else:
                try:
                    _copy_data(src, dst, _perm(sst) if not dst_exists else 0o666)
                except PermissionError:
                    if not force:
                        raise
                    os.unlink(dst)
                    _copy_data(src, dst, _perm(sst))
                    dst_exists = False
                if _WASI and not dst_exists and not preserve:
                    # what the O_CREAT mode would have given, remembered (WASI drops it)
                    _chmod_quiet(dst, _st.S_IMODE(_perm(sst)) & ~_umask())
                if preserve:
                    _preserve(sst, dst)
        except IsADirectoryError as e:
            fail(f"cannot create regular file {_q(dst)}: {_strerror(e)}")
            return
        except OSError as e:
            if e.filename == src or (e.filename is None and not os.path.exists(src)):
                fail(f"cannot open {_q(src)} for reading: {_strerror(e)}")
            elif _st.S_ISLNK(sst.st_mode) or soft:
                fail(f"cannot create symbolic link {_q(dst)}: {_strerror(e)}")
            elif hard:
                fail(f"cannot create hard link {_q(dst)} to {_q(src)}: {_strerror(e)}")
            else:
                fail(f"cannot create regular file {_q(dst)}: {_strerror(e)}")
            return
        if verbose:
            yield _b(f"{_q(src)} -> {_q(dst)}\n")

    for src in srcs:
        if into:
            if parents:
                dst = _concat(dest, src.lstrip("/"))
                d = _dir_name(dst)
                try:
                    os.makedirs(d, exist_ok=True)
                except OSError as e:
                    fail(f"cannot make directory {_q(d)}: {_strerror(e)}")
                    continue
            else:
                dst = _concat(dest, _base_name(src))
        else:
            dst = dest
            if dest.endswith("/") and not os.path.isdir(dest):
                if not os.path.lexists(src):
                    fail(f"cannot stat {_q(src)}: No such file or directory")
                    continue
                if not _is_dir(src):
                    fail(f"cannot create regular file {_q(dest)}: Not a directory")
                    continue
        tops[:] = [src, dst]
        into_self[0] = False
        created.clear()
        yield from copy(src, dst, True)
    return status


def mv(ctx, argv):
    longs = {"force": ("f", 0), "no-clobber": ("n", 0), "verbose": ("v", 0),
             "target-directory": ("t", 1), "no-target-directory": ("T", 0), "update": ("u", 2),
             "interactive": ("i", 0), "backup": ("backup", 2), "help": ("help", 0),
             "strip-trailing-slashes": ("sts", 0)}
    try:
        opts, args = _getopt(argv, "fnvt:TuibS:", longs)
    except _Usage as e:
        return _usage(ctx, "mv", e)
    noclobber, verbose, tdir, notdir, update, interactive = False, False, None, False, False, False
    for k, v in opts:
        if k == "help":
            yield _help("mv", "[OPTION]... [-T] SOURCE DEST")
            return 0
        if k == "f":
            noclobber = interactive = False
        elif k == "n":
            noclobber, interactive = True, False
        elif k == "i":
            interactive, noclobber = True, False
        elif k == "v":
            verbose = True
        elif k == "t":
            tdir = v
        elif k == "T":
            notdir = True
        elif k == "u":
            update = True
    if not args:
        return _usage(ctx, "mv", _Usage("missing file operand"))
    if tdir is None and len(args) == 1:
        return _usage(ctx, "mv", _Usage(
            f"missing destination file operand after {_q(args[0])}"))
    if tdir is not None:
        dest, srcs, into = tdir, args, True
        if not _is_dir(dest):
            _err(ctx, "mv", f"target directory {_q(dest)}: "
                 f"{'Not a directory' if os.path.exists(dest) else 'No such file or directory'}")
            return 1
    else:
        dest, srcs = args[-1], args[:-1]
        into = _is_dir(dest) and not notdir
        if len(srcs) > 1 and not into:
            if notdir:
                return _usage(ctx, "mv", _Usage(f"extra operand {_q(args[2])}"))
            _err(ctx, "mv", f"target {_q(dest)}: {_notdir_why(dest)}")
            return 1
    status = 0
    out = []
    for src in srcs:
        dst = _concat(dest, _base_name(src)) if into else dest
        try:
            sst = os.lstat(src)
        except OSError as e:
            _err(ctx, "mv", f"cannot stat {_q(src)}: {_strerror(e)}")
            status = 1
            continue
        try:
            dlst = os.lstat(dst)
        except OSError:
            dlst = None
        if dlst is not None:
            if (sst.st_ino == dlst.st_ino and sst.st_dev == dlst.st_dev and sst.st_ino) or (
                    _canon(src, "missing") == _canon(dst, "missing")):
                _err(ctx, "mv", f"{_q(src)} and {_q(dst)} are the same file")
                status = 1
                continue
            if noclobber:
                continue
            if interactive:
                ctx.stderr.write(_b(f"mv: overwrite {_q(dst)}? "))
                if ctx.stdin.readline()[:1] not in (b"y", b"Y"):
                    continue
            if update and _ns(dlst, "m") >= _ns(sst, "m"):
                continue
            if _st.S_ISDIR(dlst.st_mode) and not _st.S_ISDIR(sst.st_mode):
                _err(ctx, "mv", f"cannot overwrite directory {_q(dst)} with non-directory")
                status = 1
                continue
            if _st.S_ISDIR(sst.st_mode) and not _st.S_ISDIR(dlst.st_mode):
                _err(ctx, "mv", f"cannot overwrite non-directory {_q(dst)} with directory "
                     f"{_q(src)}")
                status = 1
                continue
        if _st.S_ISDIR(sst.st_mode) and _inside(src, dst):
            _err(ctx, "mv", f"cannot move {_q(src)} to a subdirectory of itself, {_q(dst)}")
            status = 1
            continue
        try:
            os.replace(src, dst)
        except OSError as e:
            if e.errno == 18:  # EXDEV: copy, then remove
                try:
                    import shutil

                    shutil.move(src, dst)
                except OSError as e2:
                    _err(ctx, "mv", f"cannot move {_q(src)} to {_q(dst)}: {_strerror(e2)}")
                    status = 1
                    continue
            else:
                _err(ctx, "mv", f"cannot move {_q(src)} to {_q(dst)}: {_strerror(e)}")
                status = 1
                continue
        if verbose:
            out.append(_b(f"renamed {_q(src)} -> {_q(dst)}\n"))
    if out:
        yield b"".join(out)
    return status


# ---------------------------------------------------------------------------------------
# date

_MON = {m[:3].lower(): i + 1 for i, m in enumerate(_MONTHS)}
_UNITS = {
    "sec": 1, "second": 1, "min": 60, "minute": 60, "hour": 3600, "day": 86400,
    "week": 604800, "fortnight": 1209600, "month": "month", "year": "year",
}
_TZNAMES = {"utc": 0, "gmt": 0, "z": 0, "ut": 0, "est": -5, "edt": -4, "cst": -6, "cdt": -5,
            "mst": -7, "mdt": -6, "pst": -8, "pdt": -7, "cet": 1, "cest": 2, "bst": 1,
            "jst": 9, "ist": None}


def _parse_date(text, ctx=None, utc=False, now_ns=None):
    """A subset of GNU date's -d: @EPOCH, ISO 8601 dates and times (with T, fractions, Z or
    offsets), `Mon DD [YYYY]`, `DD Mon YYYY`, HH:MM[:SS], now/today/yesterday/tomorrow,
    `N unit[s] [ago]`, `+N unit`, `next/last unit`, weekday names. Returns ns or None."""
    import datetime
    import re
    import time as _time

    if now_ns is None:
        now_ns = _time.time_ns()
    tz = _tz_for(ctx, utc)
    s = text.strip()
    if s.startswith("@"):
        try:
            v = s[1:].strip()
            if "." in v or "," in v:
                a, _, b = v.replace(",", ".").partition(".")
                neg = a.startswith("-")
                ns = int(a or "0") * 10**9 + (-1 if neg else 1) * int((b + "0" * 9)[:9])
                return ns
            return int(v) * 10**9
        except ValueError:
            return None
    low = s.lower()
    nowd = _when(now_ns, tz).d
    date = None  # (Y, m, d)
    tod = None  # (H, M, S, ns)
    offset = None  # seconds east
    rel_s = 0
    rel_m = 0
    rel_days = 0
    wday = None
    toks = re.findall(r"[+-]?\d+(?:[.,]\d+)?|[a-z]+\.?|[:/,+-]|\S", low)
    # whole-string ISO forms first
    m = re.match(
        r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[t ]+(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
        r"\s*(z|utc|gmt|[+-]\d{2}:?\d{2}|[+-]\d{2})?\s*(.*)$", low)
    rest = low
    if m:
        date = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if m.group(4):
            frac = (m.group(7) or "") + "000000000"
            tod = (int(m.group(4)), int(m.group(5)), int(m.group(6) or 0), int(frac[:9]))
        if m.group(8):
            z = m.group(8)
            if z in ("z", "utc", "gmt"):
                offset = 0
            else:
                sign = -1 if z[0] == "-" else 1
                digits = z[1:].replace(":", "")
                offset = sign * (int(digits[:2]) * 3600 + (int(digits[2:4] or 0) * 60))
        rest = m.group(9)
        toks = re.findall(r"[+-]?\d+(?:[.,]\d+)?|[a-z]+\.?|[:/,]|\S", rest)
    i = 0
    days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    pending_num = None
    while i < len(toks):
        t = toks[i].rstrip(".")
        nxt = toks[i + 1].rstrip(".") if i + 1 < len(toks) else None
        if t in ("now",):
            i += 1
            continue
        if t == "today":
            i += 1
            continue
        if t == "yesterday":
            rel_days -= 1
            i += 1
            continue
        if t == "tomorrow":
            rel_days += 1
            i += 1
            continue
        if t in ("at", "and", ","):
            i += 1
            continue
        if t == "ago":
            rel_s, rel_m, rel_days = -rel_s, -rel_m, -rel_days
            i += 1
            continue
        if t in ("next", "last", "this") and nxt is not None:
            n = {"next": 1, "last": -1, "this": 0}[t]
            u = nxt.rstrip("s") if nxt not in days else nxt
            if u in _UNITS:
                unit = _UNITS[u]
                if unit == "month":
                    rel_m += n
                elif unit == "year":
                    rel_m += 12 * n
                elif unit == 86400:
                    rel_days += n
                elif unit in (604800, 1209600):
                    rel_days += n * unit // 86400
                else:
                    rel_s += n * unit
                i += 2
                continue
            if nxt[:3] in [d[:3] for d in days]:
                wday = ([d[:3] for d in days].index(nxt[:3]), n)
                i += 2
                continue
            return None
        if t[:3] in [d[:3] for d in days] and t.rstrip(",") in days + [d[:3] for d in days] + [
                "tues", "wednes", "thur", "thurs"]:
            if wday is None:
                wday = ([d[:3] for d in days].index(t[:3]), 0)
            i += 1
            continue
        if re.fullmatch(r"[+-]?\d+", t) and nxt is not None and (
                nxt.rstrip("s") in _UNITS or nxt in _UNITS):
            n = int(t)
            u = nxt.rstrip("s") if nxt.rstrip("s") in _UNITS else nxt
            unit = _UNITS[u]
            if unit == "month":
                rel_m += n
            elif unit == "year":
                rel_m += 12 * n
            elif unit in (86400, 604800, 1209600):
                rel_days += n * unit // 86400
            else:
                rel_s += n * unit
            i += 2
            continue
        if t.rstrip("s") in _UNITS:
            unit = _UNITS[t.rstrip("s")]
            if unit == "month":
                rel_m += 1
            elif unit == "year":
                rel_m += 12
            elif unit in (86400, 604800, 1209600):
                rel_days += unit // 86400
            else:
                rel_s += unit
            i += 1
            continue
        # HH:MM[:SS[.frac]] [am|pm]
        if re.fullmatch(r"\d{1,2}", t) and nxt == ":":
            j = i
            parts = [t]
            j += 1
            while j + 1 < len(toks) and toks[j] == ":" and re.fullmatch(
                    r"\d{1,2}(?:[.,]\d+)?", toks[j + 1]):
                parts.append(toks[j + 1])
                j += 2
            if len(parts) < 2:
                return None
            hh, mm = int(parts[0]), int(parts[1])
            sec, ns = 0, 0
            if len(parts) > 2:
                a, _, b = parts[2].replace(",", ".").partition(".")
                sec, ns = int(a), int((b + "0" * 9)[:9])
            if j < len(toks) and toks[j] in ("am", "pm", "a.m.", "p.m."):
                if hh == 12:
                    hh = 0
                if toks[j].startswith("p"):
                    hh += 12
                j += 1
            tod = (hh, mm, sec, ns)
            i = j
            continue
        if re.fullmatch(r"[+-]\d{2}:?\d{2}", t) and tod is not None and offset is None:
            digits = t[1:].replace(":", "")
            offset = (-1 if t[0] == "-" else 1) * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
            i += 1
            continue
        if t in ("+", "-") and nxt and re.fullmatch(r"\d{2}:?\d{2}", nxt) and tod is not None:
            digits = nxt.replace(":", "")
            offset = (-1 if t == "-" else 1) * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
            i += 2
            continue
        if t in _TZNAMES and _TZNAMES[t] is not None:
            offset = _TZNAMES[t] * 3600
            i += 1
            continue
        if t[:3] in _MON and (t in _MON or t[:3] + t[3:] in [x.lower() for x in _MONTHS]
                              or t == "sept"):
            mon = _MON[t[:3]]
            day = None
            year = None
            j = i + 1
            if j < len(toks) and re.fullmatch(r"\d{1,2}", toks[j]):
                day = int(toks[j])
                j += 1
                if j < len(toks) and toks[j] == ",":
                    j += 1
                if j < len(toks) and re.fullmatch(r"\d{4}", toks[j]):
                    year = int(toks[j])
                    j += 1
            if pending_num is not None and day is None:
                day = pending_num
                if j < len(toks) and re.fullmatch(r"\d{4}", toks[j]):
                    year = int(toks[j])
                    j += 1
                pending_num = None
            date = (year or nowd.year, mon, day or 1)
            i = j
            continue
        if re.fullmatch(r"\d{4}", t) and date is not None and tod is not None:
            date = (int(t), date[1], date[2])
            i += 1
            continue
        if re.fullmatch(r"\d{1,2}", t) and nxt and nxt[:3] in _MON:
            pending_num = int(t)
            i += 1
            continue
        if re.fullmatch(r"\d{1,2}", t) and nxt == "/":
            seg = [t]
            j = i + 1
            while j + 1 < len(toks) and toks[j] == "/" and toks[j + 1].isdigit():
                seg.append(toks[j + 1])
                j += 2
            if len(seg) >= 2:
                y = int(seg[2]) if len(seg) > 2 else nowd.year
                if len(seg) > 2 and len(seg[2]) == 2:
                    y += 2000 if y < 69 else 1900
                date = (y, int(seg[0]), int(seg[1]))
                i = j
                continue
        if re.fullmatch(r"\d{8}", t):
            date = (int(t[:4]), int(t[4:6]), int(t[6:]))
            i += 1
            continue
        if re.fullmatch(r"\d{4}", t) and date is None:
            # a bare 4-digit number: HHMM time of day, as GNU reads it
            tod = (int(t[:2]), int(t[2:]), 0, 0)
            i += 1
            continue
        return None
    if pending_num is not None:
        return None
    try:
        if date is None:
            y, mo, d = nowd.year, nowd.month, nowd.day
            if tod is None and not (rel_s or rel_m or rel_days or wday) and low.strip() not in (
                    "", "now", "today", "yesterday", "tomorrow"):
                pass
        else:
            y, mo, d = date
        if tod is None:
            if date is None and wday is None and low.strip() not in ("today",):
                hh, mi, ss, ns = nowd.hour, nowd.minute, nowd.second, now_ns % 10**9
            else:
                hh, mi, ss, ns = 0, 0, 0, 0
            if date is None and wday is None and low.strip() == "today":
                hh, mi, ss, ns = nowd.hour, nowd.minute, nowd.second, now_ns % 10**9
        else:
            hh, mi, ss, ns = tod
        if rel_m:
            total = y * 12 + (mo - 1) + rel_m
            y, mo = divmod(total, 12)
            mo += 1
        if offset is not None:
            zone = datetime.timezone(datetime.timedelta(seconds=offset))
            dt = datetime.datetime(y, mo, d, hh, mi, ss, tzinfo=zone)
        elif tz is not None:
            dt = datetime.datetime(y, mo, d, hh, mi, ss, tzinfo=tz)
        else:
            dt = datetime.datetime(y, mo, d, hh, mi, ss).astimezone()
        if wday is not None:
            wd, n = wday
            delta = (wd - dt.weekday()) % 7
            if n > 0 and delta == 0:
                delta = 7
            if n < 0:
                delta = delta - 7 if delta else -7
            dt = dt + datetime.timedelta(days=delta + 7 * max(n - 1, 0))
        dt = dt + datetime.timedelta(days=rel_days)
        return (int(dt.timestamp()) + rel_s) * 10**9 + ns
    except (ValueError, OverflowError):
        return None


def date(ctx, argv):
    longs = {
        "utc": ("u", 0), "universal": ("u", 0), "date": ("d", 1), "reference": ("r", 1),
        "iso-8601": ("I", 2), "rfc-email": ("R", 0), "rfc-2822": ("R", 0),
        "rfc-3339": ("rfc3339", 1), "set": ("s", 1), "file": ("f", 1), "debug": ("debug", 0),
        "help": ("help", 0), "version": ("version", 0), "resolution": ("resolution", 0),
    }
    argv2 = [argv[0]]
    # -I takes an optional argument glued to it
    for a in argv[1:]:
        if a.startswith("-I") and len(a) > 2 and not a.startswith("--"):
            argv2.append("--iso-8601=" + a[2:])
        else:
            argv2.append(a)
    try:
        opts, args = _getopt(argv2, "ud:r:IRs:f:", longs)
    except _Usage as e:
        return _usage(ctx, "date", e)
    import time as _time

    utc, fmt, files = False, None, None
    dstr = None
    ref = None
    for k, v in opts:
        if k == "help":
            yield _help("date", "[OPTION]... [+FORMAT]")
            return 0
        if k == "version":
            yield b"date (GNU coreutils) 9.1\n"
            return 0
        if k == "u":
            utc = True
        elif k == "d":
            dstr = v
        elif k == "r":
            ref = v
        elif k == "I":
            spec = v or "date"
            choices = ["date", "hours", "minutes", "seconds", "ns"]
            match = [c for c in choices if c.startswith(spec)]
            if not match:
                _err(ctx, "date", f"invalid argument {_q(spec)} for '--iso-8601'")
                return 1
            fmt = {"date": "%Y-%m-%d", "hours": "%Y-%m-%dT%H%:z",
                   "minutes": "%Y-%m-%dT%H:%M%:z", "seconds": "%Y-%m-%dT%H:%M:%S%:z",
                   "ns": "%Y-%m-%dT%H:%M:%S,%N%:z"}[match[0]]
        elif k == "R":
            fmt = "%a, %d %b %Y %H:%M:%S %z"
        elif k == "rfc3339":
            choices = ["date", "seconds", "ns"]
            match = [c for c in choices if c.startswith(v)]
            if not match:
                _err(ctx, "date", f"invalid argument {_q(v)} for '--rfc-3339'")
                return 1
            fmt = {"date": "%Y-%m-%d", "seconds": "%Y-%m-%d %H:%M:%S%:z",
                   "ns": "%Y-%m-%d %H:%M:%S.%N%:z"}[match[0]]
        elif k == "s":
            _err(ctx, "date", "cannot set date: Operation not permitted")
            return 1
        elif k == "f":
            files = v
        elif k == "resolution":
            yield b"0.000000001\n"
            return 0
    for a in args:
        if a.startswith("+"):
            if fmt is not None and len(args) == 1:
                _err(ctx, "date", "multiple output formats specified")
                return 1
            fmt = a[1:]
        else:
            if len(args) > 1 or dstr is not None:
                return _usage(ctx, "date", _Usage(f"extra operand {_q(a)}"))
            _err(ctx, "date", "cannot set date: Operation not permitted")
            return 1
    if fmt is None:
        fmt = "%a %b %e %H:%M:%S %Z %Y"
    tz = _tz_for(ctx, utc)
    if files is not None:
        try:
            data = ctx.stdin.read() if files == "-" else open(files, "rb").read()
        except OSError as e:
            _err(ctx, "date", f"{files}: {_strerror(e)}")
            return 1
        status = 0
        out = []
        for line in data.decode("utf-8", "surrogateescape").splitlines():
            t = _parse_date(line, ctx, utc)
            if t is None:
                _err(ctx, "date", f"invalid date {_q(line)}")
                status = 1
                continue
            out.append(_b(_strftime(fmt, _when(t, tz)) + "\n"))
        yield b"".join(out)
        return status
    if ref is not None:
        try:
            t = _ns(os.stat(ref), "m")
        except OSError as e:
            _err(ctx, "date", f"{ref}: {_strerror(e)}")
            return 1
    elif dstr is not None:
        t = _parse_date(dstr, ctx, utc)
        if t is None:
            _err(ctx, "date", f"invalid date {_q(dstr)}")
            return 1
    else:
        t = _time.time_ns()
    yield _b(_strftime(fmt, _when(t, tz)) + "\n")
    return 0


# ---------------------------------------------------------------------------------------
# find


class _FindError(Exception):
    pass


class _Quit(Exception):
    pass


class _FEnt:
    __slots__ = ("path", "depth", "lst", "_st", "follow", "prune", "start")

    def __init__(self, path, depth, lst, follow, start):
        self.path = path
        self.depth = depth
        self.lst = lst
        self._st = None
        self.follow = follow
        self.prune = False
        self.start = start

    @property
    def st(self):
        """stat as find sees it: lstat unless -L (then the target's, if any)."""
        if self.follow and _st.S_ISLNK(self.lst.st_mode):
            if self._st is None:
                try:
                    self._st = os.stat(self.path)
                except OSError:
                    self._st = self.lst
            return self._st
        return self.lst

    @property
    def name(self):
        if self.depth == 0:
            p = self.path
            if p.strip("/") == "":
                return "/" if p else p
            return _base_name(p)
        return self.path[self.path.rfind("/") + 1:]


def _find_num(s, pred):
    """[+-]N -> (cmp, N): cmp is 1 for more than, -1 for less than, 0 for exactly."""
    c = 0
    if s.startswith("+"):
        c, s = 1, s[1:]
    elif s.startswith("-"):
        c, s = -1, s[1:]
    if not s.isdigit():
        raise _FindError(f"invalid argument {_q(('+' if c == 1 else '-' if c else '') + s)} "
                         f"to {_q(pred)}")
    return c, int(s)


def _cmpn(c, n, v):
    return v > n if c == 1 else v < n if c == -1 else v == n


def _type_char(m):
    if _st.S_ISREG(m):
        return "f"
    if _st.S_ISDIR(m):
        return "d"
    if _st.S_ISLNK(m):
        return "l"
    if _st.S_ISFIFO(m):
        return "p"
    if _st.S_ISSOCK(m):
        return "s"
    if _st.S_ISCHR(m):
        return "c"
    if _st.S_ISBLK(m):
        return "b"
    return "U"


def _emacs_regex(r):
    """findutils' default regex type (emacs) to Python re."""
    out = []
    i = 0
    while i < len(r):
        c = r[i]
        if c == "\\" and i + 1 < len(r):
            n = r[i + 1]
            if n in "()|{}":
                out.append(n)
            elif n in "`":
                out.append("\\A")
            elif n == "'":
                out.append("\\Z")
            else:
                out.append("\\" + n)
            i += 2
            continue
        if c in "(){}|":
            out.append("\\" + c)
        elif c == "[":
            j = r.find("]", i + 2 if r[i + 1:i + 2] in ("]", "^") else i + 1)
            if j == -1:
                out.append("\\[")
            else:
                cls = r[i:j + 1]
                for name, rng in _CLASSES.items():
                    cls = cls.replace("[:%s:]" % name, rng)
                out.append(cls.replace("\\", "\\\\") if "\\" in cls else cls)
                i = j + 1
                continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def find(ctx, argv):
    import time as _time

    args = argv[1:]
    follow = False
    cmdfollow = False
    i = 0
    while i < len(args) and args[i] in ("-H", "-L", "-P", "-O0", "-O1", "-O2", "-O3", "-D"):
        if args[i] == "-L":
            follow = True
        elif args[i] == "-H":
            cmdfollow = True
        elif args[i] == "-P":
            follow = cmdfollow = False
        elif args[i] == "-D":
            i += 1
        i += 1
    starts = []
    while i < len(args) and not (args[i].startswith("-") and len(args[i]) > 1) and args[i] not in (
            "(", "!", ")", ","):
        starts.append(args[i])
        i += 1
    toks = args[i:]
    if toks[:1] in (["--help"], ["-help"]):
        yield _help("find", "[-H] [-L] [-P] [-Olevel] [-D debugopts] [path...] [expression]")
        return 0
    if toks[:1] in (["--version"], ["-version"]):
        yield b"find (GNU findutils) 4.9.0\n"
        return 0
    if not starts:
        starts = ["."]
    now = _time.time()
    tz = _tz_for(ctx)
    st = {"maxdepth": None, "mindepth": 0, "depth": False, "status": 0, "has_action": False,
          "out": [], "batches": [], "daystart": False}
    pos = [0]
    nonopt_seen = [None]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take(pred):
        if pos[0] >= len(toks):
            raise _FindError(f"missing argument to `{pred}'")
        v = toks[pos[0]]
        pos[0] += 1
        return v

    def emit(b):
        st["out"].append(b)

    def run_cmd(cmd, e_or_paths):
        try:
            status, out = ctx.run(cmd)
        except Exception as ex:  # a command that cannot run
            _err(ctx, "find", f"{_q(cmd[0])}: {ex}")
            return 1
        if out:
            emit(out)
        return status

    def primary(t):
        ntests = ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename",
                  "-type", "-xtype", "-size", "-empty", "-newer", "-mtime", "-mmin",
                  "-atime", "-amin", "-ctime", "-cmin", "-regex", "-iregex", "-perm",
                  "-user", "-group", "-uid", "-gid", "-links", "-inum", "-samefile",
                  "-readable", "-writable", "-executable", "-nouser", "-nogroup",
                  "-lname", "-ilname", "-true", "-false", "-used", "-anewer", "-cnewer",
                  "-newermt", "-print", "-print0", "-printf", "-exec", "-execdir", "-ok",
                  "-okdir", "-delete", "-prune", "-quit", "-ls", "-fprint", "-fls")
        if t in ("-maxdepth", "-mindepth"):
            v = take(t)
            if not v.isdigit():
                raise _FindError(f"Expected a positive decimal integer argument to {t}, "
                                 f"but got {_q(v)}")
            st[t[1:]] = int(v)
            return lambda e: True
        if t in ("-depth", "-d"):
            st["depth"] = True
            return lambda e: True
        if t in ("-xdev", "-mount", "-noleaf", "-ignore_readdir_race",
                 "-noignore_readdir_race", "-nowarn", "-warn", "-daystart"):
            if t == "-daystart":
                st["daystart"] = True
            return lambda e: True
        if t == "-follow":
            nonlocal follow
            follow = True
            return lambda e: True
        if t == "-regextype":
            take(t)
            return lambda e: True
        if t not in ntests:
            if t.startswith("-"):
                raise _FindError(f"unknown predicate `{t}'")
            raise _FindError(f"paths must precede expression: `{t}'")
        if nonopt_seen[0] is None:
            nonopt_seen[0] = t
        if t in ("-name", "-iname"):
            pat = take(t)
            rx = _fn_regex(pat, icase=t == "-iname")
            return lambda e: rx.match(e.name) is not None
        if t in ("-path", "-ipath", "-wholename", "-iwholename"):
            pat = take(t)
            rx = _fn_regex(pat, icase=t.startswith("-i"))
            return lambda e: rx.match(e.path) is not None
        if t in ("-lname", "-ilname"):
            pat = take(t)
            rx = _fn_regex(pat, icase=t == "-ilname")

            def lname(e):
                if not _st.S_ISLNK(e.lst.st_mode):
                    return False
                try:
                    return rx.match(os.readlink(e.path)) is not None
                except OSError:
                    return False
            return lname
        if t in ("-regex", "-iregex"):
            import re

            pat = take(t)
            try:
                rx = re.compile(_emacs_regex(pat), re.I if t == "-iregex" else 0)
            except re.error as ex:
                raise _FindError(f"Invalid regular expression {_q(pat)}: {ex}")
            return lambda e: rx.fullmatch(e.path) is not None
        if t in ("-type", "-xtype"):
            v = take(t)
            kinds = set(v.split(","))
            for k in kinds:
                if k not in set("fdlpscbD"):
                    if len(k) != 1:
                        raise _FindError(f"Must separate multiple arguments to {t} using: ','")
                    raise _FindError(f"Unknown argument to {t}: {k}")
            if t == "-type":
                return lambda e: _type_char(e.st.st_mode) in kinds

            def xtype(e):
                if _st.S_ISLNK(e.lst.st_mode) and not follow:
                    try:
                        return _type_char(os.stat(e.path).st_mode) in kinds
                    except OSError:
                        return "l" in kinds
                if follow and _st.S_ISLNK(e.lst.st_mode):
                    return "l" in kinds
                return _type_char(e.st.st_mode) in kinds
            return xtype
        if t == "-size":
            v = take(t)
            unit = 512
            if v and v[-1] in "cwbkMG":
                unit = {"c": 1, "w": 2, "b": 512, "k": 1024, "M": 1 << 20, "G": 1 << 30}[v[-1]]
                v = v[:-1]
            c, n = _find_num(v, "-size")
            return lambda e: _cmpn(c, n, -(-e.st.st_size // unit))
        if t == "-empty":
            def empty(e):
                m = e.st.st_mode
                if _st.S_ISREG(m):
                    return e.st.st_size == 0
                if _st.S_ISDIR(m):
                    try:
                        with os.scandir(e.path) as it:
                            for _x in it:
                                return False
                        return True
                    except OSError:
                        return False
                return False
            return empty
        if t in ("-newer", "-anewer", "-cnewer"):
            ref = take(t)
            try:
                rst = os.stat(ref)
            except OSError as ex:
                raise _FindError(f"{_q(ref)}: {_strerror(ex)}")
            rt = _ns(rst, "m")
            which = {"-newer": "m", "-anewer": "a", "-cnewer": "c"}[t]
            return lambda e: _ns(e.st, which) > rt
        if t == "-newermt":
            v = take(t)
            rt = _parse_date(v, ctx)
            if rt is None:
                raise _FindError(f"I cannot figure out how to interpret {_q(v)} as a date or "
                                 f"time")
            return lambda e: _ns(e.st, "m") > rt
        if t in ("-mtime", "-atime", "-ctime", "-mmin", "-amin", "-cmin"):
            v = take(t)
            c, n = _find_num(v, t)
            which = t[1]
            per = 86400 if t.endswith("time") else 60

            def age(e):
                base = now
                if st["daystart"]:
                    lt = _time.localtime(now)
                    base = now - (lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec) + 86400
                d = (base - _ns(e.st, which) / 1e9) / per
                import math

                if per == 60 and c == 0:
                    return math.floor(d) == n if d >= 0 else False
                return _cmpn(c, n, math.floor(d))
            return age
        if t == "-used":
            v = take(t)
            c, n = _find_num(v, t)
            return lambda e: _cmpn(c, n, int((_ns(e.st, "a") - _ns(e.st, "c")) / 86400e9))
        if t == "-perm":
            v = take(t)
            kind = ""
            if v[:1] in "-/+":
                kind, v = v[0], v[1:]
            mode = _parse_mode(v, 0)
            if mode is None:
                raise _FindError(f"invalid mode {_q(v)}")

            def perm(e):
                m = _st.S_IMODE(_perm(e.st))
                if kind == "-":
                    return m & mode == mode
                if kind in "/+" and kind:
                    return mode == 0 or bool(m & mode)
                return m == mode
            return perm
        if t in ("-user", "-group", "-uid", "-gid"):
            v = take(t)
            attr = "st_uid" if t in ("-user", "-uid") else "st_gid"
            if v.isdigit():
                n = int(v)
            elif t == "-user" and _pwd is not None:
                try:
                    n = _pwd.getpwnam(v).pw_uid
                except KeyError:
                    raise _FindError(f"{_q(v)} is not the name of a known user")
            elif t == "-group" and _grp is not None:
                try:
                    n = _grp.getgrnam(v).gr_gid
                except KeyError:
                    raise _FindError(f"{_q(v)} is not the name of an existing group")
            elif v == "root":
                n = 0
            else:
                raise _FindError(f"{_q(v)} is not the name of a known user")
            return lambda e: getattr(e.st, attr) == n
        if t in ("-nouser", "-nogroup"):
            return lambda e: (_user(e.st.st_uid) if t == "-nouser" else _group(
                e.st.st_gid)) is None
        if t in ("-links", "-inum"):
            c, n = _find_num(take(t), t)
            attr = "st_nlink" if t == "-links" else "st_ino"
            return lambda e: _cmpn(c, n, getattr(e.st, attr))
        if t == "-samefile":
            ref = take(t)
            try:
                rst = os.stat(ref)
            except OSError as ex:
                raise _FindError(f"{_q(ref)}: {_strerror(ex)}")
            return lambda e: (e.st.st_ino, e.st.st_dev) == (rst.st_ino, rst.st_dev)
        if t in ("-readable", "-writable", "-executable"):
            flag = {"-readable": os.R_OK, "-writable": os.W_OK, "-executable": os.X_OK}[t]
            return lambda e: os.access(e.path, flag)
        if t == "-true":
            return lambda e: True
        if t == "-false":
            return lambda e: False
        # actions
        st["has_action"] = st["has_action"] or t not in ("-prune", "-quit")
        if t == "-print":
            return lambda e: emit(_b(e.path) + b"\n") or True
        if t == "-print0":
            return lambda e: emit(_b(e.path) + b"\0") or True
        if t in ("-fprint", "-fls"):
            take(t)
            raise _FindError(f"{t} is not supported in the sandbox's shell; use -print with a "
                             f"redirection")
        if t == "-ls":
            def ls_(e):
                s2 = e.st
                u = _user(s2.st_uid) or str(s2.st_uid)
                g = _group(s2.st_gid) or str(s2.st_gid)
                w = _when(_ns(s2, "m"), tz)
                nowns = int(now * 1e9)
                recent = nowns - 15778476 * 10**9 < _ns(s2, "m") <= nowns
                ts = _strftime("%b %e %H:%M" if recent else "%b %e  %Y", w)
                name = e.path
                if _st.S_ISLNK(s2.st_mode):
                    try:
                        name += " -> " + os.readlink(e.path)
                    except OSError:
                        pass
                emit(_b("%9d %6d %s %3d %-8s %-8s %8d %s %s\n" % (
                    s2.st_ino, -(-_blocks(s2) // 2), _st.filemode(_perm(s2)), s2.st_nlink,
                    u, g, s2.st_size, ts, name)))
                return True
            return ls_
        if t == "-printf":
            fmt = take(t)
            return lambda e: emit(_b(_find_printf(fmt, e, tz))) or True
        if t == "-prune":
            def prune(e):
                if not st["depth"]:
                    e.prune = True
                return True
            return prune
        if t == "-quit":
            def quit_(e):
                raise _Quit()
            return quit_
        if t == "-delete":
            st["depth"] = True

            def delete(e):
                if e.path in (".",) or e.depth == 0 and e.name in (".", ".."):
                    return True
                try:
                    if _st.S_ISDIR(e.lst.st_mode):
                        os.rmdir(e.path)
                    else:
                        os.unlink(e.path)
                    return True
                except OSError as ex:
                    _err(ctx, "find", f"cannot delete {_q(e.path)}: {_strerror(ex)}")
                    st["status"] = 1
                    return False
            return delete
        if t in ("-exec", "-execdir", "-ok", "-okdir"):
            cmd = []
            plus = False
            while True:
                if pos[0] >= len(toks):
                    raise _FindError(f"missing argument to `{t}'")
                a = toks[pos[0]]
                pos[0] += 1
                if a == ";":
                    break
                if a == "+" and cmd and cmd[-1] == "{}":
                    plus = True
                    cmd.pop()
                    break
                cmd.append(a)
            if not cmd:
                raise _FindError(f"missing argument to `{t}'")
            indir = t in ("-execdir", "-okdir")
            if plus:
                if any("{}" in a for a in cmd):
                    raise _FindError("Only one instance of {} is supported with -exec%s ... +"
                                     % ("dir" if indir else ""))
                batch = {"cmd": cmd, "paths": [], "indir": indir}
                st["batches"].append(batch)

                def execplus(e):
                    p = e.path
                    if indir:
                        p = "./" + e.name
                    batch["paths"].append((p, _dir_name(e.path) if indir else None))
                    if len(batch["paths"]) >= 5000:
                        flush(batch)
                    return True
                return execplus

            def execone(e):
                p = e.path
                if indir:
                    p = "./" + e.name
                argv2 = [a.replace("{}", p) for a in cmd]
                if t in ("-ok", "-okdir"):
                    ctx.stderr.write(_b(f"< {' '.join(argv2)} ... {e.path} > ? "))
                    if ctx.stdin.readline()[:1] not in (b"y", b"Y"):
                        return False
                if indir:
                    here = os.getcwd()
                    try:
                        os.chdir(_dir_name(e.path))
                        return run_cmd(argv2, e) == 0
                    finally:
                        os.chdir(here)
                return run_cmd(argv2, e) == 0
            return execone
        raise _FindError(f"unknown predicate {_q(t)}")

    def flush(batch):
        if not batch["paths"]:
            return
        groups = {}
        for p, d in batch["paths"]:
            groups.setdefault(d, []).append(p)
        batch["paths"] = []
        for d, paths in groups.items():
            if d is not None:
                here = os.getcwd()
                os.chdir(d)
            try:
                if run_cmd(batch["cmd"] + paths, None) != 0:
                    st["status"] = 1
            finally:
                if d is not None:
                    os.chdir(here)

    def parse_expr():
        left = parse_or()
        while peek() == ",":
            pos[0] += 1
            if peek() is None:
                raise _FindError("invalid expression; you have used a binary operator ',' "
                                 "with nothing after it.")
            right = parse_or()
            left = (lambda a, b: lambda e: (a(e), b(e))[1])(left, right)
        return left

    def parse_or():
        left = parse_and()
        while peek() in ("-o", "-or"):
            op = toks[pos[0]]
            pos[0] += 1
            if peek() is None:
                raise _FindError(f"expected an expression after {_q(op)}")
            if peek() in (")", "-o", "-or", "-a", "-and", ","):
                raise _FindError(f"invalid expression; you have used a binary operator "
                                 f"{_q(op)} with nothing after it.")
            right = parse_and()
            left = (lambda a, b: lambda e: a(e) or b(e))(left, right)
        return left

    def parse_and():
        left = parse_not()
        while True:
            t = peek()
            if t in ("-a", "-and"):
                pos[0] += 1
                if peek() in (None, ")", "-o", "-or", "-a", "-and", ","):
                    raise _FindError(f"invalid expression; you have used a binary operator "
                                     f"{_q(t)} with nothing after it.")
            elif t is None or t in (")", "-o", "-or", ","):
                return left
            right = parse_not()
            left = (lambda a, b: lambda e: a(e) and b(e))(left, right)

    def parse_not():
        t = peek()
        if t in ("!", "-not"):
            pos[0] += 1
            if peek() is None:
                raise _FindError(f"invalid expression; you have used a unary operator {_q(t)} "
                                 f"with nothing after it.")
            inner = parse_not()
            return lambda e: not inner(e)
        if t == "(":
            pos[0] += 1
            if peek() == ")":
                raise _FindError("invalid expression; empty parentheses are not allowed.")
            inner = parse_expr()
            if peek() != ")":
                raise _FindError("invalid expression; I was expecting to find a ')' somewhere "
                                 "but did not see one.")
            pos[0] += 1
            return inner
        if t in ("-o", "-or", "-a", "-and", ","):
            raise _FindError(f"invalid expression; you have used a binary operator {_q(t)} "
                             f"with nothing before it.")
        if t == ")":
            raise _FindError("invalid expression; you have too many ')'")
        pos[0] += 1
        return primary(t)

    try:
        expr = parse_expr() if toks else (lambda e: True)
        if pos[0] < len(toks):
            if toks[pos[0]] == ")":
                raise _FindError("invalid expression; you have too many ')'")
            raise _FindError(f"paths must precede expression: `{toks[pos[0]]}'")
    except _FindError as ex:
        _err(ctx, "find", str(ex))
        return 1
    if not st["has_action"]:
        inner = expr

        def expr(e):
            if inner(e):
                emit(_b(e.path) + b"\n")
            return True
    maxd, mind, depthfirst = st["maxdepth"], st["mindepth"], st["depth"]
    seen_dirs = []

    def visit(path, depth, lst, start):
        e = _FEnt(path, depth, lst, follow, start)
        isdir = _st.S_ISDIR(e.st.st_mode)
        if not depthfirst and depth >= mind:
            expr(e)
            if st["out"]:
                yield b"".join(st["out"])
                st["out"].clear()
        if isdir and not e.prune and (maxd is None or depth < maxd):
            key = (e.st.st_dev, e.st.st_ino)
            if follow and key in seen_dirs and e.st.st_ino:
                _err(ctx, "find", f"File system loop detected; {_q(path)} is part of the same "
                     f"file system loop as {_q(start)}.")
                st["status"] = 1
            else:
                seen_dirs.append(key)
                try:
                    with os.scandir(path) as it:
                        names = [d.name for d in it]
                except OSError as ex:
                    names = None
                    _err(ctx, "find", f"{_q(path)}: {_strerror(ex)}")
                    st["status"] = 1
                if names:
                    for n in names:
                        child = _concat(path, n)
                        try:
                            clst = os.lstat(child)
                        except OSError as ex:
                            _err(ctx, "find", f"{_q(child)}: {_strerror(ex)}")
                            st["status"] = 1
                            continue
                        yield from visit(child, depth + 1, clst, start)
                seen_dirs.pop()
        if depthfirst and depth >= mind:
            expr(e)
            if st["out"]:
                yield b"".join(st["out"])
                st["out"].clear()

    try:
        for s in starts:
            try:
                lst = os.stat(s) if (follow or cmdfollow) else os.lstat(s)
            except OSError as ex:
                if follow or cmdfollow:
                    try:
                        lst = os.lstat(s)
                    except OSError:
                        lst = None
                else:
                    lst = None
                if lst is None:
                    _err(ctx, "find", f"{_q(s)}: {_strerror(ex)}")
                    st["status"] = 1
                    continue
            yield from visit(s, 0, lst, s)
    except _Quit:
        pass
    finally:
        pass
    if st["out"]:
        yield b"".join(st["out"])
        st["out"].clear()
    for b in st["batches"]:
        flush(b)
    if st["out"]:
        yield b"".join(st["out"])
        st["out"].clear()
    return st["status"]


def _find_printf(fmt, e, tz):
    out = []
    i = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c == "\\" and i + 1 < n:
            k = fmt[i + 1]
            esc = {"n": "\n", "t": "\t", "0": "\0", "\\": "\\", "a": "\a", "b": "\b",
                   "f": "\f", "r": "\r", "v": "\v"}
            if k in esc:
                out.append(esc[k])
                i += 2
                continue
            if k == "c":
                break
            if k in "01234567":
                j = i + 1
                while j < n and j < i + 4 and fmt[j] in "01234567":
                    j += 1
                out.append(chr(int(fmt[i + 1:j], 8)))
                i = j
                continue
            out.append("\\" + k)
            i += 2
            continue
        if c != "%" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        j = i + 1
        flags = ""
        while j < n and fmt[j] in "-+ #0":
            flags += fmt[j]
            j += 1
        width = ""
        while j < n and fmt[j].isdigit():
            width += fmt[j]
            j += 1
        prec = None
        if j < n and fmt[j] == ".":
            j += 1
            p = ""
            while j < n and fmt[j].isdigit():
                p += fmt[j]
                j += 1
            prec = p
        if j >= n:
            break
        k = fmt[j]
        i = j + 1
        s2 = e.st
        v = None
        isnum = False
        if k == "%":
            out.append("%")
            continue
        if k == "p":
            v = e.path
        elif k == "f":
            v = e.name
        elif k == "h":
            p = e.path
            if e.depth == 0:
                v = _dir_name(p) if "/" in p.rstrip("/") else "."
            else:
                v = p[: p.rfind("/")] or "/"
        elif k == "P":
            v = e.path[len(e.start):].lstrip("/") if e.depth else ""
        elif k == "H":
            v = e.start
        elif k == "d":
            v, isnum = e.depth, True
        elif k == "s":
            v, isnum = s2.st_size, True
        elif k == "b":
            v, isnum = _blocks(s2), True
        elif k == "k":
            v, isnum = -(-_blocks(s2) // 2), True
        elif k == "m":
            v = "%o" % _st.S_IMODE(_perm(s2))
            if "#" in flags:
                v = "0" + v
        elif k == "M":
            v = _st.filemode(_perm(s2))
        elif k == "y":
            v = _type_char(e.lst.st_mode)
        elif k == "Y":
            if _st.S_ISLNK(e.lst.st_mode):
                try:
                    v = _type_char(os.stat(e.path).st_mode)
                except OSError:
                    v = "N"
            else:
                v = _type_char(s2.st_mode)
        elif k == "l":
            v = ""
            if _st.S_ISLNK(e.lst.st_mode):
                try:
                    v = os.readlink(e.path)
                except OSError:
                    v = ""
        elif k == "i":
            v, isnum = s2.st_ino, True
        elif k == "n":
            v, isnum = s2.st_nlink, True
        elif k == "u":
            v = _user(s2.st_uid) or str(s2.st_uid)
        elif k == "g":
            v = _group(s2.st_gid) or str(s2.st_gid)
        elif k == "U":
            v, isnum = s2.st_uid, True
        elif k == "G":
            v, isnum = s2.st_gid, True
        elif k == "D":
            v, isnum = s2.st_dev, True
        elif k == "F":
            v = "ext4" if not _WASI else "wasi"
        elif k == "S":
            bs = _blocks(s2) * 512
            v = "%g" % (bs / s2.st_size if s2.st_size else 1.0)
        elif k in "acAtTC":
            which = {"a": "a", "A": "a", "t": "m", "T": "m", "c": "c", "C": "c"}[k]
            w = _when(_ns(s2, which), tz)
            if k in "act":
                v = _strftime("%a %b %e %H:%M:%S.%N0 %Y", w)
                v = _strftime("%a %b %e %H:%M:%S", w) + ".%09d0 " % w.ns + str(w.d.year)
            else:
                if i >= n:
                    break
                sub = fmt[i]
                i += 1
                if sub == "@":
                    v = "%d.%09d0" % (w.sec, w.ns)
                elif sub == "+":
                    v = _strftime("%Y-%m-%d+%H:%M:%S", w) + ".%09d0" % w.ns
                elif sub == "S":
                    v = _strftime("%S", w) + ".%09d0" % w.ns
                elif sub == "T":
                    v = _strftime("%H:%M:%S", w) + ".%09d0" % w.ns
                else:
                    v = _strftime("%" + sub, w)
        else:
            out.append("%" + k)
            continue
        spec = "%" + flags + width + ("." + prec if prec is not None else "")
        if isnum:
            out.append((spec + "d") % v)
        else:
            out.append((spec + "s") % v)
    return "".join(out)


# ---------------------------------------------------------------------------------------
# stat du df


def _mount_point(path):
    if _WASI:
        return "/"
    try:
        p = _canon(path, "missing")
        dev = os.stat(p).st_dev
    except (OSError, _CanonError):
        return "?"
    while p != "/":
        parent = _dir_name(p)
        try:
            if os.stat(parent).st_dev != dev:
                return p
        except OSError:
            return p
        p = parent
    return "/"


def _fsid(v):
    return ((v & 0xFFFFFFFF) << 32) | (v >> 32)


def _fs_info(path):
    """(source, type, mount, bsize, frsize, blocks, bfree, bavail, files, ffree, namemax);
    None fields are unknown."""
    if hasattr(os, "statvfs") and not _WASI:
        v = os.statvfs(path)
        mount = _mount_point(path)
        source, fstype = "-", "-"
        try:
            with open("/proc/self/mounts") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[1].replace("\\040", " ") == mount:
                        source, fstype = parts[0], parts[2]
        except OSError:
            pass
        return (source, fstype, mount, v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree,
                v.f_bavail, v.f_files, v.f_ffree, v.f_namemax, "%x" % _fsid(getattr(v, "f_fsid", 0)))
    used = 0
    files = 0
    roots = ["/" + n for n in sorted(os.listdir("/")) if n != "usr"] if os.path.isdir("/") else []
    for root in roots:
        if not os.path.isdir(root) or os.path.islink(root):
            try:
                used += -(-os.lstat(root).st_size // 4096)
                files += 1
            except OSError:
                pass
            continue
        for dp, dn, fn in os.walk(root):
            files += len(dn) + len(fn)
            for n in fn:
                try:
                    used += -(-os.lstat(dp + "/" + n).st_size // 4096)
                except OSError:
                    pass
    limit = None
    try:
        limit = int(os.environ.get("VIVARIUM_DISK_LIMIT", "")) // 4096
    except ValueError:
        limit = None
    if limit is not None:
        return ("sandbox", "wasi", "/", 4096, 4096, limit, max(limit - used, 0),
                max(limit - used, 0), None, None, 255, "0")
    return ("sandbox", "wasi", "/", 4096, 4096, None, None, None, None, None, 255, "0", used)


def _stat_fmt(fmt, path, st, fs=None, tz=None, deref=False):
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
        while j < n and fmt[j] in "-+ #0'I":
            flags += fmt[j]
            j += 1
        width = ""
        while j < n and fmt[j].isdigit():
            width += fmt[j]
            j += 1
        prec = None
        if j < n and fmt[j] == ".":
            j += 1
            p = ""
            while j < n and fmt[j].isdigit():
                p += fmt[j]
                j += 1
            prec = p or "0"
        hl = ""
        if j < n and fmt[j] in "HL" and j + 1 < n and fmt[j + 1] in "dr":
            hl = fmt[j]
            j += 1
        if j >= n:
            out.append(fmt[i:])
            break
        k = fmt[j]
        i = j + 1
        v, kind = _stat_dir(k, hl, path, st, fs, tz, deref, flags)
        if v is None:
            out.append("%" + flags + width + k if k != "%" else "%")
            continue
        fl = flags.replace("'", "").replace("I", "")
        if kind == "d":
            if prec is not None:
                spec = "%" + fl + width + "." + prec + "d"
            else:
                spec = "%" + fl + width + "d"
            out.append(spec % v)
        elif kind == "o":
            txt = ("0%o" % v) if "#" in fl and v else "%o" % v
            fl2 = fl.replace("#", "")
            out.append(txt.rjust(int(width), "0") if "0" in fl2 and width else
                       txt.ljust(int(width)) if "-" in fl2 and width else
                       txt.rjust(int(width or 0)))
        elif kind == "x":
            out.append(("%" + fl + width + "x") % v)
        elif kind == "t":  # a time with nanoseconds: the precision picks digits
            sec, ns = v
            if prec is not None:
                p = int(prec)
                txt = str(sec) + ("." + ("%09d" % ns)[:p] if p else "")
            else:
                txt = str(sec)
            out.append(("%" + fl.replace("0", "") + width + "s") % txt if "0" not in fl
                       else txt.rjust(int(width or 0), "0"))
        else:
            spec = "%" + fl.replace("0", "") + width + ("." + prec if prec is not None else "")
            out.append((spec + "s") % v)
    return "".join(out)


def _stat_dir(k, hl, path, st, fs, tz, deref, flags):
    if fs is not None:
        src, ftype, mount, bsize, frsize, blocks, bfree, bavail, files, ffree, namemax = fs[:11]
        m = {"n": (path, "s"), "i": (fs[11] if len(fs) > 11 else "0", "s"), "l": (namemax, "d"), "t": (0xEF53, "x"),
             "T": ("ext2/ext3" if ftype in ("ext2", "ext3", "ext4") else ftype, "s"),
             "b": (blocks if blocks is not None else 0, "d"),
             "f": (bfree if bfree is not None else 0, "d"),
             "a": (bavail if bavail is not None else 0, "d"), "s": (bsize, "d"),
             "S": (frsize, "d"), "c": (files or 0, "d"), "d": (ffree or 0, "d"),
             "%": ("%", "s")}
        return m.get(k, (None, None))
    mode = _perm(st)
    if k == "%":
        return "%", "s"
    if k == "n":
        return path, "s"
    if k in "N\x01":
        qf = _q if k == "N" else _shq
        q = qf(path)
        if _st.S_ISLNK(st.st_mode) and not deref:
            try:
                q += " -> " + qf(os.readlink(path))
            except OSError:
                pass
        return q, "s"
    if k == "s":
        return st.st_size, "d"
    if k == "b":
        return _blocks(st), "d"
    if k == "B":
        return 512, "d"
    if k == "o":
        return _blksize(st), "d"
    if k == "F":
        return _ftype(st.st_mode, st.st_size), "s"
    if k == "a":
        return _st.S_IMODE(mode), "o"
    if k == "A":
        return _st.filemode(mode), "s"
    if k == "f":
        return mode, "x"
    if k == "h":
        return st.st_nlink, "d"
    if k == "i":
        return st.st_ino, "d"
    if k == "u":
        return st.st_uid, "d"
    if k == "U":
        return _user(st.st_uid) or "UNKNOWN", "s"
    if k == "g":
        return st.st_gid, "d"
    if k == "G":
        return _group(st.st_gid) or "UNKNOWN", "s"
    if k == "d":
        if hl == "H":
            return _major(st.st_dev), "d"
        if hl == "L":
            return _minor(st.st_dev), "d"
        return st.st_dev, "d"
    if k == "D":
        return st.st_dev, "x"
    if k == "r":
        rdev = getattr(st, "st_rdev", 0)
        if hl == "H":
            return _major(rdev), "d"
        if hl == "L":
            return _minor(rdev), "d"
        return rdev, "d"
    if k == "R":
        return getattr(st, "st_rdev", 0), "x"
    if k == "t":
        return _major(getattr(st, "st_rdev", 0)), "x"
    if k == "T":
        return _minor(getattr(st, "st_rdev", 0)), "x"
    if k == "m":
        return _mount_point(path), "s"
    if k == "C":
        if not _WASI:
            _stat_dir.ctx_fail = path
        return "?", "s"
    if k in "xyzw":
        if k == "w":
            bt = getattr(st, "st_birthtime_ns", None)
            if bt is None:
                return "-", "s"
            return _strftime("%Y-%m-%d %H:%M:%S.%N %z", _when(bt, tz)), "s"
        which = {"x": "a", "y": "m", "z": "c"}[k]
        return _strftime("%Y-%m-%d %H:%M:%S.%N %z", _when(_ns(st, which), tz)), "s"
    if k in "XYZW":
        if k == "W":
            bt = getattr(st, "st_birthtime_ns", None)
            if bt is None:
                return (0, 0), "t"
            return divmod(bt, 10**9), "t"
        which = {"X": "a", "Y": "m", "Z": "c"}[k]
        return divmod(_ns(st, which), 10**9), "t"
    return None, None


def _unescape_printf(s):
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            k = s[i + 1]
            esc = {"n": "\n", "t": "\t", "\\": "\\", "a": "\a", "b": "\b", "f": "\f",
                   "r": "\r", "v": "\v", '"': '"', "e": "\x1b"}
            if k in esc:
                out.append(esc[k])
                i += 2
                continue
            if k in "01234567":
                j = i + 1
                while j < len(s) and j < i + 4 and s[j] in "01234567":
                    j += 1
                out.append(chr(int(s[i + 1:j], 8)))
                i = j
                continue
            if k == "x":
                j = i + 2
                while j < len(s) and j < i + 4 and s[j] in "0123456789abcdefABCDEF":
                    j += 1
                if j > i + 2:
                    out.append(chr(int(s[i + 2:j], 16)))
                    i = j
                    continue
            out.append(c)
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


_STAT_DEFAULT = (
    "  File: %\x01\n  Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\n"
    "Device: %Hd,%Ld\tInode: %-11i Links: %h\n"
    "Access: (%04a/%10.10A)  Uid: (%5u/%8U)   Gid: (%5g/%8G)\n"
    "Access: %x\nModify: %y\nChange: %z\n Birth: %w\n"
)
_STAT_DEV = (
    "  File: %\x01\n  Size: %-10s\tBlocks: %-10b IO Block: %-6o %F\n"
    "Device: %Hd,%Ld\tInode: %-11i Links: %-5h Device type: %Hr,%Lr\n"
    "Access: (%04a/%10.10A)  Uid: (%5u/%8U)   Gid: (%5g/%8G)\n"
    "Access: %x\nModify: %y\nChange: %z\n Birth: %w\n"
)
_STAT_FS = (
    "  File: \"%n\"\n    ID: %-8i Namelen: %-7l Type: %T\n"
    "Block size: %-10s Fundamental block size: %S\n"
    "Blocks: Total: %-10b Free: %-10f Available: %a\n"
    "Inodes: Total: %-10c Free: %d\n"
)


def stat(ctx, argv):
    longs = {"dereference": ("L", 0), "file-system": ("f", 0), "format": ("c", 1),
             "printf": ("printf", 1), "terse": ("t", 0), "cached": ("cached", 1),
             "help": ("help", 0), "version": ("version", 0)}
    try:
        opts, args = _getopt(argv, "Lfc:t", longs)
    except _Usage as e:
        return _usage(ctx, "stat", e)
    deref, fsmode, fmt, terse = False, False, None, False
    for k, v in opts:
        if k == "help":
            yield _help("stat", "[OPTION]... FILE...")
            return 0
        if k == "version":
            yield b"stat (GNU coreutils) 9.1\n"
            return 0
        if k == "L":
            deref = True
        elif k == "f":
            fsmode = True
        elif k == "c":
            fmt = v + "\n"
        elif k == "printf":
            fmt = _unescape_printf(v)
        elif k == "t":
            terse = True
    if not args:
        return _usage(ctx, "stat", _Usage("missing operand"))
    tz = _tz_for(ctx)
    status = 0
    for a in args:
        try:
            if fsmode:
                fs = _fs_info(a)
                os.stat(a)
                f = fmt or ("%n %i %l %t %s %S %b %f %a %c %d\n" if terse else _STAT_FS)
                yield _b(_stat_fmt(f, a, None, fs, tz))
                continue
            st = os.stat(a) if deref else os.lstat(a)
        except OSError as e:
            if fsmode:
                _err(ctx, "stat", f"cannot read file system information for {_q(a)}: "
                     f"{_strerror(e)}")
            else:
                _err(ctx, "stat", f"cannot statx {_q(a)}: {_strerror(e)}")
            status = 1
            continue
        if fmt is not None:
            f = fmt
        elif terse:
            f = "%n %s %b %f %u %g %D %i %h %t %T %X %Y %Z %W %o\n"
        elif _st.S_ISCHR(st.st_mode) or _st.S_ISBLK(st.st_mode):
            f = _STAT_DEV
        else:
            f = _STAT_DEFAULT
        _stat_dir.ctx_fail = None
        yield _b(_stat_fmt(f, a, st, None, tz, deref))
        if _stat_dir.ctx_fail is not None:
            # as GNU stat on a Linux host without SELinux
            _err(ctx, "stat", f"failed to get security context of {_q(a)}: No data available")
            status = 1
    return status


def du(ctx, argv):
    longs = {"all": ("a", 0), "summarize": ("s", 0), "human-readable": ("h", 0),
             "si": ("si", 0), "total": ("c", 0), "max-depth": ("d", 1), "bytes": ("b", 0),
             "apparent-size": ("A", 0), "block-size": ("B", 1), "dereference": ("L", 0),
             "count-links": ("l", 0), "separate-dirs": ("S", 0), "null": ("0", 0),
             "one-file-system": ("x", 0), "exclude": ("exclude", 1), "threshold": ("t", 1),
             "inodes": ("inodes", 0), "time": ("time", 2), "help": ("help", 0),
             "dereference-args": ("D", 0), "no-dereference": ("P", 0)}
    try:
        opts, args = _getopt(argv, "ab0chsd:B:kmLlSxt:DHP", longs)
    except _Usage as e:
        return _usage(ctx, "du", e)
    all_, summ, human, si, total, maxd = False, False, False, False, False, None
    apparent, bsize, deref, count_links, sep, eol = False, 1024, False, False, False, b"\n"
    excludes, threshold, deref_args = [], None, False
    for k, v in opts:
        if k == "help":
            yield _help("du", "[OPTION]... [FILE]...")
            return 0
        if k == "a":
            all_ = True
        elif k == "s":
            summ = True
        elif k == "h":
            human, si = True, False
        elif k == "si":
            human, si = True, True
        elif k == "c":
            total = True
        elif k == "d":
            if not v.isdigit():
                _err(ctx, "du", f"invalid maximum depth {_q(v)}")
                return 1
            maxd = int(v)
        elif k == "b":
            apparent, bsize, human = True, 1, False
        elif k == "A":
            apparent = True
        elif k == "B":
            try:
                bsize = _parse_size(v)
            except ValueError:
                _err(ctx, "du", f"invalid -B argument {_q(v)}")
                return 1
            human = False
        elif k == "k":
            bsize, human = 1024, False
        elif k == "m":
            bsize, human = 1 << 20, False
        elif k == "L":
            deref = True
        elif k in ("D", "H"):
            deref_args = True
        elif k == "P":
            deref = False
        elif k == "l":
            count_links = True
        elif k == "S":
            sep = True
        elif k == "0":
            eol = b"\0"
        elif k == "exclude":
            excludes.append(_fn_regex(v))
        elif k == "t":
            try:
                threshold = int(v[1:] if v.startswith("-") else v) * (-1 if v.startswith(
                    "-") else 1)
            except ValueError:
                _err(ctx, "du", f"invalid --threshold argument {_q(v)}")
                return 1
    if summ and all_:
        _err(ctx, "du", "cannot both summarize and show all entries")
        _err(ctx, "du", "Try 'du --help' for more information.")
        return 1
    if summ:
        if maxd is not None and maxd != 0:
            _err(ctx, "du", f"warning: summarizing conflicts with --max-depth={maxd}")
            _err(ctx, "du", "Try 'du --help' for more information.")
            return 1
        maxd = 0
    seen = set()
    status = 0
    hash_all = len(args) > 1 or deref  # as GNU du: every inode once over several operands

    def size_of(st):
        if apparent:
            return st.st_size
        return _blocks(st) * 512

    def fmt(nbytes):
        if human:
            return _human(nbytes, si)
        return str(-(-nbytes // bsize))

    def show(nbytes, path):
        if threshold is not None:
            if (threshold >= 0 and nbytes < threshold) or (threshold < 0 and nbytes > -threshold):
                return b""
        return _b(fmt(nbytes) + "\t" + path) + eol

    def walk(path, depth, top):
        """Returns (bytes for the parent's total, is a directory)."""
        nonlocal status
        try:
            lst = os.stat(path) if (deref or (top and deref_args)) else os.lstat(path)
        except OSError as e:
            _err(ctx, "du", f"cannot access {_q(path)}: {_strerror(e)}")
            status = 1
            return 0, False
        key = (lst.st_dev, lst.st_ino)
        if not count_links and (hash_all or lst.st_nlink > 1 or _st.S_ISDIR(
                lst.st_mode)) and lst.st_ino:
            if key in seen:
                return 0, False
            seen.add(key)
        own = size_of(lst)
        if not _st.S_ISDIR(lst.st_mode):
            if top or (all_ and (maxd is None or depth <= maxd)):
                out.append(show(own, path))
            return own, False
        try:
            with os.scandir(path) as it:
                names = [d.name for d in it]
        except OSError as e:
            _err(ctx, "du", f"cannot read directory {_q(path)}: {_strerror(e)}")
            status = 1
            names = []
        sub = 0
        for nm in names:
            if excludes and any(rx.match(nm) for rx in excludes):
                continue
            sz, isdir = walk(_concat(path, nm), depth + 1, False)
            if not (sep and isdir):
                sub += sz
        if maxd is None or depth <= maxd:
            out.append(show(own + sub, path))
        return own + sub, True

    out = []

    grand = 0
    for a in args or ["."]:
        grand += walk(a, 0, True)[0]
        if out:
            yield b"".join(out)
            out.clear()
    if total:
        yield show(grand, "total")
    return status


def df(ctx, argv):
    longs = {"human-readable": ("h", 0), "si": ("H", 0), "print-type": ("T", 0),
             "all": ("a", 0), "local": ("l", 0), "inodes": ("i", 0), "portability": ("P", 0),
             "block-size": ("B", 1), "total": ("total", 0), "output": ("output", 2),
             "type": ("t", 1), "exclude-type": ("x", 1), "sync": ("sync", 0),
             "no-sync": ("nosync", 0), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "ahHiklmPTt:x:B:v", longs)
    except _Usage as e:
        return _usage(ctx, "df", e)
    human, si, showtype, inodes, bsize, posix, total = False, False, False, False, 1024, False, False
    for k, v in opts:
        if k == "help":
            yield _help("df", "[OPTION]... [FILE]...")
            return 0
        if k == "h":
            human, si = True, False
        elif k == "H":
            human, si = True, True
        elif k == "T":
            showtype = True
        elif k == "i":
            inodes = True
        elif k == "k":
            bsize = 1024
        elif k == "m":
            bsize = 1 << 20
        elif k == "B":
            try:
                bsize = _parse_size(v)
            except ValueError:
                _err(ctx, "df", f"invalid -B argument {_q(v)}")
                return 1
        elif k == "P":
            posix = True
        elif k == "total":
            total = True
    rows = []
    status = 0
    seen = set()
    for a in args or ["/"] if _WASI else (args or ["."]):
        try:
            os.stat(a)
            fs = _fs_info(a)
        except OSError as e:
            _err(ctx, "df", f"{a}: {_strerror(e)}")
            status = 1
            continue
        if not args and fs[2] in seen:
            continue
        seen.add(fs[2])
        rows.append(fs)
    if not rows:
        return status or 1

    def num(blocks, frsize):
        if blocks is None:
            return "-"
        nbytes = blocks * frsize
        if human:
            return _human(nbytes, si)
        return str(-(-nbytes // bsize))

    if human:
        head = ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on"]
    elif inodes:
        head = ["Filesystem", "Inodes", "IUsed", "IFree", "IUse%", "Mounted on"]
    else:
        if bsize % (1 << 20) == 0:
            bh = "%dM-blocks" % (bsize >> 20)
        elif bsize % 1024 == 0:
            bh = "%dK-blocks" % (bsize >> 10) if not (posix and bsize == 1024) else "1024-blocks"
        else:
            bh = "%dB-blocks" % bsize if bsize != 1 else "1B-blocks"
        head = ["Filesystem", bh, "Used", "Available", "Capacity" if posix else "Use%",
                "Mounted on"]
    if showtype:
        head.insert(1, "Type")
    table = [head]
    tot = [0, 0, 0]
    for r in rows:
        src, ftype, mount, bs, frsize, blocks, bfree, bavail, files, ffree, nm = r[:11]
        if inodes:
            used = files - ffree if files is not None and ffree is not None else None
            cells = [str(files) if files is not None else "-",
                     str(used) if used is not None else "-",
                     str(ffree) if ffree is not None else "-"]
            u, av = used, ffree
        else:
            if blocks is None:
                used = None
                if len(r) > 12:
                    used = r[12]
            else:
                used = blocks - bfree
            cells = [num(blocks, frsize), num(used, frsize), num(bavail, frsize)]
            u, av = used, bavail
            if blocks is not None:
                tot[0] += blocks * frsize
                tot[1] += used * frsize
                tot[2] += bavail * frsize
        if u is None or av is None or (u + av) == 0:
            pct = "-"
        else:
            pct = "%d%%" % -(-u * 100 // (u + av))
        row = [src] + cells + [pct, mount]
        if showtype:
            row.insert(1, ftype)
        table.append(row)
    if total and not inodes:
        u, av = tot[1], tot[2]
        row = ["total", num(tot[0], 1), num(u, 1), num(av, 1),
               "%d%%" % -(-u * 100 // (u + av)) if u + av else "-", "-"]
        if showtype:
            row.insert(1, "-")
        table.append(row)
    mins = [14] + ([4] if showtype else []) + [5, 5, 5, 4, 0]
    widths = [max([mins[c]] + [len(r[c]) for r in table]) for c in range(len(head))]
    lines = []
    for r in table:
        cells = []
        for c, v in enumerate(r):
            if c == len(r) - 1:
                cells.append(v)
            elif c == 0 or (showtype and c == 1):
                cells.append(v.ljust(widths[c]))
            else:
                cells.append(v.rjust(widths[c]))
        lines.append(" ".join(cells))
    yield _b("\n".join(lines) + "\n")
    return status


# ---------------------------------------------------------------------------------------
# file: a small magic table after file(1) 5.44

_GZ_OS = {0: "FAT filesystem (MS-DOS, OS/2, NT)", 1: "Amiga", 2: "VMS", 3: "Unix",
          5: "Atari", 6: "HPFS filesystem (OS/2, NT)", 7: "Macintosh", 10: "Tops/20",
          11: "NTFS filesystem (NT)", 13: "Acorn RISCOS"}
_ELF_MACH = {3: "Intel 80386", 8: "MIPS", 20: "PowerPC", 21: "64-bit PowerPC", 40: "ARM",
             62: "x86-64", 183: "ARM aarch64", 243: "UCB RISC-V", 0xF7: "eBPF"}
_TEXT_BYTES = frozenset(list(range(7, 14)) + [27] + list(range(32, 127)))


def _text_encoding(data):
    """('ASCII'|'UTF-8'|'UTF-8 BOM'|'UTF-16LE'|'UTF-16BE'|'ISO-8859'|'Non-ISO'|None)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            data[2:].decode("utf-16-le" if data[:2] == b"\xff\xfe" else "utf-16-be")
            return "UTF-16LE" if data[:2] == b"\xff\xfe" else "UTF-16BE"
        except UnicodeDecodeError:
            pass
    if all(b in _TEXT_BYTES for b in data):
        return "ASCII"
    if data[:3] == b"\xef\xbb\xbf":
        enc = "UTF-8 BOM"
        body = data[3:]
    else:
        enc = "UTF-8"
        body = data
    try:
        txt = body.decode("utf-8")
        if all(ord(c) >= 128 or ord(c) in _TEXT_BYTES for c in txt):
            return enc
    except UnicodeDecodeError as e:
        # a sequence cut at the end of the sample is still UTF-8
        if e.start >= len(body) - 3 and len(body) >= 4096:
            try:
                body[: e.start].decode("utf-8")
                return enc
            except UnicodeDecodeError:
                pass
    if all(b in _TEXT_BYTES or b >= 0xA0 for b in data):
        return "ISO-8859"
    if all(b in _TEXT_BYTES or b >= 0x80 for b in data):
        return "Non-ISO extended-ASCII"
    return None


def _magic(data, size, path=None):
    """(description, mime) for file contents, or None to fall back to text/data."""
    import struct

    d = data
    if d.startswith(b"\x89PNG\r\n\x1a\n") and len(d) >= 29:
        w, h, depth, color, _c, _f, inter = struct.unpack(">IIBBBBB", d[16:29])
        kinds = {0: "grayscale", 2: "/color RGB", 3: "colormap", 4: "gray+alpha",
                 6: "/color RGBA"}
        k = kinds.get(color, "")
        k = ("%d-bit%s" % (depth, k)) if k.startswith("/") else "%d-bit %s" % (depth, k)
        return ("PNG image data, %d x %d, %s, %s" % (
            w, h, k, "interlaced" if inter else "non-interlaced"), "image/png")
    if d[:6] in (b"GIF87a", b"GIF89a") and len(d) >= 10:
        w, h = struct.unpack("<HH", d[6:10])
        return ("GIF image data, version %s, %d x %d" % (d[3:6].decode(), w, h), "image/gif")
    if d[:3] == b"\xff\xd8\xff":
        parts = ["JPEG image data"]
        if d[6:11] == b"JFIF\x00" and len(d) >= 18:
            seglen = struct.unpack(">H", d[4:6])[0]
            units = d[13]
            dx, dy = struct.unpack(">HH", d[14:18])
            parts.append("JFIF standard %d.%02d" % (d[11], d[12]))
            parts.append({0: "aspect ratio", 1: "resolution (DPI)",
                          2: "resolution (DPCM)"}.get(units, "aspect ratio"))
            parts.append("density %dx%d" % (dx, dy))
            parts.append("segment length %d" % seglen)
        elif d[6:10] == b"Exif":
            parts.append("Exif standard: [TIFF image data]")
        i = 2
        while i + 9 < len(d):
            if d[i] != 0xFF:
                break
            marker = d[i + 1]
            ln = struct.unpack(">H", d[i + 2:i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                prec = d[i + 4]
                h, w = struct.unpack(">HH", d[i + 5:i + 9])
                comps = d[i + 9] if i + 9 < len(d) else 0
                parts.append({0xC0: "baseline", 0xC1: "extended sequential",
                              0xC2: "progressive"}[marker])
                parts.append("precision %d" % prec)
                parts.append("%dx%d" % (w, h))
                parts.append("components %d" % comps)
                break
            i += 2 + ln
        return (", ".join(parts), "image/jpeg")
    if d[:2] == b"\x1f\x8b":
        parts = ["gzip compressed data"]
        flags = d[3] if len(d) > 3 else 0
        mtime = struct.unpack("<I", d[4:8])[0] if len(d) >= 8 else 0
        xfl = d[8] if len(d) > 8 else 0
        osb = d[9] if len(d) > 9 else 255
        if flags & 8:
            j = 10
            if flags & 4 and len(d) >= 12:
                j += 2 + struct.unpack("<H", d[10:12])[0]
            end = d.find(b"\0", j)
            if end != -1:
                parts.append('was "%s"' % _s(d[j:end]))
        if mtime:
            parts.append("last modified: " + _strftime("%a %b %e %H:%M:%S %Y",
                                                       _when(mtime * 10**9, None)))
        if xfl == 2:
            parts.append("max compression")
        elif xfl == 4:
            parts.append("max speed")
        if osb in _GZ_OS:
            parts.append("from " + _GZ_OS[osb])
        if path is not None and size >= 18:
            try:
                with open(path, "rb") as f:
                    f.seek(size - 4)
                    parts.append("original size modulo 2^32 %d" % struct.unpack(
                        "<I", f.read(4))[0])
            except OSError:
                pass
        return (", ".join(parts), "application/gzip")
    if d[:4] == b"PK\x05\x06":
        return ("Zip archive data (empty)", "application/zip")
    if d[:4] == b"PK\x03\x04" and len(d) >= 30:
        ver = struct.unpack("<H", d[4:6])[0]
        method = struct.unpack("<H", d[8:10])[0]
        nlen = struct.unpack("<H", d[26:28])[0]
        name = d[30:30 + nlen]
        if name == b"mimetype":
            mt = d[30 + nlen + struct.unpack("<H", d[28:30])[0]:][:60]
            if mt.startswith(b"application/vnd.oasis.opendocument.text"):
                return ("OpenDocument Text", "application/vnd.oasis.opendocument.text")
        if name == b"[Content_Types].xml" or name.startswith((b"word/", b"xl/", b"ppt/")):
            return ("Microsoft OOXML", "application/octet-stream")
        if name == b"META-INF/MANIFEST.MF" or name == b"META-INF/":
            return ("Java archive data (JAR)", "application/java-archive")
        mname = {0: "store", 8: "deflate", 12: "bzip2", 14: "lzma", 93: "zstd",
                 95: "xz"}.get(method, "%d" % method)
        return ("Zip archive data, at least v%d.%d to extract, compression method=%s" % (
            ver // 10, ver % 10, mname), "application/zip")
    if len(d) >= 263 and d[257:265] == b"ustar  \x00":
        return ("POSIX tar archive (GNU)", "application/x-tar")
    if len(d) >= 263 and d[257:263] == b"ustar\x00":
        return ("POSIX tar archive", "application/x-tar")
    if d.startswith(b"%PDF-"):
        ver = d[5:8].decode("ascii", "replace")
        return ("PDF document, version %s" % ver, "application/pdf")
    if d[:3] == b"BZh" and len(d) > 3 and 0x31 <= d[3] <= 0x39:
        return ("bzip2 compressed data, block size = %d00k" % (d[3] - 0x30),
                "application/x-bzip2")
    if d[:6] == b"\xfd7zXZ\x00":
        ck = {0: "none", 1: "CRC32", 4: "CRC64", 10: "SHA-256"}.get(d[7] & 15 if len(
            d) > 7 else 0, "unknown")
        return ("XZ compressed data, checksum %s" % ck, "application/x-xz")
    if d[:4] == b"\x28\xb5\x2f\xfd":
        return ("Zstandard compressed data (v0.8+), Dictionary ID: None", "application/zstd")
    if d[:6] == b"7z\xbc\xaf\x27\x1c":
        return ("7-zip archive data, version %d.%d" % (d[6], d[7]), "application/x-7z-compressed")
    if d[:4] == b"\x00asm" and len(d) >= 8:
        v = struct.unpack("<I", d[4:8])[0]
        return ("WebAssembly (wasm) binary module version 0x%x%s" % (
            v, " (MVP)" if v == 1 else ""), "application/wasm")
    if d[:16] == b"SQLite format 3\x00" and len(d) >= 100:
        ver, = struct.unpack(">I", d[96:100])
        counter, pages = struct.unpack(">II", d[24:32])
        cookie, schema = struct.unpack(">II", d[40:48])
        enc, = struct.unpack(">I", d[56:60])
        valid, = struct.unpack(">I", d[92:96])
        encs = {1: "UTF-8", 2: "UTF-16 little endian", 3: "UTF-16 big endian"}
        return ("SQLite 3.x database, last written using SQLite version %d, file counter %d, "
                "database pages %d, cookie 0x%x, schema %d, %s, version-valid-for %d" % (
                    ver, counter, pages, cookie, schema, encs.get(enc, "unknown"), valid),
                "application/vnd.sqlite3")
    if d[:6] == b"\x93NUMPY" and len(d) >= 10:
        return ("NumPy data file, version %d.%d" % (d[6], d[7]), "application/octet-stream")
    if d[:4] == b"RIFF" and d[8:12] == b"WEBP":
        return ("RIFF (little-endian) data, Web/P image", "image/webp")
    if d[:4] == b"RIFF" and d[8:12] == b"WAVE":
        return ("RIFF (little-endian) data, WAVE audio", "audio/x-wav")
    if d[:2] == b"BM" and len(d) >= 26:
        return ("PC bitmap", "image/bmp")
    if d[:4] == b"\x7fELF" and len(d) >= 20:
        cls = {1: "32-bit", 2: "64-bit"}.get(d[4], "invalid class")
        le = d[5] == 1
        e = "<" if le else ">"
        etype, mach = struct.unpack(e + "HH", d[16:20])
        kind = {1: "relocatable", 2: "executable", 3: "shared object", 4: "core file"}.get(
            etype, "unknown")
        has_interp = b"/ld-linux" in d[:4096] or b"/ld-musl" in d[:4096]
        if etype == 3 and has_interp:
            kind = "pie executable"
        osabi = {0: "SYSV", 3: "GNU/Linux"}.get(d[7], "SYSV")
        parts = ["ELF %s %s %s" % (cls, "LSB" if le else "MSB", kind),
                 _ELF_MACH.get(mach, "*unknown arch 0x%x*" % mach),
                 "version %d (%s)" % (d[6], osabi)]
        if etype in (2, 3):
            parts.append("dynamically linked" if has_interp or etype == 3 else "statically linked")
        mime = {1: "application/x-object", 2: "application/x-executable",
                3: "application/x-pie-executable" if has_interp else "application/x-sharedlib",
                4: "application/x-coredump"}.get(etype, "application/octet-stream")
        return (", ".join(parts), mime)
    return None


def _looks_python(b):
    """file 5.44's Magdir/python tests for scripts without #!."""
    import re

    head = b[:8192]
    if re.search(rb"^from[ \t\f\r\n]+[\w.]+[ \t\f\r\n]+import.*$", head, re.M):
        return True
    if re.search(rb"^import [_A-Za-z]+ as [A-Za-z][ \t\f\r\v]*$", head, re.M):
        return True
    i = head.find(b"def __init__")
    if i != -1 and b"self" in head[i + 12:i + 12 + 64]:
        return True
    i = head.find(b"if __name__")
    if i != -1 and (b"'__main__'" in head[i + 11:i + 11 + 64 + 10] or
                    b'"__main__"' in head[i + 11:i + 11 + 64 + 10]):
        return True
    i = head.find(b"try:")
    if i != -1:
        rest = head[i + 4:]
        if re.search(rb"^[ \t]*except.*:[ \t]*$", rest, re.M) or b"finally:" in rest:
            return True
    if re.search(rb"^[ \t]*def [_a-zA-Z]\w*\(([_a-zA-Z]\w*(, ?[_a-zA-Z]\w*)*)?\):", head, re.M):
        return True
    return False


def _looks_csv(b):
    """file 5.44's is_csv: the first lines (up to 10) have the same, non-zero number of
    commas outside quotes."""
    nf = tf = nl = 0
    i, n = 0, min(len(b), 1 << 16)
    while i < n:
        c = b[i]
        i += 1
        if c == 0x22:
            while i < n:
                if b[i] == 0x22:
                    if i + 1 < n and b[i + 1] == 0x22:
                        i += 2
                        continue
                    i += 1
                    break
                i += 1
        elif c == 0x2C:
            nf += 1
        elif c == 0x0A:
            nl += 1
            if nl == 10:
                return tf != 0 and tf == nf
            if tf == 0:
                if nf == 0:
                    return False
                tf = nf
            elif tf != nf:
                return False
            nf = 0
    return bool(tf) and nl > 2


def _describe_text(data, enc):
    """file's text analysis: (description, mime)."""
    import re

    encname = {"ASCII": "ASCII", "UTF-8": "Unicode text, UTF-8",
               "UTF-8 BOM": "Unicode text, UTF-8 (with BOM)",
               "UTF-16LE": "Unicode text, UTF-16, little-endian",
               "UTF-16BE": "Unicode text, UTF-16, big-endian", "ISO-8859": "ISO-8859",
               "Non-ISO extended-ASCII": "Non-ISO extended-ASCII"}[enc]
    body = data
    if enc.startswith("UTF-16"):
        body = data[2:].decode("utf-16-le" if enc == "UTF-16LE" else "utf-16-be").encode(
            "utf-8", "replace")
    # line terminators and lengths
    crlf = body.count(b"\r\n")
    cr = body.count(b"\r") - crlf
    lf = body.count(b"\n") - crlf
    terms = []
    if crlf:
        terms.append("CRLF")
    if cr:
        terms.append("CR")
    if lf:
        terms.append("LF")
    notes = []
    longest = max((len(x) for x in re.split(rb"\r\n|\r|\n", body)), default=0)
    if longest > 300:
        notes.append("with very long lines (%d)" % longest)
    if not terms:
        notes.append("with no line terminators")
    elif terms != ["LF"]:
        notes.append("with %s line terminators" % ", ".join(terms))
    if b"\x1b" in body:
        notes.append("with escape sequences")
    if re.search(rb"[^\b]\x08[^\b]", body):
        notes.append("with overstriking")
    tail = "".join(", " + n for n in notes)
    head = body.lstrip(b"\xef\xbb\xbf")
    if head.startswith(b"#!"):
        line = head.split(b"\n", 1)[0][2:].strip()
        words = line.split()
        interp = words[0].rsplit(b"/", 1)[-1] if words else b""
        if interp == b"env" and len(words) > 1:
            rest = [w for w in words[1:] if not w.startswith(b"-")]
            interp = rest[0] if rest else b""
        interp = _s(interp)
        mime = "text/x-shellscript"
        if interp == "sh":
            kind = "POSIX shell script"
        elif interp == "bash":
            kind = "Bourne-Again shell script"
        elif interp in ("zsh",):
            kind = "Paul Falstad's zsh script"
        elif interp.startswith("python"):
            kind, mime = "Python script", "text/x-script.python"
        elif interp.startswith("perl"):
            kind, mime = "Perl script", "text/x-perl"
        elif interp.startswith("ruby"):
            kind, mime = "Ruby script", "text/x-ruby"
        elif interp == "node":
            return ("Node.js script executable, %s text%s" % (encname, tail),
                    "application/javascript")
        elif interp in ("awk", "gawk"):
            kind, mime = "awk or perl script", "text/x-awk"
        else:
            kind = "a %s script" % _s(line.split()[0]) if line else "a script"
            mime = "text/plain"
        return ("%s, %s text executable%s" % (kind, encname, tail), mime)
    if _looks_python(head):
        return ("Python script, %s text executable%s" % (encname, tail), "text/x-script.python")
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        import json

        try:
            json.loads(body.decode("utf-8"))
            return ("JSON text data", "application/json")
        except (ValueError, UnicodeDecodeError):
            pass
    if _looks_csv(body):
        return ("CSV text", "text/csv")
    low = stripped[:1024].lower()
    if low.startswith(b"<?xml"):
        if b"<svg" in low:
            return ("SVG Scalable Vector Graphics image", "image/svg+xml")
        m = re.match(rb'<\?xml\s+version\s*=\s*["\']([0-9.]+)', low)
        return ("XML %s document, %s text%s" % (_s(m.group(1)) if m else "1.0", encname, tail),
                "text/xml")
    if low.startswith(b"<svg"):
        return ("SVG Scalable Vector Graphics image", "image/svg+xml")
    if low.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<title", b"<script",
                       b"<table", b"<h1", b"<!--")) and (b"<html" in low or not low.startswith(
                           b"<!--")):
        return ("HTML document, %s text%s" % (encname, tail), "text/html")
    if re.search(rb"^#include\s*[<\"]", head[:4096], re.M):
        return ("C source, %s text%s" % (encname, tail), "text/x-c")
    return ("%s text%s" % (encname, tail), "text/plain")


def file(ctx, argv):
    longs = {"brief": ("b", 0), "mime": ("i", 0), "mime-type": ("mimetype", 0),
             "mime-encoding": ("mimeenc", 0), "dereference": ("L", 0),
             "no-dereference": ("h", 0), "no-pad": ("N", 0), "separator": ("F", 1),
             "files-from": ("f", 1), "print0": ("0", 0), "help": ("help", 0),
             "version": ("v", 0), "keep-going": ("k", 0), "raw": ("r", 0),
             "uncompress": ("z", 0), "special-files": ("s", 0)}
    try:
        opts, args = _getopt(argv, "bihLNF:f:0vkrzsE", longs)
    except _Usage as e:
        ctx.stderr.write(_b(f"file: {e.msg}\nUsage: file [-bcdEhikLlNnprsSvzZ0] [--apple] "
                            "[--extension] [--mime-encoding]\n"))
        return 1
    brief, mime, deref, pad, sep, eol = False, None, False, True, ":", b"\n"
    for k, v in opts:
        if k == "help":
            yield _help("file", "[OPTION...] [FILE...]")
            return 0
        if k == "v":
            yield b"file-5.44\nmagic file from /etc/magic:/usr/share/misc/magic\n"
            return 0
        if k == "b":
            brief = True
        elif k == "i":
            mime = "full"
        elif k == "mimetype":
            mime = "type"
        elif k == "mimeenc":
            mime = "enc"
        elif k == "L":
            deref = True
        elif k == "h":
            deref = False
        elif k == "N":
            pad = False
        elif k == "F":
            sep = v
        elif k == "f":
            try:
                src = ctx.stdin.read() if v == "-" else open(v, "rb").read()
            except OSError as e:
                _err(ctx, "file", f"Cannot open `{v}' ({_strerror(e)})")
                return 1
            args.extend(_s(x) for x in src.splitlines() if x)
        elif k == "0":
            eol = b"\0"
    if not args:
        ctx.stderr.write(b"Usage: file [-bcdEhikLlNnprsSvzZ0] [--apple] [--extension] "
                         b"[--mime-encoding]\n            [--mime-type] [-e <testname>] "
                         b"[-F <separator>] [-f <namefile>]\n            [-m <magicfiles>] "
                         b"[-P <parameter=value>] [--exclude-do <testname>]\n"
                         b"            file ...\n       file -C [-m <magicfiles>]\n"
                         b"       file [--help]\n")
        return 1
    names = ["/dev/stdin" if a == "-" else a for a in args]
    width = max(len(n) for n in names) + len(sep) if pad else 0

    def one(a):
        if a == "-":
            data = ctx.stdin.read(1 << 16)
            return classify_data(data, len(data), None)
        try:
            lst = os.lstat(a)
        except OSError as e:
            return (f"cannot open `{a}' ({_strerror(e)})", "cannot open")
        st = lst
        if _st.S_ISLNK(lst.st_mode):
            try:
                t = os.readlink(a)
            except OSError:
                t = "?"
            try:
                tst = os.stat(a)
            except OSError:
                return ("broken symbolic link to %s" % t, "inode/symlink")
            if not deref:
                return ("symbolic link to %s" % t, "inode/symlink")
            st = tst
        m = st.st_mode
        if _st.S_ISDIR(m):
            return ("directory", "inode/directory")
        if _st.S_ISFIFO(m):
            return ("fifo (named pipe)", "inode/fifo")
        if _st.S_ISSOCK(m):
            return ("socket", "inode/socket")
        if _st.S_ISCHR(m):
            return ("character special (%d/%d)" % (_major(st.st_rdev), _minor(st.st_rdev)),
                    "inode/chardevice")
        if _st.S_ISBLK(m):
            return ("block special (%d/%d)" % (_major(st.st_rdev), _minor(st.st_rdev)),
                    "inode/blockdevice")
        try:
            with open(a, "rb") as f:
                data = f.read(1 << 16)
        except OSError as e:
            return (f"cannot open `{a}' ({_strerror(e)})", "cannot open")
        return classify_data(data, st.st_size, a)

    def classify_data(data, size, path):
        if not data:
            return ("empty", "inode/x-empty")
        r = _magic(data, size, path)
        if r is not None:
            return r
        enc = _text_encoding(data)
        if enc is not None:
            return _describe_text(data, enc)
        return ("data", "application/octet-stream")

    out = []
    for a, nm in zip(args, names):
        desc, mt = one(a)
        if mime is not None:
            if mt == "cannot open":
                pass
            else:
                charset = "binary"
                if not mt.startswith("inode/") and a != "-":
                    try:
                        with open(a, "rb") as f:
                            enc = _text_encoding(f.read(1 << 16))
                        charset = {"ASCII": "us-ascii", "UTF-8": "utf-8", "UTF-8 BOM": "utf-8",
                                   "UTF-16LE": "utf-16le", "UTF-16BE": "utf-16be",
                                   "ISO-8859": "iso-8859-1", None: "binary"}.get(
                                       enc, "unknown-8bit")
                    except OSError:
                        pass
                full = mt if desc.startswith("broken ") else f"{mt}; charset={charset}"
                desc = {"full": full, "type": mt, "enc": charset}[mime]
        if brief:
            out.append(_b(desc) + eol)
        else:
            head = nm + sep
            if pad:
                head = head.ljust(width)
            out.append(_b(head + " " + desc) + eol)
    yield b"".join(out)
    return 0


# ---------------------------------------------------------------------------------------
# gzip gunzip zcat

_GZ_SUFFIXES = (".gz", "-gz", ".z", "-z", "_z", ".Z", ".tgz", ".taz")


class _GzFormatError(Exception):
    pass


def _gz_header(name, mtime, level):
    import struct

    flags = 8 if name is not None else 0
    xfl = 2 if level == 9 else 4 if level == 1 else 0
    h = b"\x1f\x8b\x08" + bytes([flags]) + struct.pack("<I", int(mtime) & 0xFFFFFFFF)
    h += bytes([xfl, 3])
    if name is not None:
        h += _b(name) + b"\0"
    return h


def _gz_compress_iter(chunks, name, mtime, level):
    """Yields a gzip member (GNU gzip's header: name, mtime, OS Unix) around raw deflate."""
    import struct
    import zlib

    yield _gz_header(name, mtime, level)
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8)
    crc = 0
    size = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
        out = c.compress(chunk)
        if out:
            yield out
    yield c.flush() + struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF)


def _gz_decompress_iter(chunks, warn):
    """Yields decompressed data of every member; raises _GzFormatError on a bad start;
    calls warn() on trailing garbage."""
    import zlib

    buf = b""
    it = iter(chunks)
    first = True
    d = None
    for chunk in it:
        buf += chunk
        while buf:
            if d is None:
                if len(buf) < 2:
                    break
                if buf[:2] != b"\x1f\x8b":
                    if first:
                        raise _GzFormatError("not in gzip format")
                    if buf.strip(b"\0"):
                        warn()
                    buf = b""
                    for _ in it:
                        pass
                    return
                d = zlib.decompressobj(16 + 15)
                first = False
            try:
                out = d.decompress(buf)
            except zlib.error as e:
                raise _GzFormatError("invalid compressed data--format violated" if "header"
                                     not in str(e) else "not in gzip format")
            buf = b""
            if out:
                yield out
            if d.eof:
                buf = d.unused_data
                d = None
            else:
                break
    if d is not None and not d.eof:
        if first:
            raise _GzFormatError("unexpected end of file")
        raise _GzFormatError("unexpected end of file")
    if first:
        raise _GzFormatError("unexpected end of file")


def _read_chunks(f, n=1 << 16):
    while True:
        b = f.read(n)
        if not b:
            return
        yield b


def gzip(ctx, argv, _name="gzip"):
    longs = {"stdout": ("c", 0), "to-stdout": ("c", 0), "decompress": ("d", 0),
             "uncompress": ("d", 0), "force": ("f", 0), "keep": ("k", 0), "list": ("l", 0),
             "no-name": ("n", 0), "name": ("N", 0), "quiet": ("q", 0), "recursive": ("r", 0),
             "suffix": ("S", 1), "test": ("t", 0), "verbose": ("v", 0), "fast": ("1", 0),
             "best": ("9", 0), "help": ("h", 0), "version": ("V", 0), "license": ("L", 0),
             "rsyncable": ("rsyncable", 0), "synchronous": ("sync", 0)}
    try:
        opts, args = _getopt(argv, "cdfhklLnNqrS:tvV", longs, numeric=True)
    except _Usage as e:
        return _usage(ctx, "gzip", e)
    tostdout = decomp = force = keep = listing = recursive = test = verbose = quiet = False
    level, suffix, save_name = 6, ".gz", True
    if _name == "gunzip":
        decomp = True
    elif _name == "zcat":
        decomp = tostdout = True
    for k, v in opts:
        if k == "h":
            yield _help(_name, "[OPTION]... [FILE]...")
            return 0
        if k == "V":
            yield b"gzip 1.12\n"
            return 0
        if k == "c":
            tostdout = True
        elif k == "d":
            decomp = True
        elif k == "f":
            force = True
        elif k == "k":
            keep = True
        elif k == "l":
            listing = True
        elif k == "n":
            save_name = False
        elif k == "N":
            save_name = True
        elif k == "q":
            quiet = True
        elif k == "r":
            recursive = True
        elif k == "S":
            suffix = v
        elif k == "t":
            test = decomp = True
        elif k == "v":
            verbose = True
        elif k == "1":
            level = 1
        elif k == "9":
            level = 9
        elif k == "#":
            level = int(v[-1]) or 1
    status = 0

    def warn(msg):
        nonlocal status
        if not quiet:
            _err(ctx, "gzip", msg)
        status = max(status, 2)

    def error(msg):
        nonlocal status
        _err(ctx, "gzip", msg)
        status = 1

    def strip_suffix(name):
        for sfx in (suffix,) + _GZ_SUFFIXES:
            if name.endswith(sfx) and len(name) > len(sfx):
                base = name[: -len(sfx)]
                if sfx in (".tgz", ".taz"):
                    base += ".tar"
                return base
        return None

    if listing:
        rows = []
        tot_c = tot_u = 0
        last_hdr = 0
        out = [b"         compressed        uncompressed  ratio uncompressed_name\n"]
        for a in args or ["-"]:
            try:
                data = ctx.stdin.read() if a == "-" else open(a, "rb").read()
            except OSError as e:
                error(f"{a}: {_strerror(e)}")
                continue
            if data[:2] != b"\x1f\x8b" or len(data) < 18:
                error(f"{a}: not in gzip format")
                continue
            import struct

            flags = data[3]
            j = 10
            if flags & 4:
                j += 2 + struct.unpack("<H", data[10:12])[0]
            if flags & 8:
                j = data.index(b"\0", j) + 1
            if flags & 16:
                j = data.index(b"\0", j) + 1
            if flags & 2:
                j += 2
            hdr = j + 8
            comp = len(data)
            unc = struct.unpack("<I", data[-4:])[0]
            name = "stdout" if a == "-" else (strip_suffix(a) or a)
            ratio = 0.0 if unc == 0 else 100.0 * (unc - (comp - hdr)) / unc
            out.append(_b("%19d %19d %5.1f%% %s\n" % (comp, unc, ratio, name)))
            rows.append(a)
            tot_c += comp
            tot_u += unc
            last_hdr = hdr
        if len(rows) > 1:
            ratio = 0.0 if tot_u == 0 else 100.0 * (tot_u - (tot_c - last_hdr)) / tot_u
            out.append(_b("%19d %19d %5.1f%% (totals)\n" % (tot_c, tot_u, ratio)))
        if rows:
            yield b"".join(out)
        return status

    def expand(paths):
        for a in paths:
            if recursive and a != "-" and _is_dir(a) and not os.path.islink(a):
                try:
                    names = [de.name for de in os.scandir(a)]
                except OSError as e:
                    error(f"{a}: {_strerror(e)}")
                    continue
                yield from expand([_concat(a, n) for n in names])
            else:
                yield a

    for a in expand(args or ["-"]):
        if a == "-":
            src = ctx.stdin
            if decomp:
                try:
                    gen = _gz_decompress_iter(_read_chunks(src), lambda: warn(
                        "stdin: decompression OK, trailing garbage ignored"))
                    for chunk in gen:
                        if not test:
                            yield chunk
                except _GzFormatError as e:
                    error(f"stdin: {e}")
            else:
                yield from _gz_compress_iter(_read_chunks(src), None, 0, level)
            continue
        try:
            lst = os.lstat(a)
            st = os.stat(a)
        except OSError as e:
            error(f"{a}: {_strerror(e)}")
            continue
        if _st.S_ISDIR(st.st_mode):
            warn(f"{a} is a directory -- ignored")
            continue
        if _st.S_ISLNK(lst.st_mode) and not force and not tostdout:
            warn(f"{a}: Too many levels of symbolic links")
            continue
        if not _st.S_ISREG(st.st_mode) and not force:
            warn(f"{a} is not a directory or a regular file - ignored")
            continue
        if decomp:
            outname = strip_suffix(a)
            if outname is None and not (tostdout or test):
                warn(f"{a}: unknown suffix -- ignored")
                continue
        else:
            if any(a.endswith(x) for x in (suffix,) + _GZ_SUFFIXES) and not (tostdout and force):
                if not quiet:  # a warning GNU gzip does not count in its status
                    _err(ctx, "gzip", f"{a} already has {suffix} suffix -- unchanged")
                continue
            outname = a + suffix
        if tostdout or test:
            try:
                with open(a, "rb") as f:
                    if decomp:
                        for chunk in _gz_decompress_iter(_read_chunks(f), lambda: warn(
                                f"{a}: decompression OK, trailing garbage ignored")):
                            if not test:
                                yield chunk
                    else:
                        yield from _gz_compress_iter(
                            _read_chunks(f), _base_name(a) if save_name else None,
                            st.st_mtime if save_name else 0, level)
            except _GzFormatError as e:
                error(f"{a}: {e}")
            except OSError as e:
                error(f"{a}: {_strerror(e)}")
            continue
        if os.path.lexists(outname):
            if not force:
                warn(f"{outname} already exists;\tnot overwritten")
                continue
            try:
                os.unlink(outname)
            except OSError:
                pass
        try:
            with open(a, "rb") as f:
                fd = os.open(outname, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             _st.S_IMODE(st.st_mode) or 0o644)
                try:
                    with os.fdopen(fd, "wb") as g:
                        if decomp:
                            for chunk in _gz_decompress_iter(_read_chunks(f), lambda: warn(
                                    f"{a}: decompression OK, trailing garbage ignored")):
                                g.write(chunk)
                        else:
                            for chunk in _gz_compress_iter(
                                    _read_chunks(f), _base_name(a) if save_name else None,
                                    st.st_mtime if save_name else 0, level):
                                g.write(chunk)
                except _GzFormatError as e:
                    os.unlink(outname)
                    error(f"{a}: {e}")
                    continue
                except BaseException:
                    try:
                        os.unlink(outname)
                    except OSError:
                        pass
                    raise
        except OSError as e:
            error(f"{a}: {_strerror(e)}")
            continue
        try:
            os.utime(outname, ns=(_ns(st, "a"), _ns(st, "m")))
        except (OSError, NotImplementedError):
            pass
        if verbose:
            try:
                insz, outsz = st.st_size, os.stat(outname).st_size
                if decomp:
                    insz, outsz = outsz, insz
                ratio = 0.0 if insz == 0 else 100.0 * (insz - outsz) / insz
                ctx.stderr.write(_b(f"{a}:\t{ratio:5.1f}% -- replaced with {outname}\n"
                                    if not keep else f"{a}:\t{ratio:5.1f}% -- created "
                                    f"{outname}\n"))
            except OSError:
                pass
        if not keep:
            try:
                os.unlink(a)
            except OSError as e:
                error(f"{a}: {_strerror(e)}")
    return status


def gunzip(ctx, argv):
    return (yield from gzip(ctx, argv, "gunzip"))


def zcat(ctx, argv):
    return (yield from gzip(ctx, argv, "zcat"))


# ---------------------------------------------------------------------------------------
# tar

_TAR_ARGOPTS = set("fCTXbNgKLV")


def _tar_mode_str(ti):
    import tarfile

    if ti.type in (tarfile.DIRTYPE,):
        c = "d"
    elif ti.type == tarfile.SYMTYPE:
        c = "l"
    elif ti.type == tarfile.LNKTYPE:
        c = "h"
    elif ti.type == tarfile.CHRTYPE:
        c = "c"
    elif ti.type == tarfile.BLKTYPE:
        c = "b"
    elif ti.type == tarfile.FIFOTYPE:
        c = "p"
    else:
        c = "-"
    return c + _st.filemode(ti.mode | _st.S_IFREG)[1:]


def tar(ctx, argv):
    import io
    import tarfile

    args = list(argv[1:])
    # old-style bundle: `tar czf out.tgz dir`
    if args and not args[0].startswith("-"):
        bundle = args.pop(0)
        new = []
        rest = args
        for c in bundle:
            if c in _TAR_ARGOPTS:
                if not rest:
                    _err(ctx, "tar", f"Old option '{c}' requires an argument.")
                    ctx.stderr.write(b"Try 'tar --help' or 'tar --usage' for more information.\n")
                    return 2
                new += ["-" + c, rest[0]]
                rest = rest[1:]
            else:
                new.append("-" + c)
        args = new + rest
    longs = {
        "create": ("c", 0), "extract": ("x", 0), "get": ("x", 0), "list": ("t", 0),
        "append": ("r", 0), "update": ("u", 0), "file": ("f", 1), "gzip": ("z", 0),
        "gunzip": ("z", 0), "ungzip": ("z", 0), "bzip2": ("j", 0), "xz": ("J", 0),
        "auto-compress": ("a", 0), "verbose": ("v", 0), "directory": ("C", 1),
        "to-stdout": ("O", 0), "exclude": ("exclude", 1), "strip-components": ("strip", 1),
        "keep-old-files": ("k", 0), "skip-old-files": ("skipold", 0), "overwrite": ("overwrite", 0),
        "preserve-permissions": ("p", 0), "same-permissions": ("p", 0),
        "dereference": ("h", 0), "absolute-names": ("P", 0), "files-from": ("T", 1),
        "exclude-from": ("X", 1), "no-same-owner": ("nso", 0), "same-owner": ("so", 0),
        "touch": ("m", 0), "wildcards": ("wildcards", 0), "no-wildcards": ("nowildcards", 0),
        "numeric-owner": ("numeric", 0), "owner": ("owner", 1), "group": ("group", 1),
        "mode": ("modeopt", 1), "mtime": ("mtime", 1), "sort": ("sort", 1),
        "format": ("H", 1), "help": ("help", 0), "version": ("version", 0),
        "totals": ("totals", 2), "no-recursion": ("norec", 0), "recursion": ("rec", 0),
        "one-file-system": ("ofs", 0), "anchored": ("anchored", 0),
        "warning": ("warning", 1), "delete": ("delete", 0), "test-label": ("testlabel", 0),
        "concatenate": ("A", 0), "catenate": ("A", 0), "show-transformed-names": ("stn", 0),
        "zstd": ("zstd", 0), "lzma": ("lzma", 0),
    }
    try:
        opts, operands = _getopt([argv[0]] + args, "cxtruAf:zjJavC:OkpPhT:X:mH:b:oSwWl", longs)
    except _Usage as e:
        _err(ctx, "tar", e.msg)
        ctx.stderr.write(b"Try 'tar --help' or 'tar --usage' for more information.\n")
        return 2
    mode = None
    archive = None
    comp = None
    verbose = 0
    tostdout = keep = skipold = deref = absolute = touch_ = numeric = False
    norec = False
    strip = 0
    excludes = []
    seq = []  # ("C", dir) and ("F", name) in command-line order, for -c
    sort = "none"
    for k, v in opts:
        if k == "help":
            yield _help("tar", "[OPTION...] [FILE]...")
            return 0
        if k == "version":
            yield b"tar (GNU tar) 1.34\n"
            return 0
        if k in ("c", "x", "t", "r", "u", "A", "delete", "testlabel"):
            if mode is not None and mode != k:
                _err(ctx, "tar", "You may not specify more than one '-Acdtrux', '--delete' or "
                     " '--test-label' option")
                ctx.stderr.write(b"Try 'tar --help' or 'tar --usage' for more information.\n")
                return 2
            mode = k
        elif k == "f":
            archive = v
        elif k == "z":
            comp = "gz"
        elif k == "j":
            comp = "bz2"
        elif k == "J":
            comp = "xz"
        elif k == "a":
            comp = comp or "auto"
        elif k == "v":
            verbose += 1
        elif k == "C":
            seq.append(("C", v))
        elif k == "O":
            tostdout = True
        elif k == "exclude":
            excludes.append(v)
        elif k == "X":
            try:
                with open(v, "rb") as f:
                    excludes.extend(_s(x) for x in f.read().splitlines() if x)
            except OSError as e:
                _err(ctx, "tar", f"{v}: Cannot open: {_strerror(e)}")
                return 2
        elif k == "T":
            try:
                data = ctx.stdin.read() if v == "-" else open(v, "rb").read()
            except OSError as e:
                _err(ctx, "tar", f"{v}: Cannot open: {_strerror(e)}")
                return 2
            for x in data.splitlines():
                if x:
                    seq.append(("F", _s(x)))
        elif k == "strip":
            try:
                strip = int(v)
            except ValueError:
                _err(ctx, "tar", f"Invalid number of elements: {_q(v)}")
                return 2
        elif k == "k":
            keep = True
        elif k == "skipold":
            skipold = True
        elif k == "overwrite":
            keep = skipold = False
        elif k == "h":
            deref = True
        elif k == "P":
            absolute = True
        elif k == "m":
            touch_ = True
        elif k == "numeric":
            numeric = True
        elif k == "norec":
            norec = True
        elif k == "sort":
            sort = v
        elif k in ("zstd", "lzma"):
            _err(ctx, "tar", f"--{k} is not available in the sandbox")
            return 2
    for o in operands:
        seq.append(("F", o))
    if mode is None:
        _err(ctx, "tar", "You must specify one of the '-Acdtrux', '--delete' or '--test-label' "
             "options")
        ctx.stderr.write(b"Try 'tar --help' or 'tar --usage' for more information.\n")
        return 2
    if mode in ("A", "delete", "testlabel", "u"):
        _err(ctx, "tar", "this operation is not supported by the sandbox's tar "
             "(use -c, -x, -t or -r)")
        return 2
    if archive is None:
        archive = os.environ.get("TAPE", "-")
    status = 0
    ex_rx = [_fn_regex(p) for p in excludes]

    def excluded(name):
        n = name.rstrip("/")
        parts = n.split("/")
        for rx in ex_rx:
            if rx.match(n) or any(rx.match(p) for p in parts) or any(
                    rx.match("/".join(parts[i:])) for i in range(len(parts))):
                return True
        return False

    vout = ctx.stderr if archive == "-" and mode in ("c", "r") else None
    tz = _tz_for(ctx)
    lines = []

    def say(text):
        if vout is not None:
            vout.write(_b(text))
        else:
            lines.append(_b(text))

    def verbose_line(ti, name=None):
        name = name if name is not None else ti.name + ("/" if ti.isdir() and not ti.name.endswith(
            "/") else "")
        if verbose < 2 and mode != "t":
            return name + "\n"
        if verbose < 1:
            return name + "\n"
        user = (ti.uname or str(ti.uid)) if not numeric else str(ti.uid)
        group = (ti.gname or str(ti.gid)) if not numeric else str(ti.gid)
        if ti.ischr() or ti.isblk():
            size = "%d,%d" % (ti.devmajor, ti.devminor)
        else:
            size = str(ti.size)
        pad = len(user) + 1 + len(group) + 1 + len(size)
        if pad > tar_ugs[0]:
            tar_ugs[0] = pad
        when = _strftime("%Y-%m-%d %H:%M", _when(int(ti.mtime) * 10**9, tz))
        tail = ""
        if ti.issym():
            tail = " -> " + ti.linkname
        elif ti.islnk():
            tail = " link to " + ti.linkname
        return "%s %s/%s %*s %s %s%s\n" % (_tar_mode_str(ti), user, group,
                                          tar_ugs[0] - pad + len(size), size, when, name, tail)

    tar_ugs = [19]

    def open_read():
        if archive == "-":
            data = ctx.stdin.read()
        else:
            with open(archive, "rb") as f:
                data = f.read()
        if data[:2] == b"\x1f\x8b":
            import gzip as _gz

            data = _gz.decompress(data)
        elif data[:3] == b"BZh":
            import bz2

            data = bz2.decompress(data)
        elif data[:6] == b"\xfd7zXZ\x00":
            import lzma

            data = lzma.decompress(data)
        return tarfile.open(fileobj=io.BytesIO(data), mode="r:")

    if mode in ("t", "x"):
        try:
            tf = open_read()
        except OSError as e:
            _err(ctx, "tar", f"{archive}: Cannot open: {_strerror(e)}")
            _err(ctx, "tar", "Error is not recoverable: exiting now")
            return 2
        except (tarfile.TarError, EOFError, ValueError) as e:
            _err(ctx, "tar", "This does not look like a tar archive")
            _err(ctx, "tar", "Exiting with failure status due to previous errors")
            return 2
        wanted = [o for t, o in seq if t == "F"]
        found = set()
        dest = "."
        for t, o in seq:
            if t == "C":
                dest = o if o.startswith("/") or dest == "." else _concat(dest, o)
        if mode == "x" and dest != "." and not _is_dir(dest):
            _err(ctx, "tar", f"{dest}: Cannot open: No such file or directory")
            _err(ctx, "tar", "Error is not recoverable: exiting now")
            return 2
        warned_abs = False
        dir_times = []
        with tf:
            for ti in tf:
                name = ti.name
                shown = name + ("/" if ti.isdir() and not name.endswith("/") else "")
                if wanted:
                    hit = None
                    for w in wanted:
                        ws = w.rstrip("/")
                        if name.rstrip("/") == ws or name.startswith(ws + "/") or (
                                "*" in w or "?" in w or "[" in w) and _fn_regex(w).match(
                                    name.rstrip("/")):
                            hit = w
                    if hit is None:
                        continue
                    found.add(hit)
                if excluded(name):
                    continue
                if mode == "t":
                    lines.append(_b(verbose_line(ti, shown) if verbose else shown + "\n"))
                    if len(lines) > 64:
                        yield b"".join(lines)
                        lines.clear()
                    continue
                # extract
                rel = name
                if rel.startswith("/") and not absolute:
                    if not warned_abs:
                        _err(ctx, "tar", "Removing leading `/' from member names")
                        warned_abs = True
                    rel = rel.lstrip("/")
                parts = [p for p in rel.split("/") if p not in ("", ".")]
                if ".." in parts and not absolute:
                    _err(ctx, "tar", f"{name}: Member name contains '..'")
                    status = 2
                    continue
                if strip:
                    if len(parts) <= strip:
                        continue
                    parts = parts[strip:]
                if not parts:
                    continue
                rel = "/".join(parts)
                target = rel if dest == "." else _concat(dest, rel)
                if verbose:
                    say(verbose_line(ti, shown) if verbose > 1 else shown + "\n")
                if tostdout:
                    if ti.isreg():
                        f = tf.extractfile(ti)
                        for chunk in _read_chunks(f):
                            yield chunk
                    continue
                try:
                    parent = _dir_name(target)
                    if parent not in (".", "/") and not os.path.isdir(parent):
                        os.makedirs(parent, exist_ok=True)
                    if ti.isdir():
                        if not os.path.isdir(target):
                            if os.path.lexists(target):
                                os.unlink(target)
                            os.mkdir(target, 0o700)
                        dir_times.append((target, ti))
                        continue
                    if os.path.lexists(target):
                        if keep:
                            _err(ctx, "tar", f"{rel}: Cannot open: File exists")
                            status = 2
                            continue
                        if skipold:
                            continue
                        if os.path.isdir(target) and not os.path.islink(target):
                            try:
                                os.rmdir(target)
                            except OSError:
                                pass
                        else:
                            os.unlink(target)
                    if ti.issym():
                        os.symlink(ti.linkname, target)
                        continue
                    if ti.islnk():
                        lp = [p for p in ti.linkname.lstrip("/").split("/") if p not in (
                            "", ".")][strip:]
                        src = "/".join(lp)
                        src = src if dest == "." else _concat(dest, src)
                        os.link(src, target)
                        continue
                    if not ti.isreg():
                        _err(ctx, "tar", f"{rel}: Cannot create special file: Operation not "
                             f"permitted")
                        status = 2
                        continue
                    f = tf.extractfile(ti)
                    with open(target, "wb") as g:
                        for chunk in _read_chunks(f):
                            g.write(chunk)
                    _chmod_quiet(target, ti.mode & 0o7777 & ~_umask())
                    if not touch_:
                        os.utime(target, (ti.mtime, ti.mtime))
                except OSError as e:
                    _err(ctx, "tar", f"{rel}: Cannot open: {_strerror(e)}")
                    status = 2
            for target, ti in reversed(dir_times):
                _chmod_quiet(target, (ti.mode & 0o7777 & ~_umask()) | 0o700)
                if not touch_:
                    try:
                        os.utime(target, (ti.mtime, ti.mtime))
                    except OSError:
                        pass
        for w in wanted:
            if w not in found:
                _err(ctx, "tar", f"{w}: Not found in archive")
                status = 2
        if lines:
            yield b"".join(lines)
            lines.clear()
        if status:
            _err(ctx, "tar", "Exiting with failure status due to previous errors")
        return status

    # create / append
    if not any(t == "F" for t, _ in seq):
        _err(ctx, "tar", "Cowardly refusing to create an empty archive")
        ctx.stderr.write(b"Try 'tar --help' or 'tar --usage' for more information.\n")
        return 2
    if comp == "auto":
        comp = None
        for sfx, c in ((".tar.gz", "gz"), (".tgz", "gz"), (".taz", "gz"), (".tar.bz2", "bz2"),
                       (".tbz", "bz2"), (".tbz2", "bz2"), (".tar.xz", "xz"), (".txz", "xz")):
            if archive.endswith(sfx):
                comp = c
    buf = io.BytesIO()
    if mode == "r":
        if comp is not None:
            _err(ctx, "tar", "Cannot update compressed archives")
            return 2
        if archive != "-" and os.path.exists(archive):
            with open(archive, "rb") as f:
                buf.write(f.read())
            # find the end of the last member: tarfile appends there
            buf.seek(0)
            tfm = tarfile.open(fileobj=buf, mode="a", format=tarfile.GNU_FORMAT)
        else:
            tfm = tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT)
    else:
        tfm = tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT)
    warned_abs = False
    seen_inodes = {}
    active = set()
    cwd = "."

    def add(path, arcname):
        nonlocal status
        if excluded(arcname):
            return
        try:
            ti = tfm.gettarinfo(path, arcname)
            if deref and ti.issym():
                ti = tfm.gettarinfo(os.path.realpath(path), arcname)
        except OSError as e:
            _err(ctx, "tar", f"{arcname}: Cannot stat: {_strerror(e)}")
            status = 2
            return
        if ti is None:
            _err(ctx, "tar", f"{arcname}: socket ignored")
            return
        if _WASI:
            ti.mode = _st.S_IMODE(_perm(os.lstat(path) if not deref else os.stat(path))) if (
                not ti.mode & 0o777) else ti.mode
            if not ti.uname:
                ti.uname = _user(ti.uid) or ""
            if not ti.gname:
                ti.gname = _group(ti.gid) or ""
        try:
            lst = os.lstat(path)
            if ti.isreg() and lst.st_nlink > 1 and lst.st_ino:
                key = (lst.st_dev, lst.st_ino)
                if key in seen_inodes:
                    ti.type = tarfile.LNKTYPE
                    ti.linkname = seen_inodes[key]
                    ti.size = 0
                else:
                    seen_inodes[key] = ti.name
        except OSError:
            pass
        if verbose:
            say(verbose_line(ti) if verbose > 1 else ti.name + ("/" if ti.isdir() else "") + "\n")
        try:
            if ti.isreg():
                with open(path, "rb") as f:
                    tfm.addfile(ti, f)
            else:
                tfm.addfile(ti)
        except OSError as e:
            _err(ctx, "tar", f"{arcname}: Cannot open: {_strerror(e)}")
            status = 2
            return
        if ti.isdir() and not norec:
            try:
                dst_ = os.stat(path)
                key = (dst_.st_dev, dst_.st_ino)
            except OSError:
                key = None
            if key is not None and key in active and dst_.st_ino:
                _err(ctx, "tar", f"{arcname}: File system loop detected")
                status = 2
                return
            try:
                names = [de.name for de in os.scandir(path)]
            except OSError as e:
                _err(ctx, "tar", f"{arcname}: Cannot open: {_strerror(e)}")
                status = 2
                return
            if sort == "name":
                names.sort(key=_b)
            active.add(key)
            for n in names:
                add(_concat(path, n), _concat(arcname, n))
            active.discard(key)

    for t, o in seq:
        if t == "C":
            cwd = o if o.startswith("/") or cwd == "." else _concat(cwd, o)
            if not _is_dir(cwd):
                _err(ctx, "tar", f"{o}: Cannot open: No such file or directory")
                _err(ctx, "tar", "Error is not recoverable: exiting now")
                return 2
            continue
        path = o if (cwd == "." or o.startswith("/")) else _concat(cwd, o)
        arc = o
        if arc.startswith("/") and not absolute:
            if not warned_abs:
                _err(ctx, "tar", "Removing leading `/' from member names")
                warned_abs = True
            arc = arc.lstrip("/") or "."
        if not os.path.lexists(path):
            _err(ctx, "tar", f"{o}: Cannot stat: No such file or directory")
            status = 2
            continue
        add(path, arc.rstrip("/") if arc not in ("/",) and arc.rstrip("/") else arc)
        if lines and vout is None:
            yield b"".join(lines)
            lines.clear()
    tfm.close()
    data = buf.getvalue()
    if comp == "gz":
        data = b"".join(_gz_compress_iter([data], None, 0, 6))
    elif comp == "bz2":
        import bz2

        data = bz2.compress(data)
    elif comp == "xz":
        import lzma

        data = lzma.compress(data)
    if archive == "-":
        yield data
    else:
        try:
            with open(archive, "wb") as f:
                f.write(data)
        except OSError as e:
            _err(ctx, "tar", f"{archive}: Cannot open: {_strerror(e)}")
            _err(ctx, "tar", "Error is not recoverable: exiting now")
            return 2
    if lines:
        yield b"".join(lines)
    if status:
        _err(ctx, "tar", "Exiting with failure status due to previous errors")
    return status


# ---------------------------------------------------------------------------------------
# zip unzip (Info-ZIP's output formats)


def _zip_percent(n, m):
    if n > 0xFFFFFF:
        n = (n + 0x80) >> 8
        m = (m + 0x80) >> 8
    return (1 + (200 * (n - m) // n)) // 2 if n > m else 0


def zip_(ctx, argv):
    import zipfile
    import zlib

    longs = {"recurse-paths": ("r", 0), "quiet": ("q", 0), "junk-paths": ("j", 0),
             "delete": ("d", 0), "move": ("m", 0), "exclude": ("x", 0), "include": ("i", 0),
             "update": ("u", 0), "freshen": ("f", 0), "symlinks": ("y", 0),
             "no-dir-entries": ("D", 0), "test": ("T", 0), "verbose": ("v", 0),
             "help": ("h", 0), "names-stdin": ("@", 0), "encrypt": ("e", 0)}
    args = argv[1:]
    # zip's -x/-i take the rest of the words up to the next option, as Info-ZIP does
    pats_x, pats_i, words = [], [], []
    i = 0
    cur = None
    while i < len(args):
        a = args[i]
        if a in ("-x", "--exclude"):
            cur = pats_x
        elif a in ("-i", "--include"):
            cur = pats_i
        elif a.startswith("-") and len(a) > 1 and cur is not None:
            cur = None
            words.append(a)
        elif cur is not None:
            cur.append(a)
        else:
            words.append(a)
        i += 1
    try:
        opts, operands = _getopt([argv[0]] + words, "rRqjdmufyDTvhe@0123456789", longs)
    except _Usage as e:
        ctx.stderr.write(_b(f"\nzip error: Invalid command arguments ({e.msg})\n"))
        return 16
    recurse = quiet = junk = delete = move = update = freshen = symlinks = nodirs = False
    level = 6
    names_stdin = False
    for k, _v in opts:
        if k == "h":
            yield _help("zip", "[-options] [-b path] [-t mmddyyyy] [-n suffixes] [zipfile list] "
                        "[-xi list]")
            return 0
        if k in ("r", "R"):
            recurse = True
        elif k == "q":
            quiet = True
        elif k == "j":
            junk = True
        elif k == "d":
            delete = True
        elif k == "m":
            move = True
        elif k == "u":
            update = True
        elif k == "f":
            freshen = True
        elif k == "y":
            symlinks = True
        elif k == "D":
            nodirs = True
        elif k == "@":
            names_stdin = True
        elif k == "e":
            ctx.stderr.write(b"\nzip error: Invalid command arguments (encryption is not "
                             b"supported in the sandbox)\n")
            return 16
        elif k.isdigit():
            level = int(k)
    if not operands:
        ctx.stderr.write(b"\nzip error: Invalid command arguments (nothing to select from)\n")
        return 16
    archive = operands[0]
    files = operands[1:]
    if names_stdin:
        files += [_s(x) for x in ctx.stdin.read().splitlines() if x]
    base = _base_name(archive)
    if archive != "-" and "." not in base:
        archive += ".zip"
    existing = []
    if archive != "-" and os.path.exists(archive):
        try:
            with zipfile.ZipFile(archive) as zf:
                for zi in zf.infolist():
                    existing.append([zi, zf.read(zi)])
        except (zipfile.BadZipFile, OSError) as e:
            ctx.stderr.write(_b(f"\nzip error: Zip file structure invalid ({archive})\n"))
            return 3
    xrx = [_fn_regex(p) for p in pats_x]
    irx = [_fn_regex(p) for p in pats_i]
    out = []
    status = 0

    def excluded(name):
        if any(rx.match(name) for rx in xrx):
            return True
        if irx and not any(rx.match(name) for rx in irx):
            return True
        return False

    if delete:
        keep = []
        deleted = False
        for zi, data in existing:
            if any(_fn_regex(p).match(zi.filename) for p in files):
                if not quiet:
                    out.append(_b(f"deleting: {zi.filename}\n"))
                deleted = True
            else:
                keep.append([zi, data])
        if not deleted:
            yield b"".join(out) + _b(f"\nzip error: Nothing to do! ({archive})\n")
            return 12
        existing = keep
        entries = []
    else:
        entries = []  # (arcname, path)
        seen = set()
        active = set()

        def collect(path, arc):
            try:
                lst = os.lstat(path)
            except OSError:
                return
            isdir = _st.S_ISDIR(lst.st_mode) or (not symlinks and _is_dir(path))
            if isdir:
                name = arc.rstrip("/") + "/"
                if not nodirs and not junk and not excluded(name) and name not in seen:
                    entries.append((name, path, lst))
                    seen.add(name)
                if recurse:
                    try:
                        names = [de.name for de in os.scandir(path)]
                        dst_ = os.stat(path)
                        key = (dst_.st_dev, dst_.st_ino)
                    except OSError:
                        return
                    if key in active and dst_.st_ino:
                        return  # a link back to a directory being added
                    active.add(key)
                    for n in names:
                        collect(_concat(path, n), _concat(arc.rstrip("/"), n) if arc not in (
                            ".", "./") else n)
                    active.discard(key)
                return
            name = _base_name(arc) if junk else arc
            if excluded(name) or name in seen:
                return
            seen.add(name)
            entries.append((name, path, lst))

        for f in files:
            if not os.path.lexists(f):
                if any(c in f for c in "*?["):
                    import glob as _glob

                    matches = sorted(_glob.glob(f))
                    if matches:
                        for m in matches:
                            collect(m, m)
                        continue
                # Info-ZIP writes its warnings to stdout
                yield _b(f"\tzip warning: name not matched: {f}\n")
                continue
            arc = f
            while arc.startswith("./"):
                arc = arc[2:]
            arc = arc.lstrip("/")
            if arc in ("", "."):
                if recurse:
                    try:
                        for de in os.scandir(f):
                            collect(_concat(f, de.name), de.name)
                    except OSError:
                        pass
                continue
            collect(f, arc)
        if not entries and not (update or freshen):
            yield _b(f"\nzip error: Nothing to do! ({archive})\n")
            return 12
    # build the new archive
    import io

    index = {zi.filename: n for n, (zi, _d) in enumerate(existing)}
    new_items = list(existing)
    added_paths = []
    for name, path, lst in entries:
        old = index.get(name)
        try:
            st = lst if symlinks else os.stat(path)
        except OSError:
            st = lst
        if freshen and old is None:
            continue
        if (update or freshen) and old is not None:
            import datetime

            zt = datetime.datetime(*existing[old][0].date_time).timestamp()
            if st.st_mtime <= zt + 1:
                continue
        zi = zipfile.ZipInfo.from_file(path, name, strict_timestamps=False) if not (
            symlinks and _st.S_ISLNK(lst.st_mode)) else None
        if zi is None:
            import time as _time

            zi = zipfile.ZipInfo(name, _time.localtime(lst.st_mtime)[:6])
            zi.external_attr = (_perm(lst) & 0xFFFF) << 16
            data = _b(os.readlink(path))
        elif name.endswith("/"):
            data = b""
            zi.external_attr = ((_perm(st) & 0xFFFF) << 16) | 0x10
        else:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                ctx.stderr.write(_b(f"\tzip warning: could not open for reading: {path}\n"))
                status = 18
                continue
            zi.external_attr = (_perm(st) & 0xFFFF) << 16
        zi.create_system = 3
        zi.create_version = 30
        method = zipfile.ZIP_STORED
        comp_len = len(data)
        if data and level > 0 and not name.endswith("/"):
            c = zlib.compressobj(level, zlib.DEFLATED, -15)
            comp = c.compress(data) + c.flush()
            if len(comp) < len(data):
                method = zipfile.ZIP_DEFLATED
                comp_len = len(comp)
        zi.compress_type = method
        zi.extract_version = 20 if method == zipfile.ZIP_DEFLATED else 10
        zi._compresslevel = level
        verb = "updating" if old is not None else "  adding"
        if not quiet:
            what = "deflated %d%%" % _zip_percent(len(data), comp_len) if (
                method == zipfile.ZIP_DEFLATED) else "stored 0%"
            out.append(_b(f"{verb}: {name} ({what})\n"))
        if old is not None:
            new_items[old] = [zi, data]
        else:
            new_items.append([zi, data])
        added_paths.append(path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for zi, data in new_items:
            zf.writestr(zi, data, compress_type=zi.compress_type,
                        compresslevel=getattr(zi, "_compresslevel", None) or 6)
    if archive == "-":
        yield buf.getvalue()
        if out:
            ctx.stderr.write(b"".join(out))
    else:
        try:
            with open(archive, "wb") as f:
                f.write(buf.getvalue())
        except OSError as e:
            ctx.stderr.write(_b(f"\nzip I/O error: {_strerror(e)}\n\nzip error: Could not create "
                                f"output file ({archive})\n"))
            return 15
        if out:
            yield b"".join(out)
    if move:
        for p in reversed(added_paths):
            try:
                if _is_dir(p) and not os.path.islink(p):
                    os.rmdir(p)
                else:
                    os.unlink(p)
            except OSError:
                pass
    return status


def unzip(ctx, argv):
    import zipfile

    args = argv[1:]
    xpats = []
    words = []
    i = 0
    while i < len(args):
        if args[i] == "-x":
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                xpats.append(args[i])
                i += 1
            continue
        words.append(args[i])
        i += 1
    try:
        opts, operands = _getopt([argv[0]] + words, "lvtpoqnjd:CLZfuaXhcz", {})
    except _Usage as e:
        _err(ctx, "unzip", e.msg)
        return 10
    listing = verbose_list = test = pipe = overwrite = never = junk = False
    quiet = 0
    dest = None
    for k, v in opts:
        if k == "l":
            listing = True
        elif k == "v":
            verbose_list = True
        elif k == "t":
            test = True
        elif k in ("p", "c"):
            pipe = True
        elif k == "o":
            overwrite, never = True, False
        elif k == "n":
            never, overwrite = True, False
        elif k == "q":
            quiet += 1
        elif k == "j":
            junk = True
        elif k == "d":
            dest = v
        elif k == "h":
            yield b"UnZip 6.00 of 20 April 2009, by Debian. Original by Info-ZIP.\n"
            return 0
    if not operands:
        yield (b"UnZip 6.00 of 20 April 2009, by Debian. Original by Info-ZIP.\n\n"
               b"Usage: unzip [-Z] [-opts[modifiers]] file[.zip] [list] [-x xlist] "
               b"[-d exdir]\n")
        return 0
    archive = operands[0]
    members = operands[1:]
    if len(members) >= 2 and members[-2] == "-d":
        dest = members[-1]
        members = members[:-2]
    path = archive
    if not os.path.isfile(path):
        for cand in (archive + ".zip", archive + ".ZIP"):
            if os.path.isfile(cand):
                path = cand
                break
        else:
            _err(ctx, "unzip", f" cannot find or open {archive}, {archive}.zip or "
                 f"{archive}.ZIP.")
            return 9
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        if not quiet:
            yield _b(f"Archive:  {path}\n")
        ctx.stderr.write(
            b"  End-of-central-directory signature not found.  Either this file is not\n"
            b"  a zipfile, or it constitutes one disk of a multi-part archive.  In the\n"
            b"  latter case the central directory and zipfile comment will be found on\n"
            b"  the last disk(s) of this archive.\n")
        _err(ctx, "unzip", f" cannot find zipfile directory in one of {archive} or\n"
             f"        {archive}.zip, and cannot find {archive}.ZIP, period.")
        return 9
    status = 0
    mrx = [_fn_regex(m) for m in members]
    xrx = [_fn_regex(m) for m in xpats]
    matched = set()

    def selected(name):
        if xrx and any(rx.match(name) for rx in xrx):
            return False
        if not mrx:
            return True
        ok = False
        for m, rx in zip(members, mrx):
            if rx.match(name):
                matched.add(m)
                ok = True
        return ok

    import time as _time

    def dt(zi):
        y, mo, d, h, mi, _s2 = zi.date_time
        return "%04d-%02d-%02d %02d:%02d" % (y, mo, d, h, mi)

    with zf:
        infos = [zi for zi in zf.infolist() if selected(zi.filename)]
        if listing or verbose_list:
            out = [] if quiet else [_b(f"Archive:  {path}\n")]
            tot = ctot = 0
            if verbose_list:
                out.append(b" Length   Method    Size  Cmpr    Date    Time   CRC-32   Name\n"
                           b"--------  ------  ------- ---- ---------- ----- --------  ----\n")
                for zi in infos:
                    meth = "Stored" if zi.compress_type == 0 else "Defl:N" if (
                        zi.compress_type == 8) else "Unk:%03d" % zi.compress_type
                    pct = ((1000 * (zi.file_size - zi.compress_size) // zi.file_size) + 5) // 10 \
                        if zi.file_size else 0
                    out.append(_b("%8d  %-6s %8d %3d%% %s %08x  %s\n" % (
                        zi.file_size, meth, zi.compress_size, pct, dt(zi), zi.CRC, zi.filename)))
                    tot += zi.file_size
                    ctot += zi.compress_size
                pct = ((1000 * (tot - ctot) // tot) + 5) // 10 if tot else 0
                n = len(infos)
                out.append(_b("--------          -------  ---                            -------\n"
                              "%8d         %8d %3d%%                            %d file%s\n" % (
                                  tot, ctot, pct, n, "" if n == 1 else "s")))
            else:
                out.append(b"  Length      Date    Time    Name\n"
                           b"---------  ---------- -----   ----\n")
                for zi in infos:
                    out.append(_b("%9d  %s   %s\n" % (zi.file_size, dt(zi), zi.filename)))
                    tot += zi.file_size
                n = len(infos)
                out.append(_b("---------                     -------\n"
                              "%9d                     %d file%s\n" % (
                                  tot, n, "" if n == 1 else "s")))
            yield b"".join(out)
            for m in members:
                if m not in matched:
                    _err(ctx, "caution", f"filename not matched:  {m}")
                    status = 11
            return status
        if test:
            out = [] if quiet else [_b(f"Archive:  {path}\n")]
            bad = 0
            for zi in infos:
                try:
                    zf.read(zi)
                    ok = "OK"
                except Exception:
                    ok = "bad CRC"
                    bad += 1
                if quiet == 0:
                    out.append(_b("    testing: %s   %s\n" % (zi.filename.ljust(22), ok)))
            if bad:
                out.append(_b(f"At least one error was detected in {path}.\n"))
                status = 2
            elif quiet < 2:
                out.append(_b(f"No errors detected in compressed data of {path}.\n"))
            yield b"".join(out)
            return status
        if pipe:
            for zi in infos:
                if not zi.is_dir():
                    with zf.open(zi) as f:
                        for chunk in _read_chunks(f):
                            yield chunk
            return 0
        if not quiet:
            yield _b(f"Archive:  {path}\n")
        if dest is not None and not os.path.isdir(dest):
            try:
                os.makedirs(dest)
                if not quiet:
                    pass
            except OSError as e:
                _err(ctx, "checkdir", f"cannot create extraction directory: {dest}\n"
                     f"           {_strerror(e)}")
                return 3
        answer_all = None
        deferred = []
        dirs = []
        for zi in infos:
            name = zi.filename.replace("\\", "/")
            parts = name.split("/")
            clean = [p for p in parts if p not in ("", ".", "..")]
            if parts and (parts[0] == "" or ".." in parts):
                if ".." in parts:
                    ctx.stderr.write(_b(f"warning:  skipped \"../\" path component(s) in "
                                        f"{name}\n"))
            if junk:
                if zi.is_dir():
                    continue
                clean = clean[-1:]
            rel = "/".join(clean) + ("/" if zi.is_dir() and clean else "")
            if not clean:
                continue
            target = rel if dest is None else _concat(dest, rel)
            mode = zi.external_attr >> 16
            is_link = zi.create_system == 3 and _st.S_ISLNK(mode)
            if zi.is_dir():
                if not os.path.isdir(target):
                    try:
                        os.makedirs(target, exist_ok=True)
                    except OSError as e:
                        _err(ctx, "checkdir error", f" cannot create {target}\n"
                             f"                 {_strerror(e)}")
                        status = 50
                        continue
                    if quiet == 0:
                        yield _b(f"   creating: {target}\n")
                dirs.append((target, zi))
                continue
            if os.path.lexists(target):
                if never:
                    continue
                if not overwrite and answer_all is None:
                    ctx.stderr.write(_b(f"replace {target}? [y]es, [n]o, [A]ll, [N]one, "
                                        f"[r]ename: "))
                    line = ctx.stdin.readline()
                    if not line:
                        ctx.stderr.write(b" NULL\n(EOF or read error, treating as \"[N]one\" "
                                         b"...)\n")
                        answer_all = "N"
                        status = max(status, 1)
                        continue
                    c = line[:1]
                    if c == b"A":
                        answer_all = "A"
                    elif c == b"N":
                        answer_all = "N"
                        continue
                    elif c not in (b"y", b"Y"):
                        continue
                elif answer_all == "N" and not overwrite:
                    continue
                try:
                    if os.path.isdir(target) and not os.path.islink(target):
                        continue
                    os.unlink(target)
                except OSError:
                    pass
            parent = _dir_name(target)
            if parent not in (".", "/") and not os.path.isdir(parent):
                try:
                    os.makedirs(parent, exist_ok=True)
                except OSError as e:
                    _err(ctx, "checkdir error", f" cannot create {parent}")
                    status = 50
                    continue
            try:
                if is_link:
                    link_to = _s(zf.read(zi))
                    if quiet == 0:
                        yield _b("    linking: %s  -> %s \n" % (target.ljust(22), link_to))
                    deferred.append((target, link_to))
                    continue
                verb = " extracting" if zi.compress_type == 0 else "  inflating"
                if quiet == 0:
                    yield _b("%s: %s  \n" % (verb, target.ljust(22)))
                with zf.open(zi) as f, open(target, "wb") as g:
                    for chunk in _read_chunks(f):
                        g.write(chunk)
                if zi.create_system == 3 and mode & 0o777:
                    _chmod_quiet(target, mode & 0o777)
                try:
                    t = _time.mktime(zi.date_time + (0, 0, -1))
                    os.utime(target, (t, t))
                except (OSError, OverflowError, ValueError):
                    pass
            except (OSError, zipfile.BadZipFile) as e:
                _err(ctx, "error", f" cannot create {target}\n        {_strerror(e)}")
                status = max(status, 50 if isinstance(e, OSError) else 2)
        if deferred:
            if quiet == 0:
                yield b"finishing deferred symbolic links:\n"
            for target, link_to in deferred:
                try:
                    os.symlink(link_to, target)
                    if quiet == 0:
                        yield _b("  %s -> %s\n" % (target.ljust(22), link_to))
                except OSError as e:
                    _err(ctx, "error", f" cannot create symbolic link {target}: {_strerror(e)}")
                    status = max(status, 50)
        for target, zi in reversed(dirs):
            try:
                t = _time.mktime(zi.date_time + (0, 0, -1))
                os.utime(target, (t, t))
            except (OSError, OverflowError, ValueError):
                pass
    for m in members:
        if m not in matched:
            ctx.stderr.write(_b(f"caution: filename not matched:  {m}\n"))
            status = 11
    return status


# ---------------------------------------------------------------------------------------
# readlink rmdir unlink chmod mktemp truncate (file commands agents reach for as well)


def readlink(ctx, argv):
    longs = {"canonicalize": ("f", 0), "canonicalize-existing": ("e", 0),
             "canonicalize-missing": ("m", 0), "no-newline": ("n", 0), "quiet": ("q", 0),
             "silent": ("s", 0), "verbose": ("v", 0), "zero": ("z", 0), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "femnqsvz", longs)
    except _Usage as e:
        return _usage(ctx, "readlink", e)
    mode, nonl, verbose, eol = None, False, False, b"\n"
    for k, _v in opts:
        if k == "help":
            yield _help("readlink", "[OPTION]... FILE...")
            return 0
        if k == "f":
            mode = "last"
        elif k == "e":
            mode = "all"
        elif k == "m":
            mode = "missing"
        elif k == "n":
            nonl = True
        elif k in ("q", "s"):
            verbose = False
        elif k == "v":
            verbose = True
        elif k == "z":
            eol = b"\0"
    if not args:
        return _usage(ctx, "readlink", _Usage("missing operand"))
    if nonl and len(args) > 1:
        _err(ctx, "readlink", "ignoring --no-newline with multiple arguments")
        nonl = False
    status = 0
    out = []
    for a in args:
        try:
            if mode is None:
                r = os.readlink(a)
            else:
                r = _canon(a, mode)
        except (OSError, _CanonError) as e:
            if verbose:
                _err(ctx, "readlink", f"{a}: {os.strerror(e.errno)}")
            status = 1
            continue
        out.append(_b(r) + (b"" if nonl else eol))
    yield b"".join(out)
    return status


def rmdir(ctx, argv):
    longs = {"parents": ("p", 0), "verbose": ("v", 0), "help": ("help", 0),
             "ignore-fail-on-non-empty": ("ignore", 0)}
    try:
        opts, args = _getopt(argv, "pv", longs)
    except _Usage as e:
        return _usage(ctx, "rmdir", e)
    parents = verbose = ignore = False
    for k, _v in opts:
        if k == "help":
            yield _help("rmdir", "[OPTION]... DIRECTORY...")
            return 0
        if k == "p":
            parents = True
        elif k == "v":
            verbose = True
        elif k == "ignore":
            ignore = True
    if not args:
        return _usage(ctx, "rmdir", _Usage("missing operand"))
    status = 0
    out = []
    for a in args:
        p = a
        while True:
            if verbose:
                out.append(_b(f"rmdir: removing directory, {_q(p)}\n"))
            try:
                os.rmdir(p)
            except OSError as e:
                if not (ignore and e.errno in (39, 66, 55)):
                    _err(ctx, "rmdir", f"failed to remove {_q(p)}: {_strerror(e)}")
                    status = 1
                break
            if not parents:
                break
            p = _dir_name(p.rstrip("/"))
            if p in (".", "/") or p.rstrip("/") == "":
                break
    if out:
        yield b"".join(out)
    return status


def unlink(ctx, argv):
    try:
        _opts, args = _getopt(argv, "", {"help": ("help", 0)})
    except _Usage as e:
        return _usage(ctx, "unlink", e)
    if not args:
        return _usage(ctx, "unlink", _Usage("missing operand"))
    if len(args) > 1:
        return _usage(ctx, "unlink", _Usage(f"extra operand {_q(args[1])}"))
    try:
        os.unlink(args[0])
    except OSError as e:
        _err(ctx, "unlink", f"cannot unlink {_q(args[0])}: {_strerror(e)}")
        return 1
    return 0


def chmod(ctx, argv):
    """chmod validates and applies modes; in the sandbox (WASI) files carry no permission
    bits, so the call succeeds and changes nothing (ls -l keeps showing 0644/0755)."""
    args = argv[1:]
    # a mode such as -w or -x looks like an option: GNU takes it as the mode
    rest = []
    mode_s = None
    recursive = verbose = changes = quiet = False
    ref = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i + 1:])
            break
        if a in ("-R", "--recursive"):
            recursive = True
        elif a in ("-v", "--verbose"):
            verbose = True
        elif a in ("-c", "--changes"):
            changes = True
        elif a in ("-f", "--silent", "--quiet"):
            quiet = True
        elif a.startswith("--reference="):
            ref = a.split("=", 1)[1]
        elif a == "--help":
            yield _help("chmod", "[OPTION]... MODE[,MODE]... FILE...")
            return 0
        elif a.startswith("-") and len(a) > 1 and mode_s is None and ref is None and (
                a[1] in "rwxXst" and _parse_mode(a, 0) is not None):
            mode_s = a
        elif a.startswith("-") and len(a) > 1 and not a[1:].isdigit():
            bad = a[1]
            if a.startswith("--"):
                return _usage(ctx, "chmod", _Usage(f"unrecognized option '{a}'"))
            return _usage(ctx, "chmod", _Usage(f"invalid option -- '{bad}'"))
        else:
            rest.append(a)
        i += 1
    if ref is None and mode_s is None:
        if not rest:
            return _usage(ctx, "chmod", _Usage("missing operand"))
        mode_s = rest.pop(0)
    if not rest:
        return _usage(ctx, "chmod", _Usage(f"missing operand after {_q(mode_s or ref)}"))
    if ref is not None:
        try:
            refmode = _st.S_IMODE(_perm(os.stat(ref)))
        except OSError as e:
            _err(ctx, "chmod", f"failed to get attributes of {_q(ref)}: {_strerror(e)}")
            return 1
    elif _parse_mode(mode_s, 0o644) is None:
        _err(ctx, "chmod", f"invalid mode: {_q(mode_s)}")
        ctx.stderr.write(b"Try 'chmod --help' for more information.\n")
        return 1
    status = 0
    out = []

    def apply(p):
        nonlocal status
        try:
            st = os.stat(p)
        except OSError as e:
            if not quiet:
                _err(ctx, "chmod", f"cannot access {_q(p)}: {_strerror(e)}")
            status = 1
            return
        old = _st.S_IMODE(_perm(st))
        new = refmode if ref is not None else _parse_mode(mode_s, old)
        if _st.S_ISDIR(st.st_mode) and ref is None and "X" in mode_s:
            new = _parse_mode(mode_s.replace("X", "x"), old)
        try:
            _set_mode(p, new)
        except OSError as e:
            if not quiet:
                _err(ctx, "chmod", f"changing permissions of {_q(p)}: {_strerror(e)}")
            status = 1
            return
        if verbose or (changes and new != old):
            o = _st.filemode(old | _st.S_IFREG)[1:]
            nw = _st.filemode(new | _st.S_IFREG)[1:]
            if new != old:
                out.append(_b(f"mode of {_q(p)} changed from {old:04o} ({o}) to "
                              f"{new:04o} ({nw})\n"))
            else:
                out.append(_b(f"mode of {_q(p)} retained as {old:04o} ({o})\n"))
        if recursive and _st.S_ISDIR(st.st_mode) and not os.path.islink(p):
            try:
                names = [de.name for de in os.scandir(p)]
            except OSError:
                names = []
            for n in names:
                c = _concat(p, n)
                if not os.path.islink(c):
                    apply(c)

    for a in rest:
        apply(a)
        if out:
            yield b"".join(out)
            out.clear()
    return status


def mktemp(ctx, argv):
    import random

    longs = {"directory": ("d", 0), "dry-run": ("u", 0), "quiet": ("q", 0),
             "tmpdir": ("p", 2), "suffix": ("suffix", 1), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "duqp:t", longs)
    except _Usage as e:
        return _usage(ctx, "mktemp", e)
    isdir = dry = quiet = use_t = False
    tmpdir = None
    suffix = ""
    for k, v in opts:
        if k == "help":
            yield _help("mktemp", "[OPTION]... [TEMPLATE]")
            return 0
        if k == "d":
            isdir = True
        elif k == "u":
            dry = True
        elif k == "q":
            quiet = True
        elif k == "p":
            tmpdir = v if v else (ctx.env.get("TMPDIR") or "/tmp")
        elif k == "t":
            use_t = True
        elif k == "suffix":
            suffix = v
    if len(args) > 1:
        return _usage(ctx, "mktemp", _Usage(f"too many templates"))
    template = args[0] if args else "tmp.XXXXXXXXXX"
    if not args or use_t:
        if tmpdir is None:
            tmpdir = ctx.env.get("TMPDIR") or "/tmp"
    if "/" in template and (use_t or (tmpdir is not None and args)):
        if use_t:
            _err(ctx, "mktemp", f"invalid template, {_q(template)}, contains directory "
                 f"separator")
            return 1
    if not suffix:
        j = len(template)
        while j > 0 and template[j - 1] == "X":
            j -= 1
        if j == len(template) and "X" in template:
            k = template.rfind("X")
            suffix = template[k + 1:]
            template = template[:k + 1]
    n = len(template) - len(template.rstrip("X"))
    if n < 3:
        if not quiet:
            _err(ctx, "mktemp", f"too few X's in template {_q(template + suffix)}")
        return 1
    base = template[:-n]
    chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    rnd = random.SystemRandom() if hasattr(os, "urandom") else random
    for _attempt in range(100):
        name = base + "".join(rnd.choice(chars) for _ in range(n)) + suffix
        path = _concat(tmpdir, name) if tmpdir is not None else name
        if dry:
            if not os.path.lexists(path):
                yield _b(path) + b"\n"
                return 0
            continue
        try:
            if isdir:
                os.mkdir(path, 0o700)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.close(fd)
        except FileExistsError:
            continue
        except OSError as e:
            if not quiet:
                what = "directory" if isdir else "file"
                _err(ctx, "mktemp", f"failed to create {what} via template {_q(path[:len(path) - n - len(suffix)] + 'X' * n + suffix)}: {_strerror(e)}")
            return 1
        yield _b(path) + b"\n"
        return 0
    if not quiet:
        _err(ctx, "mktemp", "failed to create file: File exists")
    return 1


def truncate(ctx, argv):
    longs = {"no-create": ("c", 0), "size": ("s", 1), "reference": ("r", 1),
             "io-blocks": ("o", 0), "help": ("help", 0)}
    try:
        opts, args = _getopt(argv, "cs:r:o", longs)
    except _Usage as e:
        return _usage(ctx, "truncate", e)
    create, size_s, ref = True, None, None
    for k, v in opts:
        if k == "help":
            yield _help("truncate", "OPTION... FILE...")
            return 0
        if k == "c":
            create = False
        elif k == "s":
            size_s = v
        elif k == "r":
            ref = v
    if size_s is None and ref is None:
        return _usage(ctx, "truncate", _Usage("you must specify either '--size' or "
                                              "'--reference'"))
    if not args:
        return _usage(ctx, "truncate", _Usage("missing file operand"))
    op, num = "=", 0
    if size_s is not None:
        t = size_s
        if t[:1] in "+-<>/%":
            op, t = t[0], t[1:]
        try:
            num = _parse_size(t)
        except ValueError:
            _err(ctx, "truncate", f"invalid number: {_q(size_s)}")
            return 1
    if ref is not None:
        try:
            refsize = os.stat(ref).st_size
        except OSError as e:
            _err(ctx, "truncate", f"cannot stat {_q(ref)}: {_strerror(e)}")
            return 1
        if size_s is None:
            op, num = "=", refsize
    status = 0
    for a in args:
        try:
            if not os.path.exists(a):
                if not create:
                    continue
                open(a, "ab").close()
            cur = os.stat(a).st_size
            new = {"=": num, "+": cur + num, "-": max(cur - num, 0), "<": min(cur, num),
                   ">": max(cur, num), "/": (cur // num) * num if num else cur,
                   "%": -(-cur // num) * num if num else cur}[op]
            os.truncate(a, new)
        except OSError as e:
            _err(ctx, "truncate", f"cannot open {_q(a)} for writing: {_strerror(e)}")
            status = 1
    return status


COMMANDS = {
    "ls": ls, "find": find, "stat": stat, "du": du, "df": df, "mkdir": mkdir, "rm": rm,
    "cp": cp, "mv": mv, "touch": touch, "ln": ln, "basename": basename, "dirname": dirname,
    "realpath": realpath, "file": file, "gzip": gzip, "gunzip": gunzip, "zcat": zcat,
    "tar": tar, "zip": zip_, "unzip": unzip, "date": date, "readlink": readlink,
    "rmdir": rmdir, "unlink": unlink, "chmod": chmod, "mktemp": mktemp, "truncate": truncate,
}
