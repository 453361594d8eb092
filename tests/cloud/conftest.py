"""A real runtimed for the official SDK's tests, started as tests/e2e/lib.mjs starts it.

These tests run with /opt/runtime-test/venv-cloud's python (scripts/install-deps), whose
`withruntime` is Runtime Cloud's own package from PyPI, unmodified: the SDK users
already have. RUNTIME_BUILD picks the build tree (default: build/). The daemon runs in
a temp dir on a free loopback port (the SDK takes plain http only for loopback) with
a dead loopback nameserver. Every wait polls a condition against a deadline.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import withruntime

ROOT = Path(__file__).resolve().parent.parent.parent
RUNTIMED = (ROOT / os.environ.get("RUNTIME_BUILD", "build")).resolve() / "runtimed"
# The isolation driver of the daemons' sandboxes, as tests/e2e/lib.mjs: RUNTIME_DRIVER, else ns.
DRIVER = os.environ.get("RUNTIME_DRIVER", "ns")


def official_sdk() -> bool:
    """Whether `withruntime` is Runtime Cloud's 0.35.0 as pip installed it from PyPI."""
    try:
        installed = importlib.metadata.version("withruntime")
    except importlib.metadata.PackageNotFoundError:
        return False
    return installed == getattr(withruntime, "__version__", "") == "0.35.0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """One runtimed in a temp dir. extra_args: more options (e.g. --resolve pins);
    online: resolve sandbox destinations for real (no dead nameserver); ca: the daemon
    serves https (--tls-cert in extra_args) with a certificate from this CA."""

    def __init__(self, extra_args: list[str] | None = None, online: bool = False,
                 ca: Path | None = None) -> None:
        self.extra_args = list(extra_args or [])
        self.online = online
        self.ca = ca
        self.dir = Path(tempfile.mkdtemp(prefix="runtime-cloud-"))
        self.dir.chmod(0o711)
        self.state_dir = self.dir / "state"
        self.port = free_port()
        self.log_file = self.dir / "runtimed.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def key(self) -> str:
        return (self.state_dir / "admin.key").read_text().strip()

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def start(self) -> Daemon:
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                [str(RUNTIMED), "--state-dir", str(self.state_dir), "--listen",
                 f"127.0.0.1:{self.port}", "--socket", str(self.dir / "api.sock"),
                 "--driver", DRIVER,
                 *([] if self.online else ["--nameserver", "127.0.0.1:9"]), *self.extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 20
        while not self._answers():
            if time.monotonic() > deadline:
                raise AssertionError(f"runtimed did not answer:\n{self.log()}")
            time.sleep(0.025)  # the poll interval of a condition, not a synchronisation
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"runtimed exited ({self.proc.returncode}):\n{self.log()}")
        if not (self.state_dir / "admin.key").exists():
            return False
        req = urllib.request.Request(self.url + "/healthz")
        context = ssl.create_default_context(cafile=str(self.ca)) if self.ca else None
        try:
            with urllib.request.urlopen(req, timeout=1, context=context) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        # A sanitized daemon (make check's second pass) reports leaks when it stops.
        log = self.log()
        leaks = log[log.find("ERROR: LeakSanitizer"):][:8000] if "ERROR: LeakSanitizer" in log else ""
        if not os.environ.get("RUNTIME_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        if leaks:
            raise AssertionError(f"runtimed leaked memory (LeakSanitizer):\n{leaks}")


def need_daemon() -> None:
    """Skips without root; fails when the SDK is not the official one."""
    if os.geteuid() != 0:
        pytest.skip("runtimed needs root")
    if not official_sdk():
        pytest.fail("withruntime is not Runtime Cloud's 0.35.0 from PyPI: run these tests with "
                    "/opt/runtime-test/venv-cloud/bin/python (scripts/install-deps makes it)")


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    need_daemon()
    d = Daemon().start()
    yield d
    d.close()


@pytest.fixture()
def runtime(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[withruntime.Runtime]:
    """The SDK as a user configures it: RUNTIME_API_URL and RUNTIME_API_KEY."""
    monkeypatch.setenv("RUNTIME_API_URL", daemon.url)
    monkeypatch.setenv("RUNTIME_API_KEY", daemon.key)
    for proxy in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    yield withruntime.Runtime()
