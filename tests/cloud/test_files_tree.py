"""Runtime Cloud's file-tree routes through the official SDK (withruntime 0.35.0):
files.list, stat, exists, mkdir, remove, rename and the chmod its chunked upload sends,
with Runtime Cloud's error classes, and a sandbox that tries to reach the host through
symlinks."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import withruntime
from withruntime import Sandbox


@pytest.fixture(scope="module")
def sbx(daemon, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    mp = pytest.MonkeyPatch()
    mp.setenv("RUNTIME_API_URL", daemon.url)
    mp.setenv("RUNTIME_API_KEY", daemon.key)
    for proxy in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        mp.delenv(proxy, raising=False)
    with withruntime.Runtime().sandboxes.create() as s:
        yield s
    mp.undo()


def post(daemon, sbx: Sandbox, verb: str, body: dict) -> tuple[int, dict]:
    """A raw POST .../files:VERB, for what the SDK never sends."""
    req = urllib.request.Request(
        f"{daemon.url}/v1/sandboxes/{sbx.id}/files:{verb}", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {daemon.key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(daemon, sbx: Sandbox, route: str, query: str) -> tuple[int, dict]:
    req = urllib.request.Request(f"{daemon.url}/v1/sandboxes/{sbx.id}/files/{route}?{query}",
                                 headers={"Authorization": f"Bearer {daemon.key}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_mkdir_list_and_stat(sbx: Sandbox) -> None:
    sbx.files.mkdir("/workspace/t1/a/b", parents=True)
    sbx.exec("echo hi > /workspace/t1/a/b.txt; echo x > /workspace/t1/.secret; "
             "ln -s a/b.txt /workspace/t1/link; echo deep > /workspace/t1/a/b/c.py", check=True)
    sbx.files.mkdir("/workspace/t1/a/b", parents=True)  # there already: fine

    top = sbx.files.list("/workspace/t1")
    assert [e["path"] for e in top] == ["/workspace/t1/a", "/workspace/t1/link"]
    a, link = top
    assert (a["name"], a["type"], a["mode"]) == ("a", "directory", "755")
    assert (link["type"], link["symlinkTarget"]) == ("symlink", "a/b.txt")
    assert a["uid"] == 1000 and a["owner"] == "user" and a["modifiedAt"].endswith("Z")

    every = sbx.files.list("/workspace/t1", depth=3, hidden=True)
    assert [e["path"][len("/workspace/t1/"):] for e in every] == [
        ".secret", "a", "a/b", "a/b.txt", "a/b/c.py", "link"]
    assert sbx.files.list("/workspace/t1", depth=3, limit=2).__len__() == 2
    assert [e["name"] for e in sbx.files.glob("**/*.py", "/workspace/t1")] == ["c.py"]
    assert [e["name"] for e in sbx.files.list("/workspace/t1", depth=2, glob="a/*.txt")] == [
        "b.txt"]

    st = sbx.files.stat("/workspace/t1/a/b.txt")
    assert (st["exists"], st["type"], st["size"], st["mode"], st["path"]) == (
        True, "file", 3, "644", "/workspace/t1/a/b.txt")
    assert sbx.files.exists("/workspace/t1/a")
    assert not sbx.files.exists("/workspace/t1/nothing")
    assert not sbx.files.exists("/workspace/t1/a/b.txt/under-a-file")
    assert sbx.files.stat("t1/link")["type"] == "symlink"  # relative: under /workspace


def test_rename_remove_and_chmod(sbx: Sandbox, daemon) -> None:
    sbx.exec("mkdir -p /workspace/t2/d && echo 1 > /workspace/t2/one && "
             "echo 2 > /workspace/t2/two && echo 3 > /workspace/t2/d/three", check=True)
    with pytest.raises(withruntime.ConflictError) as taken:
        sbx.files.rename("/workspace/t2/one", "/workspace/t2/two")
    assert taken.value.code == "file_exists" and "/workspace/t2/two" in str(taken.value)
    sbx.files.rename("/workspace/t2/one", "/workspace/t2/two", overwrite=True)
    assert sbx.exec("cat /workspace/t2/two").stdout == "1\n"
    assert not sbx.files.exists("/workspace/t2/one")

    with pytest.raises(withruntime.ConflictError) as full:
        sbx.files.remove("/workspace/t2/d")
    assert full.value.code == "not_empty" and "/workspace/t2/d" in str(full.value)
    assert sbx.files.remove("/workspace/t2/d", recursive=True) is True
    assert sbx.files.remove("/workspace/t2/d") is False
    assert sbx.files.remove("/workspace/t2/two") is True

    sbx.exec("echo '#!/bin/sh' > /workspace/t2/run", check=True)
    assert post(daemon, sbx, "chmod", {"path": "/workspace/t2/run", "mode": "755"}) == (
        200, {"path": "/workspace/t2/run", "mode": "755"})
    assert sbx.files.stat("/workspace/t2/run")["mode"] == "755"
    assert sbx.exec("test -x /workspace/t2/run").exit_code == 0


def test_the_chunked_upload_with_a_mode(sbx: Sandbox) -> None:
    payload = os.urandom(1_048_576 + 10)  # over 1 MiB: begin, chunks, commit, then maybe chmod
    sbx.files.write("/workspace/big.bin", payload, mode=0o700)
    st = sbx.files.stat("/workspace/big.bin")
    assert (st["size"], st["mode"]) == (len(payload), "700")


def test_errors_are_runtime_clouds(sbx: Sandbox, daemon) -> None:
    with pytest.raises(withruntime.NotFoundError) as missing:
        sbx.files.list("/workspace/none")
    assert missing.value.code == "file_not_found" and "/workspace/none" in str(missing.value)
    with pytest.raises(withruntime.NotFoundError):
        sbx.files.rename("/workspace/none", "/workspace/other")
    sbx.exec("echo f > /workspace/plain && mkdir -p /workspace/dir", check=True)
    with pytest.raises(withruntime.ConflictError) as not_dir:
        sbx.files.list("/workspace/plain")
    assert not_dir.value.code == "not_a_directory"
    with pytest.raises(withruntime.ConflictError) as is_dir:
        sbx.files.rename("/workspace/plain", "/workspace/dir", overwrite=True)
    assert is_dir.value.code == "is_a_directory"
    with pytest.raises(withruntime.PermissionDeniedError) as denied:
        sbx.files.mkdir("/etc/mine")
    assert denied.value.code == "permission_denied" and "/etc/mine" in str(denied.value)

    status, body = post(daemon, sbx, "mkdir", {"path": "/workspace/x", "colour": 1, "size": 2})
    assert status == 400 and body["error"]["code"] == "invalid_request"
    assert "colour" in body["error"]["message"] and "size" in body["error"]["message"]
    status, body = post(daemon, sbx, "remove", {"path": 5, "recursive": "yes"})
    assert status == 400 and "path" in body["error"]["message"]
    assert "recursive" in body["error"]["message"]
    status, body = post(daemon, sbx, "chmod", {"path": "/workspace/plain", "mode": "4755"})
    assert status == 400 and "mode" in body["error"]["message"]
    status, body = get(daemon, sbx, "list", "path=/workspace&colour=red")
    assert status == 400 and "colour" in body["error"]["message"]
    status, body = get(daemon, sbx, "list", "depth=99")
    assert status == 400 and "depth" in body["error"]["message"]


@pytest.fixture()
def host_victim() -> Iterator[Path]:
    """A file and a directory on the host, outside every sandbox."""
    d = Path(tempfile.mkdtemp(prefix="runtime-victim-"))
    (d / "keep").write_text("host data\n")
    (d / "keep").chmod(0o600)
    d.chmod(0o777)
    yield d
    for p in sorted(d.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
    d.rmdir()


def test_symlinks_never_reach_the_host(sbx: Sandbox, host_victim: Path) -> None:
    victim = host_victim / "keep"
    sbx.exec(f"mkdir -p /workspace/t3 && cd /workspace/t3 && ln -s / root && ln -s /etc etc && "
             f"ln -s ../../.. up && ln -s {host_victim} host && ln -s {victim} hostfile && "
             f"ln -s /usr/bin/env env && ln -s /proc/1/root magic", check=True)

    # Listing through a link to / shows the sandbox's root, never the host's.
    names = {e["name"] for e in sbx.files.list("/workspace/t3/root")}
    assert "workspace" in names and host_victim.name not in names
    assert [e["name"] for e in sbx.files.list("/workspace/t3/up")] == [
        e["name"] for e in sbx.files.list("/")]
    # The walk itself never follows a link.
    assert all(e["type"] == "symlink" for e in sbx.files.list("/workspace/t3", depth=5))
    # The host's path means nothing inside.
    assert not sbx.files.exists(f"{host_victim}/keep")
    with pytest.raises(withruntime.NotFoundError):
        sbx.files.list("/workspace/t3/host")
    # A magic link is refused, not followed (by the kernel's ptrace check or by
    # RESOLVE_NO_MAGICLINKS, whichever comes first).
    with pytest.raises(withruntime.RuntimeError) as magic:
        sbx.files.list("/workspace/t3/magic/etc")
    assert magic.value.status in (400, 403)

    # chmod follows a link only inside: the host's file keeps its mode.
    with pytest.raises(withruntime.NotFoundError):
        raise_chmod(sbx, "/workspace/t3/hostfile", "777")
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    env_mode = stat.S_IMODE(Path("/usr/bin/env").stat().st_mode)
    with pytest.raises(withruntime.PermissionDeniedError):
        raise_chmod(sbx, "/workspace/t3/env", "777")
    assert stat.S_IMODE(Path("/usr/bin/env").stat().st_mode) == env_mode

    # Renames move the link, never what it points to.
    sbx.files.rename("/workspace/t3/hostfile", "/workspace/t3/moved")
    assert victim.read_text() == "host data\n"
    # A recursive remove of a link removes the link alone.
    for link in ("root", "etc", "up", "host", "moved", "env", "magic"):
        assert sbx.files.remove(f"/workspace/t3/{link}", recursive=True) is True
    assert victim.read_text() == "host data\n" and Path("/etc/passwd").exists()
    assert sbx.exec("test -f /etc/passwd && ls /workspace/t3 | wc -l").stdout == "0\n"
    # Nor does removing the sandbox's whole tree reach past its root.
    sbx.exec(f"ln -s {host_victim} /workspace/t3/again", check=True)
    assert sbx.files.remove("/workspace/t3", recursive=True) is True
    assert victim.read_text() == "host data\n"


def raise_chmod(sbx: Sandbox, path: str, mode: str) -> None:
    """POST .../files:chmod through the SDK's own transport, so its error classes apply."""
    sbx.files._t.json("POST", sbx.files._path("/files:chmod"), body={"path": path, "mode": mode})
