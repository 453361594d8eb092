"""tickets: a small MCP server of one's own, over stdio, standard library only.

The programs next to this file upload it into a sandbox as
/workspace/tickets_server.py and run it with the sandbox's (Debian's) python3;
the gateway makes it an MCP Streamable HTTP server. It speaks newline-delimited
JSON-RPC on stdin/stdout, as the MCP stdio transport says, and has two tools:
create_ticket (title, priority) and list_tickets. Tickets live in memory for as
long as the process does.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Newest first: an initialize naming one of these gets it back, any other the newest.
VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
PRIORITIES = ("low", "normal", "high")

TOOLS = [
    {"name": "create_ticket",
     "description": "Opens a support ticket and returns its id.",
     "inputSchema": {"type": "object", "required": ["title"],
                     "properties": {"title": {"type": "string", "description": "What is wrong"},
                                    "priority": {"type": "string", "enum": list(PRIORITIES)}}}},
    {"name": "list_tickets",
     "description": "Lists the open tickets, oldest first, one a line.",
     "inputSchema": {"type": "object", "properties": {}}},
]

tickets: list[dict[str, str]] = []


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def text(s: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": s}], "isError": error}


def create_ticket(args: dict[str, Any]) -> dict[str, Any]:
    title = args.get("title")
    priority = args.get("priority", "normal")
    if not isinstance(title, str) or not title.strip():
        return text("create_ticket needs a title", error=True)
    if priority not in PRIORITIES:
        return text(f"priority must be one of {', '.join(PRIORITIES)}", error=True)
    ticket = {"id": f"T-{len(tickets) + 1}", "title": title.strip(), "priority": priority}
    tickets.append(ticket)
    return text(f"{ticket['id']} created: {ticket['title']} ({priority})")


def list_tickets(_args: dict[str, Any]) -> dict[str, Any]:
    lines = [f"{t['id']} [{t['priority']}] {t['title']}" for t in tickets]
    return text("\n".join(lines) if lines else "no open tickets")


CALLS = {"create_ticket": create_ticket, "list_tickets": list_tickets}


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {"protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tickets", "version": "1.0.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        call = CALLS.get(params.get("name", ""))
        if call is None:
            raise RpcError(-32602, f"no tool {params.get('name')!r}")
        return call(params.get("arguments") or {})
    raise RpcError(-32601, f"method {method!r} not found")


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": None,
                                     "error": {"code": -32700, "message": "parse error"}}
        else:
            if "method" not in msg or "id" not in msg:
                continue  # a notification (or a response): nothing to answer
            reply = {"jsonrpc": "2.0", "id": msg["id"]}
            try:
                reply["result"] = answer(msg["method"], msg.get("params") or {})
            except RpcError as e:
                reply["error"] = {"code": e.code, "message": str(e)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
