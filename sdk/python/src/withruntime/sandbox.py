"""Sandboxes and what runs in them: exec, files, network, events, MCP servers."""

from __future__ import annotations

import builtins
import codecs
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .client import Runtime, default_runtime, quote
from .errors import CommandError, McpServerError, NotFoundError, TimeoutError
from .models import Event, ExecResult, Gateway, NetworkInput, NetworkPolicy, SandboxInfo, ServerSpec

__all__ = ["Sandbox", "Sandboxes", "Files", "Network", "Mcp"]

# The daemon's own limit on one exec, plus time for the answer to come back.
_EXEC_DEFAULT_MS = 60_000
_EXEC_SLACK_MS = 15_000
# Creating a sandbox builds its workspace: more than an ordinary call's time.
_CREATE_MIN_MS = 120_000
# A long poll asks for at most this much at a time, so that a connection that
# died silently costs one poll, not the whole wait.
_POLL_SECONDS = 60
_POLL_SLACK_MS = 15_000
_PENDING = frozenset({"installing", "starting"})
_BROKEN = frozenset({"failed", "refused"})


def _spec(*, name: str | None, memory_mib: int | None, cpus: float | None,
          disk_mib: int | None, idle_pause_seconds: int | None,
          labels: Mapping[str, str] | None, env: Mapping[str, str] | None,
          network: NetworkInput | None) -> dict[str, Any]:
    """The body of POST /v1/sandboxes from keyword options; None means the daemon's default."""
    fields = {"name": name, "memoryMiB": memory_mib, "cpus": cpus, "diskMiB": disk_mib,
              "idlePauseSeconds": idle_pause_seconds,
              "labels": dict(labels) if labels is not None else None,
              "env": dict(env) if env is not None else None,
              "network": dict(network) if network is not None else None}
    return {k: v for k, v in fields.items() if v is not None}


class Sandboxes:
    """``runtime.sandboxes``: create, find, list and remove sandboxes."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime

    def create(self, *, name: str | None = None, memory_mib: int | None = None,
               cpus: float | None = None, disk_mib: int | None = None,
               idle_pause_seconds: int | None = None, labels: Mapping[str, str] | None = None,
               env: Mapping[str, str] | None = None, network: NetworkInput | None = None,
               timeout_ms: int | None = None) -> Sandbox:
        """Creates a sandbox. Options left out take the daemon's defaults
        (1024 MiB, 1 CPU, 2048 MiB disk, pause after 300 idle seconds, internet on).

        Raises ConflictError when ``name`` is taken, BadRequestError for a bad
        option, LimitError when the account's limits are reached.
        """
        body = _spec(name=name, memory_mib=memory_mib, cpus=cpus, disk_mib=disk_mib,
                     idle_pause_seconds=idle_pause_seconds, labels=labels, env=env, network=network)
        return Sandbox(self._rt, self._rt.call("POST", "/v1/sandboxes", json_body=body,
                                                timeout_ms=self._create_ms(timeout_ms)))

    def get_or_create(self, name: str, *, memory_mib: int | None = None,
                      cpus: float | None = None, disk_mib: int | None = None,
                      idle_pause_seconds: int | None = None,
                      labels: Mapping[str, str] | None = None,
                      env: Mapping[str, str] | None = None, network: NetworkInput | None = None,
                      timeout_ms: int | None = None) -> Sandbox:
        """The sandbox named ``name``, created with these options if there is none
        (an existing one is returned as it is)."""
        body = _spec(name=name, memory_mib=memory_mib, cpus=cpus, disk_mib=disk_mib,
                     idle_pause_seconds=idle_pause_seconds, labels=labels, env=env, network=network)
        body["getOrCreate"] = True
        return Sandbox(self._rt, self._rt.call("POST", "/v1/sandboxes", json_body=body,
                                                timeout_ms=self._create_ms(timeout_ms)))

    def _create_ms(self, timeout_ms: int | None) -> int:
        return timeout_ms if timeout_ms is not None else max(self._rt.timeout_ms, _CREATE_MIN_MS)

    def get(self, id_or_name: str, *, timeout_ms: int | None = None) -> Sandbox:
        """The sandbox with this id or name; NotFoundError when there is none."""
        return Sandbox(self._rt, self._rt.call("GET", f"/v1/sandboxes/{quote(id_or_name)}",
                                                timeout_ms=timeout_ms))

    def list(self, *, labels: Mapping[str, str] | None = None,
             timeout_ms: int | None = None) -> builtins.list[Sandbox]:
        """Every sandbox, oldest first (every page); with ``labels``, those carrying all of them."""
        labels_q = [f"{k}:{v}" for k, v in (labels or {}).items()]
        found: builtins.list[Sandbox] = []
        cursor: str | None = None
        while True:
            query: dict[str, Any] = {"label": labels_q}
            if cursor:
                query["cursor"] = cursor
            page = self._rt.call("GET", "/v1/sandboxes", query=query, timeout_ms=timeout_ms)
            found += [Sandbox(self._rt, info) for info in page["data"]]
            cursor = page.get("nextCursor")
            if not cursor:
                return found

    def delete(self, id_or_name: str, *, missing_ok: bool = False,
               timeout_ms: int | None = None) -> None:
        """Removes a sandbox with its workspace; NotFoundError when there is none
        (unless ``missing_ok``)."""
        try:
            self._rt.call("DELETE", f"/v1/sandboxes/{quote(id_or_name)}", timeout_ms=timeout_ms)
        except NotFoundError:
            if not missing_ok:
                raise


class Sandbox:
    """One sandbox. ``sbx.info`` is the last answer about it (a dict, also
    readable as ``sbx["memoryMiB"]``); :meth:`refresh` asks again.

    As a context manager it is deleted on exit (already gone counts as done)::

        with runtime.sandboxes.create() as tmp:
            tmp.exec(["true"], check=True)
    """

    def __init__(self, runtime: Runtime, info: SandboxInfo) -> None:
        self.runtime = runtime
        self.info: SandboxInfo = info
        self.files = Files(self)
        self.network = Network(self)
        self.mcp = Mcp(self)

    # ------------------------------------------------ the class methods

    @classmethod
    def create(cls, *, name: str | None = None, memory_mib: int | None = None,
               cpus: float | None = None, disk_mib: int | None = None,
               idle_pause_seconds: int | None = None, labels: Mapping[str, str] | None = None,
               env: Mapping[str, str] | None = None, network: NetworkInput | None = None,
               timeout_ms: int | None = None, runtime: Runtime | None = None) -> Sandbox:
        """:meth:`Sandboxes.create` on ``runtime`` (default: from the environment)."""
        return (runtime or default_runtime()).sandboxes.create(
            name=name, memory_mib=memory_mib, cpus=cpus, disk_mib=disk_mib,
            idle_pause_seconds=idle_pause_seconds, labels=labels, env=env, network=network,
            timeout_ms=timeout_ms)

    @classmethod
    def get_or_create(cls, name: str, *, memory_mib: int | None = None,
                      cpus: float | None = None, disk_mib: int | None = None,
                      idle_pause_seconds: int | None = None,
                      labels: Mapping[str, str] | None = None,
                      env: Mapping[str, str] | None = None, network: NetworkInput | None = None,
                      timeout_ms: int | None = None, runtime: Runtime | None = None) -> Sandbox:
        """:meth:`Sandboxes.get_or_create` on ``runtime`` (default: from the environment)."""
        return (runtime or default_runtime()).sandboxes.get_or_create(
            name, memory_mib=memory_mib, cpus=cpus, disk_mib=disk_mib,
            idle_pause_seconds=idle_pause_seconds, labels=labels, env=env, network=network,
            timeout_ms=timeout_ms)

    @classmethod
    def get(cls, id_or_name: str, *, timeout_ms: int | None = None,
            runtime: Runtime | None = None) -> Sandbox:
        """:meth:`Sandboxes.get` on ``runtime`` (default: from the environment)."""
        return (runtime or default_runtime()).sandboxes.get(id_or_name, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ state

    @property
    def id(self) -> str:
        """The sandbox's id (stable; a name may be reused after a delete)."""
        return self.info["id"]

    @property
    def name(self) -> str | None:
        """Its name, if it was given one."""
        return self.info.get("name")

    @property
    def status(self) -> str:
        """Its status when last seen: creating, running, paused, stopped or failed."""
        return self.info["status"]

    def __getitem__(self, key: str) -> Any:
        return self.info[key]  # type: ignore[literal-required]

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} name={self.name!r} status={self.status}>"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete(missing_ok=True)  # someone removed it already: what we wanted

    def _path(self, tail: str = "") -> str:
        return f"/v1/sandboxes/{quote(self.id)}{tail}"

    def refresh(self, *, timeout_ms: int | None = None) -> SandboxInfo:
        """Reads the sandbox again; updates and returns :attr:`info`."""
        self.info = self.runtime.call("GET", self._path(), timeout_ms=timeout_ms)
        return self.info

    def delete(self, *, missing_ok: bool = False, timeout_ms: int | None = None) -> None:
        """Removes the sandbox with its workspace and servers."""
        self.runtime.sandboxes.delete(self.id, missing_ok=missing_ok, timeout_ms=timeout_ms)

    def pause(self, *, timeout_ms: int | None = None) -> SandboxInfo:
        """Freezes it; it wakes on the next exec, file or MCP request."""
        self.info = self.runtime.call("POST", self._path("/pause"), timeout_ms=timeout_ms)
        return self.info

    def resume(self, *, timeout_ms: int | None = None) -> SandboxInfo:
        """Thaws a paused sandbox."""
        self.info = self.runtime.call("POST", self._path("/resume"), timeout_ms=timeout_ms)
        return self.info

    # ------------------------------------------------------------- commands

    def exec(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
             cwd: str | None = None, stdin: str | None = None, timeout_ms: int | None = None,
             check: bool = False) -> ExecResult:
        """Runs a command in the sandbox and waits for it.

        Args:
            argv: the program and its arguments (no shell: pass ``["sh", "-c", ...]``).
            env: extra environment variables.
            cwd: the working directory (default ``/workspace``).
            stdin: text fed to the command.
            timeout_ms: the command is killed after this long (default 60 s);
                the call itself waits a little longer for the answer.
            check: raise CommandError unless it exited 0 in time.

        Returns ``{exitCode, stdout, stderr, timedOut, durationMs}``.
        """
        if isinstance(argv, str):
            raise TypeError("argv is a list of strings, e.g. ['sh', '-c', 'echo hi']")
        body: dict[str, Any] = {"argv": list(argv)}
        for key, value in (("env", dict(env) if env is not None else None), ("cwd", cwd),
                           ("stdin", stdin), ("timeoutMs", timeout_ms)):
            if value is not None:
                body[key] = value
        wait_ms = (timeout_ms or _EXEC_DEFAULT_MS) + _EXEC_SLACK_MS
        result: ExecResult = self.runtime.call("POST", self._path("/exec"), json_body=body,
                                               timeout_ms=wait_ms)
        if check and (result["exitCode"] != 0 or result.get("timedOut")):
            raise CommandError(argv, result)
        return result

    def events(self, *, after: int | None = None,
               timeout_ms: int | None = None) -> builtins.list[Event]:
        """The sandbox's events, oldest first; ``after`` a seq, only newer ones."""
        return self.runtime.call("GET", self._path("/events"),  # type: ignore[no-any-return]
                                 query={"after": after}, timeout_ms=timeout_ms)


class Files:
    """``sbx.files``: read and write files in the sandbox (relative paths are under /workspace)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sbx = sandbox

    def read(self, path: str, *, timeout_ms: int | None = None) -> bytes:
        """The file's bytes."""
        response = self._sbx.runtime.request("GET", self._sbx._path("/files"),
                                             query={"path": path}, timeout_ms=timeout_ms)
        return response.body

    def read_with_mode(self, path: str, *, timeout_ms: int | None = None) -> tuple[bytes, int]:
        """The file's bytes and its permission bits (``0o644``), to copy it faithfully."""
        response = self._sbx.runtime.request("GET", self._sbx._path("/files"),
                                             query={"path": path}, timeout_ms=timeout_ms)
        return response.body, int(response.headers.get("x-file-mode", "0644"), 8)

    def read_text(self, path: str, *, encoding: str = "utf-8",
                  timeout_ms: int | None = None) -> str:
        """The file decoded as text."""
        return self.read(path, timeout_ms=timeout_ms).decode(encoding)

    def write(self, path: str, data: bytes | str, *, mode: int | str | None = None,
              timeout_ms: int | None = None) -> None:
        """Writes (creates or replaces) a file; ``mode`` as ``0o755`` or ``"0755"``."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        mode_text = f"{mode:04o}" if isinstance(mode, int) else mode
        self._sbx.runtime.request("PUT", self._sbx._path("/files"), body=payload,
                                  query={"path": path, "mode": mode_text},
                                  headers={"Content-Type": "application/octet-stream"},
                                  timeout_ms=timeout_ms)


class Network:
    """``sbx.network``: the sandbox's egress policy."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sbx = sandbox

    def get(self, *, timeout_ms: int | None = None) -> NetworkPolicy:
        """The policy in force: ``{internet, allow}``; no ``allow`` key: any public host."""
        return self._sbx.refresh(timeout_ms=timeout_ms).get("network", {})

    def set(self, *, internet: bool = True, allow: Sequence[str] | None = None,
            timeout_ms: int | None = None) -> NetworkPolicy:
        """Replaces the policy at once, also for open connections.

        Args:
            internet: False: no host at all (but the sandbox's catalog MCP servers' own).
            allow: None (the default): any public host. A list: only those hosts, and
                an empty list no host; the hosts of the sandbox's catalog MCP servers
                are reachable either way.

        Private and metadata addresses stay refused whatever it says.
        """
        body: dict[str, Any] = {"internet": internet}
        if allow is not None:
            if isinstance(allow, str):
                raise TypeError("allow is a list of hosts, e.g. ['api.github.com']")
            body["allow"] = list(allow)
        policy: NetworkPolicy = self._sbx.runtime.call(
            "PUT", self._sbx._path("/network"), json_body=body, timeout_ms=timeout_ms)
        self._sbx.info["network"] = policy
        return policy


class Mcp:
    """``sbx.mcp``: the sandbox's MCP servers and their gateway URLs."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sbx = sandbox

    def start(self, servers: Sequence[ServerSpec | str], *,
              timeout_ms: int | None = None) -> Gateway:
        """Starts servers: catalog ones as ``{"id": "github", "secrets": {...}}`` (or just
        ``"github"``), your own as ``{"name": "tickets", "command": [...]}``.

        Returns at once (the daemon answers 202) with the gateway as it is then;
        :meth:`ready` waits for the servers.
        """
        specs = [{"id": s} if isinstance(s, str) else dict(s) for s in servers]
        return self._sbx.runtime.call(  # type: ignore[no-any-return]
            "POST", self._sbx._path("/mcp"), json_body={"servers": specs}, timeout_ms=timeout_ms)

    def status(self, *, wait: int | None = None, timeout_ms: int | None = None) -> Gateway:
        """Each server's status and URL, and the headers a client sends.

        With ``wait`` (seconds) the daemon holds the answer until no server is
        installing or starting, or that time has passed.
        """
        if timeout_ms is None and wait:
            timeout_ms = wait * 1000 + _POLL_SLACK_MS
        return self._sbx.runtime.call("GET", self._sbx._path("/mcp"),  # type: ignore[no-any-return]
                                      query={"wait": wait}, timeout_ms=timeout_ms)

    def ready(self, *, timeout_ms: int = 300_000, check: bool = True) -> Gateway:
        """Waits until no server is installing or starting; returns the gateway.

        Raises McpServerError naming each ``failed`` or ``refused`` server
        (unless ``check=False``), TimeoutError when servers are still
        installing after ``timeout_ms``.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            left = deadline - time.monotonic()
            # At least a second: a wait of 0 would spin until the deadline.
            gateway = self.status(wait=max(1, min(_POLL_SECONDS, math.ceil(left))))
            pending = [s for s in gateway["servers"] if s["status"] in _PENDING]
            if not pending:
                break
            if time.monotonic() >= deadline:
                names = ", ".join(f"{s['name']} ({s['status']})" for s in pending)
                raise TimeoutError(f"MCP servers of sandbox {self._sbx.id} not ready after "
                                   f"{timeout_ms} ms: {names}")
        broken = [s for s in gateway["servers"] if s["status"] in _BROKEN]
        if check and broken:
            raise McpServerError(broken, gateway)
        return gateway

    def logs(self, name: str, *, timeout_ms: int | None = None) -> str:
        """What the server ``name`` wrote on stderr, and its install's output, oldest first.

        The daemon keeps the last 64 KiB of each server, in memory; when older bytes were
        dropped, the first line says how many.
        """
        response = self._sbx.runtime.request("GET", self._sbx._path(f"/mcp/{quote(name)}/logs"),
                                             timeout_ms=timeout_ms)
        return response.body.decode("utf-8", errors="replace")

    def follow_logs(self, name: str, *, timeout_ms: int | None = None,
                    idle_timeout_ms: int | None = None) -> Iterator[str]:
        """:meth:`logs`, then what the server writes next, as it comes: text chunks
        (not lines), until the server is removed or the iterator is closed (``break``
        out of a ``for`` loop, or ``close()``). ``timeout_ms`` bounds the start;
        ``idle_timeout_ms`` (default: none) raises TimeoutError when nothing comes for
        that long.
        """
        chunks = self._sbx.runtime.stream("GET", self._sbx._path(f"/mcp/{quote(name)}/logs"),
                                          query={"follow": "1"}, timeout_ms=timeout_ms,
                                          idle_timeout_ms=idle_timeout_ms)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            for chunk in chunks:
                text = decoder.decode(chunk)
                if text:
                    yield text
        finally:
            chunks.close()  # type: ignore[attr-defined]

    def stop(self, name: str, *, timeout_ms: int | None = None) -> None:
        """Stops one server and removes it from the gateway."""
        self._sbx.runtime.call("DELETE", self._sbx._path(f"/mcp/{quote(name)}"),
                               timeout_ms=timeout_ms)
