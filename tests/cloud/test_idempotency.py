"""Idempotency-Key as Runtime Cloud answers it: the SDK sends a key with every change and
retries with it; the same request again is the first answer again, nothing twice."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import withruntime

from conftest import Daemon


def send(daemon: Daemon, method: str, path: str, body: object | None, key: str) -> tuple[int, dict, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(daemon.url + path, data=data, method=method, headers={
        "Authorization": f"Bearer {daemon.key}", "Content-Type": "application/json",
        "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read()
            return r.status, dict(r.headers), json.loads(text) if text.strip() else {}
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_the_same_create_twice_makes_one_sandbox(daemon: Daemon, runtime: withruntime.Runtime) -> None:
    key = str(uuid.uuid4())
    first = send(daemon, "POST", "/v1/sandboxes", {"name": "idem-one"}, key)
    again = send(daemon, "POST", "/v1/sandboxes", {"name": "idem-one"}, key)
    assert first[0] == 201 and again[0] == 201
    assert again[2]["id"] == first[2]["id"]
    assert again[2]["replayed"] is True and "replayed" not in first[2]
    assert again[1].get("Idempotency-Replayed") == "true"
    # The same key with another request is refused, naming the rule.
    other = send(daemon, "POST", "/v1/sandboxes", {"name": "idem-two"}, key)
    assert other[0] == 422 and other[2]["error"]["code"] == "idempotency_key_reused"
    # A new key is new work: the name is taken now.
    taken = send(daemon, "POST", "/v1/sandboxes", {"name": "idem-one"}, str(uuid.uuid4()))
    assert taken[0] == 409
    # A delete sent again answers the same, and removes nothing else.
    key = str(uuid.uuid4())
    assert send(daemon, "DELETE", f"/v1/sandboxes/{first[2]['id']}", None, key)[0] == 200
    assert send(daemon, "DELETE", f"/v1/sandboxes/{first[2]['id']}", None, key)[0] == 200
    assert send(daemon, "DELETE", f"/v1/sandboxes/{first[2]['id']}", None, str(uuid.uuid4()))[0] == 404


def test_an_exec_sent_again_runs_once(daemon: Daemon, runtime: withruntime.Runtime) -> None:
    with runtime.sandboxes.create() as sbx:
        key = str(uuid.uuid4())
        body = {"command": "echo x >> /workspace/count; wc -l < /workspace/count"}
        first = send(daemon, "POST", f"/v1/sandboxes/{sbx.id}:exec", body, key)
        again = send(daemon, "POST", f"/v1/sandboxes/{sbx.id}:exec", body, key)
        assert first[2]["stdout"] == "1\n" and again[2]["stdout"] == "1\n"
        assert again[2]["replayed"] is True
        assert sbx.exec("wc -l < /workspace/count").stdout == "1\n"


def test_a_bad_key_is_refused(daemon: Daemon) -> None:
    status, _, body = send(daemon, "POST", "/v1/sandboxes", {}, "not a key")
    assert status == 400 and "Idempotency-Key" in body["error"]["message"]
