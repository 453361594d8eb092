"""Runtime Cloud's official SDK (withruntime 0.35.0, unmodified) writing and reading
files in a runtimed sandbox: .../files/content for up to 1 MiB, the chunked uploads
beyond, and what the SDK checks on a read (x-content-length, x-content-sha256)."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request

import pytest
import withruntime

MiB = 1 << 20


def raw(daemon, method: str, path: str, body: bytes | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request as curl would send it: the answer's status, headers and bytes."""
    req = urllib.request.Request(daemon.url + path, data=body, method=method, headers={
        "Authorization": f"Bearer {daemon.key}", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def test_write_makes_parents_and_read_gets_the_bytes_back(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        data = bytes(range(256)) * 3
        assert sbx.files.write("/workspace/deep/er/blob.bin", data) == {
            "path": "/workspace/deep/er/blob.bin", "size": len(data)}
        assert sbx.files.read("/workspace/deep/er/blob.bin") == data
        # The program in the sandbox sees the same file, owned by its user.
        me = sbx.exec("id -un").stdout.strip()
        r = sbx.exec("stat -c '%U %a %s' /workspace/deep/er/blob.bin; stat -c %U /workspace/deep")
        assert r.stdout.split("\n")[:2] == [f"{me} 644 {len(data)}", me]
        sbx.files.write("/workspace/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        assert sbx.exec("/workspace/run.sh").stdout == "ran\n"
        assert sbx.files.read_text("/workspace/run.sh").startswith("#!/bin/sh")


def test_a_read_carries_its_length_and_digest(runtime: withruntime.Runtime, daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.exec("printf 'hello, world' > /workspace/h.txt", check=True)
        status, headers, body = raw(daemon, "GET",
                                    f"/v1/sandboxes/{sbx.id}/files/content?path=/workspace/h.txt")
        assert status == 200 and body == b"hello, world"
        assert headers["x-content-length"] == "12"
        assert headers["x-content-sha256"] == hashlib.sha256(b"hello, world").hexdigest()


def test_file_errors_are_runtime_clouds(runtime: withruntime.Runtime, daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        with pytest.raises(withruntime.NotFoundError) as missing:
            sbx.files.read("/workspace/nothing-here")
        assert missing.value.code == "file_not_found"
        assert "/workspace/nothing-here" in str(missing.value)
        sbx.exec("mkdir -p /workspace/adir /workspace/ro && chmod 555 /workspace/ro", check=True)
        with pytest.raises(withruntime.ConflictError) as is_dir:
            sbx.files.read("/workspace/adir")
        assert is_dir.value.code == "is_a_directory"
        with pytest.raises(withruntime.PermissionDeniedError) as denied:
            sbx.files.write("/workspace/ro/x", "no room\n")
        assert denied.value.code == "permission_denied"
        # A query parameter the route does not take is refused, not ignored.
        status, _, body = raw(daemon, "GET", f"/v1/sandboxes/{sbx.id}/files/content"
                              "?path=/workspace/x&recursive=true")
        err = json.loads(body)["error"]
        assert (status, err["code"]) == (400, "invalid_request") and "recursive" in err["message"]
        # A PUT over 1 MiB is refused with where to send it instead.
        status, _, body = raw(daemon, "PUT", f"/v1/sandboxes/{sbx.id}/files/content"
                              "?path=/workspace/big", b"x" * (MiB + 1))
        err = json.loads(body)["error"]
        assert status == 413 and "/uploads" in err["message"]


def test_a_large_write_goes_in_checked_chunks(runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        data = os.urandom(3 * MiB + 12345)
        assert sbx.files.write("/workspace/up/big.bin", data, mode=0o600) == {
            "path": "/workspace/up/big.bin", "size": len(data)}
        assert sbx.files.read("/workspace/up/big.bin") == data
        r = sbx.exec("stat -c '%a %s' /workspace/up/big.bin; ls -A /workspace/up")
        assert r.stdout == f"600 {len(data)}\nbig.bin\n"  # no temporary file left


def begin(daemon, sandbox_id: str, **body) -> tuple[int, dict]:
    status, _, answer = raw(daemon, "POST", f"/v1/sandboxes/{sandbox_id}/uploads",
                            json.dumps(body).encode(), {"Content-Type": "application/json"})
    return status, json.loads(answer)


def test_an_upload_is_checked_before_it_takes_the_files_place(runtime: withruntime.Runtime,
                                                               daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        sbx.files.write("/workspace/keep.txt", "the old contents\n")
        good = os.urandom(MiB + 10)
        status, up = begin(daemon, sbx.id, path="/workspace/keep.txt", size=len(good),
                           sha256=hashlib.sha256(b"something else").hexdigest())
        assert status == 201 and up["chunkBytes"] == MiB
        base = f"/v1/sandboxes/{sbx.id}/uploads/{up['uploadId']}"
        # Out of order, and one chunk twice: each is written once.
        for offset in (MiB, 0, MiB):
            status, _, _ = raw(daemon, "PUT", f"{base}?offset={offset}",
                               good[offset:offset + MiB])
            assert status == 200
        status, _, body = raw(daemon, "POST", f"{base}:commit", b"{}")
        assert status == 400 and "SHA-256" in json.loads(body)["error"]["message"]
        assert sbx.files.read_text("/workspace/keep.txt") == "the old contents\n"
        status, _, _ = raw(daemon, "POST", f"{base}:abort", b"{}")
        assert status == 200
        left = set(sbx.exec("ls -A /workspace").stdout.split()) - {"lost+found"}
        assert left == {"keep.txt"}  # the aborted upload's file went
        status, _, _ = raw(daemon, "POST", f"{base}:commit", b"{}")
        assert status == 404


def test_an_incomplete_upload_is_not_committed(runtime: withruntime.Runtime, daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        data = os.urandom(2 * MiB + 1)
        status, up = begin(daemon, sbx.id, path="/workspace/partial", size=len(data),
                           sha256=hashlib.sha256(data).hexdigest())
        base = f"/v1/sandboxes/{sbx.id}/uploads/{up['uploadId']}"
        raw(daemon, "PUT", f"{base}?offset=0", data[:MiB])
        status, _, body = raw(daemon, "POST", f"{base}:commit", b"{}")
        err = json.loads(body)["error"]
        assert status == 409 and f"offset {MiB}" in err["message"]
        # A chunk of the wrong length, or at an offset that is no chunk's, is refused.
        status, _, _ = raw(daemon, "PUT", f"{base}?offset={MiB}", data[MiB:MiB + 5])
        assert status == 400
        status, _, _ = raw(daemon, "PUT", f"{base}?offset=7", data[7:MiB + 7])
        assert status == 400
        raw(daemon, "PUT", f"{base}?offset={MiB}", data[MiB:2 * MiB])
        raw(daemon, "PUT", f"{base}?offset={2 * MiB}", data[2 * MiB:])
        status, _, body = raw(daemon, "POST", f"{base}:commit", b"{}")
        assert status == 200 and json.loads(body)["size"] == len(data)
        assert sbx.files.read("/workspace/partial") == data


def test_a_begin_names_every_wrong_field(runtime: withruntime.Runtime, daemon) -> None:
    with runtime.sandboxes.create() as sbx:
        status, answer = begin(daemon, sbx.id, path="/etc/x", size=-1, sha256="abc",
                               mode="999", owner="root")
        err = answer["error"]
        assert (status, err["code"]) == (400, "invalid_request")
        named = {issue["field"] for issue in err["details"]["issues"]}
        assert {"path", "size", "sha256", "mode"} <= named
        assert "owner" in err["message"]
