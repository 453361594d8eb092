"""Runtime Cloud's official SDK (withruntime 0.35.0 from PyPI, unmodified) against
runtimed: a sandbox's life and its commands, the calls the seeds' programs begin with."""

from __future__ import annotations

import os
import subprocess

import pytest
import withruntime
from withruntime import Sandbox

from conftest import RUNTIMED

RUNTIME = RUNTIMED.parent / "runtime"


def test_create_runs_and_the_block_end_deletes_it(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create(labels={"suite": "cloud"}) as sbx:
        assert sbx.state == "running"
        sandbox_id = sbx.id
        assert runtime.sandboxes.get(sandbox_id).state == "running"
    with pytest.raises(withruntime.NotFoundError):
        runtime.sandboxes.get(sandbox_id)


def test_exec_a_command_line_and_an_argv(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        r = sbx.exec("echo $((6 * 7)); echo oops >&2; exit 3")
        assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "42\n", "oops\n", False)
        r = sbx.exec(["printf", "%s|", "a b", "c"])
        assert (r.exit_code, r.stdout) == (0, "a b|c|")
        with pytest.raises(withruntime.CommandError):
            sbx.exec("false", check=True)


def test_pause_wake_stop_and_restart_keep_the_workspace(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.exec("echo kept > /workspace/note", check=True)
        sbx.pause()
        assert sbx.state == "paused"
        sbx.wake()
        assert sbx.state == "running"
        sbx.stop()
        assert sbx.state == "stopped"
        sbx.restart()
        assert sbx.state == "running"
        assert sbx.exec("cat /workspace/note").stdout == "kept\n"


def test_a_block_on_a_sandbox_it_did_not_create_stops_it(runtime: withruntime.Runtime) -> None:
    made = runtime.sandboxes.create()
    with runtime.sandboxes.get(made.id) as again:
        assert again.state == "running"
    assert runtime.sandboxes.get(made.id).state == "stopped"
    made.delete()


def test_errors_are_the_sdk_classes(runtime: withruntime.Runtime, daemon) -> None:
    with pytest.raises(withruntime.NotFoundError) as missing:
        runtime.sandboxes.get("no-such-sandbox")
    assert missing.value.code == "not_found"
    assert missing.value.request_id and missing.value.request_id.startswith("req_")
    with pytest.raises(withruntime.AuthenticationError):
        withruntime.Runtime(api_key="wrong-key", base_url=daemon.url).sandboxes.get("x")


def test_the_package_level_create(daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNTIME_API_URL", daemon.url)
    monkeypatch.setenv("RUNTIME_API_KEY", daemon.key)
    with Sandbox.create() as sbx:
        assert sbx.exec(["true"]).exit_code == 0


def test_a_streamed_exec_gives_output_as_it_comes(runtime: withruntime.Runtime) -> None:
    """The SDK streams (NDJSON) with on_stdout, and whenever timeout_ms is over 60 s."""
    with runtime.sandboxes.create() as sbx:
        seen: list[str] = []
        r = sbx.exec("printf 'one\\n'; printf 'err\\n' >&2; printf 'h\\xc3\\xa9\\n'; exit 4",
                     on_stdout=seen.append)
        assert (r.exit_code, r.stdout, r.stderr) == (4, "one\nhé\n", "err\n")
        assert "".join(seen) == "one\nhé\n"
        assert not r.stdout_truncated and not r.stderr_truncated
        r = sbx.exec(["cat"], stdin=b"\x00\x01binary\n", timeout_ms=90_000)
        assert r.exit_code == 0 and r.stdout.endswith("binary\n")


def test_a_streamed_exec_that_runs_longer_than_a_minute_beside_leases_ending(
        runtime: withruntime.Runtime) -> None:
    """The seeds' installs run this long: the answer must not wait for the end to start.
    Meanwhile two sandboxes' leases (timeoutSeconds 60, the shortest) end: one pauses, the
    other stops, as their onLeaseEnd says; the minute is shared."""
    paused = runtime.sandboxes.create(timeout_seconds=60)
    stopped = runtime.sandboxes.create(timeout_seconds=60, on_lease_end="stop")
    try:
        assert (paused.info["timeoutSeconds"], paused.info["onLeaseEnd"]) == (60, "pause")
        assert paused.info["endsAt"] and stopped.info["onLeaseEnd"] == "stop"
        with runtime.sandboxes.create() as sbx:
            r = sbx.exec("echo begun; sleep 61; echo done", timeout_ms=120_000, check=True)
            assert r.stdout == "begun\ndone\n"
        assert paused.wait_for("paused", 30).state == "paused"
        assert stopped.wait_for("stopped", 30).state == "stopped"
        # A wake is a new run, with a fresh lease of its own timeoutSeconds.
        paused.wake()
        assert paused.state == "running" and paused.info["endsAt"]
    finally:
        paused.delete()
        stopped.delete()


def test_get_or_create_reuses_wakes_and_restarts(runtime: withruntime.Runtime) -> None:
    """A name held answers its sandbox (reused), running: woken if paused, started again
    if stopped; the block's end stops a reused one instead of deleting it."""
    first = runtime.sandboxes.create(name="cloud-reuse")
    first.exec("echo mine > /workspace/f", check=True)
    first.pause()
    with Sandbox.get_or_create("cloud-reuse") as again:
        assert again.id == first.id and again.state == "running"
        assert again.info.get("reused") is True
    assert runtime.sandboxes.get(first.id).state == "stopped"  # stopped, not deleted
    back = Sandbox.get_or_create("cloud-reuse")
    assert back.id == first.id and back.state == "running"
    assert back.exec("cat /workspace/f").stdout == "mine\n"
    back.delete()
    fresh = Sandbox.get_or_create("cloud-reuse")
    assert fresh.id != first.id and not fresh.info.get("reused")
    fresh.delete()


def test_list_pages_and_filters(runtime: withruntime.Runtime) -> None:
    made = [runtime.sandboxes.create(labels={"suite": "list", "n": str(i)}) for i in range(3)]
    try:
        made[1].pause()
        listed = [s.id for s in runtime.sandboxes.list(labels={"suite": "list"}, limit=1)]
        assert listed == [s.id for s in made], "every page, oldest first"
        paused = [s.id for s in runtime.sandboxes.list(state=["paused"], labels={"suite": "list"})]
        assert paused == [made[1].id]
        assert [s.id for s in runtime.sandboxes.list(labels={"suite": "list", "n": "2"})] == [made[2].id]
    finally:
        for s in made:
            s.delete()


def test_update_changes_what_it_names_and_keeps_the_rest(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create(name="before-update", labels={"team": "a"},
                                  env={"KEEP": "1", "DROP": "x"}) as sbx:
        sbx.update(name="after-update", labels={"team": "b"}, env={"DROP": None, "NEW": "2"},
                   idle_pause_seconds=120)
        info = runtime.sandboxes.get(sbx.id).info
        assert (info["name"], info["labels"], info["idlePauseSeconds"]) == (
            "after-update", {"team": "b"}, 120)
        assert info["env"] == {"KEEP": "1", "NEW": "2"}
        # Commands started afterwards see the change.
        assert sbx.exec("echo $KEEP-$DROP-$NEW").stdout == "1--2\n"
        assert runtime.sandboxes.get("after-update").id == sbx.id
        with pytest.raises(withruntime.NotFoundError):
            runtime.sandboxes.get("before-update")


def test_update_refuses_what_runtimed_cannot_do_and_a_taken_name(runtime: withruntime.Runtime,
                                                                 daemon) -> None:
    with runtime.sandboxes.create(name="holder") as holder, runtime.sandboxes.create() as sbx:
        with pytest.raises(withruntime.ConflictError) as taken:
            sbx.update(name="holder")
        assert taken.value.code == "name_taken"
        with pytest.raises(withruntime.RuntimeError) as unavailable:
            sbx.update(auto_wake=False, user="root")
        assert unavailable.value.code == "feature_unavailable"
        assert "autoWake" in str(unavailable.value) and "user" in str(unavailable.value)
        assert holder.info["name"] == "holder"


def test_create_takes_vcpu_and_refuses_cloud_only_fields_by_name(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create(vcpu=1, memory_mib=512, auto_wake=True) as sbx:
        assert (sbx.info["vcpu"], sbx.info["cpus"], sbx.info["memoryMiB"]) == (1, 1, 512)
    before = {s.id for s in runtime.sandboxes.list()}
    with pytest.raises(withruntime.RuntimeError) as refused:
        runtime.sandboxes.create(region="eu-west", image="python:3.12")
    assert refused.value.code == "feature_unavailable"
    assert "region" in str(refused.value) and "image" in str(refused.value)
    assert {s.id for s in runtime.sandboxes.list()} == before, "nothing was made"


def test_every_wrong_field_is_named_in_one_answer(runtime: withruntime.Runtime) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as wrong:
        runtime.sandboxes.create(name="Bad Name!", memory_mib=1, idle_pause_seconds=-5)
    message = str(wrong.value)
    for field in ("name", "memoryMiB", "idlePauseSeconds"):
        assert field in message, message


def test_wait_for_answers_when_the_state_comes(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.stop(wait=False)
        assert sbx.wait_for("stopped", 60).state == "stopped"
        sbx.restart()
        assert sbx.wait_for("running", 60).state == "running"
        # A state that does not come: the answer at the deadline, as it is.
        assert sbx.wait_for("paused", 1).state == "running"


def test_a_command_a_signal_ends_has_no_exit_code(runtime: withruntime.Runtime, daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        killed = sbx.exec("echo before; kill -KILL $$")
        assert (killed.exit_code, killed.stdout, killed.timed_out) == (None, "before\n", False)
        assert sbx.exec("exit 137").exit_code == 137  # an exit status is not a signal
        with pytest.raises(withruntime.CommandError):
            sbx.exec("kill -TERM $$", check=True)
        # runtimed's own field says which signal; the CLI exits as a shell would.
        cli = subprocess.run([str(RUNTIME), "sandbox", "exec", sbx.id, "--", "sh", "-c", "kill -TERM $$"],
                             env={**os.environ, "RUNTIME_API_URL": daemon.url,
                                  "RUNTIME_API_KEY": daemon.key}, capture_output=True, timeout=60)
        assert cli.returncode == 128 + 15, cli.stderr
