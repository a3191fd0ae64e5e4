"""FastMCP CodeMode with Vivarium as its sandbox provider: FastMCP's own CodeMode example
(``examples/code_mode``: a server with a few tools, the ``CodeMode`` transform, a client
that searches and then chains calls in one ``execute``), in memory, end to end."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


fastmcp = require("fastmcp")
code_mode = require("fastmcp.experimental.transforms.code_mode")

from vivarium_client import AsyncClient  # noqa: E402
from vivarium_client.fastmcp import VivariumSandboxProvider  # noqa: E402


async def test_codemode_example_flow_runs_in_vivarium(server) -> None:
    mcp = fastmcp.FastMCP("CodeMode Demo")
    calls: list[str] = []

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Add two numbers together."""
        calls.append("add")
        return a + b

    @mcp.tool
    def multiply(x: float, y: float) -> float:
        """Multiply two numbers."""
        calls.append("multiply")
        return x * y

    @mcp.tool
    def fibonacci(n: int) -> list[int]:
        """Generate the first n Fibonacci numbers."""
        calls.append("fibonacci")
        seq = [0, 1]
        while len(seq) < n:
            seq.append(seq[-1] + seq[-2])
        return seq[:n]

    async with AsyncClient(server.url) as vivarium:
        mcp.add_transform(code_mode.CodeMode(sandbox_provider=VivariumSandboxProvider(vivarium)))
        async with fastmcp.Client(mcp) as client:
            names = {t.name for t in await client.list_tools()}
            assert names == {"search", "get_schema", "execute"}

            found = await client.call_tool("search", {"query": "add multiply numbers"})
            assert "add" in found.content[0].text and "multiply" in found.content[0].text

            # The example's chain. FastMCP wraps a primitive return as {"result": ...}
            # (whatever the sandbox), hence the ["result"].
            code = (
                'a = (await call_tool("add", {"a": 3, "b": 4}))["result"]\n'
                'b = (await call_tool("multiply", {"x": a, "y": 2}))["result"]\n'
                'fib = (await call_tool("fibonacci", {"n": int(b)}))["result"]\n'
                'import numpy as np\n'
                'return {"sum": a, "product": b, "fibonacci": fib, "mean": float(np.mean(fib))}\n'
            )
            result = await client.call_tool("execute", {"code": code})
            assert result.structured_content == {
                "sum": 7,
                "product": 14.0,
                "fibonacci": [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233],
                "mean": 43.5,
            }
            assert calls == ["add", "multiply", "fibonacci"]

            # A trailing expression is the value, as in Monty.
            plain = await client.call_tool("execute", {"code": "x = 20\nx + 1"})
            assert plain.content[0].text == "21"

            # A failing tool call fails the program; FastMCP reports it as a tool error.
            failed = await client.call_tool(
                "execute", {"code": "await call_tool('nope', {})"}, raise_on_error=False
            )
            assert failed.is_error
            assert "Unknown tool: nope" in failed.content[0].text
            assert 'File "<code>", line 1' in failed.content[0].text


async def test_provider_takes_a_server_url(server) -> None:
    provider = VivariumSandboxProvider(server.url)
    try:
        assert provider.client.base_url == server.url
        assert await provider.run("return 6 * 7") == 42
    finally:
        await provider.aclose()
    assert provider.client._http.is_closed
