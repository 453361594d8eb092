"""The weather-server start, as a user writes it with the withruntime package and
urllib: install an MCP server from the team's npm registry into a sandbox that
reaches only that registry, narrow the sandbox to the weather API, start the
server behind the gateway, check its tool list against the fingerprint that was
reviewed, and only then use it.

    RUNTIME_API_URL=... RUNTIME_API_KEY=... WEATHER_FINGERPRINT=HASH python3 weather_server.py

HASH is the reviewed fingerprint (the 16 hex digits users see, or all 64). On a
mismatch the sandbox is deleted and the program exits 1 naming both fingerprints.
Otherwise it prints the sandbox, the fingerprint, the forecast and the server's
URL, and leaves the sandbox running for the agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import urllib.parse
import urllib.request
from typing import Any

from withruntime import Runtime, Sandbox

REGISTRY = "http://registry.acme.test/"
PACKAGE = "@acme/weather-mcp@1.4.2"
API_HOST = "api.weather.test"
SERVER = {"name": "weather", "command": ["node", "/workspace/srv/node_modules/.bin/weather-mcp"]}
CITY = "Lisbon"
PROTOCOL = "2025-06-18"


class FingerprintMismatch(Exception):
    pass


def fingerprint(tools: list[dict[str, Any]]) -> str:
    """The fingerprint (docs/gateway.md): sha256 of the canonical JSON of the tools sorted by name."""
    ordered = sorted(tools, key=lambda tool: tool["name"])
    return hashlib.sha256(json.dumps(ordered, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


class McpHttp:
    """A Streamable HTTP client of one server: JSON-RPC over POST, the answer as JSON or SSE."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers
        self.session: str | None = None
        self.version: str | None = None
        self.next_id = 1

    def post(self, message: dict[str, Any]) -> tuple[str, str]:
        headers = {**self.headers, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(),
                                         headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=60) as answer:  # HTTP errors raise
            self.session = answer.headers.get("Mcp-Session-Id") or self.session
            return answer.headers.get("Content-Type", ""), answer.read().decode()

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        request_id = self.next_id
        self.next_id += 1
        kind, text = self.post({"jsonrpc": "2.0", "id": request_id, "method": method,
                                "params": params or {}})
        answer = from_events(text, request_id) if kind.startswith("text/event-stream") \
            else json.loads(text)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error'].get('message')}")
        return answer["result"]

    def notify(self, method: str) -> None:
        self.post({"jsonrpc": "2.0", "method": method, "params": {}})

    def initialize(self) -> None:
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "weather-server", "version": "1.0.0"}})
        self.version = result["protocolVersion"]
        self.notify("notifications/initialized")

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool, following nextCursor page by page."""
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(100):
            result = self.request("tools/list", params)
            tools += result["tools"]
            if result.get("nextCursor") is None:
                return tools
            params = {"cursor": result["nextCursor"]}
        raise RuntimeError("tools/list has more than 100 pages")


def from_events(text: str, request_id: int) -> dict[str, Any]:
    """The answer with this id among the messages of an SSE body."""
    for event in re.split(r"\r?\n\r?\n", text):
        data = "\n".join(line[5:].strip() for line in event.splitlines()
                         if line.startswith("data:"))
        if data:
            message = json.loads(data)
            if message.get("id") == request_id:
                return message  # type: ignore[no-any-return]
    raise RuntimeError(f"no answer to request {request_id} in the event stream")


def install(sbx: Sandbox) -> None:
    sbx.exec(["npm", "config", "set", "registry", REGISTRY], check=True)
    sbx.exec(["npm", "install", "--ignore-scripts", "--prefix", "/workspace/srv", PACKAGE],
             check=True, timeout_ms=180_000)


def checked_client(server: dict[str, Any], headers: dict[str, str], expected: str) -> McpHttp:
    client = McpHttp(server["url"], headers)
    client.initialize()
    seen = fingerprint(client.list_tools())
    print(f"fingerprint {seen}", flush=True)
    if not re.fullmatch(r"[0-9a-f]{16}([0-9a-f]{48})?", expected) or not seen.startswith(expected):
        raise FingerprintMismatch(f"the weather server's tools changed: expected fingerprint "
                                  f"{expected}, its tools have {seen[:16]} (sha256 {seen})")
    return client


def main() -> None:
    expected = os.environ.get("WEATHER_FINGERPRINT", "").strip().lower()
    if not expected:
        sys.exit("weather-server: set WEATHER_FINGERPRINT to the reviewed fingerprint "
                 "of the weather server")
    runtime = Runtime()
    sbx = runtime.sandboxes.create(labels={"app": "weather-server"}, network={
        "internet": True, "allow": [urllib.parse.urlsplit(REGISTRY).hostname or ""]})
    print(f"sandbox {sbx.id}", flush=True)
    try:
        install(sbx)
        sbx.network.set(internet=True, allow=[API_HOST])
        sbx.mcp.start([SERVER])  # type: ignore[list-item]
        gateway = sbx.mcp.ready()
        server = next(s for s in gateway["servers"] if s["name"] == SERVER["name"])
        client = checked_client(dict(server), dict(gateway["headers"]), expected)
        result = client.request("tools/call", {"name": "get_forecast", "arguments": {"city": CITY}})
        text = "\n".join(c["text"] for c in result["content"] if c["type"] == "text").strip()
        if result.get("isError"):
            raise RuntimeError(f"get_forecast failed: {text}")
        print(f"forecast {text}")
        print(f"url {server['url']}")
    except BaseException:
        sbx.delete()  # nothing half set up is left behind, least of all an unreviewed server
        raise


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line for the user, not a traceback
        sys.exit(f"weather-server: {e}")
