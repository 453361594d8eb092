"""The client: finding the daemon and its key, requests, time-outs and retries."""

from __future__ import annotations

import builtins
import dataclasses
import email.utils
import json
import os
import ssl
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConnectionError, NotFoundError, RuntimeError, error_for_status
from .models import Account, AccountCreated, AccountKey, CatalogEntry, SecretInfo, Usage
from .transport import HTTPTransport, Request, Response, Transport

if TYPE_CHECKING:
    from .sandbox import Sandboxes

__all__ = ["Runtime", "default_runtime", "DEFAULT_API_URL"]

DEFAULT_API_URL = "http://127.0.0.1:7070"
DEFAULT_STATE_DIR = "/var/lib/runtime"
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
_RETRY_STATUS = frozenset({429, 503})
_MAX_RETRY_WAIT = 10.0  # seconds; a longer Retry-After is the caller's decision, not ours
_REMOVE_MIN_MS = 120_000  # an account's removal removes its sandboxes first

Query = Mapping[str, "str | int | Sequence[str] | None"]


def _find_key(state_dir: str | None) -> str | None:
    """The admin key from STATE/admin.key, when this process may read it."""
    for path in ([os.path.join(state_dir, "admin.key")] if state_dir else []) + [
        os.path.join(DEFAULT_STATE_DIR, "admin.key")
    ]:
        try:
            with open(path, encoding="utf-8") as f:
                key = f.read().strip()
        except OSError:
            continue
        if key:
            return key
    return None


def _retry_after(response: Response) -> float | None:
    """Seconds the daemon asked us to wait (Retry-After: seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Runtime:
    """A connection to one runtimed.

    Args:
        api_url: the daemon, e.g. ``http://127.0.0.1:7070``; default
            ``RUNTIME_API_URL``, else ``http://127.0.0.1:7070``.
        api_key: the API key; default ``RUNTIME_API_KEY``, else
            ``$RUNTIME_STATE_DIR/admin.key`` or ``/var/lib/runtime/admin.key``
            when this process can read it.
        timeout_ms: the default time-out of a call (each method also takes
            ``timeout_ms``).
        max_retries: how often a call is tried again where that is safe: when
            the connection failed before anything was sent, and for GET, PUT
            and DELETE when the daemon answered 429 or 503 (after its
            Retry-After, when that is at most 10 s and within the call's time).
        ca: for an ``https://`` api_url, a PEM file of the CA certificates to
            trust instead of the system's (a daemon whose certificate comes
            from a private CA); default ``RUNTIME_CA_FILE``.
        ssl_context: for ``https://``, an :class:`ssl.SSLContext` to use as
            is (instead of ``ca``).
        transport: how requests are sent (tests pass their own).

    Use it as a context manager, or call :meth:`close`, to drop its connections.
    """

    def __init__(self, api_url: str | None = None, api_key: str | None = None, *,
                 timeout_ms: int = 60_000, max_retries: int = 2,
                 ca: str | os.PathLike[str] | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 transport: Transport | None = None) -> None:
        from .sandbox import Sandboxes  # the sandbox module builds on this one

        self.api_url = (api_url or os.environ.get("RUNTIME_API_URL") or DEFAULT_API_URL).rstrip("/")
        self.api_key = api_key or os.environ.get("RUNTIME_API_KEY") or _find_key(
            os.environ.get("RUNTIME_STATE_DIR"))
        self.timeout_ms = timeout_ms
        self.max_retries = max_retries
        if ca is None and ssl_context is None and self.api_url.startswith("https://"):
            ca = os.environ.get("RUNTIME_CA_FILE") or None
        self.transport: Transport = transport or HTTPTransport(self.api_url, ca=ca,
                                                               ssl_context=ssl_context)
        self.sandboxes: Sandboxes = Sandboxes(self)
        self.secrets = Secrets(self)
        self.mcp = Catalog(self)
        self.accounts = Accounts(self)

    def __repr__(self) -> str:
        return f"Runtime(api_url={self.api_url!r})"

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the idle connections (a later call opens a new one)."""
        self.transport.close()

    def usage(self, *, timeout_ms: int | None = None) -> Usage:
        """What each sandbox used and cost (``GET /v1/usage``)."""
        return self.call("GET", "/v1/usage", timeout_ms=timeout_ms)  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- requests

    def call(self, method: str, path: str, *, json_body: Any = None, body: bytes | None = None,
             query: Query | None = None, timeout_ms: int | None = None,
             headers: Mapping[str, str] | None = None) -> Any:
        """One API call; returns the parsed JSON answer (``None`` for 204).

        Raises the typed error of :mod:`withruntime.errors` for an error answer.
        """
        response = self.request(method, path, json_body=json_body, body=body, query=query,
                                timeout_ms=timeout_ms, headers=headers)
        if not response.body or response.status == 204:
            return None
        return json.loads(response.body)

    def request(self, method: str, path: str, *, json_body: Any = None, body: bytes | None = None,
                query: Query | None = None, timeout_ms: int | None = None,
                headers: Mapping[str, str] | None = None) -> Response:
        """One API call, returning the raw answer when it is a success (2xx)."""
        method = method.upper()
        if not self.api_key:
            raise RuntimeError("no API key: pass Runtime(api_key=...), set RUNTIME_API_KEY, or "
                               "set RUNTIME_STATE_DIR to a state dir whose admin.key you may read",
                               code="no_api_key")
        h = {"Accept": "application/json", "User-Agent": "withruntime-python",
             "Authorization": f"Bearer {self.api_key}"}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        timeout = (self.timeout_ms if timeout_ms is None else timeout_ms) / 1000
        req = Request(method, _target(path, query), h, body, timeout)
        response = self._send(req, deadline=time.monotonic() + timeout)
        if 200 <= response.status < 300:
            return response
        raise error_for_status(response.status, response.body)

    def stream(self, method: str, path: str, *, query: Query | None = None,
               timeout_ms: int | None = None, idle_timeout_ms: int | None = None) -> Iterator[bytes]:
        """One API call whose answer is read as it comes (a followed log): its body in
        chunks. ``timeout_ms`` bounds the connection and the answer's head;
        ``idle_timeout_ms`` (None: none) how long the body may then be silent.

        Needs a transport with ``stream`` (:class:`~withruntime.transport.HTTPTransport`).
        Raises the typed error of an error answer before the first chunk.
        """
        stream = getattr(self.transport, "stream", None)
        if stream is None:
            raise TypeError(f"{type(self.transport).__name__} cannot stream an answer; "
                            "following needs withruntime's HTTPTransport")
        if not self.api_key:
            raise RuntimeError("no API key: pass Runtime(api_key=...), set RUNTIME_API_KEY, or "
                               "set RUNTIME_STATE_DIR to a state dir whose admin.key you may read",
                               code="no_api_key")
        h = {"User-Agent": "withruntime-python", "Authorization": f"Bearer {self.api_key}"}
        timeout = (self.timeout_ms if timeout_ms is None else timeout_ms) / 1000
        idle = None if idle_timeout_ms is None else idle_timeout_ms / 1000
        head, chunks = stream(Request(method.upper(), _target(path, query), h, None, timeout),
                              idle_timeout=idle)
        if 200 <= head.status < 300:
            return chunks  # type: ignore[no-any-return]
        body = b"".join(chunks)
        raise error_for_status(head.status, body)

    def _send(self, req: Request, *, deadline: float) -> Response:
        """Sends with the bounded retries that cannot run a request twice."""
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            # Every attempt gets what is left of the call's time, not a fresh one.
            left = max(0.001, deadline - time.monotonic())
            try:
                response = self.transport.send(dataclasses.replace(req, timeout=left))
            except ConnectionError as e:
                wait = 0.1 * 2**attempt
                # Only a request that never left is repeated: one that broke
                # on the way may have been acted on, whatever its method.
                if last or e.sent or time.monotonic() + wait > deadline:
                    raise
            else:
                if last or response.status not in _RETRY_STATUS or req.method not in _IDEMPOTENT:
                    return response
                after = _retry_after(response)
                wait = 0.2 * 2**attempt if after is None else after
                if wait > _MAX_RETRY_WAIT or time.monotonic() + wait > deadline:
                    return response  # waiting would outlast the call: hand back the 429/503
            time.sleep(wait)  # a back-off between attempts, not a synchronisation
        raise AssertionError("unreachable")  # the last attempt returns or raises


def _target(path: str, query: Query | None) -> str:
    """The path and query string; list values repeat the key (label=a&label=b)."""
    pairs: list[tuple[str, str]] = []
    for key, value in (query or {}).items():
        if value is None:
            continue
        values: Iterable[Any] = [value] if isinstance(value, (str, int)) else value
        pairs.extend((key, str(v)) for v in values)
    return path + ("?" + urllib.parse.urlencode(pairs) if pairs else "")


def quote(segment: str) -> str:
    """One path segment (a sandbox id or name, a secret or server name)."""
    return urllib.parse.quote(segment, safe="")


class Secrets:
    """``runtime.secrets``: values that only leave the host towards their own hosts."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    def set(self, name: str, *, value: str, hosts: Sequence[str],
            methods: Sequence[str] | None = None, paths: Sequence[str] | None = None,
            timeout_ms: int | None = None) -> SecretInfo:
        """Creates or replaces a secret; it is sent only to ``hosts`` (and methods, paths)."""
        body: dict[str, Any] = {"value": value, "hosts": builtins.list(hosts)}
        if methods is not None:
            body["methods"] = builtins.list(methods)
        if paths is not None:
            body["paths"] = builtins.list(paths)
        return self._rt.call("PUT", f"/v1/egress-secrets/{quote(name, safe='')}",  # type: ignore[no-any-return]
                             json_body=body, timeout_ms=timeout_ms)

    def list(self, *, timeout_ms: int | None = None) -> builtins.list[SecretInfo]:
        """The secrets of this account, without their values: each page's ``next`` followed."""
        secrets: builtins.list[SecretInfo] = []
        after: str | None = None
        while True:
            query = "" if after is None else f"?after={quote(after, safe='')}"
            page = self._rt.call("GET", f"/v1/egress-secrets{query}", timeout_ms=timeout_ms)
            secrets.extend(page["secrets"])
            after = page.get("next")
            if not after:
                return secrets

    def delete(self, name: str, *, timeout_ms: int | None = None) -> None:
        """Removes a secret."""
        self._rt.call("DELETE", f"/v1/egress-secrets/{quote(name, safe='')}", timeout_ms=timeout_ms)


class Catalog:
    """``runtime.mcp``: the catalog of pinned MCP servers."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    def catalog(self, *, timeout_ms: int | None = None) -> list[CatalogEntry]:
        """Every catalog entry (docs/catalog.md)."""
        return self._rt.call("GET", "/v1/mcp/catalog", timeout_ms=timeout_ms)  # type: ignore[no-any-return]


class Accounts:
    """``runtime.accounts``: accounts, each with its own API key and limits.

    Admin key only: an account's key gets :class:`~withruntime.ForbiddenError`. A
    ``Runtime(api_key=...)`` made with an account's key sees and changes only that
    account's sandboxes and secrets.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    def create(self, name: str, *, max_sandboxes: int | None = None,
               max_memory_mib: int | None = None, timeout_ms: int | None = None) -> AccountCreated:
        """Creates an account; the answer's ``apiKey`` is shown only this once.

        A limit left out is none. A taken name raises ConflictError.
        """
        body: dict[str, Any] = {"name": name}
        if max_sandboxes is not None:
            body["maxSandboxes"] = max_sandboxes
        if max_memory_mib is not None:
            body["maxMemoryMiB"] = max_memory_mib
        return self._rt.call("POST", "/v1/accounts", json_body=body, timeout_ms=timeout_ms)  # type: ignore[no-any-return]

    def list(self, *, timeout_ms: int | None = None) -> builtins.list[Account]:
        """Every account (the admin's own, default, aside), oldest first; never a key."""
        return self._rt.call("GET", "/v1/accounts", timeout_ms=timeout_ms)  # type: ignore[no-any-return]

    def rotate_key(self, name: str, *, timeout_ms: int | None = None) -> AccountKey:
        """A new API key for the account, shown only this once.

        The key before it keeps working until the next rotation; older ones stop now.
        """
        return self._rt.call("POST", f"/v1/accounts/{quote(name)}/keys",  # type: ignore[no-any-return]
                             timeout_ms=timeout_ms)

    def delete(self, name: str, *, missing_ok: bool = False, timeout_ms: int | None = None) -> None:
        """Removes the account with its sandboxes, secrets and usage, then its keys.

        Returns once they are gone; a 404 raises NotFoundError unless ``missing_ok``.
        """
        # The removal waits for every sandbox of the account: allow what a create may take.
        wait = timeout_ms if timeout_ms is not None else max(self._rt.timeout_ms, _REMOVE_MIN_MS)
        try:
            self._rt.call("DELETE", f"/v1/accounts/{quote(name)}", timeout_ms=wait)
        except NotFoundError:
            if not missing_ok:
                raise


_default: Runtime | None = None


def default_runtime() -> Runtime:
    """The Runtime the ``Sandbox`` class methods use: one, made from the environment."""
    global _default
    if _default is None:
        _default = Runtime()
    return _default
