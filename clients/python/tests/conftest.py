"""Fixtures: a real Vivarium server (no mocks).

``server`` is ``$VIVARIUM_URL`` when set; otherwise a server started for the test session
from ``$VIVARIUM_BIN`` (else ``vivarium`` on PATH, else the repository's
``target/release/vivarium``) with ``serve --listen 127.0.0.1:0``, stopped at the end.
``keyed_server`` is always started here, with an API keys file: ``alice`` (a tenant of her
own) and ``bob`` (tenant ``tiny``, whose ``runs`` quota is 1).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent
ALICE_KEY = "sk-alice-0123456789abcdef"
BOB_KEY = "sk-bob-0123456789abcdef"


@dataclass
class Server:
    url: str
    keys: dict[str, str] = field(default_factory=dict)


def vivarium_bin() -> str:
    candidates = [
        os.environ.get("VIVARIUM_BIN"),
        shutil.which("vivarium"),
        str(PACKAGE_DIR.parent.parent / "target" / "release" / "vivarium"),
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise RuntimeError(
        "no Vivarium server: set VIVARIUM_URL to a running one, or VIVARIUM_BIN to the "
        "binary (or put `vivarium` on PATH, or build target/release/vivarium)"
    )


def _wait_ready(url: str, proc: subprocess.Popen[bytes] | None, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it was ready")
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} was not ready in time")


def _start(tmp: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """Starts a server, returns it and the address it printed on stdout."""
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [vivarium_bin(), "serve", "--listen", "127.0.0.1:0",
         "--snapshot-dir", str(tmp / "snapshots"), "--audit-log", str(tmp / "audit.log"), *args],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        # User templates kept with the rest of this server's state, not under the shared
        # `$VIVARIUM_HOME` (an environment variable: a build without templates ignores it).
        env={**os.environ, "VIVARIUM_TEMPLATE_DIR": str(tmp / "templates")},
    )
    log.close()
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            m = re.search(r"https?://[^\s]+", raw.decode("utf-8", "replace"))
            if m and not found:
                found.append(m.group(0).rstrip("/"))
        # keep draining so the server never blocks on a full pipe

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 120
    while not found and time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the server exited with {proc.returncode}: "
                + (tmp / "server.log").read_text(errors="replace")[-2000:]
            )
        time.sleep(0.02)
    if not found:
        proc.kill()
        raise RuntimeError("the server printed no address")
    _wait_ready(found[0], proc, deadline)
    return proc, found[0]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    url = os.environ.get("VIVARIUM_URL")
    if url:
        _wait_ready(url.rstrip("/"), None, time.monotonic() + 30)
        yield Server(url.rstrip("/"))
        return
    proc, url = _start(tmp_path_factory.mktemp("vivarium"))
    try:
        yield Server(url)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("vivarium-keys")
    keys = tmp / "keys.txt"
    keys.write_text(
        "# alice: a tenant of her own; bob: tenant `tiny`, one run at a time\n"
        f"alice:{ALICE_KEY}\n"
        "tenant tiny runs=1\n"
        f"bob@tiny:{BOB_KEY}\n"
    )
    proc, url = _start(tmp, "--api-keys-file", str(keys))
    try:
        yield Server(url, {"alice": ALICE_KEY, "bob": BOB_KEY})
    finally:
        _stop(proc)
