"""The shapes of the API's answers and bodies, as TypedDicts.

Keys are the API's own (camelCase, as in api/openapi.yaml): the SDK hands answers back
as the plain dicts the daemon sent, so ``gateway["servers"][0]["url"]`` works
and nothing is lost when the daemon adds a field.

Each name here is a wire type that ``sdk/scripts/gen-types.mjs`` writes from
``api/openapi.yaml`` into ``_api_types.py``; only the names differ, except where a
comment says why the SDK's type is not the wire type.
"""

from __future__ import annotations

from typing import TypeAlias

from . import _api_types as api

__all__ = [
    "SandboxStatus",
    "ServerState",
    "NetworkPolicy",
    "NetworkInput",
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
    "AccountCreated",
    "AccountKey",
    "AccountOptions",
    "AccountUsage",
    "Usage",
]

SandboxStatus: TypeAlias = api.SandboxStatus
#: A server's status (the document's McpServerStatus).
ServerState: TypeAlias = api.McpServerStatus

#: Egress of a sandbox: the internet on or off, and hosts allowed either way
#: (``network.get()``, ``info["network"]``: both keys are always there).
NetworkPolicy: TypeAlias = api.Network
#: A policy to set: a key left out takes its default (internet on, no allow list).
NetworkInput: TypeAlias = api.NetworkInput
#: A sandbox as ``GET /v1/sandboxes/{id}`` shows it.
SandboxInfo: TypeAlias = api.Sandbox
#: What a command did: ``POST /v1/sandboxes/{id}/exec``.
ExecResult: TypeAlias = api.ExecResult
#: One entry of a sandbox's event log; ``kind`` tells which fields it has.
Event: TypeAlias = api.Event

#: A catalog server to start: its id, secrets as ``{ENV: SECRET}``, env, args.
CatalogServer: TypeAlias = api.McpCatalogServerStart
#: Your own stdio server: a name and the command that runs it in the sandbox.
CustomServer: TypeAlias = api.McpCustomServerStart
ServerSpec: TypeAlias = CatalogServer | CustomServer
#: One MCP server of a sandbox and the gateway URL that reaches it.
ServerStatus: TypeAlias = api.McpServer
#: ``GET /v1/sandboxes/{id}/mcp``: the servers, and the headers a client sends.
Gateway: TypeAlias = api.McpStatus

#: A variable a catalog server reads.
CatalogSetting: TypeAlias = api.CatalogSetting
#: A pinned server of the catalog (docs/catalog.md).
CatalogEntry: TypeAlias = api.CatalogEntry
#: A secret as listed: never its value.
SecretInfo: TypeAlias = api.Secret
#: ``GET /v1/usage``: a row per sandbox, the totals and the rates.
Usage: TypeAlias = api.Usage
#: An account's totals in ``usage()["accounts"]``.
AccountUsage: TypeAlias = api.AccountUsage

#: What ``POST /v1/accounts`` takes (``accounts.create`` builds it from its arguments).
AccountOptions: TypeAlias = api.AccountOptions
#: An account as listed: its limits (``None``: none) and what its sandboxes hold now; never a key.
Account: TypeAlias = api.Account
#: The answer of ``accounts.create``: the account and its ``apiKey``, shown only this once.
AccountCreated: TypeAlias = api.AccountCreated
#: The answer of ``accounts.rotate_key``: the new ``apiKey``, shown only this once.
AccountKey: TypeAlias = api.AccountKey
