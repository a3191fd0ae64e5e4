#!/usr/bin/env python3
"""Run Vivarium's guest shell under the host's python3, for development (issue 49).

Loads python-wasi/guest/{shell,shell_text,shell_lang,shell_files,ipy}.py under their guest
module names (vivarium_shell, ...) and runs a script in the current directory:

    python3 tests/shell/run_host.py -c 'ls | wc -l'
    python3 tests/shell/run_host.py script.sh
    echo 'echo hi' | python3 tests/shell/run_host.py

The exit status is the script's.
"""

import importlib.util
import os
import sys

sys.dont_write_bytecode = True

GUEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python-wasi", "guest")
MODULES = [
    ("vivarium_shell_text", "shell_text.py"),
    ("vivarium_shell_lang", "shell_lang.py"),
    ("vivarium_shell_files", "shell_files.py"),
    ("vivarium_shell", "shell.py"),
    ("vivarium_ipy", "ipy.py"),
]


def load():
    """Imports the guest modules under their guest names; returns vivarium_shell."""
    for name, file in MODULES:
        if name in sys.modules:
            continue
        path = os.path.normpath(os.path.join(GUEST, file))
        if not os.path.exists(path):
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            if name == "vivarium_shell":
                raise
            import traceback

            traceback.print_exc()
    return sys.modules["vivarium_shell"]


def main(argv):
    if len(argv) >= 2 and argv[0] == "-c":
        source = argv[1]
    elif argv and argv[0] not in ("-", "-s"):
        with open(argv[0], "rb") as f:
            source = f.read().decode("utf-8", "surrogateescape")
    else:
        source = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
    shell = load()
    status = shell.run(source)
    sys.stdout.flush()
    sys.stderr.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
