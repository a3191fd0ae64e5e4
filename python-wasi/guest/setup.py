"""Vivarium's per-sandbox set-up, loaded into every template at build time as `_vivarium`.

A template is a snapshot taken after an init turn, so everything that turn fixed is the same
in every sandbox made from it: the environment, the random generators, `tempfile`'s name
sequence. Before a program's first turn the host runs `begin(...)` as a hidden turn, which
gives the sandbox its own, and loads what the front door asked for: rich outputs
(`vivarium_display`), line-buffered output for streaming, and the pre-execution check
(`vivarium_check`), whose verdict leaves through the host door, never through stdout.

Only the host calls this, before any untrusted code has run in the instance; what the
program does to this module afterwards harms only its own run.
"""

import json
import os
import sys

import _host
import _reactor

# The prefix of a message the host keeps as this turn's result (src/sandbox/door.rs).
RESULT_TAG = b"\0vivarium-result\0"


def _refresh():
    """Reseeds `random`, and numpy's global generator when numpy is imported, from WASI
    randomness (`_reactor._refresh`). The guest's own refresh reseeds numpy with
    `numpy.random.seed()`, which derives MT19937's state from 128 fresh bits through a
    SeedSequence: 280 us, most of what a fresh `scientific` sandbox's set-up turn cost. The
    same 128 fresh bits through MT19937's own seeding take 20 us, so the refresh runs with
    numpy's seed set aside, and numpy is seeded here."""
    np_random = sys.modules.get("numpy.random")
    if np_random is None:
        _reactor._refresh(False)
        return
    seed = np_random.seed
    np_random.seed = _seeded_below
    try:
        _reactor._refresh(False)
    finally:
        np_random.seed = seed
    seed(sys.modules["numpy"].frombuffer(os.urandom(16), dtype="<u4"))


def _seeded_below():
    pass


def begin(env, rich=False, line_buffered=False, check=None):
    os.environ.clear()
    os.environ.update(env)
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile._name_sequence = None
    _refresh()
    if rich:
        import vivarium_display

        vivarium_display.install()
    if line_buffered:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except Exception:
                pass
    if check is not None:
        import vivarium_check

        verdict = json.dumps(vivarium_check.check(check))
        _host.call(RESULT_TAG + verdict.encode("utf-8", "replace"))
    # This hidden turn does not count: the program is `<turn 1>` in tracebacks.
    _reactor._turns = 0
