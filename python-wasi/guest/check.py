# Vivarium's pre-execution checker, loaded into every template as `vivarium_check`. The host
# calls `check(source)` in the sandbox that will run the code (the guest's own CPython, so
# its parser is exactly the one the code will meet), before any of it runs; the verdict is
# one JSON object, sent through the host door (see setup.py):
#   {"syntax": {"ok": bool, "errors": [{line, col, message}]},
#    "findings": [{rule, severity, line, col, message}]}
# Columns are 1-based. The host treats this output as untrusted data: it caps its size and
# parses it into fixed types. Nothing here runs the submitted code.
import ast
import json
import sys

MAX_FINDINGS = 200

PROCESS_CALLS = {
    "os.system": ("os_system", "os.system() runs a shell command; the sandbox has no processes, so it always fails here"),
    "os.popen": ("os_system", "os.popen() runs a shell command; the sandbox has no processes, so it always fails here"),
}
PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
FORK_CALLS = {"os.fork", "os.forkpty", "pty.fork", "os.register_at_fork"}
NETWORK_MODULES = {
    "socket", "ssl", "urllib.request", "http.client", "requests", "httpx", "aiohttp",
    "urllib3", "ftplib", "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc.client",
    "websocket", "websockets",
}
NETWORK_CALLS = {"urllib.request.urlopen", "urllib.request.urlretrieve", "socket.socket",
                 "socket.create_connection"}
EXIT_CALLS = {"sys.exit", "exit", "quit", "os._exit", "os.abort"}
WRITE_MODE_CHARS = set("wax+")


class Checker(ast.NodeVisitor):
    def __init__(self):
        self.findings = []
        self.aliases = {}  # local name -> fully qualified dotted name

    def add(self, rule, severity, node, message):
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append({
                "rule": rule,
                "severity": severity,
                "line": getattr(node, "lineno", 1),
                "col": getattr(node, "col_offset", 0) + 1,
                "message": message,
            })

    # --- names -------------------------------------------------------------------------
    def qualname(self, node):
        """The dotted name a call target refers to, with import aliases resolved."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def module_used(self, name, node):
        top = name.split(".")[0]
        for mod in sorted(NETWORK_MODULES):
            if name == mod or name.startswith(mod + ".") or (top == mod):
                self.add("network", "error", node,
                         f"`{name}` needs the network; the sandbox has none, so it fails here")
                return
        if top == "ctypes":
            self.add("ctypes", "error", node,
                     "ctypes loads native code; the sandbox cannot, so it fails here")
        elif top == "subprocess":
            self.add("subprocess", "error", node,
                     "subprocess starts processes; the sandbox has none, so it fails here")

    # --- imports -----------------------------------------------------------------------
    def visit_Import(self, node):
        for a in node.names:
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                top = a.name.split(".")[0]
                self.aliases[top] = top
            self.module_used(a.name, node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level == 0:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{mod}.{a.name}"
            full = [f"{mod}.{a.name}" for a in node.names]
            # `from urllib import request` is the network module urllib.request.
            hit = next((f for f in full if f in NETWORK_MODULES), None)
            self.module_used(hit or mod, node)
        self.generic_visit(node)

    # --- calls -------------------------------------------------------------------------
    def visit_Call(self, node):
        name = self.qualname(node.func)
        if name:
            self.check_call(name, node)
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                    arg.value.startswith(("http://", "https://", "ftp://")):
                self.add("network", "warning", arg,
                         f"{arg.value[:60]!r} is a URL; the sandbox has no network, so fetching it fails")
        self.generic_visit(node)

    def check_call(self, name, node):
        if name in PROCESS_CALLS:
            rule, msg = PROCESS_CALLS[name]
            self.add(rule, "error", node, msg)
        elif name.startswith(PROCESS_PREFIXES):
            self.add("os_system", "error", node,
                     f"{name}() starts a process; the sandbox has none, so it fails here")
        elif name.startswith("subprocess."):
            self.add("subprocess", "error", node,
                     f"{name}() starts a process; the sandbox has none, so it fails here")
        elif name in FORK_CALLS:
            self.add("fork", "error", node,
                     f"{name}() forks; the sandbox has no processes, so it fails here")
        elif name in NETWORK_CALLS:
            self.add("network", "error", node,
                     f"{name}() needs the network; the sandbox has none, so it fails here")
        elif name.startswith("ctypes."):
            self.add("ctypes", "error", node,
                     f"{name}() loads native code; the sandbox cannot, so it fails here")
        elif name in ("eval", "exec", "builtins.eval", "builtins.exec"):
            if node.args and not is_literal(node.args[0]):
                short = name.rsplit(".", 1)[-1]
                self.add("eval_exec", "warning", node,
                         f"{short}() of a value computed at run time runs whatever that value holds")
        elif name in ("open", "io.open", "builtins.open", "os.open"):
            self.check_open(name, node)

    def check_open(self, name, node):
        if not node.args:
            return
        path = node.args[0]
        if not (isinstance(path, ast.Constant) and isinstance(path.value, str)):
            return
        mode = node.args[1] if len(node.args) > 1 else None
        for kw in node.keywords:
            if kw.arg in ("mode", "flags"):
                mode = kw.value
        if name == "os.open":
            writes = mode is not None and not (isinstance(mode, ast.Name) and mode.id == "O_RDONLY")
        else:
            writes = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
                bool(WRITE_MODE_CHARS & set(mode.value))
        if not writes:
            return
        p = path.value
        if ".." in p.replace("\\", "/").split("/"):
            self.add("write_outside_workdir", "error", path,
                     f"writing to {p!r} climbs out of the working directory with '..'; the sandbox refuses it")
        elif p.startswith("/"):
            if p.startswith("/usr/"):
                self.add("write_outside_workdir", "error", path,
                         f"{p!r} is on the read-only runtime mount; writing there fails")
            else:
                self.add("write_outside_workdir", "warning", path,
                         f"writing to the absolute path {p!r}: in the sandbox '/' is the working directory, "
                         "so the file lands there, not on any host path")

    # --- loops -------------------------------------------------------------------------
    def visit_While(self, node):
        if isinstance(node.test, ast.Constant) and bool(node.test.value) and not node.orelse \
                and not loop_exits(node.body, self):
            self.add("infinite_loop", "warning", node,
                     "`while True` with no break, return, raise or exit inside runs until the "
                     "time or fuel limit stops it")
        self.generic_visit(node)


def is_literal(node):
    try:
        ast.literal_eval(node)
        return True
    except Exception:
        return False


def loop_exits(body, checker):
    """Whether a loop body holds a way out of *this* loop."""
    return any(exits(stmt, checker, False) for stmt in body)


def exits(node, checker, in_nested_loop):
    if isinstance(node, (ast.Return, ast.Raise)):
        return True
    if isinstance(node, ast.Break):
        # A break inside a nested loop leaves only that loop.
        return not in_nested_loop
    if isinstance(node, ast.Call) and checker.qualname(node.func) in EXIT_CALLS:
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return False
    nested = in_nested_loop or isinstance(node, (ast.For, ast.AsyncFor, ast.While))
    return any(exits(c, checker, nested) for c in ast.iter_child_nodes(node))


def check(src):
    out = {"syntax": {"ok": True, "errors": []}, "findings": []}
    tree = None
    try:
        tree = ast.parse(src, filename="<code>")
        # The compiler finds what the parser lets through (`return` outside a function, ...).
        compile(tree, "<code>", "exec", dont_inherit=True)
    except SyntaxError as e:
        out["syntax"]["ok"] = False
        out["syntax"]["errors"].append({
            "line": e.lineno or 1,
            "col": e.offset or 1,
            "message": f"{type(e).__name__}: {e.msg}",
        })
    except (ValueError, RecursionError, MemoryError) as e:
        out["syntax"]["ok"] = False
        out["syntax"]["errors"].append({"line": 1, "col": 1, "message": f"{type(e).__name__}: {e}"})
    if tree is not None:
        c = Checker()
        try:
            c.visit(tree)
        except RecursionError:
            pass
        out["findings"] = c.findings
    return out


# A clean verdict, the most common one, as the host reads it: sent as it is, since the
# guest's `json` encodes in Python, which would cost more than the check itself.
CLEAN_VERDICT = '{"syntax": {"ok": true, "errors": []}, "findings": []}'


def verdict_json(src):
    """`check(src)` as the JSON text the host reads."""
    out = check(src)
    if out["syntax"]["ok"] and not out["findings"]:
        return CLEAN_VERDICT
    return json.dumps(out)


if __name__ == "__main__":
    sys.stdout.write(verdict_json(sys.stdin.buffer.read()))
