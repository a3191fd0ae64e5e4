#!/usr/bin/env python3
"""Checks of vivarium_ipy (python-wasi/guest/ipy.py), notebook cells (issue 49, H8).

    python3 tests/shell/test_ipy.py            # the checks, with the host's python3
    python3 tests/shell/test_ipy.py -k who     # those whose name holds "who"
    python3 tests/shell/test_ipy.py --compare-ipython PYTHON
        # TABLE against the real IPython's TransformerManager, run by PYTHON (a python
        # with IPython installed, e.g. target/jupyterlab_venv/bin/python)
    python3 tests/shell/test_ipy.py --compare-guest VIVARIUM
        # TABLE through the guest's CPython 3.15 (`VIVARIUM run`, e.g. target/release/vivarium)

The table's expected translations are checked in below, so the checks need no IPython; the
two comparisons are how they were made and are kept honest. The module is loaded with
tests/shell/run_host.py's loader, under its guest name, with the guest shell beside it (the
`!` and `%%bash` checks use the real vivarium_shell).
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import traceback
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_host  # noqa: E402

try:
    run_host.load()
except Exception:
    traceback.print_exc()
IPY = sys.modules.get("vivarium_ipy")
if IPY is None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "vivarium_ipy", os.path.join(HERE, "..", "..", "python-wasi", "guest", "ipy.py")
    )
    IPY = importlib.util.module_from_spec(spec)
    sys.modules["vivarium_ipy"] = IPY
    spec.loader.exec_module(IPY)
SHELL = sys.modules.get("vivarium_shell")
HAVE_SHELL = SHELL is not None and hasattr(SHELL, "run") and hasattr(SHELL, "run_capture")

S = "_vivarium_ipy_()"

# (cell, its translation). IPython's get_ipython() is spelt _vivarium_ipy_() here; where
# IPython joins continued lines or drops leading blank lines, this keeps blank lines so
# every other line keeps its number (the comparison ignores blank lines).
TABLE = [
    ("%matplotlib inline\nimport numpy as np\n",
     f"{S}.run_line_magic('matplotlib', 'inline')\nimport numpy as np\n"),
    ("!pip install seaborn\nimport seaborn\n",
     f"{S}.system('pip install seaborn')\nimport seaborn\n"),
    ("files = !ls\nprint(files)\n",
     f"files = {S}.getoutput('ls')\nprint(files)\n"),
    ("%%bash\necho hi\nls | wc -l\n",
     f"{S}.run_cell_magic('bash', '', 'echo hi\\nls | wc -l\\n')\n"),
    ("%%writefile -a out.txt\nline 'one'\n",
     f"{S}.run_cell_magic('writefile', '-a out.txt', \"line 'one'\\n\")\n"),
    ("%time x = sum(range(10))\n",
     f"{S}.run_line_magic('time', 'x = sum(range(10))')\n"),
    ("%timeit -n 10 -r 2 f(x)\n",
     f"{S}.run_line_magic('timeit', '-n 10 -r 2 f(x)')\n"),
    ("obj?\n", f"{S}.run_line_magic('pinfo', 'obj')\n"),
    ("obj??\n", f"{S}.run_line_magic('pinfo2', 'obj')\n"),
    ("?obj\n", f"{S}.run_line_magic('pinfo', 'obj')\n"),
    ("??obj\n", f"{S}.run_line_magic('pinfo2', 'obj')\n"),
    ("np.linalg.norm?\n", f"{S}.run_line_magic('pinfo', 'np.linalg.norm')\n"),
    ("%time?\n", f"{S}.run_line_magic('pinfo', '%time')\n"),
    ("a*?\n", f"{S}.run_line_magic('psearch', 'a*')\n"),
    ("x[0]?\n", f"{S}.run_line_magic('pinfo', 'x[0]')\n"),
    ("def f():\n    !ls\n    x = !pwd\n    return x\n",
     f"def f():\n    {S}.system('ls')\n    x = {S}.getoutput('pwd')\n    return x\n"),
    ("if True:\n    %cd /tmp\nprint(2)\n",
     f"if True:\n    {S}.run_line_magic('cd', '/tmp')\nprint(2)\n"),
    ("!echo a \\\n  b\nprint(1)\n",
     f"{S}.system('echo a    b')\n\nprint(1)\n"),
    ("x = %pwd\n", f"x = {S}.run_line_magic('pwd', '')\n"),
    ("!!ls -a\n", f"{S}.getoutput('ls -a')\n"),
    ("  %pwd\n  x = 1\n", f"{S}.run_line_magic('pwd', '')\nx = 1\n"),
    ("\n%%time\nx = 1\n", f"\n{S}.run_cell_magic('time', '', 'x = 1\\n')\n"),
    ("%env FOO=bar\n", f"{S}.run_line_magic('env', 'FOO=bar')\n"),
    ("!ls {path} $name\n", f"{S}.system('ls {{path}} $name')\n"),
    ("result = !echo $HOME\n", f"result = {S}.getoutput('echo $HOME')\n"),
    ("%load_ext autoreload\n%autoreload 2\n",
     f"{S}.run_line_magic('load_ext', 'autoreload')\n{S}.run_line_magic('autoreload', '2')\n"),
    ("/print 1 2\n", "print(1, 2)\n"),
    (",print a b\n", 'print("a", "b")\n'),
    (";print a b\n", 'print("a b")\n'),
    ("x = [\n    1,\n    2]\n!ls\n", f"x = [\n    1,\n    2]\n{S}.system('ls')\n"),
    ("%%timeit -n 2\nsum(range(10))\n",
     f"{S}.run_cell_magic('timeit', '-n 2', 'sum(range(10))\\n')\n"),
    ("a = !ls\nb = %pwd\n!echo done\n",
     f"a = {S}.getoutput('ls')\nb = {S}.run_line_magic('pwd', '')\n{S}.system('echo done')\n"),
    ("x = 1 \\\n  + 2\n%who\n", f"x = 1 \\\n  + 2\n{S}.run_line_magic('who', '')\n"),
    ("%who_ls \\\n  int\nx = 1\n", f"{S}.run_line_magic('who_ls', '   int')\n\nx = 1\n"),
    ("y = %who_ls int\n", f"y = {S}.run_line_magic('who_ls', 'int')\n"),
    ("print('''\n!not a command\n''')\n!echo real\n",
     f"print('''\n!not a command\n''')\n{S}.system('echo real')\n"),
    ("for i in range(2):\n    !echo $i\n", f"for i in range(2):\n    {S}.system('echo $i')\n"),
    ("%%capture out\nprint(1)\n", f"{S}.run_cell_magic('capture', 'out', 'print(1)\\n')\n"),
    ("%pip install requests==2.31 'numpy>=1'\n",
     f"{S}.run_line_magic('pip', \"install requests==2.31 'numpy>=1'\")\n"),
    ("%%sh\nexit 3", f"{S}.run_cell_magic('sh', '', 'exit 3\\n')\n"),
    ("x = 1\n%foo bar\n", f"x = 1\n{S}.run_line_magic('foo', 'bar')\n"),
    ("%%foo\nbody\n", f"{S}.run_cell_magic('foo', '', 'body\\n')\n"),
    ("x = 1\nx\n", "x = 1\nx\n"),
]

# Python with no IPython syntax, some of it looking close: needs_transform says no, and the
# translation is the cell itself.
PLAIN = [
    "print('hello')\n",
    "x = 5 % 3\ny = x != 2\n",
    "s = '%s' % 1\nt = \"!x\"\n",
    "doc = '''\n%magic in a string\n!bang in a string\nwhat?\n'''\n",
    "# %comment\n# !comment\n# what?\n",
    "x = (1\n     / 2)\n",
    "a = [1,\n     2]\n",
    "y = f'{x!r}'\n",
    "z = 10 %3\n",
    "d = {'a?': 1}\n",
    "if x != 3:\n    pass\n",
    "",
]


def translate(cell):
    return IPY.transform(cell)


class Capture(io.TextIOWrapper):
    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def text(self):
        self.flush()
        return self.buffer.getvalue().decode("utf-8", "replace")


class Cell:
    """Runs cells as the host does (vivarium_ipy.run) in a fresh `__main__`, capturing
    stdout and stderr (text and bytes), in a temporary working directory."""

    def __enter__(self):
        self.main = types.ModuleType("__main__")
        self.old_main = sys.modules["__main__"]
        sys.modules["__main__"] = self.main
        self.out, self.err = Capture(), Capture()
        self.old_streams = sys.stdout, sys.stderr, sys.displayhook
        sys.stdout, sys.stderr = self.out, self.err
        self.shown = []
        sys.displayhook = lambda v: v is not None and self.shown.append(v)
        self.old_cwd = os.getcwd()
        self.tmp = tempfile.TemporaryDirectory()
        os.chdir(self.tmp.name)
        self.old_env = dict(os.environ)
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr, sys.displayhook = self.old_streams
        sys.modules["__main__"] = self.old_main
        os.chdir(self.old_cwd)
        os.environ.clear()
        os.environ.update(self.old_env)
        self.tmp.cleanup()
        return False

    @property
    def ns(self):
        return self.main.__dict__

    def run(self, source, echo=False):
        IPY.run(source, echo)
        return self

    def error(self, source):
        """The traceback the excepthook would show for `source`, as text."""
        try:
            IPY.run(source, False)
        except BaseException as e:
            tb = IPY.trim(e.__traceback__) or e.__traceback__
            return "".join(traceback.format_exception(type(e), e, tb))
        raise AssertionError("no error")

    def stdout(self):
        return self.out.text()

    def stderr(self):
        return self.err.text()


def _short(text):
    return text if len(text) < 50 else text[:25] + "<...>" + text[-25:]


class Transform(unittest.TestCase):
    def test_table(self):
        for cell, expected in TABLE:
            with self.subTest(cell=cell):
                self.assertEqual(translate(cell), expected)
                self.assertTrue(IPY.needs_transform(cell) or cell == expected)

    def test_line_numbers_are_kept(self):
        for cell, _ in TABLE:
            if cell.lstrip().startswith("%%"):
                continue
            with self.subTest(cell=cell):
                want = cell if cell.endswith("\n") else cell + "\n"
                self.assertEqual(translate(cell).count("\n"), want.count("\n"))

    def test_plain_python_is_left_alone(self):
        for cell in PLAIN:
            with self.subTest(cell=cell):
                self.assertFalse(IPY.needs_transform(cell))
                self.assertEqual(translate(cell).rstrip("\n"), cell.rstrip("\n"))

    def test_translations_compile(self):
        for cell, expected in TABLE:
            if "foo" in cell or "x[0]" in cell:
                continue
            with self.subTest(cell=cell):
                compile(expected, "<t>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT

    def test_needs_transform_is_cheap_on_plain_python(self):
        import time

        big = "".join(f"x{i} = {i} % 7  # a comment\n" for i in range(2000))
        t0 = time.perf_counter()
        for _ in range(50):
            self.assertFalse(IPY.needs_transform(big))
        per = (time.perf_counter() - t0) / 50
        # About 1 ms on an idle host; the tokenizer alone would take some 30 times longer.
        self.assertLess(per, 0.01, f"{per * 1e3:.2f} ms for 2000 plain lines")


class Magics(unittest.TestCase):
    def test_time_prints_ipythons_format_and_returns_the_value(self):
        with Cell() as c:
            c.run("%time y = sum(range(1000))\n%time 6 * 7\n", echo=True)
            lines = c.stdout().splitlines()
            unit = r"[0-9.]+ (?:s|ms|\u03bcs|ns)"
            self.assertEqual(len(lines), 4, lines)
            for cpu, wall in (lines[0:2], lines[2:4]):
                self.assertRegex(cpu, rf"^CPU times: user {unit}, sys: {unit}, total: {unit}$")
                self.assertRegex(wall, rf"^Wall time: {unit}$")
            self.assertEqual(c.ns["y"], 499500)
            self.assertEqual(c.shown, [42])

    def test_cell_time_runs_the_body_and_shows_its_last_value(self):
        with Cell() as c:
            c.run("%%time\na = 2\na * 21\n", echo=True)
            self.assertEqual(c.shown, [42])
            self.assertIn("Wall time:", c.stdout())

    def test_timeit_formats_and_options(self):
        with Cell() as c:
            c.run("%timeit -n 5 -r 3 sum(range(10))\n")
            self.assertRegex(
                c.stdout(),
                r"^(?:The slowest run took [0-9.]+ times longer than the fastest\. This could "
                r"mean that an intermediate result is being cached\.\n)?"
                r"[0-9.]+ (?:s|ms|\u03bcs|ns) \xb1 [0-9.]+ (?:s|ms|\u03bcs|ns) per loop "
                r"\(mean \xb1 std\. dev\. of 3 runs, 5 loops each\)\n$",
            )
            c.run("r = %timeit -o -q -n 1 -r 1 pass\n")
            r = c.ns["r"]
            self.assertEqual((r.loops, r.repeat), (1, 1))
            self.assertIn("of 1 run, 1 loop each)", str(r))

    def test_timeit_picks_its_loop_count_as_ipython_does(self):
        with Cell() as c:
            c.run("r = %timeit -o -q -r 2 sum(range(50))\n")
            r = c.ns["r"]
            self.assertEqual(r.repeat, 2)
            self.assertTrue(r.loops in [10**i for i in range(10)], r.loops)
            # IPython's rule: the first power of ten that takes 0.2 s or more.
            self.assertGreaterEqual(r.loops * r.average, 0.1)

    def test_format_time_matches_ipython(self):
        f = IPY._format_time
        self.assertEqual(f(0), "0 ns")
        self.assertEqual(f(1.5e-6), "1.5 \u03bcs")
        self.assertEqual(f(0.0123), "12.3 ms")
        self.assertEqual(f(2.0), "2 s")
        self.assertEqual(f(125.0), "2min 5s")

    def test_who_and_whos(self):
        with Cell() as c:
            c.run("%who\n")
            self.assertEqual(c.stdout(), "Interactive namespace is empty.\n")
        with Cell() as c:
            c.run("import string\n_hidden = 1\nalpha = 123\nbeta = 'test'\nitems = [1, 2]\n%who\n%whos\n")
            self.assertEqual(
                c.stdout(),
                "alpha\t beta\t items\t string\t \n"
                "Variable   Type      Data/Info\n"
                "------------------------------\n"
                "alpha      int       123\n"
                "beta       str       test\n"
                "items      list      n=2\n"
                f"string     module    {_short(str(__import__('string')))}\n",
            )
            c.run("names = %who_ls str\n")
            self.assertEqual(c.ns["names"], ["beta"])

    def test_cd_and_pwd(self):
        with Cell() as c:
            os.mkdir("sub")
            here = os.getcwd()
            c.run("%cd sub\nx = %pwd\n%cd -\n")
            sub = os.path.join(here, "sub")
            self.assertEqual(c.stdout(), f"{sub}\n{here}\n")
            self.assertEqual(c.ns["x"], sub)
            self.assertEqual(os.getcwd(), here)

    def test_env(self):
        with Cell() as c:
            c.run("%env VIV_A=1\n%env VIV_B two\nb = %env VIV_B\nall = %env\n")
            self.assertEqual(c.stdout(), "env: VIV_A=1\nenv: VIV_B=two\n")
            self.assertEqual(os.environ["VIV_A"], "1")
            self.assertEqual(c.ns["b"], "two")
            self.assertEqual(c.ns["all"]["VIV_A"], "1")
            os.environ["MY_API_KEY"] = "s3cret"
            c.run("all = %env\n")
            self.assertEqual(c.ns["all"]["MY_API_KEY"], "<hidden>")
            tb = c.error("%env VIV_NOPE\n")
            self.assertTrue(tb.endswith("UsageError: Environment does not have key: VIV_NOPE\n"), tb)

    def test_writefile(self):
        with Cell() as c:
            c.run("%%writefile hello.py\nprint('hi')\n")
            c.run("%%writefile -a hello.py\nprint('again')\n")
            c.run("%%writefile hello.py\nprint('new')\n")
            self.assertEqual(
                c.stdout(), "Writing hello.py\nAppending to hello.py\nOverwriting hello.py\n"
            )
            with open("hello.py") as f:
                self.assertEqual(f.read(), "print('new')\n")

    def test_capture(self):
        with Cell() as c:
            c.run("%%capture cap\nprint('out')\nimport sys\nprint('err', file=sys.stderr)\n")
            self.assertEqual(c.stdout(), "")
            self.assertEqual(c.stderr(), "")
            cap = c.ns["cap"]
            self.assertEqual((cap.stdout, cap.stderr), ("out\n", "err\n"))
            cap.show()
            self.assertEqual(c.stdout(), "out\n")

    def test_silent_magics_are_accepted(self):
        with Cell() as c:
            c.run(
                "%matplotlib inline\n%matplotlib agg\n%load_ext autoreload\n%autoreload 2\n"
                "%config InlineBackend.figure_format = 'retina'\n%reload_ext autoreload\nx = 1\n"
            )
            self.assertEqual((c.stdout(), c.stderr(), c.ns["x"]), ("", "", 1))

    def test_unknown_magics_are_usage_errors_at_the_callers_line(self):
        with Cell() as c:
            tb = c.error("x = 1\n\n%foo bar\n")
            self.assertTrue(tb.endswith("UsageError: Line magic function `%foo` not found.\n"), tb)
            self.assertIn('line 3, in <module>\n    %foo bar\n', tb)
            self.assertNotIn("ipy.py", tb)
            tb = c.error("%%foo\nbody\n")
            self.assertTrue(tb.endswith("UsageError: Cell magic `%%foo` not found.\n"), tb)

    def test_syntax_error_names_the_callers_line(self):
        with Cell() as c:
            try:
                c.run("x = 1\n%pwd\nx = = 2\n")
            except SyntaxError as e:
                self.assertEqual((e.lineno, e.text), (3, "x = = 2"[: len(e.text)] + e.text[7:]))
            else:
                self.fail("no SyntaxError")
            try:
                c.run("!echo hi\ny = (\n")
            except SyntaxError as e:
                self.assertEqual(e.lineno, 2)
            else:
                self.fail("no SyntaxError")

    def test_error_in_a_cell_magic_body_keeps_its_line(self):
        with Cell() as c:
            tb = c.error("%%time\nx = 1\n1/0\n")
            self.assertIn("line 3, in <module>\n    1/0\n", tb)
            self.assertTrue(tb.endswith("ZeroDivisionError: division by zero\n"), tb)
            tb = c.error("%%capture\n\nraise ValueError('v')\n")
            self.assertIn("line 3, in <module>\n    raise ValueError('v')\n", tb)

    def test_echo_of_a_final_expression_and_top_level_await(self):
        with Cell() as c:
            c.run("import asyncio\n%matplotlib inline\nawait asyncio.sleep(0)\n1 + 1\n", echo=True)
            self.assertEqual(c.shown, [2])
            c.run("%pwd\n", echo=False)
            self.assertEqual(c.shown, [2])

    def test_get_ipython_is_a_builtin_once_a_cell_ran(self):
        with Cell() as c:
            c.run("%matplotlib inline\nip = get_ipython()\nip.run_line_magic('env', 'VIV_C=3')\n")
            self.assertIs(c.ns["ip"], IPY.get_ipython())
            self.assertIs(c.ns["ip"].user_ns, c.ns)
            c.run("get_ipython = None\n%env VIV_D=4\n")  # the translation does not use the name
            self.assertEqual(os.environ.get("VIV_D"), "4")

    def test_help(self):
        with Cell() as c:
            c.run("def f(a, b=2):\n    'Adds.'\n    return a + b\nf?\n")
            out = c.stdout()
            self.assertIn("Signature: f(a, b=2)\n", out)
            self.assertIn("Docstring: Adds.\n", out)
            self.assertIn("function", out)
            c.run("nothing_here?\n")
            self.assertIn("Object `nothing_here` not found.\n", c.stdout())

    def test_pip_without_the_shells_pip_names_what_is_installed(self):
        shell = sys.modules.pop("vivarium_shell", None)
        try:
            with Cell() as c:
                c.run("%pip install json5_not_a_package_h8 unittest\n")
                self.assertIn("Requirement already satisfied: unittest\n", c.stdout())
                self.assertIn("json5_not_a_package_h8", c.stderr())
        finally:
            if shell is not None:
                sys.modules["vivarium_shell"] = shell

    def test_var_expand(self):
        shell = IPY.get_ipython()
        with Cell() as c:
            c.ns.update(name="world", n=3)
            self.assertEqual(shell.var_expand("hello $name {n*2} $$x"), "hello world 6 $x")
            self.assertEqual(shell.var_expand("echo $HOME_NOT_A_VAR"), "echo $HOME_NOT_A_VAR")
            self.assertEqual(shell.var_expand("echo '$name'"), "echo '$name'")

    def test_slist(self):
        s = IPY.SList(["a 1", "b 2", "c 10"])
        self.assertEqual(s.n, "a 1\nb 2\nc 10")
        self.assertEqual(s.s, "a 1 b 2 c 10")
        self.assertIs(s.l, s)
        self.assertEqual(s.grep("b"), ["b 2"])
        self.assertEqual(s.grep("b", prune=True), ["a 1", "c 10"])
        self.assertEqual(s.fields(1), ["1", "2", "10"])
        self.assertEqual(s.sort(1, nums=True), ["a 1", "b 2", "c 10"])
        self.assertIsInstance(s.grep("a"), IPY.SList)


@unittest.skipUnless(HAVE_SHELL, "vivarium_shell.run and run_capture are not there yet")
class Commands(unittest.TestCase):
    def test_bang_runs_in_the_guest_shell_and_sets_exit_code(self):
        with Cell() as c:
            c.run("print('before')\n!echo hi | tr a-z A-Z\nprint('after')\n")
            self.assertEqual(c.stdout(), "before\nHI\nafter\n")
            self.assertEqual(c.ns["_exit_code"], 0)
            c.run("!exit 3\n")
            self.assertEqual(c.ns["_exit_code"], 3)

    def test_bang_assign_is_an_slist_of_lines(self):
        with Cell() as c:
            for name in ("b.txt", "a.txt"):
                open(name, "w").close()
            c.run("files = !ls\nboth = !echo out; echo err >&2\n")
            self.assertEqual(c.ns["files"], ["a.txt", "b.txt"])
            self.assertIsInstance(c.ns["files"], IPY.SList)
            self.assertEqual(c.ns["files"].s, "a.txt b.txt")
            self.assertEqual(c.ns["both"], ["out", "err"])

    def test_bang_expands_python_values(self):
        with Cell() as c:
            c.run("name = 'world'\n!echo hello $name {1+1}\n")
            self.assertEqual(c.stdout(), "hello world 2\n")

    def test_cd_in_a_bang_does_not_stay(self):
        with Cell() as c:
            os.mkdir("d")
            here = os.getcwd()
            c.run("!cd d && pwd\n")
            self.assertEqual(os.getcwd(), here)
            self.assertEqual(c.stdout(), os.path.join(here, "d") + "\n")

    def test_bash_cell(self):
        with Cell() as c:
            c.run("%%bash\nfor i in 1 2; do echo $i; done\n")
            self.assertEqual(c.stdout(), "1\n2\n")
            tb = c.error("%%bash\necho x\nexit 2\n")
            self.assertIn("returned non-zero exit status 2.", tb)
            c.run("%%script bash --no-raise-error\nexit 4\n")

    def test_ls_magic(self):
        with Cell() as c:
            open("z.txt", "w").close()
            c.run("%ls\n")
            self.assertEqual(c.stdout(), "z.txt\n")

    def test_pip_goes_to_the_shells_pip(self):
        with Cell() as c:
            c.run("%pip install unittest 'json>=0'\n")
            self.assertEqual(
                c.stdout(),
                "Requirement already satisfied: unittest\nRequirement already satisfied: json>=0\n",
            )
            c.run("%pip install h8_not_a_package\n")
            self.assertIn("h8_not_a_package", c.stderr())

    def test_capture_holds_the_shells_output(self):
        with Cell() as c:
            c.run("%%capture cap\n!echo from-shell\nprint('py')\n")
            self.assertEqual(c.ns["cap"].stdout, "from-shell\npy\n")
            self.assertEqual(c.stdout(), "")


# ---- the comparisons (run by hand; see the module docstring)

IPYTHON_SCRIPT = r"""
import json, sys
from IPython.core.inputtransformer2 import TransformerManager
tm = TransformerManager()
out = []
for cell in json.load(sys.stdin):
    try:
        out.append(tm.transform_cell(cell))
    except Exception as e:
        out.append("!error " + repr(e))
json.dump(out, sys.stdout)
"""


def _norm(text):
    return [l for l in text.replace("get_ipython()", S).splitlines() if l.strip()]


def compare_ipython(python):
    cells = [c for c, _ in TABLE] + PLAIN
    got = subprocess.run(
        [python, "-c", IPYTHON_SCRIPT], input=json.dumps(cells), capture_output=True,
        text=True, check=True,
    )
    theirs = json.loads(got.stdout)
    bad = 0
    for cell, ipython in zip(cells, theirs):
        mine = translate(cell)
        if _norm(mine) != _norm(ipython):
            bad += 1
            print(f"DIFFERS: {cell!r}\n  ipython: {ipython!r}\n  ours:    {mine!r}")
    print(f"{len(cells) - bad}/{len(cells)} cells translate as IPython's TransformerManager does")
    return 1 if bad else 0


GUEST_SCRIPT = r"""
import json, sys, types
m = types.ModuleType('vivarium_ipy'); m.__file__ = '<vivarium_ipy>'
exec(compile(open('ipy.py').read(), m.__file__, 'exec'), m.__dict__)
cells = json.load(open('cells.json'))
print(json.dumps([[m.needs_transform(c), m.transform(c)] for c in cells]))
"""


def compare_guest(vivarium):
    cells = [c for c, _ in TABLE] + PLAIN
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "cells.json"), "w") as f:
            json.dump(cells, f)
        with open(os.path.join(d, "main.py"), "w") as f:
            f.write(GUEST_SCRIPT)
        src = os.path.join(HERE, "..", "..", "python-wasi", "guest", "ipy.py")
        got = subprocess.run(
            [vivarium, "run", "--file", f"ipy.py={src}",
             "--file", f"cells.json={os.path.join(d, 'cells.json')}", os.path.join(d, "main.py")],
            capture_output=True, text=True,
        )
    if got.returncode != 0:
        print(got.stdout, got.stderr)
        return 1
    theirs = json.loads(got.stdout.strip().splitlines()[-1])
    bad = 0
    for cell, (needs, guest) in zip(cells, theirs):
        mine = translate(cell)
        if guest != mine or needs != IPY.needs_transform(cell):
            bad += 1
            print(f"DIFFERS: {cell!r}\n  guest: {needs} {guest!r}\n  host:  {mine!r}")
    print(f"{len(cells) - bad}/{len(cells)} cells translate in the guest's 3.15 as on the host")
    return (1 if bad else 0) | run_in_guest(vivarium)


# Cells run in the guest by vivarium_ipy.run (and, `tools`, by code mode's
# vivarium_tools.run(vivarium_ipy.transform(cell))), with the guest shell, each as a single
# program (so its code is `<string>`, as `python -c`'s): (how, cell, what its stdout must be,
# what its stderr must end with).
GUEST_CELLS = [
    ("run", "print('a')\n!echo hi | tr a-z A-Z\nfiles = !ls *.py\nprint(files)\n",
     "a\nHI\n['ipy.py', 'main.py', 'shell.py', 'shell_files.py', 'shell_lang.py', 'shell_text.py']\n", ""),
    ("run", "!exit 3\nprint(_exit_code)\nname = 'w'\n!echo $name {1+1}\n", "3\nw 2\n", ""),
    ("run", "%cd /tmp\n!pwd\n%env ZZ=1\n!echo $ZZ\n", "/tmp\n/tmp\nenv: ZZ=1\n1\n", ""),
    ("run", "%%bash\nfor i in 1 2; do echo $i; done\n", "1\n2\n", ""),
    ("run", "x = 1\n\n%foo bar\n", "",
     'File "<string>", line 3, in <module>\n    %foo bar\nUsageError: Line magic function `%foo` not found.\n'),
    ("run", "%%time\nx = 1\n1/0\n", None,
     'line 1, in <module>\n    %%time\n  File "<string>", line 3, in <module>\n    1/0\n    ~^~\n'
     "ZeroDivisionError: division by zero\n"),
    ("run", "x = 1\n%pwd\nx = = 2\n", "", '  File "<string>", line 3\n    x = = 2\n        ^\nSyntaxError: invalid syntax\n'),
    ("run", "import asyncio\n%matplotlib inline\nawait asyncio.sleep(0)\nprint(6 * 7)\n", "42\n", ""),
    ("tools", "x = !echo hi\nprint(x)\n%env A=1\n", "['hi']\nenv: A=1\n", ""),
    ("tools", "def f():\n    return 1/0\n!echo a\nf()\n", "a\n",
     '  File "<string>", line 2, in f\n    return 1/0\n           ~^~\nZeroDivisionError: division by zero\n'),
]

GUEST_RUNNER = r"""
import sys, types
for name, f in [("vivarium_shell_text", "shell_text.py"), ("vivarium_shell_lang", "shell_lang.py"),
                ("vivarium_shell_files", "shell_files.py"), ("vivarium_shell", "shell.py"),
                ("vivarium_ipy", "ipy.py")]:
    m = types.ModuleType(name); m.__file__ = '<' + name + '>'
    sys.modules[name] = m
    exec(compile(open(f).read(), m.__file__, 'exec'), m.__dict__)
how, cell = open('how.txt').read(), open('cell.txt').read()
if how == 'tools':
    import vivarium_tools
    vivarium_tools.run(m.transform(cell), [], False)
else:
    m.run(cell, False)
"""


def run_in_guest(vivarium):
    guest = os.path.join(HERE, "..", "..", "python-wasi", "guest")
    bad = 0
    for how, cell, want_out, want_err in GUEST_CELLS:
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("main.py", GUEST_RUNNER), ("cell.txt", cell), ("how.txt", how)):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            files = []
            for name in ("shell_text", "shell_lang", "shell_files", "shell", "ipy"):
                files += ["--file", f"{name}.py={os.path.join(guest, name + '.py')}"]
            for name in ("cell.txt", "how.txt", "main.py"):
                files += ["--file", f"{name}={os.path.join(d, name)}"]
            got = subprocess.run(
                [vivarium, "run", *files, os.path.join(d, "main.py")],
                capture_output=True, text=True, cwd=d,
            )
        ok = (want_out is None or got.stdout == want_out) and got.stderr.endswith(want_err)
        if not ok:
            bad += 1
            print(f"DIFFERS ({how}): {cell!r}\n  stdout: {got.stdout!r}\n  stderr: {got.stderr!r}")
    print(f"{len(GUEST_CELLS) - bad}/{len(GUEST_CELLS)} cells run in the guest as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compare-ipython":
        sys.exit(compare_ipython(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "--compare-guest":
        sys.exit(compare_guest(os.path.abspath(sys.argv[2])))
    unittest.main()
