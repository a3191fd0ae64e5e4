"""Code mode in the guest, loaded into every template at build time as `vivarium_tools`.

A program that was given tools runs as `vivarium_tools.run(source, tools, echo)`: the tools
become functions on the `tools` namespace in `__main__` (`tools.get_weather(city="Paris")`)
with awaitable twins on `tools.aio`, and the source is compiled with top-level `await`
allowed, as in Jupyter. A call leaves through the host door (`TOOLS_TAG` and a JSON list of
calls); the host checks each against its schema, hands the valid ones to the caller, and
answers with one JSON answer per call, in order. Calls made under `asyncio.gather` leave
together: the event loop here sends every call its tasks are waiting on in one round, once
no task can run.

Nothing here is trusted by the host: a program may call the door itself, and every call is
checked there. Only what the host answers is trusted here, and only to be JSON.
"""

import ast
import asyncio
import asyncio.base_events
import builtins
import inspect
import json
import keyword
import sys
import time

import _host
import _reactor

# The prefix of a round of tool calls (src/guest/mod.rs, TOOLS_TAG).
TOOLS_TAG = b"\0vivarium-tools\0"

_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}

# Code objects compiled from the caller's source: an uncaught exception's traceback is shown
# from the first of them, without this module's frames above it.
_user_code = set()


class ToolError(Exception):
    """An error a tool's caller raised whose type is not a Python builtin exception."""

    def __init__(self, type, message=""):
        super().__init__(f"{type}: {message}" if message else type)
        self.type = type
        self.message = message


def _exception(error):
    kind = str(error.get("type", "ToolError"))
    message = str(error.get("message", ""))
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:
            pass
    return ToolError(kind, message)


def _round(calls):
    """Sends `calls` ([(name, arguments)]) in one round; their answers, in order."""
    payload = json.dumps(
        [{"name": n, "arguments": a} for n, a in calls],
        ensure_ascii=False,
        allow_nan=False,
    )
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        reply = _host.call(TOOLS_TAG + payload.encode("utf-8", "surrogatepass"))
    except ConnectionRefusedError:
        raise RuntimeError("no tools were given with this code") from None
    answers = json.loads(reply)
    if not isinstance(answers, list) or len(answers) != len(calls):
        raise RuntimeError("the host answered a round of tool calls out of shape")
    return answers


def _outcome(answer):
    if "error" in answer:
        raise _exception(answer["error"])
    return answer.get("result")


def _signature(schema):
    props = schema.get("properties") or {}
    required = [p for p in (schema.get("required") or []) if p in props]
    P = inspect.Parameter
    params, loose = [], False
    for optional in (False, True):
        for name, sub in props.items():
            if (name in required) == optional:
                continue
            if not name.isidentifier() or keyword.iskeyword(name):
                loose = True
                continue
            kind = sub.get("type") if isinstance(sub, dict) else None
            annotation = _JSON_TYPES.get(kind, P.empty) if isinstance(kind, str) else P.empty
            default = sub.get("default", None) if isinstance(sub, dict) else None
            params.append(
                P(
                    name,
                    P.POSITIONAL_OR_KEYWORD,
                    default=default if optional else P.empty,
                    annotation=annotation,
                )
            )
    if loose or schema.get("additionalProperties", True) is not False:
        params.append(P("kwargs", P.VAR_KEYWORD))
    return inspect.Signature(params)


def _doc(spec):
    lines = [spec.get("description") or ""]
    props = spec["parameters"].get("properties") or {}
    if props:
        lines += ["", "Arguments:"]
        for name, sub in props.items():
            sub = sub if isinstance(sub, dict) else {}
            kind = sub.get("type", "any")
            text = sub.get("description", "")
            lines.append(f"    {name} ({kind}): {text}".rstrip(": "))
    return "\n".join(lines).strip()


def _tool(spec):
    name, sig = spec["name"], _signature(spec["parameters"])
    given = sig.parameters

    def arguments(args, kwargs):
        bound = sig.bind(*args, **kwargs)
        out = {}
        for k, v in bound.arguments.items():
            if given[k].kind is inspect.Parameter.VAR_KEYWORD:
                out.update(v)
            else:
                out[k] = v
        return out

    def call(*args, **kwargs):
        return _outcome(_round([(name, arguments(args, kwargs))])[0])

    async def call_aio(*args, **kwargs):
        a = arguments(args, kwargs)
        loop = asyncio.get_running_loop()
        if not isinstance(loop, ToolLoop):
            return _outcome(_round([(name, a)])[0])
        future = loop.create_future()
        loop._calls.append((name, a, future))
        return await future

    for f in (call, call_aio):
        f.__name__ = f.__qualname__ = spec["python"]
        f.__doc__ = _doc(spec)
        f.__signature__ = sig
    return call, call_aio


class _Namespace:
    def __init__(self, doc):
        self.__doc__ = doc

    def __repr__(self):
        names = sorted(k for k in vars(self) if not k.startswith("_"))
        return f"<tools: {', '.join(names)}>"


class _Rounds:
    """The selector of a `ToolLoop`: once no task can run, it sends the calls they wait on."""

    def __init__(self, loop):
        self._loop = loop

    def select(self, timeout):
        loop = self._loop
        if loop._calls and timeout != 0:
            batch, loop._calls = loop._calls, []
            answers = _round([(n, a) for n, a, _ in batch])
            for (_, _, future), answer in zip(batch, answers):
                if future.done():
                    continue
                if "error" in answer:
                    future.set_exception(_exception(answer["error"]))
                else:
                    future.set_result(answer.get("result"))
            return []
        if timeout is None:
            raise RuntimeError("every task waits, and nothing it waits for can come")
        if timeout > 0:
            time.sleep(timeout)
        return []

    def close(self):
        pass


class ToolLoop(asyncio.base_events.BaseEventLoop):
    """asyncio's loop for a sandbox: no sockets, timers by sleeping, and tool calls sent in
    rounds. `asyncio.run()` and `asyncio.new_event_loop()` make one."""

    def __init__(self):
        super().__init__()
        self._selector = _Rounds(self)
        self._calls = []

    def _process_events(self, event_list):
        pass

    def _write_to_self(self):
        pass


def install(tools):
    """Puts `tools` (the specs, with each one's Python name) in `__main__`."""
    main = sys.modules["__main__"].__dict__
    ns = _Namespace("The caller's tools; each has an awaitable twin on tools.aio.")
    ns.aio = _Namespace("Awaitable twins of the tools: asyncio.gather sends them in one round.")
    ns.ToolError = ToolError
    ns.names = {}
    for spec in tools:
        call, call_aio = _tool(spec)
        setattr(ns, spec["python"], call)
        setattr(ns.aio, spec["python"], call_aio)
        ns.names[spec["name"]] = spec["python"]
    main["tools"] = ns
    asyncio.new_event_loop = asyncio.events.new_event_loop = ToolLoop
    if not getattr(sys.excepthook, "_vivarium_tools", False):
        sys.excepthook = _trimming(sys.excepthook)


def _trimming(hook):
    """An excepthook that shows a traceback from the first frame of the caller's code, and
    without this module's frames below the last of the caller's (a tool's error is raised
    here, on behalf of the call in the caller's code)."""

    def excepthook(kind, value, tb):
        t = tb
        while t is not None and t.tb_frame.f_code not in _user_code:
            t = t.tb_next
        if t is not None:
            last = t
            u = t
            while u is not None:
                if u.tb_frame.f_code.co_filename != __file__:
                    last = u
                u = u.tb_next
            last.tb_next = None
            tb = t
            try:
                value.__traceback__ = tb
            except Exception:
                pass
        hook(kind, value, tb)

    excepthook._vivarium_tools = True
    return excepthook


def _evaluate(code, scope):
    result = eval(code, scope)
    if code.co_flags & inspect.CO_COROUTINE:
        loop = ToolLoop()
        try:
            result = loop.run_until_complete(result)
        finally:
            loop.close()
    return result


def run(source, tools, echo=False):
    """Runs `source` in `__main__` with `tools`, top-level `await` allowed; with `echo`, a
    final expression's value goes to `sys.displayhook` (a session's turn)."""
    install(tools)
    filename = __import__("_vivarium").code_filename()
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    scope = sys.modules["__main__"].__dict__
    _user_code.clear()
    tree = compile(source, filename, "exec", flags | ast.PyCF_ONLY_AST)
    last = None
    if echo and tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, filename, "exec", flags)
    _user_code.add(body)
    tail = None
    if last is not None:
        tail = compile(last, filename, "eval", flags)
        _user_code.add(tail)
    _evaluate(body, scope)
    if tail is not None:
        sys.displayhook(_evaluate(tail, scope))
