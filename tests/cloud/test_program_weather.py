"""Seed program (a), the weather-server start (programs/weather_server.py), run as a user
runs it: `python weather_server.py` with Runtime Cloud's official package (withruntime
0.35.0 from PyPI, this venv's) and nothing in its environment but PATH, HOME, the
daemon's address and key (RUNTIME_API_URL, RUNTIME_API_KEY) and the reviewed
fingerprint. It installs @acme/weather-mcp@1.4.2 from the team's npm registry with
scripts off (a streamed exec: timeout_ms over 60 s), narrows the network to the
weather API, starts the server and checks its fingerprint over urllib before using it.

  matching fingerprint  exit 0; the forecast text is the fake API's (its token); the
                        registry served the packument and the tarball; the install
                        scripts did not run (while running one by hand does leave the
                        marker); after narrowing, the registry is refused and never
                        asked again; the daemon's fingerprint of the server is the
                        reviewed one; the printed URL is the gateway's
  wrong fingerprint     exit 1, the message names both fingerprints, the sandbox is
                        gone (GET 404)

The registry and the weather API run in a network namespace of their own on a
TEST-NET-2 point-to-point link (tests/fixtures/weather-registry/up.mjs, shared with the
TypeScript package's test); the daemon pins the names the program uses,
registry.acme.test and api.weather.test, to it with --resolve. The expected fingerprint
comes from the fixture's tool list through `runtime mcp fingerprint` (the daemon's
canonical form, vector-tested), checked against json.dumps here, itself checked
against a shared vector.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import withruntime

from conftest import RUNTIMED, ROOT, Daemon, need_daemon

PROGRAM = ROOT / "tests" / "cloud" / "programs" / "weather_server.py"
WORLD = ROOT / "tests" / "fixtures" / "weather-registry"
TOOLS = WORLD / "weather-mcp" / "tools.json"
VECTORS = ROOT / "tests" / "fixtures" / "fingerprint" / "vectors.jsonl"
# This file's link; the TypeScript package's test has its own, so the two can run side by side.
NS_V4 = "198.51.100.143"
HOST_V4 = "198.51.100.144"
PROGRAM_S = 240


class World:
    """up.mjs, running until its stdin closes: the registry and the weather API."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["node", str(WORLD / "up.mjs"), NS_V4, HOST_V4],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.ready = self._first_line(timeout=20)
        if self.ready.get("ev") != "ready":
            self.stop()
            raise AssertionError(f"up.mjs: {self.ready}")

    def _first_line(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.stop()
                raise AssertionError(f"up.mjs did not bring the weather world up in {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                self.stop()
                raise AssertionError(f"up.mjs exited: {line!r}")
            line += chunk
        return json.loads(line.split(b"\n")[0])  # type: ignore[no-any-return]

    @property
    def token(self) -> str:
        return str(self.ready["token"])

    def requests(self) -> list[dict[str, str]]:
        with open(self.ready["log"]) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self) -> None:
        """Closing its stdin makes it tear everything down; SIGKILL if it does not."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def api(d: Daemon, method: str, path: str) -> tuple[int, Any]:
    """runtimed's own routes (events, the gateway's fingerprints) over urllib."""
    req = urllib.request.Request(d.url + path, method=method,
                                 headers={"Authorization": f"Bearer {d.key}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
            return r.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, None


def canonical_sha256(tools: list[dict[str, Any]]) -> str:
    ordered = sorted(tools, key=lambda tool: tool["name"])
    return hashlib.sha256(json.dumps(ordered, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def vector(name: str) -> dict[str, Any]:
    for line in VECTORS.read_text().splitlines():
        v = json.loads(line)
        if v["name"] == name:
            return v  # type: ignore[no-any-return]
    raise AssertionError(f"no vector {name} in {VECTORS}")


@pytest.fixture(scope="module")
def reviewed() -> dict[str, Any]:
    """The fixture's fingerprint as the daemon's CLI computes it, cross-checked here."""
    v = vector("weather-reviewed")
    assert json.dumps(json.loads(v["tools_json"]), sort_keys=True, separators=(",", ":")) \
        == v["canonical"]
    assert canonical_sha256(json.loads(v["tools_json"])) == v["sha256"]
    r = subprocess.run([str(RUNTIMED.parent / "runtime"), "mcp", "fingerprint", str(TOOLS), "--json"],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    cli: dict[str, Any] = json.loads(r.stdout)
    assert cli["tools"] == 2
    assert cli["sha256"] == canonical_sha256(json.loads(TOOLS.read_text())), "CLI and json agree"
    return cli


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    need_daemon()
    w = World()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(scope="module")
def weather_daemon(world: World) -> Iterator[Daemon]:
    d = Daemon([a for pin in world.ready["pins"] for a in ("--resolve", pin)]).start()
    try:
        yield d
    finally:
        d.close()


@pytest.fixture(scope="module")
def client(weather_daemon: Daemon) -> withruntime.Runtime:
    return withruntime.Runtime(api_key=weather_daemon.key, base_url=weather_daemon.url)


def weather_server(d: Daemon, fingerprint: str) -> subprocess.CompletedProcess[str]:
    """The program with nothing but PATH, HOME, the daemon's URL and key, and the fingerprint."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
           "RUNTIME_API_URL": d.url, "RUNTIME_API_KEY": d.key, "WEATHER_FINGERPRINT": fingerprint}
    return subprocess.run([sys.executable, str(PROGRAM)], env=env, capture_output=True, text=True,
                          timeout=PROGRAM_S, check=False, cwd="/")


def printed(stdout: str) -> dict[str, str]:
    """`KEY value` lines of the program's stdout, as {KEY: value}."""
    return dict(line.split(" ", 1) for line in stdout.splitlines() if " " in line)


def labelled(client: withruntime.Runtime) -> list[str]:
    return sorted(s.id for s in client.sandboxes.list(labels={"app": "weather-server"}))


def test_weather_server_installs_narrows_checks_and_serves(
        weather_daemon: Daemon, client: withruntime.Runtime, world: World,
        reviewed: dict[str, Any]) -> None:
    d = weather_daemon
    r = weather_server(d, reviewed["fingerprint"])
    assert r.returncode == 0, f"the program failed:\n{r.stdout}\n{r.stderr}"
    out = printed(r.stdout)
    sbx = client.sandboxes.get(out["sandbox"])
    assert sbx.info["labels"] == {"app": "weather-server"}
    assert out["fingerprint"] == reviewed["sha256"], "the program saw the reviewed tools"
    assert out["forecast"].startswith("Forecast for Lisbon: "), out
    assert out["forecast"].endswith(f"(weather API {world.token})"), out

    # The registry served the package: the packument, then the tarball npm verified.
    reqs = world.requests()
    registry = [f"{q['method']} {q['path']}" for q in reqs if q["host"] == "registry.acme.test"]
    assert {"GET /@acme%2fweather-mcp", "GET /@acme%2Fweather-mcp", "GET /@acme/weather-mcp"} \
        & set(registry), registry
    assert "GET /@acme/weather-mcp/-/weather-mcp-1.4.2.tgz" in registry, registry
    assert any(q["host"] == "api.weather.test" and q["path"] == "/forecast?city=Lisbon"
               for q in reqs), reqs

    # Installed, and none of its install scripts ran; one run by hand leaves the
    # marker, so its absence means something.
    pkg = sbx.exec(["cat", "/workspace/srv/node_modules/@acme/weather-mcp/package.json"])
    assert json.loads(pkg.stdout)["version"] == "1.4.2"
    assert sbx.exec(["test", "-e", "/workspace/WEATHER_SCRIPTS_RAN"]).exit_code == 1, \
        "an install script ran"
    by_hand = sbx.exec(["npm", "run", "postinstall"],
                       cwd="/workspace/srv/node_modules/@acme/weather-mcp")
    assert by_hand.exit_code == 0, by_hand.stderr
    marker = sbx.exec(["cat", "/workspace/WEATHER_SCRIPTS_RAN"]).stdout
    assert marker.startswith("postinstall ran"), marker

    # Narrowed: only the weather API now; the registry is refused by name (the two
    # share an address) and hears nothing more.
    assert sbx.network.get()["allow"] == ["api.weather.test"]
    before = len(world.requests())
    curl = sbx.exec(["curl", "-sS", "-m", "10", "http://registry.acme.test/@acme%2fweather-mcp"])
    assert curl.exit_code != 0, f"the registry answered after narrowing: {curl.stdout}"
    assert len(world.requests()) == before, "the registry was reached after narrowing"
    _, events = api(d, "GET", f"/v1/sandboxes/{sbx.id}/events")
    assert any(e["kind"] == "egress.refused" and e.get("host") == "registry.acme.test"
               for e in events), events
    assert any(e["kind"] == "egress.allowed" and e.get("host") == "api.weather.test"
               for e in events), events

    # The daemon's gate fingerprinted the same tools; the URL printed is the gateway's.
    (weather,) = [s for s in sbx.mcp.get()["servers"] if s["name"] == "weather"]
    assert weather["status"] == "ready", weather
    assert out["url"] == weather["url"]
    _, mcp = api(d, "GET", f"/v1/sandboxes/{sbx.id}/mcp")
    gated = next(s for s in mcp["servers"] if s["name"] == "weather")
    assert reviewed["sha256"].startswith(gated["fingerprint"]), (gated, reviewed)
    assert sorted(gated["tools"]) == ["get_alerts", "get_forecast"]
    sbx.delete()
    with pytest.raises(withruntime.NotFoundError):
        client.sandboxes.get(sbx.id)


def test_weather_server_with_a_wrong_fingerprint_deletes_the_sandbox(
        weather_daemon: Daemon, client: withruntime.Runtime, reviewed: dict[str, Any]) -> None:
    wrong = vector("weather-reviewed")["fingerprint"]  # the weather tool alone, once approved
    assert wrong != reviewed["fingerprint"]
    earlier = labelled(client)
    r = weather_server(weather_daemon, wrong)
    assert r.returncode == 1, f"{r.stdout}\n{r.stderr}"
    assert wrong in r.stderr, f"the expected fingerprint is named: {r.stderr}"
    assert reviewed["fingerprint"] in r.stderr, f"the server's fingerprint is named: {r.stderr}"
    sandbox = printed(r.stdout).get("sandbox")
    assert sandbox, r.stdout
    with pytest.raises(withruntime.NotFoundError):
        client.sandboxes.get(sandbox)
    assert labelled(client) == earlier, "the program left no sandbox"
