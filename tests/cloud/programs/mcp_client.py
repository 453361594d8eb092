"""The official MCP Python client (the `mcp` package) on a gateway URL: what
mcp.ready() returns (the URL and the Authorization header) is all it needs.

    python3 mcp_client.py TICKETS_SERVER.py     (a python3 that has `mcp` and `withruntime`)
"""

import asyncio
import sys
from pathlib import Path

import httpx2
from mcp import Client, Implementation
from mcp.client.streamable_http import streamable_http_client

from withruntime import Runtime


def text_of(result) -> str:
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content}")
    return "\n".join(c.text for c in result.content if c.type == "text")


async def use_tickets(url: str, headers: dict[str, str]) -> None:
    # The header goes on every request of the transport's HTTP client.
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(url, http_client=http),
                          client_info=Implementation(name="tickets-agent", version="1.0.0")) as client:
            info = client.server_info
            print("server", info.name if info else "?", "protocol", client.protocol_version)
            tools = await client.list_tools()
            print("tools", ",".join(sorted(t.name for t in tools.tools)))
            created = await client.call_tool("create_ticket", {"title": "Printer on fire", "priority": "high"})
            print("create_ticket", text_of(created))
            print("list_tickets", text_of(await client.call_tool("list_tickets", {})))


runtime = Runtime()
with runtime.sandboxes.create(memory_mib=512, labels={"role": "mcp-client"}) as sbx:
    sbx.files.write("/workspace/tickets_server.py", Path(sys.argv[1]).read_bytes())
    sbx.mcp.start([{"name": "tickets", "command": ["python3", "/workspace/tickets_server.py"]}])
    gateway = sbx.mcp.ready(timeout=120)
    url = next(s["url"] for s in gateway["servers"] if s["name"] == "tickets")
    asyncio.run(use_tickets(url, dict(gateway["headers"])))
