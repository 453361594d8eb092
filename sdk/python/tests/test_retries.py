"""Retries and time-outs with transports that count or fail: only what is safe is
retried, and a daemon that is not there fails fast instead of hanging."""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections import Counter
from collections.abc import Callable

import pytest

from withruntime import (ConnectionError, HTTPTransport, LimitError, Request, Response, Runtime,
                         Sandbox, TimeoutError, UnavailableError)

import withruntime
from conftest import Daemon, free_port

ERROR = b'{"error": {"code": "unavailable", "message": "busy"}}'


class Counting:
    """A transport that answers with fn(request) and counts what it was sent."""

    def __init__(self, fn: Callable[[Request], Response]) -> None:
        self.fn = fn
        self.sent: Counter[str] = Counter()
        self.requests: list[Request] = []

    def send(self, request: Request) -> Response:
        self.sent[request.method] += 1
        self.requests.append(request)
        return self.fn(request)

    def close(self) -> None:
        pass


def answer(status: int, headers: dict[str, str] | None = None, body: bytes = ERROR) -> Callable[[Request], Response]:
    return lambda _req: Response(status, headers or {}, body)


def refused(sent: bool) -> Callable[[Request], Response]:
    def fn(_req: Request) -> Response:
        raise ConnectionError("refused" if not sent else "broken", sent=sent)
    return fn


def every_call(rt: Runtime) -> None:
    """One call of each method, each expected to fail."""
    sbx_path = "/v1/sandboxes/x"
    for method in ("GET", "PUT", "DELETE", "POST"):
        with pytest.raises(Exception):
            rt.call(method, sbx_path, json_body={} if method in ("PUT", "POST") else None)


def test_503_retried_only_for_idempotent_methods() -> None:
    t = Counting(answer(503, {"retry-after": "0"}))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, max_retries=2)
    every_call(rt)
    assert t.sent == {"GET": 3, "PUT": 3, "DELETE": 3, "POST": 1}
    with pytest.raises(UnavailableError):
        rt.sandboxes.list()


def test_429_retried_then_succeeds() -> None:
    answers = [Response(429, {"retry-after": "0"}, ERROR), Response(200, {}, b'{"data": [], "nextCursor": null}')]
    t = Counting(lambda _req: answers.pop(0))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t)
    assert rt.sandboxes.list() == []
    assert t.sent == {"GET": 2}


def test_429_on_post_is_not_retried() -> None:
    t = Counting(answer(429, {"retry-after": "0"}))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t)
    with pytest.raises(LimitError):
        rt.sandboxes.create(name="x")
    assert t.sent == {"POST": 1}


def test_retry_after_longer_than_the_call_is_not_waited_for() -> None:
    t = Counting(answer(503, {"retry-after": "3600"}))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, timeout_ms=2000)
    with pytest.raises(UnavailableError):
        rt.secrets.list()
    assert t.sent == {"GET": 1}


def test_refused_before_sending_is_retried_for_every_method() -> None:
    t = Counting(refused(sent=False))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, max_retries=2)
    every_call(rt)
    assert t.sent == {"GET": 3, "PUT": 3, "DELETE": 3, "POST": 3}


def test_broken_after_sending_is_never_retried() -> None:
    t = Counting(refused(sent=True))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, max_retries=2)
    every_call(rt)
    assert t.sent == {"GET": 1, "PUT": 1, "DELETE": 1, "POST": 1}


def test_non_idempotent_calls_of_the_api_are_sent_once() -> None:
    t = Counting(answer(503, {"retry-after": "0"}))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, max_retries=3)
    sbx = Sandbox(rt, {"id": "abc", "status": "running", "createdAt": ""})
    for call in (lambda: sbx.exec(["true"]), sbx.pause, sbx.resume,
                 lambda: sbx.mcp.start(["fetch"]), lambda: rt.sandboxes.create(),
                 lambda: rt.sandboxes.get_or_create("n"), lambda: rt.accounts.create("a")):
        with pytest.raises(UnavailableError):
            call()
    assert t.sent == {"POST": 7}


def test_timeouts_reach_the_transport() -> None:
    t = Counting(answer(200, body=b'{"exitCode": 0, "stdout": "", "stderr": "", "timedOut": false, "durationMs": 1}'))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, timeout_ms=5000)
    sbx = Sandbox(rt, {"id": "abc", "status": "running", "createdAt": ""})
    rt.call("GET", "/v1/sandboxes")
    sbx.exec(["true"], timeout_ms=180_000)
    rt.call("GET", "/v1/sandboxes", timeout_ms=250)
    got = [round(r.timeout) if r.timeout > 1 else round(r.timeout, 2) for r in t.requests]
    assert got == [5, 195, 0.25], "default, exec's own time-out plus slack, per call"
    body = t.requests[1].body or b""
    assert b'"timeoutMs": 180000' in body


def test_create_waits_longer_than_an_ordinary_call() -> None:
    t = Counting(answer(201, body=b'{"id": "i", "status": "running", "createdAt": ""}'))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="k", transport=t, timeout_ms=5000)
    rt.sandboxes.create()
    rt.sandboxes.create(timeout_ms=3000)
    assert [round(r.timeout) for r in t.requests] == [120, 3]


def test_no_key_is_an_error_before_sending(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import withruntime.client
    monkeypatch.delenv("RUNTIME_API_KEY", raising=False)
    monkeypatch.setenv("RUNTIME_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(withruntime.client, "DEFAULT_STATE_DIR", str(tmp_path))
    t = Counting(answer(200, body=b"[]"))
    rt = Runtime(api_url="http://127.0.0.1:1", transport=t)
    with pytest.raises(withruntime.RuntimeError) as e:
        rt.sandboxes.list()
    assert e.value.code == "no_api_key" and "RUNTIME_API_KEY" in e.value.message
    assert t.sent == {}


def test_a_dead_port_fails_fast() -> None:
    inner = HTTPTransport(f"http://127.0.0.1:{free_port()}")
    t = Counting(inner.send)
    rt = Runtime(api_url="http://unused", api_key="k", transport=t, max_retries=2)
    with pytest.raises(ConnectionError) as e:
        rt.sandboxes.create()
    assert not e.value.sent and t.sent == {"POST": 3}


def test_no_answer_is_a_timeout(daemon: Daemon) -> None:
    with daemon.runtime(timeout_ms=1000) as rt, rt.sandboxes.create(memory_mib=256) as sbx:
        sbx.mcp.start([{"name": "mute", "command": ["sleep", "600"]}])
        with pytest.raises(TimeoutError) as e:
            sbx.mcp.status(wait=30, timeout_ms=500)  # the daemon holds it for 30 s
        assert isinstance(e.value, builtins.TimeoutError)


def test_keep_alive_reuses_one_connection(daemon: Daemon) -> None:
    opened: list[object] = []

    class Tracking(HTTPTransport):
        def _connect(self, timeout: float):  # type: ignore[no-untyped-def]
            conn = super()._connect(timeout)
            opened.append(conn)
            return conn

    with Runtime(api_url=daemon.url, api_key=daemon.key, transport=Tracking(daemon.url)) as rt:
        for _ in range(5):
            rt.sandboxes.list()
            rt.secrets.list()
    assert len(opened) == 1


def test_requests_carry_the_key_and_json() -> None:
    sandbox = b'{"id": "i", "status": "running", "createdAt": ""}'
    page = b'{"data": [], "nextCursor": null}'
    t = Counting(lambda req: Response(200 if req.method == "GET" else 201, {},
                                      page if req.method == "GET" else sandbox))
    rt = Runtime(api_url="http://127.0.0.1:1", api_key="the-key", transport=t)
    rt.sandboxes.create(name="n", memory_mib=512, labels={"a": "b"})
    req = t.requests[0]
    assert req.headers["Authorization"] == "Bearer the-key"
    assert req.headers["Content-Type"] == "application/json"
    assert json.loads(req.body or b"") == {"name": "n", "memoryMiB": 512, "labels": {"a": "b"}}
    rt.sandboxes.list(labels={"role": "mcp", "t": "a b"})
    assert t.requests[1].target == "/v1/sandboxes?label=role%3Amcp&label=t%3Aa+b"
    assert dataclasses.is_dataclass(req)
