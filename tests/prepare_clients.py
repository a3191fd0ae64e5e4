#!/usr/bin/env python3
"""Makes every client of tests/clients.txt at once, before the tests ask for them.

The tests make a missing client on first use, one at a time, while the tests that need it wait;
installing them is mostly waiting on the registries, so .ci/run starts this beside the cold
build instead. A client that fails here is made (or reported) again by its test.
"""
import os
import pathlib
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parent.parent


def clients():
    for line in (ROOT / "tests/clients.txt").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            kind, where, probe, what = (f.strip() for f in line.split("|"))
            yield kind, where, probe, what.split()


def ready(kind, where, probe):
    if kind == "npm":
        return (ROOT / where / probe).exists()
    python = ROOT / "target" / where / "bin/python"
    return python.exists() and subprocess.run(
        [python, "-c", f"import {probe}"], capture_output=True
    ).returncode == 0


def make(client):
    kind, where, probe, what = client
    started = time.monotonic()
    if ready(kind, where, probe):
        return f"{where}: ready"
    if kind == "npm":
        cmd = ["npm", "install", "--no-audit", "--no-fund", "--prefix", where, *what]
    else:
        venv = ROOT / "target" / where
        if not (venv / "bin/python").exists():
            subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
        cmd = [venv / "bin/python", "-m", "pip", "install", "--quiet", *what]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    took = time.monotonic() - started
    if done.returncode != 0 or not ready(kind, where, probe):
        return f"{where}: FAILED after {took:.0f} s (its test will say why)\n{done.stderr[-2000:]}"
    return f"{where}: made in {took:.0f} s"


if __name__ == "__main__":
    os.makedirs(ROOT / "target", exist_ok=True)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for line in pool.map(make, list(clients())):
            print(f"clients: {line}", flush=True)
