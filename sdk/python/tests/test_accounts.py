"""runtime.accounts against the real daemon: an account's key is a Runtime of its own
that sees only its own sandboxes; the admin lists, rotates and removes; limits and admin
calls with an account's key are typed errors."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from withruntime import (ConflictError, ForbiddenError, LimitError, NotFoundError, Runtime, Sandbox,
                         UnauthorizedError)

from conftest import Daemon

KEY = re.compile(r"^rtk_[0-9a-f]{64}$")


@pytest.fixture
def name(runtime: Runtime) -> Iterator[str]:
    """A fresh account name; the account (with its sandboxes) is removed afterwards."""
    n = f"py-{uuid.uuid4().hex[:12]}"
    yield n
    runtime.accounts.delete(n, missing_ok=True)


def test_an_account_sees_only_its_own(daemon: Daemon, runtime: Runtime, name: str) -> None:
    created = runtime.accounts.create(name, max_sandboxes=2, max_memory_mib=1024)
    assert KEY.match(created["apiKey"])
    assert (created["name"], created["maxSandboxes"], created["maxMemoryMiB"]) == (name, 2, 1024)
    admins = runtime.sandboxes.create(memory_mib=256)
    try:
        with Runtime(api_url=daemon.url, api_key=created["apiKey"]) as customer:
            sbx = Sandbox.get_or_create("customer-42", memory_mib=256, runtime=customer)
            assert Sandbox.get_or_create("customer-42", runtime=customer).id == sbx.id
            assert [s.id for s in customer.sandboxes.list()] == [sbx.id]
            with pytest.raises(NotFoundError):
                customer.sandboxes.get(admins.id)
            assert [r["account"] for r in customer.usage()["sandboxes"]] == [name]
            assert sbx.id not in [s.id for s in runtime.sandboxes.list()]

            row = next(a for a in runtime.accounts.list() if a["name"] == name)
            assert (row["sandboxes"], row["memoryMiB"], row["removing"]) == (1, 256, False)
            assert "apiKey" not in row

            with pytest.raises(ForbiddenError) as e:
                customer.accounts.list()
            assert (e.value.status, e.value.code) == (403, "forbidden")
            with pytest.raises(ForbiddenError):
                customer.accounts.create("sneaky")
    finally:
        admins.delete()


def test_rotate_then_remove(daemon: Daemon, runtime: Runtime, name: str) -> None:
    first = runtime.accounts.create(name)["apiKey"]
    second = runtime.accounts.rotate_key(name)
    assert second["name"] == name and KEY.match(second["apiKey"]) and second["apiKey"] != first
    third = runtime.accounts.rotate_key(name)["apiKey"]

    def customer(key: str) -> Runtime:
        return Runtime(api_url=daemon.url, api_key=key)

    with customer(first) as old, customer(second["apiKey"]) as prev, customer(third) as new:
        with pytest.raises(UnauthorizedError):
            old.sandboxes.list()  # two rotations ago
        assert prev.sandboxes.list() == []  # the one before the newest still works
        sbx = new.sandboxes.get_or_create("customer-42", memory_mib=256)

        runtime.accounts.delete(name)
        assert name not in [a["name"] for a in runtime.accounts.list()]
        with pytest.raises(UnauthorizedError):
            new.sandboxes.list()
    with pytest.raises(NotFoundError):
        runtime.accounts.delete(name)
    runtime.accounts.delete(name, missing_ok=True)
    with pytest.raises(NotFoundError):
        runtime.accounts.rotate_key(name)
    assert sbx.id not in [r["sandbox"] for r in runtime.usage()["sandboxes"]], \
        "its usage went with it"


def test_limits_and_names(daemon: Daemon, runtime: Runtime, name: str) -> None:
    key = runtime.accounts.create(name, max_sandboxes=1)["apiKey"]
    with pytest.raises(ConflictError):
        runtime.accounts.create(name)
    with Runtime(api_url=daemon.url, api_key=key) as customer:
        customer.sandboxes.create(memory_mib=256)
        with pytest.raises(LimitError) as e:
            customer.sandboxes.create(memory_mib=256)
    assert (e.value.status, e.value.code) == (429, "limit_reached")
    assert "maxSandboxes=1" in e.value.message
