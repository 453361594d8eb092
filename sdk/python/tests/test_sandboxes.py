"""Sandboxes against the real daemon: create, get, list, get_or_create, delete,
pause/resume, the context manager and the Sandbox class methods."""

from __future__ import annotations

import pytest

import withruntime
from withruntime import ConflictError, NotFoundError, Runtime, Sandbox

from conftest import Daemon


def test_create_get_list_delete(runtime: Runtime) -> None:
    sbx = runtime.sandboxes.create(name="py-basic", memory_mib=256, cpus=0.5, disk_mib=512,
                                   idle_pause_seconds=900, labels={"role": "mcp", "team": "a"},
                                   env={"GREETING": "hi"})
    try:
        assert sbx.status == "running" and sbx.name == "py-basic"
        assert (sbx["memoryMiB"], sbx["cpus"], sbx["diskMiB"], sbx["idlePauseSeconds"]) == \
            (256, 0.5, 512, 900)
        assert sbx.info["labels"] == {"role": "mcp", "team": "a"}
        for key in (sbx.id, "py-basic"):
            assert runtime.sandboxes.get(key).id == sbx.id
        assert sbx.exec(["sh", "-c", "echo $GREETING"])["stdout"] == "hi\n"
        assert [s.id for s in runtime.sandboxes.list(labels={"role": "mcp"})] == [sbx.id]
        assert runtime.sandboxes.list(labels={"role": "mcp", "team": "b"}) == []
        assert sbx.id in [s.id for s in runtime.sandboxes.list()]
    finally:
        sbx.delete()
    with pytest.raises(NotFoundError):
        runtime.sandboxes.get(sbx.id)
    with pytest.raises(NotFoundError):
        runtime.sandboxes.delete(sbx.id)
    runtime.sandboxes.delete(sbx.id, missing_ok=True)
    sbx.delete(missing_ok=True)


def test_get_or_create_returns_the_existing_one(runtime: Runtime) -> None:
    first = runtime.sandboxes.get_or_create("py-goc", memory_mib=256)
    try:
        again = runtime.sandboxes.get_or_create("py-goc", memory_mib=512)
        assert again.id == first.id
        assert again["memoryMiB"] == 256, "an existing sandbox is returned as it is"
        with pytest.raises(ConflictError) as e:
            runtime.sandboxes.create(name="py-goc")
        assert e.value.status == 409 and e.value.code == "name_taken"
        assert "py-goc" in e.value.message
    finally:
        first.delete()


def test_context_manager_deletes_and_tolerates_gone(runtime: Runtime) -> None:
    with runtime.sandboxes.create() as tmp:
        assert tmp.exec(["true"], check=True)["exitCode"] == 0
        kept = tmp.id
    with pytest.raises(NotFoundError):
        runtime.sandboxes.get(kept)
    with runtime.sandboxes.create() as tmp:
        tmp.delete()  # already gone on exit: 404 counts as done


def test_context_manager_deletes_on_error(runtime: Runtime) -> None:
    with pytest.raises(ZeroDivisionError):
        with runtime.sandboxes.create() as tmp:
            kept = tmp.id
            1 / 0
    with pytest.raises(NotFoundError):
        runtime.sandboxes.get(kept)


def test_pause_and_resume(runtime: Runtime) -> None:
    with runtime.sandboxes.create(memory_mib=256) as sbx:
        assert sbx.pause()["status"] == "paused"
        assert sbx.refresh()["status"] == "paused"
        assert sbx.resume()["status"] == "running"
        sbx.pause()
        assert sbx.exec(["echo", "awake"])["stdout"] == "awake\n", "exec wakes a paused sandbox"


def test_class_methods_use_the_environment(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_API_URL", daemon.url)
    monkeypatch.setenv("RUNTIME_API_KEY", daemon.key)
    monkeypatch.setattr(withruntime.client, "_default", None)
    sbx = Sandbox.create(memory_mib=256, idle_pause_seconds=120,
                         network={"internet": True, "allow": ["registry.npmjs.org"]})
    try:
        assert sbx.runtime is withruntime.default_runtime()
        assert sbx.info["network"] == {"internet": True, "allow": ["registry.npmjs.org"]}
        assert Sandbox.get(sbx.id).id == sbx.id
        named = Sandbox.get_or_create("py-classmethods")
        assert Sandbox.get_or_create("py-classmethods").id == named.id
        named.delete()
    finally:
        sbx.delete()
        withruntime.default_runtime().close()


def test_key_from_state_dir(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNTIME_API_KEY", raising=False)
    monkeypatch.setenv("RUNTIME_STATE_DIR", str(daemon.state_dir))
    with Runtime(api_url=daemon.url) as rt:
        assert rt.api_key == daemon.key
        assert isinstance(rt.sandboxes.list(), list)
