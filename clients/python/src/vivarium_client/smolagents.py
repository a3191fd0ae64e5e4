"""smolagents on Vivarium: a ``PythonExecutor`` for ``CodeAgent(executor=...)``.

smolagents' ``CodeAgent`` hands each step's code to ``executor(code) -> CodeOutput`` and,
before a run, gives the executor the run's tools (``send_tools``) and variables
(``send_variables``) (``smolagents/agents.py``, ``PythonExecutor`` in
``smolagents/local_python_executor.py``). This executor runs each step as a turn of one
Vivarium session, so variables, imports and functions persist between steps::

    from smolagents import CodeAgent
    from vivarium_client.smolagents import VivariumExecutor

    agent = CodeAgent(tools=[...], model=model, executor=VivariumExecutor())

Tools are not copied into the sandbox: each is a code-mode tool, a global function of the
program (``web_search(query="...")``) that runs on the host when called, so closures,
clients and credentials stay on the host. ``final_answer`` is handled on the host too: its
call records the answer (through the agent's own ``final_answer`` tool) and ends the step,
which is then final. Arguments and results cross as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

# smolagents ships no type information (no py.typed).
from smolagents.local_python_executor import (  # type: ignore[import-untyped]
    CodeOutput,
    InterpreterError,
    PythonExecutor,
)
from smolagents.serialization import SafeSerializer  # type: ignore[import-untyped]
from smolagents.tools import Tool as SmolTool  # type: ignore[import-untyped]

from .client import Client, Session
from .results import ExecutionResult
from .tools import Tool

__all__ = ["VivariumExecutor", "tool_spec"]

FINAL_ANSWER = "final_answer"

# Run once per ``send_tools`` (a turn of its own, so the steps' line numbers are their own):
# each tool becomes a global function; ``final_answer`` also stops the step, by an exception
# the step's ``except Exception`` cannot catch (as smolagents' own executors do).
_BIND_TOOLS = """\
import json as _vv_json
def _vv_bind(function, params):
    # Positional arguments in the tool's order (the guest's signature puts required
    # parameters first).
    def bound(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"takes {{len(params)}} positional arguments but {{len(args)}} were given")
        for name, value in zip(params, args):
            if name in kwargs:
                raise TypeError(f"got multiple values for argument {{name!r}}")
            kwargs[name] = value
        return function(**kwargs)
    return bound
for _vv_name, _vv_params in _vv_json.loads({params!r}).items():
    if _vv_name.isidentifier():
        globals()[_vv_name] = _vv_bind(getattr(tools, tools.names[_vv_name]), _vv_params)
class FinalAnswerException(BaseException):
    \"\"\"Ends the step: final_answer was called.\"\"\"
if "final_answer" in tools.names:
    def final_answer(*args, _vv_record=final_answer, **kwargs):
        _vv_record(*args, **kwargs)
        raise FinalAnswerException("final_answer")
"""


def _json_type(kind: Any) -> list[str] | None:
    """A smolagents input type (or list of them) as JSON Schema types (None: any)."""
    kinds = kind if isinstance(kind, list) else [kind]
    if any(k in ("any", "image", "audio") for k in kinds):
        return None
    return [str(k) for k in kinds]


def tool_spec(tool: SmolTool) -> tuple[str, dict[str, Any]]:
    """A smolagents tool's description and its inputs as a JSON Schema object."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in tool.inputs.items():
        prop: dict[str, Any] = {}
        types = _json_type(spec.get("type", "any"))
        if types is not None:
            if spec.get("nullable") and "null" not in types:
                types.append("null")
            prop["type"] = types[0] if len(types) == 1 else types
        if spec.get("description"):
            prop["description"] = str(spec["description"])
        if "enum" in spec:
            prop["enum"] = list(spec["enum"])
        properties[name] = prop
        if not spec.get("nullable"):
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return str(tool.description or ""), schema


class VivariumExecutor(PythonExecutor):  # type: ignore[misc]
    """Runs a ``CodeAgent``'s steps in a Vivarium session.

    Args:
        client: the :class:`~vivarium_client.Client` to use, or a server URL; by default
            (and for a URL) one is made from ``base_url`` / ``api_key`` / ``timeout`` and
            closed by :meth:`cleanup`.
        session_options: options of the session (``limits``, ``template``, ``network``, ...),
            passed to ``Client.open_session``.
        tool_limits: code-mode limits of each step (``calls``, ``tool_timeout_ms``, ...).
        **request_fields: other fields of each turn (``limits``, ...).

    The session is opened at the first step (or the first ``send_*``) and closed by
    :meth:`cleanup`, which ``CodeAgent.cleanup()`` and ``with CodeAgent(...)`` call.
    """

    def __init__(
        self,
        client: Client | str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        session_options: Mapping[str, Any] | None = None,
        tool_limits: Mapping[str, Any] | None = None,
        **request_fields: Any,
    ) -> None:
        if isinstance(client, str):
            client, base_url = None, client
        self._owns_client = client is None
        self.client = client if client is not None else Client(base_url, api_key=api_key, timeout=timeout)
        self.session_options = dict(session_options or {})
        self.tool_limits = dict(tool_limits) if tool_limits is not None else None
        self.request_fields = request_fields
        self.session: Session | None = None
        self.tools: dict[str, Tool] = {}
        self._final: list[Any] = []

    # PythonExecutor --------------------------------------------------------------------

    def send_tools(self, tools: dict[str, SmolTool]) -> None:
        """Makes each tool (and managed agent) a function of the program, run on the host."""
        self.tools = {name: self._host_tool(name, tool) for name, tool in tools.items()}
        if self.tools:
            params = {name: list(t.parameters["properties"]) for name, t in self.tools.items()}
            self._turn(_BIND_TOOLS.format(params=json.dumps(params)))

    def send_variables(self, variables: dict[str, Any]) -> None:
        """Sets the variables as globals of the session (smolagents' safe serializer: JSON
        types, tuples, sets, dates, numpy arrays, ...)."""
        if not variables:
            return
        serialized = SafeSerializer.dumps(variables, allow_pickle=False)
        self._turn(
            SafeSerializer.get_deserializer_code(False)
            + f"\nglobals().update(_deserialize({serialized!r}))\n"
        )

    def __call__(self, code_action: str) -> CodeOutput:
        self._final.clear()
        result = self._run(code_action)
        logs = _logs(result)
        if self._final:
            return CodeOutput(output=self._final[-1], logs=logs, is_final_answer=True)
        if not result.ok:
            raise InterpreterError(_failure(result, logs))
        return CodeOutput(output=result.result, logs=logs, is_final_answer=False)

    # Lifecycle -------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Closes the session (and the client, if this executor made it)."""
        if self.session is not None:
            try:
                self.session.close()
            finally:
                self.session = None
        if self._owns_client:
            self.client.close()

    # Internals -------------------------------------------------------------------------

    def _host_tool(self, name: str, tool: SmolTool) -> Tool:
        description, parameters = tool_spec(tool)
        call: Callable[..., Any] = self._recorder(tool) if name == FINAL_ANSWER else tool
        return Tool(name=name, description=description, parameters=parameters, fn=call)

    def _recorder(self, final_answer: SmolTool) -> Callable[..., None]:
        """``final_answer`` on the host: the agent's tool gives the answer, kept for the step."""

        def record(*args: Any, **kwargs: Any) -> None:
            self._final.append(final_answer(*args, **kwargs))

        return record

    def _open(self) -> Session:
        if self.session is None:
            self.session = self.client.open_session(**self.session_options)
        return self.session

    def _run(self, code: str) -> ExecutionResult:
        return self._open().run(
            code, tools=self.tools or None, tool_limits=self.tool_limits, **self.request_fields
        )

    def _turn(self, code: str) -> None:
        result = self._run(code)
        if not result.ok:
            raise InterpreterError(_failure(result, _logs(result)))


def _logs(result: ExecutionResult) -> str:
    """The step's printed output, without the session's echo of its final expression."""
    out = result.stdout
    if result.result is not None and out.endswith(result.result + "\n"):
        out = out[: -len(result.result) - 1]
    return out


def _failure(result: ExecutionResult, logs: str) -> str:
    if result.error is not None:
        what = result.error.traceback or f"{result.error.type}: {result.error.message}"
    else:
        what = f"status {result.status}" + (f": {result.detail}" if result.detail else "")
        if result.stderr:
            what += "\n" + result.stderr
    return f"{logs}\nExecuting code yielded an error:\n{what}" if logs else f"Executing code yielded an error:\n{what}"
