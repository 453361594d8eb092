"""What the official SDK (withruntime 0.35.0) reads back from runtimed for a create's
options, an exec's options and a sandbox's network rules (ported from the retired
sdk/python's tests of the same daemon behaviour)."""

from __future__ import annotations

import pytest
import withruntime


def test_create_options_reach_the_sandbox_and_get_or_create_keeps_them(
        runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create(name="cloud-options", memory_mib=256, disk_mib=512,
                                  idle_pause_seconds=900, env={"GREETING": "hi"}) as sbx:
        info = runtime.sandboxes.get("cloud-options").info
        assert info["id"] == sbx.id
        assert (info["memoryMiB"], info["diskMiB"], info["idlePauseSeconds"]) == (256, 512, 900)
        assert sbx.exec("echo $GREETING").stdout == "hi\n"
        again = runtime.sandboxes.get_or_create("cloud-options", memory_mib=512)
        assert again.id == sbx.id and again.info["memoryMiB"] == 256, "fields apply only to a create"
        with pytest.raises(withruntime.ConflictError) as taken:
            runtime.sandboxes.create(name="cloud-options")
        assert (taken.value.status, taken.value.code) == (409, "name_taken")
        assert "cloud-options" in str(taken.value)


def test_exec_cwd_env_stdin_and_time_out(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        r = sbx.exec(["pwd"])
        assert (r.stdout, r.timed_out) == ("/workspace\n", False)
        assert isinstance(r.duration_ms, int)
        r = sbx.exec(["sh", "-c", 'cat; echo "$A"; pwd'], stdin="from stdin\n", env={"A": "b"},
                     cwd="/tmp")
        assert r.stdout == "from stdin\nb\n/tmp\n"
        r = sbx.exec(["sleep", "30"], timeout_ms=300)
        assert r.timed_out and r.exit_code != 0
        with pytest.raises(withruntime.CommandError):
            sbx.exec(["sleep", "30"], timeout_ms=300, check=True)


def test_network_rules_read_back(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        assert sbx.network.get()["internet"] is True and "allow" not in sbx.network.get()
        # internet=False with an allow list is that list alone, read back as internet=True.
        narrowed = sbx.network.set(internet=False, allow=["api.example.com"])
        assert (narrowed["internet"], narrowed["allow"]) == (True, ["api.example.com"])
        assert sbx.network.get()["allow"] == ["api.example.com"]
        assert sbx.network.set(internet=True, allow=[])["allow"] == []  # no host
        with pytest.raises(withruntime.InvalidRequestError):
            sbx.network.set(internet=True, allow=[""])
        assert sbx.network.get()["allow"] == [], "a refused change changes nothing"
        assert sbx.network.off()["internet"] is False
        on = sbx.network.on()
        assert on["internet"] is True and "allow" not in on
