"""A real runtimed for the tests, started like tests/e2e/lib.mjs starts it.

RUNTIME_BUILD picks the build tree (default: the repository's build/). The
daemon runs in a temp dir (mode 0711) on a free loopback port, with a dead
loopback nameserver so that nothing ever asks a resolver off this machine.
Every wait polls a condition against a deadline; nothing sleeps for sync.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from withruntime import Runtime

SDK = Path(__file__).resolve().parent.parent
ROOT = SDK.parent.parent
BUILD = (ROOT / os.environ.get("RUNTIME_BUILD", "build")).resolve()
RUNTIMED = BUILD / "runtimed"
HELLO_SERVER = ROOT / "tests" / "mcp" / "fixtures" / "hello-server.mjs"

T = TypeVar("T")


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 15.0) -> T:
    """Polls fn() until it returns something truthy; fails naming what it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.025)  # the poll interval of a condition, not a synchronisation


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """One runtimed in its own temp dir."""

    def __init__(self, prefix: str = "runtime-py-") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.dir.chmod(0o711)  # the unprivileged server must traverse it to STATE/db
        self.state_dir = self.dir / "state"
        self.socket = self.dir / "api.sock"
        self.log_file = self.dir / "runtimed.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []  # more options for runtimed
        self.ca: Path | None = None  # set: the daemon serves https with a certificate from this CA

    @property
    def url(self) -> str:
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def key(self) -> str:
        return (self.state_dir / "admin.key").read_text().strip()

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def args(self) -> list[str]:
        return [str(RUNTIMED), "--state-dir", str(self.state_dir), "--listen",
                f"127.0.0.1:{self.port}", "--socket", str(self.socket),
                "--nameserver", "127.0.0.1:9", *self.extra_args]

    def start(self) -> Daemon:
        with open(self.log_file, "ab") as log:
            # Its own session: the daemon's processes are told apart from ours.
            self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, start_new_session=True)
        wait_for(f"runtimed on port {self.port} to answer", self._answers)
        return self

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"runtimed exited ({self.proc.returncode}):\n{self.log()}")
        if not (self.state_dir / "admin.key").exists():
            return False
        req = urllib.request.Request(self.url + "/v1/sandboxes",
                                     headers={"Authorization": f"Bearer {self.key}"})
        context = ssl.create_default_context(cafile=str(self.ca)) if self.ca else None
        try:
            with urllib.request.urlopen(req, timeout=1, context=context) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def runtime(self, **kw: object) -> Runtime:
        if self.ca and "ca" not in kw and "ssl_context" not in kw:
            kw["ca"] = self.ca
        return Runtime(api_url=self.url, api_key=self.key, **kw)  # type: ignore[arg-type]

    def remove_sandboxes(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with self.runtime() as rt:
            for sbx in rt.sandboxes.list():
                sbx.__exit__(None, None, None)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, and wait; SIGKILL to the whole session if it does not exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
            raise

    def instance(self) -> str:
        """The daemon's instance tag: FNV-1a of the state dir's real path (src/daemon/main.c)."""
        h = 2166136261
        for b in os.fsencode(os.path.realpath(self.state_dir)):
            h = ((h ^ b) * 16777619) & 0xFFFFFFFF
        return f"{h:08x}"

    def force_cleanup(self) -> list[str]:
        """Last resort, as lib.mjs's forceCleanup: kill what runs in this daemon's
        cgroups, detach loop devices on its state dir, remove the cgroups.
        Returns what it had to clean (nothing when the daemon did its job)."""
        cleaned: list[str] = []
        cgroups = [c for c in Path("/sys/fs/cgroup").glob("*/runtime/*")
                   if c.name.startswith(self.instance() + "-")]
        cgroups += [c for c in Path("/sys/fs/cgroup/runtime").glob(self.instance() + "-*")]
        for cg in cgroups:
            try:
                pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()]
            except OSError:
                continue
            for pid in pids:
                cleaned.append(f"process {pid} in {cg}")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        real = os.path.realpath(self.dir)
        for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
            try:
                if backing.read_text().startswith((real + "/", str(self.dir) + "/")):
                    device = "/dev/" + backing.parent.parent.name
                    cleaned.append(f"loop {device}")
                    subprocess.run(["losetup", "-d", device], check=False, capture_output=True)
            except OSError:
                continue
        for cg in cgroups:
            # Empty once its processes are reaped: a bounded poll, not a sleep for sync.
            try:
                wait_for(f"{cg} to empty", lambda: _rmdir(cg), timeout=3)
            except AssertionError:
                cleaned.append(f"cgroup {cg} (still busy)")
        return cleaned

    def close(self) -> None:
        try:
            self.remove_sandboxes()
        finally:
            self.stop()
            # A sanitized daemon run with ASAN_OPTIONS=detect_leaks=1 reports leaks
            # in its log when it stops (as lib.mjs's close checks too).
            log = self.log()
            leaks = log[log.find("ERROR: LeakSanitizer"):][:8000] if "ERROR: LeakSanitizer" in log else ""
            left = self.force_cleanup()
            if left:
                print(f"cleanup of {self.dir} removed: {left}")
            if not os.environ.get("RUNTIME_E2E_KEEP"):
                shutil.rmtree(self.dir, ignore_errors=True)
            if leaks:
                raise AssertionError(f"runtimed leaked memory (LeakSanitizer):\n{leaks}")


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _need_daemon() -> None:
    if os.geteuid() != 0:
        pytest.skip("must run as root (runtimed needs it)")
    if not os.access(RUNTIMED, os.X_OK):
        pytest.fail(f"{RUNTIMED} is missing; run `make` (or set RUNTIME_BUILD)")


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the tests that do not stop it."""
    _need_daemon()
    d = Daemon().start()
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon of the test's own, for tests that stop or break it."""
    _need_daemon()
    d = Daemon().start()
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def runtime(daemon: Daemon) -> Iterator[Runtime]:
    with daemon.runtime() as rt:
        yield rt
