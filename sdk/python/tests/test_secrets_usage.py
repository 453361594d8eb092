"""Secrets and usage through the SDK, against the real daemon."""

from __future__ import annotations

import pytest

from withruntime import BadRequestError, NotFoundError, Runtime


def test_secrets_set_list_delete(runtime: Runtime) -> None:
    value = "py-secret-value-never-listed"
    created = runtime.secrets.set("PY_TOKEN", value=value, hosts=["api.example.com"],
                                  methods=["GET"], paths=["/v1/*"])
    assert created["name"] == "PY_TOKEN" and value not in repr(created)
    listed = {s["name"]: s for s in runtime.secrets.list()}
    assert listed["PY_TOKEN"]["hosts"] == ["api.example.com"]
    assert value not in repr(listed)
    runtime.secrets.set("PY_TOKEN", value="another", hosts=["api.example.org"])  # replaces
    assert {s["name"]: s for s in runtime.secrets.list()}["PY_TOKEN"]["hosts"] == ["api.example.org"]
    runtime.secrets.delete("PY_TOKEN")
    assert "PY_TOKEN" not in [s["name"] for s in runtime.secrets.list()]
    with pytest.raises(NotFoundError):
        runtime.secrets.delete("PY_TOKEN")


def test_secret_needs_hosts(runtime: Runtime) -> None:
    with pytest.raises(BadRequestError):
        runtime.secrets.set("PY_NOWHERE", value="v", hosts=[])


def test_secret_in_a_sandbox_is_a_placeholder(runtime: Runtime) -> None:
    runtime.secrets.set("PY_PLACEHOLDER", value="the-real-value", hosts=["api.example.com"])
    try:
        with runtime.sandboxes.create(memory_mib=256) as sbx:
            seen = sbx.exec(["sh", "-c", "echo $PY_PLACEHOLDER"], check=True)["stdout"].strip()
            assert seen and "the-real-value" not in seen
    finally:
        runtime.secrets.delete("PY_PLACEHOLDER")


def test_usage(runtime: Runtime) -> None:
    with runtime.sandboxes.create(name="py-usage", memory_mib=256) as sbx:
        sbx.exec(["true"])
        usage = runtime.usage()
        rows = [r for r in usage["sandboxes"] if r.get("name") == "py-usage"]
        assert rows and "cpuSeconds" in rows[0] and "cost" in usage["total"]
