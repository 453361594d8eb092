"""The programs users already have (issue 12), in programs/, each run as a child process
with Runtime Cloud's official package (withruntime 0.35.0 from PyPI, unmodified) and
nothing of ours in its environment but RUNTIME_API_URL, RUNTIME_API_KEY, PATH and HOME,
against the real daemon; the checks are what a user would look at:

  gateway.py         seed program (b): a secret, a named sandbox with GitHub and Fetch
                     from the catalog (installed from the real registries) and a stdio
                     server of one's own; all three ready, URLs on the daemon's public
                     URL, the Authorization header printed; the GitHub server holds a
                     placeholder, never the token; the own server answers a tools/call
                     over its URL
  first_request.py   Sandbox.get_or_create twice (the same sandbox), the initialize
                     POST and what follows, by hand with urllib
  catalog_narrow.py  a catalog entry's hosts as the network of a `with` sandbox;
                     another host is refused; the sandbox is gone after the block,
                     also when the block raises
  mcp_client.py      the official MCP client (PyPI's `mcp`, pinned with hashes in
                     requirements-mcp.txt, in the venv scripts/install-deps makes)
                     lists and calls the tools of a gateway URL

The tickets server the programs upload is programs/tickets_server.py. The catalog
installs of gateway.py need the npm registry and PyPI: RUNTIME_E2E_OFFLINE=1 runs it
without them instead (its own server ready, the catalog servers failed to install). Without the MCP venv the client test is skipped, unless RUNTIME_REQUIRE_ALL is
set (CI): then it fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import withruntime

from conftest import Daemon, need_daemon

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
TICKETS = PROGRAMS / "tickets_server.py"
MCP_VENV = Path("/opt/runtime-test/venv-mcp")
REQUIREMENTS_MCP = HERE / "requirements-mcp.txt"
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

    def run(daemon: Daemon, name: str, *args: str, python: str = sys.executable,
            pythonpath: str | None = None, stdin: str = "", timeout: float = 180) -> Ran:
        env = {"RUNTIME_API_URL": daemon.url, "RUNTIME_API_KEY": daemon.key,
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               **({"PYTHONPATH": pythonpath} if pythonpath else {})}
        r = subprocess.run([python, str(PROGRAMS / name), *args], input=stdin, env=env,
                           capture_output=True, text=True, timeout=timeout, check=False)
        show = (f"{name} {' '.join(args)}: exit {r.returncode}\n--- stdout\n{r.stdout}"
                f"--- stderr\n{r.stderr}")
        return Ran(r.returncode, r.stdout, r.stderr, show)

    return run


@pytest.fixture(scope="module")
def online_daemon() -> Iterator[Daemon]:
    """Resolves names for real: the catalog installs reach the npm registry and PyPI."""
    if os.environ.get("RUNTIME_E2E_OFFLINE"):
        pytest.skip("RUNTIME_E2E_OFFLINE is set (the catalog installs need the npm registry and PyPI)")
    need_daemon()
    d = Daemon(online=True).start()
    try:
        yield d
    finally:
        d.close()


def client_of(d: Daemon) -> withruntime.Runtime:
    return withruntime.Runtime(api_key=d.key, base_url=d.url)


def mcp_python(tmp_path: Path) -> tuple[str, str]:
    """The MCP venv's python with the pinned `mcp`, and a PYTHONPATH that adds this
    venv's official `withruntime` (alone) to it; skip (or fail under RUNTIME_REQUIRE_ALL)
    when the venv is missing, fail when it holds other versions than requirements-mcp.txt."""
    python = MCP_VENV / "bin" / "python"
    if not python.exists():
        why = f"{python} is missing: scripts/install-deps makes it (from {REQUIREMENTS_MCP.name})"
        if os.environ.get("RUNTIME_REQUIRE_ALL"):
            pytest.fail(why + "; RUNTIME_REQUIRE_ALL is set")
        pytest.skip(why)
    installed = MCP_VENV / "requirements-mcp.txt"
    if not installed.exists() or installed.read_bytes() != REQUIREMENTS_MCP.read_bytes():
        pytest.fail(f"{MCP_VENV} does not hold what {REQUIREMENTS_MCP.name} pins: run scripts/install-deps")
    overlay = tmp_path / "site"
    overlay.mkdir()
    (overlay / "withruntime").symlink_to(Path(withruntime.__file__).parent)
    return str(python), str(overlay)


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

def gateway_program(d: Daemon, program: Program, catalog_status: str) -> withruntime.Sandbox:
    """Runs gateway.py and checks what it printed and did; the catalog servers (github,
    fetch) end in catalog_status. Returns its sandbox."""
    value = "ghp_" + secrets.token_hex(18)  # fake: nothing calls GitHub
    r = program(d, "gateway.py", str(TICKETS), stdin=value + "\n", timeout=12 * 60)
    assert r.code == 0, r.show
    assert value not in r.stdout + r.stderr, "the program never shows the token"

    name, sandbox_id = r.line(r"^sandbox (gateway-[0-9a-f]{12}) (\S+)$").groups()
    rt = client_of(d)
    sbx = rt.sandboxes.get(name)
    assert sbx.id == sandbox_id
    assert sbx.info["idlePauseSeconds"] == 900
    assert sbx.info["labels"] == {"role": "mcp", "customer": name}

    urls = {}
    for server in ("github", "fetch", "tickets"):
        status, url = r.line(rf"^{server} (\S+) (\S+)$").groups()
        assert status == ("ready" if server == "tickets" else catalog_status), r.show
        assert url.startswith(d.url + "/mcp/") and url.endswith("/" + server), url
        urls[server] = url
    auth = r.line(r"^Authorization: (Bearer \S+)$").group(1)

    listed = {s["name"]: s for s in rt.secrets.list()}
    assert listed["GITHUB_TOKEN"]["hosts"] == ["api.github.com"]

    # Inside: GITHUB_TOKEN is a placeholder, and the GitHub server was given that
    # same placeholder under the name it reads; the token is in no environment.
    placeholder = sbx.exec(["printenv", "GITHUB_TOKEN"], check=True).stdout.strip()
    assert PLACEHOLDER.match(placeholder), placeholder
    procs = sbx.exec(["sh", "-c", 'for f in /proc/[0-9]*/environ; do tr "\\000" "\\n" < "$f" '
                      "2>/dev/null; echo; done"]).stdout
    assert value not in procs, "the token is in no process environment in the sandbox"
    if catalog_status == "ready":
        seen = [x for x in procs.splitlines() if x.startswith("GITHUB_PERSONAL_ACCESS_TOKEN=")]
        assert seen, "the GitHub server runs with GITHUB_PERSONAL_ACCESS_TOKEN set"
        assert set(seen) == {"GITHUB_PERSONAL_ACCESS_TOKEN=" + placeholder}

    # The own server, over its URL with the header the program printed.
    result = call_tool(urls["tickets"], auth, "create_ticket", {"title": "Disk full"})
    assert result["content"] == [{"type": "text", "text": "T-1 created: Disk full (normal)"}]
    return sbx


def test_gateway_program(online_daemon: Daemon, program: Program) -> None:
    gateway_program(online_daemon, program, "ready").delete()
    client_of(online_daemon).secrets.delete("GITHUB_TOKEN")


def test_gateway_program_offline(daemon: Daemon, program: Program) -> None:
    """Without the registries (RUNTIME_E2E_OFFLINE=1; the daemon's nameserver is dead) the
    program still runs to the end: its own server ready, the header printed, and the
    catalog servers failed, each saying that its install failed."""
    if not os.environ.get("RUNTIME_E2E_OFFLINE"):
        pytest.skip("test_gateway_program runs it with the registries")
    sbx = gateway_program(daemon, program, "failed")
    try:
        failed = {s["name"]: s["message"] for s in sbx.mcp.get()["servers"] if s["status"] == "failed"}
        assert failed.keys() == {"github", "fetch"}, failed
        assert failed["github"].startswith("cannot install @modelcontextprotocol/server-github "), failed
        assert failed["fetch"].startswith("cannot install mcp-server-fetch "), failed
    finally:
        sbx.delete()
        client_of(daemon).secrets.delete("GITHUB_TOKEN")


def test_first_request_program(daemon: Daemon, runtime: withruntime.Runtime, program: Program) -> None:
    try:
        first = program(daemon, "first_request.py", str(TICKETS))
        assert first.code == 0, first.show
        sandbox_id = first.line(r"^sandbox (\S+)$").group(1)
        first.line(r"^tickets started$")
        count = len(list(runtime.sandboxes.list()))
        second = program(daemon, "first_request.py", str(TICKETS))
        assert second.code == 0, second.show
        assert second.line(r"^sandbox (\S+)$").group(1) == sandbox_id, "the second run gets the same sandbox"
        second.line(r"^tickets already there$")
        assert len(list(runtime.sandboxes.list())) == count, "and makes no other"

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
        for sbx in runtime.sandboxes.list(name="mcp-gateway"):
            sbx.delete()


@pytest.mark.parametrize("raises", [False, True], ids=["block ends", "block raises"])
def test_catalog_narrow_program(daemon: Daemon, runtime: withruntime.Runtime, program: Program,
                                raises: bool) -> None:
    github = next(e for e in runtime.mcp.catalog() if e["id"] == "github")
    r = program(daemon, "catalog_narrow.py", *(["--raise"] if raises else []))
    sandbox_id = r.line(r"^sandbox (\S+)$").group(1)
    assert f"catalog github {github['package']}@{github['version']} egress=api.github.com\n" in r.stdout, r.show
    # Runtime Cloud stores internet=False with an allow list as internet=True with that
    # list: allow-list only (docs/runtime-cloud-contract.md §6).
    r.line(r"^network internet=true allow=api\.github\.com$")
    r.line(r"^curl example\.com exit=[1-9]\d* curl: \(6\) Could not resolve host: example\.com$")
    if raises:
        assert r.code == 1, r.show
        assert "RuntimeError: raised on purpose inside the block" in r.stderr, r.show
        assert "block left" not in r.stdout
    else:
        assert r.code == 0, r.show
        r.line(r"^block left$")
    with pytest.raises(withruntime.NotFoundError):
        runtime.sandboxes.get(sandbox_id)


def test_official_mcp_client_program(daemon: Daemon, runtime: withruntime.Runtime, program: Program,
                                     tmp_path: Path) -> None:
    python, pythonpath = mcp_python(tmp_path)
    r = program(daemon, "mcp_client.py", str(TICKETS), python=python, pythonpath=pythonpath)
    assert r.code == 0, r.show
    r.line(r"^server tickets protocol \S+$")
    r.line(r"^tools create_ticket,list_tickets$")
    r.line(r"^create_ticket T-1 created: Printer on fire \(high\)$")
    r.line(r"^list_tickets T-1 \[high\] Printer on fire$")
    assert list(runtime.sandboxes.list(labels={"role": "mcp-client"})) == [], \
        "the program deleted its sandbox"
