"""The shapes of the API's answers and bodies, as TypedDicts.

Keys are the API's own (camelCase, as in SPEC.md): the SDK hands answers back
as the plain dicts the daemon sent, so ``gateway["servers"][0]["url"]`` works
and nothing is lost when the daemon adds a field.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

__all__ = [
    "SandboxStatus",
    "ServerState",
    "NetworkPolicy",
    "SandboxInfo",
    "ExecResult",
    "Event",
    "CatalogServer",
    "CustomServer",
    "ServerSpec",
    "ServerStatus",
    "Gateway",
    "CatalogSetting",
    "CatalogEntry",
    "SecretInfo",
    "Account",
    "Usage",
]

SandboxStatus = Literal["creating", "running", "paused", "stopped", "failed"]
ServerState = Literal["installing", "starting", "ready", "failed", "refused", "stopped"]


class NetworkPolicy(TypedDict, total=False):
    """Egress of a sandbox: the internet on or off, and hosts allowed either way."""

    internet: bool
    allow: list[str]


class _SandboxRequired(TypedDict):
    id: str
    status: SandboxStatus
    createdAt: str


class SandboxInfo(_SandboxRequired, total=False):
    """A sandbox as ``GET /v1/sandboxes/{id}`` shows it."""

    name: str
    memoryMiB: int
    cpus: float
    diskMiB: int
    idlePauseSeconds: int
    labels: dict[str, str]
    env: dict[str, str]
    network: NetworkPolicy
    mcp: dict[str, Any]


class ExecResult(TypedDict):
    """What a command did: ``POST /v1/sandboxes/{id}/exec``."""

    exitCode: int
    stdout: str
    stderr: str
    timedOut: bool
    durationMs: int


class _EventRequired(TypedDict):
    seq: int
    time: str
    kind: str


class Event(_EventRequired, total=False):
    """One entry of a sandbox's event log (more fields depending on ``kind``)."""

    host: str
    server: str
    error: str


class _CatalogServerRequired(TypedDict):
    id: str


class CatalogServer(_CatalogServerRequired, total=False):
    """A catalog server to start: its id, secrets as ``{ENV: SECRET}``, env, args."""

    secrets: dict[str, str]
    env: dict[str, str]
    args: list[str]
    fingerprint: str


class _CustomServerRequired(TypedDict):
    name: str
    command: list[str]


class CustomServer(_CustomServerRequired, total=False):
    """Your own stdio server: a name and the command that runs it in the sandbox."""

    env: dict[str, str]
    fingerprint: str


ServerSpec = Union[CatalogServer, CustomServer]


class _ServerStatusRequired(TypedDict):
    name: str
    status: ServerState
    url: str
    fingerprint: str | None
    tools: list[str]
    warnings: list[str]


class ServerStatus(_ServerStatusRequired, total=False):
    """One MCP server of a sandbox and the gateway URL that reaches it."""

    id: str
    approved: str
    error: str


class Gateway(TypedDict):
    """``GET /v1/sandboxes/{id}/mcp``: the servers, and the headers a client sends."""

    servers: list[ServerStatus]
    headers: dict[str, str]


class CatalogSetting(TypedDict, total=False):
    """A variable a catalog server reads."""

    env: str
    secret: bool
    required: bool
    description: str


class CatalogEntry(TypedDict, total=False):
    """A pinned server of the catalog (SPEC.md, "Catalog entry")."""

    id: str
    name: str
    description: str
    package: str
    version: str
    runtime: str
    license: str
    command: list[str]
    egress: list[str]
    settings: list[CatalogSetting]
    fingerprint: str | None


class SecretInfo(TypedDict, total=False):
    """A secret as listed: never its value."""

    name: str
    hosts: list[str]
    methods: list[str]
    paths: list[str]


class Account(TypedDict, total=False):
    """An account; ``apiKey`` is only in the answer that created it."""

    name: str
    apiKey: str
    maxSandboxes: int
    maxMemoryMiB: int


class Usage(TypedDict, total=False):
    """``GET /v1/usage``: a row per sandbox, the totals and the rates."""

    sandboxes: list[dict[str, Any]]
    total: dict[str, Any]
    rates: dict[str, float]
