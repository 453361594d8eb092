"""MCP servers through the SDK: the catalog, a custom stdio server, mcp.ready() and
an MCP `initialize` through the gateway URL and header it returns."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from withruntime import CustomServer, McpServerError, NotFoundError, Runtime, Sandbox, TimeoutError

from conftest import HELLO_SERVER, Daemon

HELLO: CustomServer = {"name": "hello", "command": ["node", "/workspace/hello.mjs"]}


@pytest.fixture
def sbx(runtime: Runtime) -> Iterator[Sandbox]:
    with runtime.sandboxes.create(memory_mib=512) as s:
        s.files.write("hello.mjs", HELLO_SERVER.read_bytes())
        yield s


def post(url: str, authorization: str | None, message: object) -> tuple[int, str, str]:
    """A JSON-RPC POST as an MCP Streamable HTTP client sends it."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    req = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "withruntime-test", "version": "1"}}}


def test_catalog(runtime: Runtime) -> None:
    catalog = runtime.mcp.catalog()
    ids = {e["id"] for e in catalog}
    assert {"github", "fetch", "memory"} <= ids, ids
    github = next(e for e in catalog if e["id"] == "github")
    assert github["egress"] == ["api.github.com"] and github["command"]
    assert any(s["env"] == "GITHUB_PERSONAL_ACCESS_TOKEN" for s in github["settings"])


def test_custom_server_ready_and_initialize(sbx: Sandbox, daemon: Daemon) -> None:
    started = sbx.mcp.start([HELLO])
    assert [s["name"] for s in started["servers"]] == ["hello"]
    gateway = sbx.mcp.ready(timeout_ms=60_000)
    server = gateway["servers"][0]
    assert (server["name"], server["status"], server["tools"]) == ("hello", "ready", ["hello"])
    assert server["url"].startswith(daemon.url + "/mcp/") and server["url"].endswith("/hello")
    auth = gateway["headers"]["Authorization"]
    assert auth.startswith("Bearer ")

    status, ctype, text = post(server["url"], auth, INITIALIZE)
    assert status == 200, text
    assert ctype.startswith(("application/json", "text/event-stream")), ctype
    assert '"serverInfo"' in text and '"protocolVersion"' in text
    assert post(server["url"], None, INITIALIZE)[0] == 401, "the gateway token is required"
    assert post(server["url"], "Bearer " + "0" * 64, INITIALIZE)[0] == 401

    assert sbx.mcp.status()["servers"][0]["status"] == "ready"
    assert sbx.refresh()["mcp"]["servers"][0]["name"] == "hello"
    sbx.mcp.stop("hello")
    assert [s["status"] for s in sbx.mcp.status()["servers"]] in ([], ["stopped"])


def test_ready_names_a_failed_server(sbx: Sandbox) -> None:
    sbx.mcp.start([HELLO, {"name": "broken", "command": ["node", "/workspace/missing.mjs"]}])
    with pytest.raises(McpServerError) as e:
        sbx.mcp.ready(timeout_ms=60_000)
    assert [s["name"] for s in e.value.servers] == ["broken"]
    assert e.value.servers[0]["status"] == "failed" and "broken" in str(e.value)
    assert (e.value.server, e.value.server_status) == ("broken", "failed") and e.value.server_error
    assert e.value.code == "mcp_failed" and e.value.gateway["headers"]["Authorization"]
    gateway = sbx.mcp.ready(timeout_ms=60_000, check=False)
    assert {s["name"]: s["status"] for s in gateway["servers"]} == {"hello": "ready", "broken": "failed"}


def test_ready_times_out_on_its_own_deadline(sbx: Sandbox) -> None:
    # A server that never answers initialize stays `starting`.
    sbx.mcp.start([{"name": "mute", "command": ["sleep", "600"]}])
    with pytest.raises(TimeoutError) as e:
        sbx.mcp.ready(timeout_ms=1500)
    assert "mute" in str(e.value)


def test_logs_and_follow_logs(sbx: Sandbox) -> None:
    # The server copies /workspace/say to its stderr whenever the file appears.
    script = ("echo 'chatty: starting up' >&2; "
              "(while :; do if [ -f /workspace/say ]; then cat /workspace/say >&2; "
              "rm -f /workspace/say; fi; sleep 0.05; done) & exec node /workspace/hello.mjs")
    sbx.mcp.start([{"name": "chatty", "command": ["sh", "-c", script]}])
    sbx.mcp.ready(timeout_ms=60_000)
    assert sbx.mcp.logs("chatty") == "chatty: starting up\n"
    with pytest.raises(NotFoundError):
        sbx.mcp.logs("nosuch")

    follow = sbx.mcp.follow_logs("chatty", idle_timeout_ms=15_000)
    seen = next(follow)
    assert seen.startswith("chatty: starting up\n"), seen
    sbx.files.write("say", "said after the follow began\n")
    while "said after the follow began\n" not in seen:
        seen += next(follow)  # each read gives up after 15 s of silence
    follow.close()
