"""withruntime: the Python client of runtimed's HTTP API (standard library only).

    from withruntime import Runtime

    runtime = Runtime()                      # RUNTIME_API_URL, RUNTIME_API_KEY
    with runtime.sandboxes.create(memory_mib=512) as sbx:
        print(sbx.exec(["uname", "-a"], check=True)["stdout"])

See README.md for the whole surface; api/openapi.yaml of runtime is the contract.
"""

from .client import DEFAULT_API_URL, Accounts, Catalog, Runtime, Secrets, default_runtime
from .errors import (
    BadRequestError,
    CommandError,
    ConflictError,
    ConnectionError,
    ForbiddenError,
    LimitError,
    McpServerError,
    NotFoundError,
    RuntimeError,
    TimeoutError,
    UnauthorizedError,
    UnavailableError,
    error_line,
)
from .models import (
    Account,
    AccountCreated,
    AccountKey,
    AccountOptions,
    AccountUsage,
    CatalogEntry,
    CatalogServer,
    CustomServer,
    Event,
    ExecResult,
    Gateway,
    NetworkPolicy,
    SandboxInfo,
    SecretInfo,
    ServerSpec,
    ServerStatus,
    Usage,
)
from .sandbox import Files, Mcp, Network, Sandbox, Sandboxes
from .transport import HTTPTransport, Request, Response, Transport

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_API_URL",
    "Runtime",
    "Sandbox",
    "Sandboxes",
    "Files",
    "Network",
    "Mcp",
    "Secrets",
    "Catalog",
    "Accounts",
    "default_runtime",
    "Transport",
    "HTTPTransport",
    "Request",
    "Response",
    "RuntimeError",
    "NotFoundError",
    "ConflictError",
    "UnauthorizedError",
    "ForbiddenError",
    "BadRequestError",
    "LimitError",
    "UnavailableError",
    "ConnectionError",
    "TimeoutError",
    "CommandError",
    "McpServerError",
    "error_line",
    "Account",
    "AccountCreated",
    "AccountKey",
    "AccountOptions",
    "AccountUsage",
    "CatalogEntry",
    "CatalogServer",
    "CustomServer",
    "Event",
    "ExecResult",
    "Gateway",
    "NetworkPolicy",
    "SandboxInfo",
    "SecretInfo",
    "ServerSpec",
    "ServerStatus",
    "Usage",
]
