#!/usr/bin/env python3
"""The shell's differential test (issue 49): every entry of tests/shell/corpus.txt run by the
machine's bash + GNU coreutils and by Vivarium's shell, each in a fresh copy of the fixture
tree (tests/shell/fixture.py), comparing stdout byte for byte and the exit status.

    python3 tests/shell/differential.py --host-python            # guest modules, host python3
    python3 tests/shell/differential.py --server http://127.0.0.1:8000
    options: --only SUBSTR (entries or areas containing it; repeatable), --json OUT,
             --report OUT (per-area summary and every mismatch, as printed), --known (also run
             corpus_known_diffs.txt, reported apart, never counted), --jobs N, --quiet,
             --bash-only (check the corpus against itself: two bash runs must agree)

Both sides run with LC_ALL=C, TZ=UTC, HOME the fixture directory, stdin empty. The fixture
directory is `<tmp>/<n>/w` on the host and `/w` in the sandbox (built there by the fixture's
own source under the guest's `python3 -c`, then `cd /w`); stdout has the host's `<tmp>/<n>`
replaced by nothing, so absolute paths read `/w/...` on both sides.
"""

import argparse
import base64
import concurrent.futures
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture  # noqa: E402

CORPUS = os.path.join(HERE, "corpus.txt")
KNOWN = os.path.join(HERE, "corpus_known_diffs.txt")
RUN_HOST = os.path.join(HERE, "run_host.py")
BASH = shutil.which("bash") or "/bin/bash"
PATH = "/usr/local/bin:/usr/bin:/bin"
TIMEOUT = 20
HOME_NAME = "w"


class Entry:
    def __init__(self, area, source, line, known=False, why=None):
        self.area = area
        self.source = source
        self.line = line
        self.known = known
        self.why = why

    def label(self):
        first = self.source.split("\n", 1)[0]
        more = " ..." if "\n" in self.source else ""
        return f"{self.area} (line {self.line}): {first}{more}"


def parse(path, known=False):
    """Entries of a corpus file: one a line, `%%` blocks, `# --- area` headers."""
    entries = []
    area = "misc"
    why = None
    block = None
    start = 0
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if block is not None:
            if line == "%%":
                entries.append(Entry(area, "\n".join(block) + "\n", start, known, why))
                block = None
                why = None
            else:
                block.append(line)
            continue
        if line == "%%":
            block = []
            start = n
            continue
        if not line.strip():
            continue
        if line.startswith("#"):
            if line.startswith("# ---"):
                area = line[5:].strip()
            elif line.startswith("# why:"):
                why = line[6:].strip()
            elif why is not None and line.startswith("# "):
                why += " " + line[2:].strip()
            continue
        entries.append(Entry(area, line, n, known, why))
        why = None
    if block is not None:
        raise SystemExit(f"{path}: a %% block starting at line {start} is not closed")
    return entries


def environment(home):
    return {"PATH": PATH, "HOME": home, "LC_ALL": "C", "TZ": "UTC", "PWD": home}


class Fixtures:
    """Fresh fixture trees under one temporary directory; `<base>/<n>/w` each."""

    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="vivdiff.")
        self.count = 0
        self.lock = threading.Lock()

    def make(self):
        with self.lock:
            self.count += 1
            n = self.count
        parent = os.path.join(self.base, str(n))
        home = os.path.join(parent, HOME_NAME)
        fixture.build(home)
        return parent, home

    def close(self):
        shutil.rmtree(self.base, ignore_errors=True)


def normalize(out, parent):
    return out.replace(parent.encode(), b"")


def run_local(argv, entry_source, fixtures):
    parent, home = fixtures.make()
    try:
        p = subprocess.run(
            argv + [entry_source],
            cwd=home,
            env=environment(home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
        )
        return p.returncode, normalize(p.stdout, parent), p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", normalize(e.stdout or b"", parent), e.stderr or b""
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def run_bash(entry, fixtures):
    return run_local([BASH, "-c"], entry.source, fixtures)


def run_host_python(entry, fixtures):
    return run_local([sys.executable, RUN_HOST, "-c"], entry.source, fixtures)


def prelude():
    """Shell lines that build the fixture at /w in the sandbox and enter it."""
    with open(os.path.join(HERE, "fixture.py"), "rb") as f:
        packed = base64.b64encode(zlib.compress(f.read(), 9)).decode()
    build = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return f"python3 -c \"{build}\" /{HOME_NAME} && cd /{HOME_NAME}\n"


def server_request(url, entry_source, timeout=60):
    body = {
        "language": "bash",
        "code": prelude() + entry_source,
        "template": "python",
        "env": {"HOME": f"/{HOME_NAME}", "LC_ALL": "C", "TZ": "UTC"},
        "policy": "off",
        "leakage": "off",
    }
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/execute",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return {"http_error": e.code, "body": e.read().decode("utf-8", "replace")}


def run_server(url):
    def run(entry, _fixtures):
        r = server_request(url, entry.source)
        if "http_error" in r:
            return f"http {r['http_error']}", b"", r["body"].encode()
        status = r.get("exit_code")
        if r.get("status") not in ("ok", "error", "success", "completed") and status is None:
            status = r.get("status")
        return status, r.get("stdout", "").encode(), r.get("stderr", "").encode()

    return run


def lossy(b):
    """What a JSON response's string makes of bytes (invalid UTF-8 replaced)."""
    return b.decode("utf-8", "replace").encode()


KEYWORDS = {"if", "then", "else", "elif", "fi", "while", "until", "do", "done", "esac", "in",
            "!", "{", "}", "]]", "time"}


def commands_of(source):
    """The command names an entry uses (roughly: each word at a command's start)."""
    import re
    import shlex

    names = set()
    text = re.sub(
        r"<<-?\s*'?(\w+)'?([^\n]*)\n.*?\n\s*\1(\n|$)", r"\2\n", source, flags=re.S
    )
    # separators outside quotes become newlines
    flat, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                flat.append(c)
                i += 1
                c = text[i] if i < len(text) else ""
            flat.append(c)
        elif c in "'\"":
            quote = c
            flat.append(c)
        elif c == "\\":
            flat.append(text[i : i + 2])
            i += 1
        elif c in "|;&()`{}\n":
            flat.append("\n")
        elif c == "$" and text[i + 1 : i + 2] == "(":
            flat.append("\n")
            i += 1
        else:
            flat.append(c)
        i += 1
    for piece in "".join(flat).split("\n"):
        try:
            words = shlex.split(piece, comments=True)
        except ValueError:
            words = piece.split()
        if words and words[0] in ("for", "case", "select", "function"):
            continue
        if words and words[0] in ("[", "[["):
            names.add("test")
            continue
        while words and (("=" in words[0] and not words[0].startswith("=")) or words[0] in KEYWORDS):
            words = words[1:]
        if len(words) >= 1 and words[0] in ("then", "do", "else"):
            words = words[1:]
        if words and re.match(r"^[A-Za-z_][\w.\[-]*$", words[0]):
            names.add(words[0])
    return names


def compact_diff(want, got, limit=14):
    a = want.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    b = got.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    lines = [
        line.rstrip("\n") if line.endswith("\n") else line + "\\ (no newline)"
        for line in difflib.unified_diff(a, b, "bash", "shell", n=1)
    ]
    lines = lines[2:]  # the ---/+++ header
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--host-python", action="store_true")
    mode.add_argument("--server", metavar="URL")
    mode.add_argument("--bash-only", action="store_true")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--report", metavar="OUT")
    ap.add_argument("--known", action="store_true")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--quiet", action="store_true", help="summary only")
    args = ap.parse_args()

    entries = parse(CORPUS)
    if args.known:
        entries += parse(KNOWN, known=True)
    if args.only:
        entries = [e for e in entries if any(s in e.source or s in e.area for s in args.only)]
    if args.host_python:
        tested, jobs = run_host_python, args.jobs or 2 * (os.cpu_count() or 2)
    elif args.server:
        tested, jobs = run_server(args.server), args.jobs or 4
    else:
        tested, jobs = run_bash, args.jobs or 2 * (os.cpu_count() or 2)
    text_only = bool(args.server)

    fixtures = Fixtures()
    started = time.monotonic()

    def one(entry):
        want = run_bash(entry, fixtures)
        got = tested(entry, fixtures)
        return entry, want, got

    results = []
    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            results = list(pool.map(one, entries))
    finally:
        fixtures.close()
    elapsed = time.monotonic() - started

    out = []
    areas = {}
    records = []
    matched = total = 0
    for entry, (ws, wo, _we), (gs, go, ge) in results:
        if text_only:
            wo = lossy(wo)
        ok = ws == gs and wo == go
        rec = {
            "area": entry.area,
            "line": entry.line,
            "entry": entry.source,
            "known": entry.known,
            "match": ok,
            "bash": {"status": ws, "stdout": wo.decode("utf-8", "backslashreplace")},
            "shell": {
                "status": gs,
                "stdout": go.decode("utf-8", "backslashreplace"),
                "stderr": ge.decode("utf-8", "backslashreplace")[-2000:],
            },
        }
        if entry.why:
            rec["why"] = entry.why
        records.append(rec)
        if entry.known:
            continue
        total += 1
        matched += ok
        a = areas.setdefault(entry.area, [0, 0])
        a[0] += ok
        a[1] += 1

    mismatches = [r for r in records if not r["match"] and not r["known"]]
    if not args.quiet:
        for r in mismatches:
            out.append(f"MISMATCH {r['area']} (line {r['line']}): {r['entry'].rstrip()}")
            if r["bash"]["status"] != r["shell"]["status"]:
                out.append(f"  status: bash {r['bash']['status']}, shell {r['shell']['status']}")
            want = r["bash"]["stdout"].encode("utf-8", "surrogateescape")
            got = r["shell"]["stdout"].encode("utf-8", "surrogateescape")
            if want != got:
                out.extend("  " + d for d in compact_diff(want, got))
            err = r["shell"]["stderr"].strip().splitlines()
            if err:
                tail = err[-3:]
                out.extend("  stderr: " + e[:200] for e in tail)
            out.append("")
    summary = []
    known = [r for r in records if r["known"]]
    if known:
        same = sum(r["match"] for r in known)
        summary.append(f"known differences: {same} of {len(known)} happen to match now")
    summary.append("per area (matched/total):")
    for area, (m, t) in areas.items():
        flag = "" if m == t else "  <--"
        summary.append(f"  {area:42s} {m:3d}/{t:<3d}{flag}")
    tally = {}
    for r in mismatches:
        for name in sorted(commands_of(r["entry"])):
            tally[name] = tally.get(name, 0) + 1
    if tally:
        summary.append("mismatched entries by the commands they use (an entry counts for each):")
        ranked = sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))
        for i in range(0, len(ranked), 6):
            summary.append("  " + "  ".join(f"{k} {v}" for k, v in ranked[i : i + 6]))
    pct = 100.0 * matched / total if total else 0.0
    summary.append(f"matched {matched}/{total} ({pct:.1f} %) in {elapsed:.1f} s")
    sys.stdout.write("\n".join(out + summary) + "\n")
    if args.report:
        with open(args.report, "w") as f:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            mode = "--server " + args.server if args.server else "--host-python"
            f.write(f"{stamp}: python3 tests/shell/differential.py {mode}\n")
            f.write("\n".join(summary + ["", "MISMATCHES", ""] + out) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"matched": matched, "total": total, "percent": pct, "results": records},
                f,
                indent=1,
            )
    return 0 if matched == total else 1


if __name__ == "__main__":
    sys.exit(main())
