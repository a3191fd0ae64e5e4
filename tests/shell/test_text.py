#!/usr/bin/env python3
"""Direct checks of vivarium_shell_text against the machine's GNU tools (issue 49, H2).

Runs each case of CASES in a temporary fixture directory twice: with `LC_ALL=C bash -c` and
with a minimal pipeline runner over the module's COMMANDS (no vivarium_shell needed), and
compares stdout and exit status. `python3 tests/shell/test_text.py [substring]`."""

import importlib.util
import io
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "vivarium_shell_text", os.path.join(HERE, "..", "..", "python-wasi", "guest", "shell_text.py")
)
T = importlib.util.module_from_spec(spec)
spec.loader.exec_module(T)


class Reader:
    def __init__(self, gen):
        self.gen = gen
        self.buf = b""
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        try:
            self.buf += next(self.gen)
            return True
        except StopIteration:
            self.eof = True
            return False

    def read(self, n=-1):
        if n is None or n < 0:
            while self._fill():
                pass
            out, self.buf = self.buf, b""
            return out
        while len(self.buf) < n and self._fill():
            pass
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def readline(self):
        while b"\n" not in self.buf and self._fill():
            pass
        i = self.buf.find(b"\n")
        if i < 0:
            out, self.buf = self.buf, b""
        else:
            out, self.buf = self.buf[: i + 1], self.buf[i + 1 :]
        return out

    def __iter__(self):
        while True:
            line = self.readline()
            if not line:
                return
            yield line

    def readlines(self):
        return list(self)

    def close(self):
        pass


class Ctx:
    def __init__(self, stdin, stderr):
        self.stdin = stdin
        self.stderr = stderr
        self.env = dict(os.environ)
        self.cwd = os.getcwd()

    def run(self, argv, stdin=b""):
        if argv[0] == "echo":
            return 0, (" ".join(argv[1:]) + "\n").encode()
        fn = T.COMMANDS.get(argv[0])
        if fn is None:
            self.stderr.write(f"{argv[0]}: command not found\n".encode())
            return 127, b""
        r = Reader(iter([stdin]) if isinstance(stdin, bytes) else iter(()))
        out = []
        gen = fn(Ctx(r, self.stderr), argv)
        try:
            while True:
                out.append(next(gen))
        except StopIteration as e:
            return e.value or 0, b"".join(out)


def _gen_status(gen, box):
    box.append((yield from gen))


def run_pipeline(src, stdin=b""):
    stages = [shlex.split(p) for p in src.split(" | ")]
    err = io.BytesIO()
    upstream = iter([stdin])
    statuses = []
    for argv in stages:
        redirect_in = None
        if "<" in argv:
            i = argv.index("<")
            redirect_in = argv[i + 1]
            del argv[i : i + 2]
        if redirect_in:
            upstream = iter([open(redirect_in, "rb").read()])
        ctx = Ctx(Reader(upstream), err)
        box = []
        statuses.append(box)
        upstream = _gen_status(T.COMMANDS[argv[0]](ctx, argv), box)
    out = b"".join(upstream)
    return out, (statuses[-1][0] or 0), err.getvalue()


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
    with tempfile.TemporaryDirectory() as d:
        fixture(d)
        os.chdir(d)
        for case in CASES:
            if only and only not in case:
                continue
            n += 1
            env = dict(os.environ, LC_ALL="C")
            p = subprocess.run(["bash", "-c", case], capture_output=True, env=env)
            try:
                out, st, err = run_pipeline(case)
            except Exception as e:  # a crash is a mismatch
                import traceback

                out, st, err = b"", -1, traceback.format_exc().encode()
            if out != p.stdout or st != p.returncode:
                bad += 1
                print(f"FAIL {case}\n  bash: {p.returncode} {p.stdout[:400]!r}\n  ours: {st} {out[:400]!r}")
                print(f"  bash err: {p.stderr[:200]!r}\n  our err: {err[:600]!r}")
    print(f"{n - bad}/{n} match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
