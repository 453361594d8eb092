"""Runtime Cloud's official SDK (withruntime 0.35.0, unmodified) starting MCP servers in a
runtimed sandbox: sbx.mcp.start/get/ready/stop and runtime.mcp.catalog(), and the
gateway answer they read ({running, port, headers, servers[{name, status, message,
url}], warnings})."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import withruntime

TICKETS = Path(__file__).resolve().parent / "programs" / "tickets_server.py"
TICKETS_CMD = ["python3", "/workspace/tickets_server.py"]


def call_tool_list(url: str, headers: dict[str, str]) -> list[str]:
    """initialize, then tools/list, as an MCP client sends them (JSON answers)."""
    def post(body: dict, session: str | None = None) -> tuple[dict, str | None]:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
            **headers, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **({"Mcp-Session-Id": session} if session else {}),
            **({"MCP-Protocol-Version": "2025-06-18"} if session else {})})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            if text.startswith("event:") or text.startswith("data:"):
                text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
            return (json.loads(text) if text.strip() else {}), r.headers.get("Mcp-Session-Id")

    _, session = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "cloud-test", "version": "1"}}})
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    listed, _ = post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    return [t["name"] for t in listed["result"]["tools"]]


def test_start_ready_get_and_stop(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        before = sbx.mcp.get()
        assert before["running"] is False and before["servers"] == []
        sbx.files.write("/workspace/tickets_server.py", TICKETS.read_bytes())
        started = sbx.mcp.start([{"name": "tickets", "command": TICKETS_CMD}])
        assert started["running"] is True
        assert [s["status"] for s in started["servers"]] in (["installing"], ["ready"])
        gateway = sbx.mcp.ready(timeout=60, interval=0.1)
        (tickets,) = gateway["servers"]
        assert (tickets["name"], tickets["status"], tickets["message"]) == ("tickets", "ready", None)
        assert gateway["port"] is None and gateway["warnings"] == []
        assert gateway["headers"]["Authorization"] == f"Bearer {gateway['token']}"
        assert call_tool_list(tickets["url"], gateway["headers"]) == ["create_ticket",
                                                                       "list_tickets"]
        assert sbx.mcp.stop() is True
        after = sbx.mcp.get()
        assert after["running"] is False
        assert [(s["status"], s["phase"]) for s in after["servers"]] == [("failed", "stopped")]
        assert "stopped" in after["servers"][0]["message"]
        assert sbx.mcp.stop() is False  # nothing was running


def test_ready_returns_once_a_server_failed(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.mcp.start([{"name": "broken", "command": ["/workspace/no-such-program"]}])
        gateway = sbx.mcp.ready(timeout=60, interval=0.1)
        (broken,) = gateway["servers"]
        assert broken["status"] == "failed" and broken["message"]


def test_replace_stops_the_servers_not_named(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.files.write("/workspace/tickets_server.py", TICKETS.read_bytes())
        sbx.mcp.start([{"name": "one", "command": TICKETS_CMD},
                       {"name": "two", "command": TICKETS_CMD}])
        sbx.mcp.ready(timeout=60, interval=0.1)
        gateway = sbx.mcp.start([{"name": "two", "command": TICKETS_CMD}], replace=True)
        phases = {s["name"]: s["phase"] for s in gateway["servers"]}
        assert phases == {"one": "stopped", "two": "ready"}


def test_a_start_option_runtimed_cannot_honour_is_refused(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        with pytest.raises(withruntime.InvalidRequestError) as refused:
            sbx.mcp.start([{"name": "t", "command": TICKETS_CMD}], port=8765)
        assert "port" in str(refused.value)
        with pytest.raises(withruntime.InvalidRequestError) as unknown:
            sbx.mcp.start([{"name": "t", "command": TICKETS_CMD, "cwd": "/tmp"}])
        assert "cwd" in str(unknown.value)


def test_the_catalog_in_runtime_clouds_shape(runtime: withruntime.Runtime) -> None:
    catalog = {e["id"]: e for e in runtime.mcp.catalog()}
    assert {"github", "fetch"} <= catalog.keys()
    github = catalog["github"]
    assert github["title"] == "GitHub" and github["license"] in ("MIT", "Apache-2.0")
    assert github["env"][0]["name"] == "GITHUB_PERSONAL_ACCESS_TOKEN"
    assert github["env"][0]["secret"] is True and github["env"][0]["hosts"] == ["api.github.com"]
    assert github["source"].startswith("https://www.npmjs.com/package/")
    assert github["egress"] == ["api.github.com"] and github["checked"]


ENV_SERVER = r'''
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "env", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "token", "description": "GH_TOKEN as the server sees it",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        result = {"content": [{"type": "text", "text": os.environ.get("GH_TOKEN", "")}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def call_tool(url: str, headers: dict[str, str], name: str) -> str:
    """tools/call in the stateless 2026-07-28 revision: one POST, no session."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        **headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    if not text.lstrip().startswith("{"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]["content"][0]["text"]


def test_a_server_gets_a_secret_with_its_own_env_name_by_mapping(runtime: withruntime.Runtime) -> None:
    runtime.secrets.set("GITHUB_TOKEN", value="ghp_not_a_real_token_0123456789",
                        hosts=["api.github.test"], env="GH_FOR_TOOLS")
    try:
        with runtime.sandboxes.create() as sbx:
            placeholder = sbx.exec("printf %s \"$GH_FOR_TOOLS\"").stdout
            assert placeholder and "ghp_" not in placeholder  # the sandbox holds a placeholder
            sbx.files.write("/workspace/env_server.py", ENV_SERVER)
            sbx.mcp.start([{"name": "env", "command": ["python3", "/workspace/env_server.py"],
                            "secrets": {"GH_TOKEN": "GITHUB_TOKEN"}}])
            gateway = sbx.mcp.ready(timeout=60, interval=0.1)
            (env,) = gateway["servers"]
            assert env["status"] == "ready", env
            assert call_tool(env["url"], gateway["headers"], "token") == placeholder
    finally:
        runtime.secrets.delete("GITHUB_TOKEN")
