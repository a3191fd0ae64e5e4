"""An MCP client on the official Python SDK (`mcp` on PyPI), driving Vivarium's `/mcp`
endpoint over the streamable HTTP transport: initialize, list tools, call each tool. Prints
one JSON object summarising what came back; tests/server/front_mcp.rs checks it.

Usage: python front_mcp_client.py http://127.0.0.1:PORT/mcp
"""

import asyncio
import base64
import json
import sys

from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

PLOT = """\
import matplotlib.pyplot as plt
plt.plot([0, 1, 2, 3], [0, 1, 4, 9])
plt.title('squares')
plt.show()
print('plotted')
"""


def attr(obj, snake, camel):
    """SDK 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def summary(result):
    out = {"is_error": bool(attr(result, "is_error", "isError")), "texts": [], "images": [],
           "resources": [], "links": [],
           "structured": attr(result, "structured_content", "structuredContent")}
    for c in result.content:
        if c.type == "text":
            out["texts"].append(c.text)
        elif c.type == "image":
            png = base64.b64decode(c.data)
            out["images"].append({"mime": attr(c, "mime_type", "mimeType"), "png": png.startswith(b"\x89PNG"), "size": len(png)})
        elif c.type == "resource":
            r = c.resource
            blob = getattr(r, "blob", None)
            out["resources"].append({
                "uri": str(r.uri), "mime": attr(r, "mime_type", "mimeType"),
                "text": getattr(r, "text", None),
                "blob": base64.b64decode(blob).hex() if blob is not None else None,
            })
        elif c.type == "resource_link":
            out["links"].append({"uri": str(c.uri), "name": c.name})
    return out


async def legacy(url, report):
    """A client of an older revision (the initialize handshake, 2025-11-25): the text and the
    plot's image are there for it, as for every client."""
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            init = await session.initialize()
            report["legacy_protocol"] = str(attr(init, "protocol_version", "protocolVersion"))
            report["legacy_plot"] = summary(await session.call_tool("execute_python", {"code": PLOT}))


async def main(url):
    report = {}
    await legacy(url, report)
    # The SDK's own client, in its default mode: it asks `server/discover` and speaks the
    # newest revision both sides have (2026-07-28), where structuredContent is checked
    # against each tool's outputSchema.
    async with Client(url) as session:
        report["server"] = session.server_info.name if session.server_info else None
        report["protocol"] = str(session.protocol_version)
        tools = await session.list_tools()
        report["tools"] = sorted(t.name for t in tools.tools)
        report["execute_schema"] = next(
            attr(t, "input_schema", "inputSchema") for t in tools.tools if t.name == "execute_python"
        )
        # The SDK checks every structuredContent against these (and raises if it fails).
        report["output_schemas"] = {
            t.name: attr(t, "output_schema", "outputSchema") for t in tools.tools
        }
        report["turn_schema"] = next(
            attr(t, "input_schema", "inputSchema") for t in tools.tools if t.name == "run_in_session"
        )
        report["plot"] = summary(await session.call_tool("execute_python", {"code": PLOT}))
        report["files"] = summary(await session.call_tool(
            "execute_python",
            {
                "code": "print(open('in.txt').read().upper())\n1/0",
                "files": [{"path": "in.txt", "content": "from the client"}],
                "limits": {"timeout_ms": 5000},
            },
        ))
        report["written"] = summary(await session.call_tool(
            "execute_python",
            {"code": "open('out.csv', 'w').write('a,b\\n1,2\\n')\nopen('raw.bin', 'wb').write(bytes([0, 159, 146, 150]))"},
        ))
        report["check"] = summary(await session.call_tool(
            "check_python", {"code": "import os\nos.system('ls')"}
        ))
        report["denied"] = summary(await session.call_tool(
            "execute_python", {"code": "import subprocess", "policy": "deny"}
        ))
        report["scientific"] = summary(await session.call_tool(
            "execute_python",
            {"code": "import sys; print('pandas' in sys.modules)", "template": "scientific"},
        ))
        report["bad_template"] = summary(await session.call_tool(
            "execute_python", {"code": "pass", "template": "nope"}
        ))
        opened = summary(await session.call_tool("open_session", {}))
        sid = json.loads(opened["texts"][0])["session_id"]
        await session.call_tool("run_in_session", {"session_id": sid, "code": "x = 21"})
        report["turn"] = summary(await session.call_tool(
            "run_in_session", {"session_id": sid, "code": "open('notes.md', 'w').write('# x')\nx * 2"}
        ))
        report["session_id"] = sid
        # A linked session file, read back through resources/read.
        link = next(l for l in report["turn"]["links"] if l["name"] == "notes.md")
        read = await session.read_resource(link["uri"])
        report["read"] = [{"uri": str(c.uri), "text": getattr(c, "text", None)} for c in read.contents]
        try:
            await session.read_resource(f"vivarium://sessions/{sid}/files/..%2Fetc%2Fpasswd")
            report["read_outside"] = "read"
        except Exception as e:
            report["read_outside"] = str(e)
        report["closed"] = summary(await session.call_tool("close_session", {"session_id": sid}))
        report["after_close"] = summary(await session.call_tool(
            "run_in_session", {"session_id": sid, "code": "x"}
        ))
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
