"""The programs users already have (issue 12), in programs/, each run as a child
process with RUNTIME_API_URL, RUNTIME_API_KEY, PATH and HOME (and PYTHONPATH, for
this package as an install would place it) against the real daemon; the checks are
what a user would look at:

  gateway.py         a secret, a named sandbox with GitHub and Fetch from the catalog
                     (installed from the real registries) and a stdio server of one's
                     own; all ready, URLs on the daemon's public URL, a bearer header;
                     the GitHub server holds a placeholder, never the token; the own
                     server answers a tools/call over its URL
  first_request.py   Sandbox.get_or_create twice (the same sandbox), the initialize
                     POST and what follows, by hand with urllib
  catalog_narrow.py  a catalog entry's hosts as the network of a `with` sandbox;
                     another host is refused; the sandbox is gone after the block,
                     also when the block raises
  mcp_client.py      the official MCP client (PyPI's `mcp`, pinned with hashes in
                     requirements-mcp.txt, in the venv scripts/install-deps makes)
                     lists and calls the tools of a gateway URL

The tickets server the programs upload is programs/tickets_server.py (the
TypeScript programs use it too). RUNTIME_E2E_OFFLINE=1 skips the catalog installs.
Without the venv the client test is skipped, unless RUNTIME_REQUIRE_ALL is set
(CI): then it fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from withruntime import NotFoundError, Runtime

from conftest import SDK, Daemon, _need_daemon

PROGRAMS = Path(__file__).resolve().parent / "programs"
TICKETS = Path(__file__).resolve().parents[3] / "tests" / "cloud" / "programs" / "tickets_server.py"
PYTHON = "/usr/bin/python3"
MCP_VENV = Path("/opt/runtime-test/venv-mcp")
REQUIREMENTS_MCP = Path(__file__).resolve().parent / "requirements-mcp.txt"
PLACEHOLDER = re.compile(r"^RUNTIME_PH_[0-9a-f]{32}$")


@dataclass
class Ran:
    """A program's run: exit status and output, and `show` for failure messages."""
    code: int
    stdout: str
    stderr: str
    show: str

    def line(self, pattern: str) -> re.Match[str]:
        found = re.search(pattern, self.stdout, re.M)
        assert found, f"no line {pattern!r} in the output of {self.show}"
        return found


Program = Callable[..., Ran]


@pytest.fixture
def program(tmp_path: Path) -> Program:
    """Runs programs/NAME with a daemon's URL and key and nothing else of ours."""
    home = tmp_path / "home"
    home.mkdir()

    def run(daemon: Daemon, name: str, *args: str, python: str = PYTHON, stdin: str = "",
            timeout: float = 180) -> Ran:
        env = {"RUNTIME_API_URL": daemon.url, "RUNTIME_API_KEY": daemon.key,
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "PYTHONPATH": str(SDK / "src")}
        r = subprocess.run([python, str(PROGRAMS / name), *args], input=stdin, env=env,
                           capture_output=True, text=True, timeout=timeout, check=False)
        show = (f"{name} {' '.join(args)}: exit {r.returncode}\n--- stdout\n{r.stdout}"
                f"--- stderr\n{r.stderr}")
        return Ran(r.returncode, r.stdout, r.stderr, show)

    return run


class OnlineDaemon(Daemon):
    """Resolves names for real (the base class's nameserver is a dead loopback port):
    the catalog installs reach the npm registry and PyPI."""

    def args(self) -> list[str]:
        a = super().args()
        i = a.index("--nameserver")
        return a[:i] + a[i + 2:]


@pytest.fixture(scope="module")
def online_daemon() -> Iterator[Daemon]:
    if os.environ.get("RUNTIME_E2E_OFFLINE"):
        pytest.skip("RUNTIME_E2E_OFFLINE is set (the catalog installs need the npm registry and PyPI)")
    _need_daemon()
    d = OnlineDaemon().start()
    try:
        yield d
    finally:
        d.close()


def mcp_python() -> str:
    """The venv's python with the pinned `mcp`; skip (or fail under RUNTIME_REQUIRE_ALL)
    when it is missing, fail when it holds other versions than requirements-mcp.txt."""
    python = MCP_VENV / "bin" / "python"
    if not python.exists():
        why = f"{python} is missing: scripts/install-deps makes it (from {REQUIREMENTS_MCP.name})"
        if os.environ.get("RUNTIME_REQUIRE_ALL"):
            pytest.fail(why + "; RUNTIME_REQUIRE_ALL is set")
        pytest.skip(why)
    installed = MCP_VENV / "requirements-mcp.txt"
    if not installed.exists() or installed.read_bytes() != REQUIREMENTS_MCP.read_bytes():
        pytest.fail(f"{MCP_VENV} does not hold what {REQUIREMENTS_MCP.name} pins: run scripts/install-deps")
    return str(python)


# ---------------------------------------------------------------- MCP by hand

def mcp_post(url: str, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, Any, list[Any]]:
    """One Streamable HTTP POST: (status, headers, JSON-RPC messages of a JSON or SSE answer)."""
    request = urllib.request.Request(url, method="POST", data=json.dumps(message).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = answer.read().decode()
        if answer.headers.get("Content-Type", "").startswith("text/event-stream"):
            messages = [json.loads(x[5:]) for x in body.splitlines() if x.startswith("data:")]
        else:
            messages = [json.loads(body)] if body.strip() else []
        return answer.status, answer.headers, messages


def call_tool(url: str, authorization: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """initialize, notifications/initialized, tools/call: the call's result."""
    headers = {"Authorization": authorization}
    status, answer, messages = mcp_post(url, headers, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "withruntime-test", "version": "1"}}})
    assert status == 200 and messages[0]["result"]["serverInfo"]["name"] == "tickets", messages
    headers["MCP-Protocol-Version"] = messages[0]["result"]["protocolVersion"]
    if answer.get("Mcp-Session-Id"):
        headers["Mcp-Session-Id"] = answer["Mcp-Session-Id"]
    assert mcp_post(url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 202
    status, _, messages = mcp_post(url, headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                  "params": {"name": name, "arguments": arguments}})
    assert status == 200, messages
    return next(m for m in messages if m.get("id") == 2)["result"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the programs

def test_gateway_program(online_daemon: Daemon, program: Program) -> None:
    value = "ghp_" + secrets.token_hex(18)  # fake: nothing calls GitHub
    r = program(online_daemon, "gateway.py", str(TICKETS), stdin=value + "\n", timeout=12 * 60)
    assert r.code == 0, r.show
    assert value not in r.stdout + r.stderr, "the program never shows the token"

    name, sandbox_id = r.line(r"^sandbox (gateway-[0-9a-f]{12}) (\S+)$").groups()
    with online_daemon.runtime() as rt:
        sbx = rt.sandboxes.get(name)
        assert sbx.id == sandbox_id
        assert sbx["idlePauseSeconds"] == 900
        assert sbx["labels"] == {"role": "mcp", "customer": name}

        urls = {}
        for server in ("github", "fetch", "tickets"):
            status, url = r.line(rf"^{server} (\S+) (\S+)$").groups()
            assert status == "ready", r.show
            assert url.startswith(online_daemon.url + "/mcp/") and url.endswith("/" + server), url
            urls[server] = url
        auth = r.line(r"^Authorization: (Bearer \S+)$").group(1)

        listed = {s["name"]: s for s in rt.secrets.list()}
        assert listed["GITHUB_TOKEN"]["hosts"] == ["api.github.com"]

        # Inside: GITHUB_TOKEN is a placeholder, and the GitHub server was given that
        # same placeholder under the name it reads; the token is in no environment.
        placeholder = sbx.exec(["printenv", "GITHUB_TOKEN"], check=True)["stdout"].strip()
        assert PLACEHOLDER.match(placeholder), placeholder
        procs = sbx.exec(["sh", "-c", 'for f in /proc/[0-9]*/environ; do tr "\\000" "\\n" < "$f" '
                          "2>/dev/null; echo; done"])["stdout"]
        assert value not in procs, "the token is in no process environment in the sandbox"
        seen = [x for x in procs.splitlines() if x.startswith("GITHUB_PERSONAL_ACCESS_TOKEN=")]
        assert seen, "the GitHub server runs with GITHUB_PERSONAL_ACCESS_TOKEN set"
        assert set(seen) == {"GITHUB_PERSONAL_ACCESS_TOKEN=" + placeholder}

    # The own server, over its URL with the header the program printed.
    result = call_tool(urls["tickets"], auth, "create_ticket", {"title": "Disk full"})
    assert result["content"] == [{"type": "text", "text": "T-1 created: Disk full (normal)"}]


def test_first_request_program(daemon: Daemon, runtime: Runtime, program: Program) -> None:
    try:
        first = program(daemon, "first_request.py", str(TICKETS))
        assert first.code == 0, first.show
        sandbox_id = first.line(r"^sandbox (\S+)$").group(1)
        first.line(r"^tickets started$")
        count = len(runtime.sandboxes.list())
        second = program(daemon, "first_request.py", str(TICKETS))
        assert second.code == 0, second.show
        assert second.line(r"^sandbox (\S+)$").group(1) == sandbox_id, "the second run gets the same sandbox"
        second.line(r"^tickets already there$")
        assert len(runtime.sandboxes.list()) == count, "and makes no other"

        for r in (first, second):
            status, content_type = r.line(r"^initialize (\d+) (.*)$").groups()
            assert status == "200"
            assert re.match(r"(application/json|text/event-stream)\b", content_type), content_type
            result = json.loads(r.line(r"^result (.*)$").group(1))
            assert result["protocolVersion"] == "2025-06-18"
            assert result["serverInfo"]["name"] == "tickets"
            assert r.line(r"^initialized (\d+)$").group(1) == "202"
            assert r.line(r"^tools/list (\d+) (.*)$").groups() == ("200", "create_ticket,list_tickets")
    finally:
        runtime.sandboxes.delete("mcp-gateway", missing_ok=True)


@pytest.mark.parametrize("raises", [False, True], ids=["block ends", "block raises"])
def test_catalog_narrow_program(daemon: Daemon, runtime: Runtime, program: Program, raises: bool) -> None:
    github = next(e for e in runtime.mcp.catalog() if e["id"] == "github")
    r = program(daemon, "catalog_narrow.py", *(["--raise"] if raises else []))
    sandbox_id = r.line(r"^sandbox (\S+)$").group(1)
    assert f"catalog github {github['package']}@{github['version']} egress=api.github.com\n" in r.stdout, r.show
    r.line(r"^network internet=false allow=api\.github\.com$")
    r.line(r"^curl example\.com exit=[1-9]\d* curl: \(6\) Could not resolve host: example\.com$")
    if raises:
        assert r.code == 1, r.show
        assert "RuntimeError: raised on purpose inside the block" in r.stderr, r.show
        assert "block left" not in r.stdout
    else:
        assert r.code == 0, r.show
        r.line(r"^block left$")
    with pytest.raises(NotFoundError):
        runtime.sandboxes.get(sandbox_id)


def test_official_mcp_client_program(daemon: Daemon, runtime: Runtime, program: Program) -> None:
    r = program(daemon, "mcp_client.py", str(TICKETS), python=mcp_python())
    assert r.code == 0, r.show
    r.line(r"^server tickets protocol \S+$")
    r.line(r"^tools create_ticket,list_tickets$")
    r.line(r"^create_ticket T-1 created: Printer on fire \(high\)$")
    r.line(r"^list_tickets T-1 \[high\] Printer on fire$")
    assert runtime.sandboxes.list(labels={"role": "mcp-client"}) == [], "the program deleted its sandbox"
