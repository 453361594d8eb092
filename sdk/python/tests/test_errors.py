"""The typed errors against the real daemon, and a daemon that goes away."""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
import uuid

import pytest

import withruntime
from withruntime import (BadRequestError, CommandError, ConflictError, ConnectionError, NotFoundError,
                         Runtime, UnauthorizedError)

from conftest import ROOT, Daemon, wait_for


def test_wrong_key(daemon: Daemon) -> None:
    with Runtime(api_url=daemon.url, api_key="0" * 64) as rt:
        with pytest.raises(UnauthorizedError) as e:
            rt.sandboxes.list()
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    assert isinstance(e.value, withruntime.RuntimeError)


def test_unknown_sandbox(runtime: Runtime) -> None:
    with pytest.raises(NotFoundError) as e:
        runtime.sandboxes.get("no-such-box")
    assert (e.value.status, e.value.code) == (404, "not_found")
    assert "no-such-box" in e.value.message


def test_name_taken(runtime: Runtime) -> None:
    with runtime.sandboxes.create(name="py-taken"):
        with pytest.raises(ConflictError) as e:
            runtime.sandboxes.create(name="py-taken")
    assert e.value.code == "name_taken"


@pytest.mark.parametrize("options", [{"memory_mib": -1}, {"cpus": 0}, {"name": "bad name!"},
                                     {"idle_pause_seconds": "soon"},
                                     {"network": {"internet": "yes"}}])
def test_bad_option(runtime: Runtime, options: dict[str, object]) -> None:
    with pytest.raises(BadRequestError) as e:
        runtime.sandboxes.create(**options)  # type: ignore[arg-type]
    assert e.value.status == 400 and e.value.message


def test_unknown_keyword_is_a_type_error(runtime: Runtime) -> None:
    with pytest.raises(TypeError):
        runtime.sandboxes.create(memory=512)  # type: ignore[call-arg]


def _running(marker: str) -> bool:
    """Whether a process whose command line holds marker runs on this host."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    return True
        except OSError:
            continue
    return False


def test_daemon_stopped_mid_call(own_daemon: Daemon) -> None:
    rt = own_daemon.runtime()
    sbx = rt.sandboxes.create(memory_mib=256)
    marker = f"py-{uuid.uuid4().hex}"
    outcome: dict[str, object] = {}

    def call() -> None:
        try:
            outcome["result"] = sbx.exec(["sh", "-c", f"sleep 60; : {marker}"])
        except BaseException as e:  # handed to the test thread
            outcome["error"] = e

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    wait_for("the exec to run in the sandbox", lambda: _running(marker))
    own_daemon.stop()
    worker.join(20)
    assert not worker.is_alive(), "exec hung after the daemon stopped"
    err = outcome.get("error")
    assert isinstance(err, ConnectionError), outcome
    assert isinstance(err, builtins.ConnectionError) and err.sent

    start = time.monotonic()
    with pytest.raises(ConnectionError) as e:
        rt.sandboxes.list()
    assert not e.value.sent and "Connection refused" in str(e.value)
    assert time.monotonic() - start < 5, "the bounded retries of a refused connection"
    with pytest.raises(ConnectionError):
        sbx.exec(["true"])
    # Sandboxes outlive a stopped daemon: start it again so that the fixture removes them.
    own_daemon.start()
    assert rt.sandboxes.get(sbx.id).id == sbx.id, "the same client carries on once it is back"


def test_command_error_names_the_error_line_not_the_notices() -> None:
    # The stderr shapes of npm 9 and 11, pip and a traceback, as the daemon's unit test
    # reads them too (tests/fixtures/error-lines.json).
    cases = json.loads((ROOT / "tests" / "fixtures" / "error-lines.json").read_text())
    assert len(cases) >= 8
    for case in cases:
        err = CommandError(["npm", "install"], {"exitCode": 1, "stdout": "", "stderr": case["stderr"]})
        want = "npm install exited with status 1" + (f": {case['line']}" if case["line"] else "")
        assert err.message == want, case["what"]
        assert err.stderr == case["stderr"]
