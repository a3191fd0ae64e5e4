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
# What a session's excepthook sends before an uncaught exception's traceback, and the prefix
# of `input()`'s question (src/guest/mod.rs: ERROR_TAG, INPUT_TAG).
ERROR_TAG = b"\0vivarium-error\0"
INPUT_TAG = b"\0vivarium-input\0"
# The most of a value's repr a turn's result carries (MAX_RESULT_BYTES), and of a prompt.
MAX_RESULT_BYTES = 1048576
MAX_PROMPT_BYTES = 65536


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


# Set by `begin` in a single program's sandbox (a fresh execution): its code is `<string>` in
# tracebacks, as `python -c`'s, not a session's `<turn N>`.
_PROGRAM = False


def code_filename():
    """The file name the code of the turn now running has: `<string>` in a single program,
    `<turn N>` in a session (what `vivarium_ipy` and `vivarium_tools` compile it as)."""
    return "<string>" if _PROGRAM else f"<turn {_reactor._turns}>"


def _program_turns():
    """Makes `_reactor._run_turn` into one that names the code `<string>`. Compiled as
    `<reactor>`'s own code, so the reactor takes its frame off a traceback as it takes its own;
    compiled once, when the template is built (this module is imported then), not in every
    sandbox."""
    scope = {}
    exec(
        compile(
            "def make(run_turn):\n"
            "    def _run_turn(text, name):\n"
            "        return run_turn(text, '<string>')\n"
            "    return _run_turn\n",
            "<reactor>",
            "exec",
        ),
        scope,
    )
    return scope["make"]


_as_program = _program_turns()


def _session_hooks():
    """A kept interpreter's hooks (a session's, a checker's): the REPL's echo first sends the
    value's repr through the door as the turn's result; the door hears of an uncaught
    exception before its traceback is printed; `input()` asks the turn's client through the
    door, reading stdin when nobody can answer (src/hostcalls/door.rs, input.rs). After either
    send, the stream is not seen live for the rest of the turn: a kernel shows the value and
    the error as messages of their own."""
    import builtins

    echo = sys.displayhook

    def displayhook(value):
        if value is not None:
            try:
                text = repr(value)
            except BaseException:
                text = None
            if text is not None:
                try:
                    sys.stdout.flush()
                    _host.call(
                        RESULT_TAG + text.encode("utf-8", "replace")[:MAX_RESULT_BYTES]
                    )
                except BaseException:
                    pass
        echo(value)

    sys.displayhook = displayhook
    hook = sys.excepthook

    def excepthook(*args):
        try:
            sys.stderr.flush()
            _host.call(ERROR_TAG)
        except BaseException:
            pass
        hook(*args)

    sys.excepthook = excepthook
    read = builtins.input

    def input(prompt=""):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            line = _host.call(
                INPUT_TAG + str(prompt).encode("utf-8", "replace")[:MAX_PROMPT_BYTES]
            )
        except ConnectionRefusedError:
            return read(prompt)
        return line.decode("utf-8", "replace")

    builtins.input = input


def begin(env, rich=False, line_buffered=False, check=None, program=False, session=False):
    global _PROGRAM
    if program:
        _PROGRAM = True
        _reactor._run_turn = _as_program(_reactor._run_turn)
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
    if session:
        # After the rich outputs' hook: the value's result leaves before its echo (and HTML).
        _session_hooks()
    if check is not None:
        import vivarium_check

        verdict = vivarium_check.verdict_json(check)
        _host.call(RESULT_TAG + verdict.encode("utf-8", "replace"))
    # This hidden turn does not count: the program is `<turn 1>` in tracebacks.
    _reactor._turns = 0


# A session's turns and the source tracebacks show. CPython keeps every interactive
# source it is given in `linecache._interactive_cache` (the reactor registers each turn
# there, as the REPL does) and never drops one: a session's memory, and every snapshot and
# hibernation image of it, grew by each turn's source for as long as the session lived
# (benches/RESULTS.md, "Soak (issue 47)"). Kept here: the current turn's whole source (its
# traceback), and the sources of the functions and classes earlier turns defined, newest
# first, up to TRACEBACK_SOURCE_BYTES; a function defined further back shows its traceback
# lines without their source, as one read from a deleted file does.
TRACEBACK_SOURCE_BYTES = 1 << 20
# What one cache entry costs beside its source (the key tuple and the entry).
_ENTRY_BYTES = 200


class _TurnSources:
    def __init__(self, linecache):
        self._linecache = linecache
        self._register = linecache._register_code
        self._make_key = linecache._make_key
        # Per turn name, oldest first: (keys it registered, bytes charged).
        self._turns = {}
        self._bytes = 0

    def _keys(self, code):
        """The keys `_register_code` makes for `code` and the code objects inside it."""
        keys, stack = [], [code]
        while stack:
            c = stack.pop()
            keys.append(self._make_key(c))
            stack.extend(k for k in c.co_consts if isinstance(k, type(code)))
        return keys

    def _drop(self, keys):
        cache = self._linecache._interactive_cache
        for key in keys:
            cache.pop(key, None)

    def __call__(self, code, string, name):
        if not name.startswith("<turn "):
            return self._register(code, string, name)
        if name not in self._turns:
            # A new turn: the earlier ones' top-level code can never run again, and a turn
            # that defined nothing keeps nothing.
            for turn, (keys, charged) in list(self._turns.items()):
                tops = [k for k in keys if k[1] == "<module>"]
                self._drop(tops)
                keys[:] = [k for k in keys if k[1] != "<module>"]
                if not keys:
                    del self._turns[turn]
                    self._bytes -= charged
        keys = self._keys(code)
        kept, charged = self._turns.pop(name, ([], 0))
        kept.extend(keys)
        cost = len(string) + _ENTRY_BYTES * len(keys)
        self._turns[name] = (kept, charged + cost)
        self._bytes += cost
        while self._bytes > TRACEBACK_SOURCE_BYTES and len(self._turns) > 1:
            oldest = next(iter(self._turns))
            old_keys, old_bytes = self._turns.pop(oldest)
            self._drop(old_keys)
            self._bytes -= old_bytes
        return self._register(code, string, name)


def forget_build_sources():
    """Drops what the template's init turns registered (the first one's source carries every
    helper module: tens of thousands of lines): as this module loads, and by the last init
    turn (`guest::SNAPSHOT_READY`) before it fills the free space, so the memory this frees
    is filled before the snapshot rather than left as holes a sandbox's first turn would
    open, and a session's first turn finds no build turn's definitions kept."""
    import linecache

    cache = getattr(linecache, "_interactive_cache", None)
    if cache is not None:
        for key in [k for k in cache if str(k[0]).startswith("<turn ")]:
            del cache[key]
    sources = getattr(linecache, "_register_code", None)
    if isinstance(sources, _TurnSources):
        sources._turns = {}
        sources._bytes = 0


def _bound_turn_sources():
    import linecache

    register = getattr(linecache, "_register_code", None)
    if register is not None and getattr(linecache, "_make_key", None) is not None:
        linecache._register_code = _TurnSources(linecache)
        # The first init turn's entries go now, so the template's imports after this reuse
        # their memory; the last init turn drops its own (and anything since) again.
        forget_build_sources()


_bound_turn_sources()
