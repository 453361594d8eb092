"""A client's first request written out by hand: the customer's sandbox (the same
one on every run), its tickets server started once, then MCP Streamable HTTP with
nothing but urllib: initialize, notifications/initialized, tools/list.

    python3 first_request.py TICKETS_SERVER.py
"""

import json
import sys
import urllib.request
from pathlib import Path

from withruntime import Sandbox

sbx = Sandbox.get_or_create("mcp-gateway", idle_pause_seconds=900, labels={"role": "mcp"})
print("sandbox", sbx.id)

if any(s["name"] == "tickets" for s in sbx.mcp.get()["servers"]):
    print("tickets already there")
else:
    sbx.files.write("/workspace/tickets_server.py", Path(sys.argv[1]).read_bytes())
    sbx.mcp.start([{"name": "tickets", "command": ["python3", "/workspace/tickets_server.py"]}])
    print("tickets started")
gateway = sbx.mcp.ready(timeout=120)
url = next(s["url"] for s in gateway["servers"] if s["name"] == "tickets")

# What every request carries: a JSON body, both answer types accepted, the gateway token.
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           **gateway["headers"]}


def post(headers, message):
    """POSTs one JSON-RPC message; returns (status, headers, body)."""
    request = urllib.request.Request(url, method="POST", headers=headers,
                                     data=json.dumps(message).encode())
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, answer.headers, answer.read().decode()


def answer_to(request_id, headers, body):
    """The JSON-RPC response with this id, from a JSON body or a text/event-stream."""
    if headers.get("Content-Type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    else:
        parsed = json.loads(body)
        messages = parsed if isinstance(parsed, list) else [parsed]
    found = next((m for m in messages if m.get("id") == request_id and "method" not in m), None)
    if not found or "result" not in found:
        raise SystemExit(f"no result for request {request_id} in {body}")
    return found


status, headers, body = post(HEADERS, {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "first-request", "version": "1.0.0"}}})
print("initialize", status, headers.get("Content-Type"))
result = answer_to(1, headers, body)["result"]
print("result", json.dumps(result))

# Later requests name the version agreed on, and the session if the server made one.
later = {**HEADERS, "MCP-Protocol-Version": result["protocolVersion"]}
if headers.get("Mcp-Session-Id"):
    later["Mcp-Session-Id"] = headers["Mcp-Session-Id"]
print("initialized", post(later, {"jsonrpc": "2.0", "method": "notifications/initialized"})[0])
status, headers, body = post(later, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
tools = [t["name"] for t in answer_to(2, headers, body)["result"]["tools"]]
print("tools/list", status, ",".join(tools))
