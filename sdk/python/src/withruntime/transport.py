"""How requests reach the daemon: a small interface and its http.client version.

A :class:`Transport` takes one :class:`Request` and gives back one
:class:`Response`, or raises :class:`~withruntime.errors.ConnectionError`
(saying whether anything may have been sent) or
:class:`~withruntime.errors.TimeoutError`. Retries, errors and JSON live in the
client above it, so a test can swap in a transport that counts or fails calls.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .errors import ConnectionError, TimeoutError

__all__ = ["Request", "Response", "Transport", "HTTPTransport"]


@dataclass(frozen=True)
class Request:
    """One HTTP request. ``target`` is the path and query (``/v1/sandboxes?label=a%3Db``)."""

    method: str
    target: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    timeout: float = 60.0  # seconds for the whole exchange


@dataclass(frozen=True)
class Response:
    """One HTTP answer; header names are lower case."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    """Sends requests; see the module's docstring for the errors it raises."""

    def send(self, request: Request) -> Response:
        """Sends ``request`` and returns the whole answer."""
        ...

    def close(self) -> None:
        """Drops any open connections."""
        ...


class HTTPTransport:
    """HTTP/1.1 with keep-alive over ``http.client``; safe to share between threads.

    Idle connections are kept in a small pool, so a program making many calls
    opens few connections, and a long poll in one thread does not hold up
    calls from others.

    For ``https://``, the daemon's certificate is checked against the system's
    CA certificates, or against ``ca`` (a PEM file, e.g. a private CA's
    certificate) instead; ``ssl_context`` replaces both for anything else
    (client certificates, pinning).
    """

    def __init__(self, base_url: str, *, max_idle: int = 4,
                 ca: str | os.PathLike[str] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"api_url must be http://HOST:PORT or https://..., not {base_url!r}")
        if (ca is not None or ssl_context is not None) and url.scheme != "https":
            raise ValueError(f"ca and ssl_context are for an https:// api_url, not {base_url!r}")
        if ca is not None and ssl_context is not None:
            raise ValueError("give ca or ssl_context, not both")
        self._https = url.scheme == "https"
        self._ca = os.fspath(ca) if ca is not None else None
        # Made once (loading CA files is slow); a missing ca file fails here, at once.
        self._ssl = ssl_context or (ssl.create_default_context(cafile=self._ca) if self._https
                                    else None)
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")  # a daemon behind a proxy at a sub-path
        self._idle: list[http.client.HTTPConnection] = []
        self._max_idle = max_idle
        self._lock = threading.Lock()

    def send(self, request: Request) -> Response:
        conn = self._take(request.timeout)
        try:
            conn.request(request.method, self._prefix + request.target, body=request.body,
                         headers=dict(request.headers))
            answer = conn.getresponse()
            body = answer.read()
        except socket.timeout as e:
            conn.close()
            raise TimeoutError(f"no answer from {self._where()} within {request.timeout:g} s "
                               f"({request.method} {request.target})") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionError(f"the connection to {self._where()} broke during "
                                  f"{request.method} {request.target}: {type(e).__name__}: {e}", sent=True) from e
        headers = {k.lower(): v for k, v in answer.getheaders()}
        if answer.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return Response(answer.status, headers, body)

    def stream(self, request: Request, *, idle_timeout: float | None = None
               ) -> tuple[Response, Iterator[bytes]]:
        """Sends ``request`` on a connection of its own; returns the answer's status and
        headers (``body`` empty) and its body as it comes, in chunks. Closing the iterator
        (or its end) closes the connection.

        ``request.timeout`` bounds the connection and the answer's head; ``idle_timeout``
        (seconds, None: none) how long the body may then be silent.
        """
        conn = self._connect(request.timeout)
        try:
            conn.request(request.method, self._prefix + request.target, body=request.body,
                         headers=dict(request.headers))
            answer = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise TimeoutError(f"no answer from {self._where()} within {request.timeout:g} s "
                               f"({request.method} {request.target})") from e
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionError(f"the connection to {self._where()} broke during "
                                  f"{request.method} {request.target}: {type(e).__name__}: {e}", sent=True) from e
        headers = {k.lower(): v for k, v in answer.getheaders()}
        if conn.sock is not None:
            conn.sock.settimeout(idle_timeout)

        def chunks() -> Iterator[bytes]:
            try:
                while True:
                    chunk = answer.read1(65536)
                    if not chunk:
                        return
                    yield chunk
            except socket.timeout as e:
                raise TimeoutError(f"nothing came from {self._where()} for {idle_timeout:g} s "
                                   f"({request.method} {request.target})") from e
            except (OSError, http.client.HTTPException) as e:
                raise ConnectionError(f"the connection to {self._where()} broke during "
                                      f"{request.method} {request.target}: {e}", sent=True) from e
            finally:
                conn.close()

        return Response(answer.status, headers, b""), chunks()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _where(self) -> str:
        return f"{'https' if self._https else 'http'}://{self._host}:{self._port}"

    def _take(self, timeout: float) -> http.client.HTTPConnection:
        """A connection ready to send on: a live idle one, or a new, connected one."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect(timeout)
            if _still_open(conn):
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn
            conn.close()  # the daemon closed it while idle: never send on it

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        conn = (http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
                if self._https else http.client.HTTPConnection(self._host, self._port, timeout=timeout))
        try:
            conn.connect()
        except ssl.SSLCertVerificationError as e:
            conn.close()
            trusted = f"the CA in {self._ca}" if self._ca else "the system's CA certificates"
            raise ConnectionError(f"cannot connect to {self._where()}: its TLS certificate is not "
                                  f"trusted by {trusted} ({e.verify_message}); pass "
                                  f"Runtime(ca=FILE) with the CA that issued it", sent=False) from e
        except socket.timeout as e:
            conn.close()
            raise ConnectionError(f"cannot connect to {self._where()}: timed out after "
                                  f"{timeout:g} s", sent=False) from e
        except OSError as e:
            conn.close()
            raise ConnectionError(f"cannot connect to {self._where()}: {e.strerror or e}; is "
                                  f"runtimed running there? (RUNTIME_API_URL)", sent=False) from e
        return conn

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle keep-alive connection can carry a request.

    An idle connection has nothing to read; if it is readable the peer closed
    it (or sent garbage). Checking before sending is what makes reuse safe for
    requests that must not be sent twice.
    """
    if conn.sock is None:
        return False
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
