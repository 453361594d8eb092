"""exec, files, network and events of one sandbox, against the real daemon."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from withruntime import BadRequestError, CommandError, NotFoundError, Runtime, Sandbox


@pytest.fixture(scope="module")
def sbx(daemon) -> Iterator[Sandbox]:  # type: ignore[no-untyped-def]
    with daemon.runtime() as rt, rt.sandboxes.create(name="py-work", memory_mib=256) as s:
        yield s


def test_exec_result(sbx: Sandbox) -> None:
    r = sbx.exec(["sh", "-c", "echo out; echo err >&2; pwd; exit 3"])
    assert (r["exitCode"], r["stdout"], r["stderr"], r["timedOut"]) == (3, "out\n/workspace\n", "err\n", False)
    assert isinstance(r["durationMs"], int)


def test_exec_options(sbx: Sandbox) -> None:
    r = sbx.exec(["sh", "-c", 'cat; echo "$A"; pwd'], stdin="from stdin\n", env={"A": "b"}, cwd="/tmp")
    assert r["stdout"] == "from stdin\nb\n/tmp\n"


def test_exec_check_raises_command_error(sbx: Sandbox) -> None:
    with pytest.raises(CommandError) as e:
        sbx.exec(["sh", "-c", "echo partial; echo broken >&2; exit 7"], check=True)
    err = e.value
    assert (err.exit_code, err.stdout, err.stderr, err.timed_out) == (7, "partial\n", "broken\n", False)
    assert err.argv[0] == "sh" and "broken" in str(err)
    assert sbx.exec(["true"], check=True)["exitCode"] == 0


def test_exec_timeout_with_check(sbx: Sandbox) -> None:
    with pytest.raises(CommandError) as e:
        sbx.exec(["sleep", "30"], timeout_ms=300, check=True)
    assert e.value.timed_out


def test_exec_argv_must_be_a_list(sbx: Sandbox) -> None:
    with pytest.raises(TypeError):
        sbx.exec("echo hi")  # type: ignore[arg-type]


def test_files_round_trip_and_mode(sbx: Sandbox) -> None:
    data = bytes(range(256)) * 64
    sbx.files.write("blob.bin", data)
    assert sbx.files.read("/workspace/blob.bin") == data
    sbx.files.write("run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    sbx.files.write("private.txt", "s3cret", mode="0600")
    stat = sbx.exec(["stat", "-c", "%a %n", "run.sh", "private.txt"], check=True)["stdout"]
    assert stat == "755 run.sh\n600 private.txt\n"
    assert sbx.exec(["./run.sh"], check=True)["stdout"] == "ran\n"
    assert sbx.files.read_text("private.txt") == "s3cret"
    assert sbx.files.read_with_mode("run.sh") == (b"#!/bin/sh\necho ran\n", 0o755)
    sbx.files.write("empty", b"")
    assert sbx.files.read("empty") == b""


def test_files_errors(sbx: Sandbox) -> None:
    with pytest.raises(NotFoundError):
        sbx.files.read("no-such-file")
    with pytest.raises(BadRequestError):
        sbx.files.write("x", "y", mode="999")


def test_network_get_set(sbx: Sandbox) -> None:
    assert sbx.network.get() == {"internet": True}  # no allow list: any public host
    assert sbx.network.set(internet=False, allow=["api.example.com"]) == \
        {"internet": False, "allow": ["api.example.com"]}
    assert sbx.network.get() == {"internet": False, "allow": ["api.example.com"]}
    with pytest.raises(BadRequestError):
        sbx.network.set(allow=[""])
    assert sbx.network.set(allow=[]) == {"internet": True, "allow": []}  # no host
    sbx.network.set()
    assert sbx.network.get() == {"internet": True}


def test_events(sbx: Sandbox, runtime: Runtime) -> None:
    sbx.network.set(internet=False)
    try:
        mark = max([e["seq"] for e in sbx.events()], default=0)
        # A name the policy refuses: the daemon's DNS stub says no, and logs it.
        sbx.exec(["node", "-e", "require('dns').lookup('refused-by-py.test', () => {})"], check=True)
        new = sbx.events(after=mark)
        refused = [e for e in new if e["kind"] == "egress.refused" and e.get("host") == "refused-by-py.test"]
        assert refused, new
        assert all(e["seq"] > mark for e in new)
        assert sbx.events(after=new[-1]["seq"]) == []
    finally:
        sbx.network.set()
