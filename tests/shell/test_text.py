#!/usr/bin/env python3
"""Direct checks of vivarium_shell_text against the machine's GNU tools (issue 49, H2).

Runs each line of text_cases.txt in a temporary fixture directory twice: with `LC_ALL=C bash -c`
and with the guest shell under the host's python3 (run_host.py), and compares stdout and exit
status byte for byte. `python3 tests/shell/test_text.py [substring]`; exit 1 on a mismatch."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_HOST = os.path.join(HERE, "run_host.py")


def fixture(d):
    def w(name, data):
        p = os.path.join(d, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    w("f1", b"a\nb\n")
    w("f2", b"hello world\n")
    w("nonl", b"a\nb")
    w("nums", b"".join(b"%d\n" % i for i in range(1, 30)))
    w("bin", b"a\0b\n")
    w("words", b"apple\nBanana\ncherry\napple\n  date\nbanana\n10\n9\n-3\n1.5\n1e3\nzeta alpha\nAPPLE\n\n")
    w("csv", b"name,age,city\nbob,30,paris\nalice,25,london\ncarol,35,berlin\ndan,,rome\nnodelim\n")
    w("tabs", b"a\tb\tc\n1\t2\t3\nx\ty\n")
    w("d/x.txt", b"hello\nworld\n")
    w("d/sub/y.py", b"print('hello')\n# TODO fix\n")
    w("d/z.txt", b"nope\n")
    w("log", b"".join(b"%s line %d %s\n" % (b"ERROR" if i % 7 == 0 else b"INFO", i, b"x" * (i % 5)) for i in range(100)))
    w("dup", b"a\na\nb\nB\nb\nc\nc\nc\n")
    w("ver", b"v1.10\nv1.2\nv1.9\nv2.0\nv1.2.3\n")
    w("hum", b"1K\n2M\n512\n3G\n1.5K\n")
    w("sp", b"  x  y\n\tz\n")
    w("ctl", b"a\x01b\x7f\x80\xff\tc\n")


CASES = [l for l in open(os.path.join(HERE, "text_cases.txt")).read().split("\n") if l and not l.startswith("#")] if os.path.exists(os.path.join(HERE, "text_cases.txt")) else []


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    bad = 0
    n = 0
    for case in CASES:
        if only and only not in case:
            continue
        n += 1
        env = dict(os.environ, LC_ALL="C", TZ="UTC")
        results = []
        for argv in (["bash", "-c", case], [sys.executable, RUN_HOST, "-c", case]):
            with tempfile.TemporaryDirectory() as d:
                fixture(d)
                results.append(subprocess.run(argv, capture_output=True, env=env, timeout=60, cwd=d))
        p, q = results
        if q.stdout != p.stdout or q.returncode != p.returncode:
            bad += 1
            print(f"FAIL {case}\n  bash: {p.returncode} {p.stdout[:400]!r}\n  ours: {q.returncode} {q.stdout[:400]!r}")
            print(f"  bash err: {p.stderr[:200]!r}\n  our err: {q.stderr[:600]!r}")
    print(f"{n - bad}/{n} match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
