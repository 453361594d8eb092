"""The typed errors of the SDK, the same kinds as the npm package's.

Every error is a :class:`RuntimeError` (this module's, not the built-in one)
carrying the HTTP ``status`` (``None`` when there was no answer), the API's
error ``code`` and its ``message``. :class:`ConnectionError` and
:class:`TimeoutError` are also the built-in exceptions of the same name, so
code that already catches those keeps working.
"""

from __future__ import annotations

import builtins
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
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
    "error_for_status",
    "error_line",
]


class RuntimeError(Exception):  # noqa: A001 - the name the SDKs share
    """Base of every error the SDK raises.

    Attributes:
        status: the HTTP status of the answer, or ``None`` when there was none.
        code: the API's error code (``"not_found"``, ``"name_taken"``, ...).
        message: what went wrong and what to do, as the daemon said it.
    """

    def __init__(self, message: str, *, status: int | None = None, code: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        where = f"HTTP {self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.message}"


class NotFoundError(RuntimeError):
    """404: no such sandbox, server, secret or path (or not yours)."""


class ConflictError(RuntimeError):
    """409: the name is taken, or the sandbox is not in a state that allows the call."""


class UnauthorizedError(RuntimeError):
    """401: the API key is missing or wrong."""


class ForbiddenError(RuntimeError):
    """403: the key may not make this call (an account's key on an admin call: accounts, metrics)."""


class BadRequestError(RuntimeError):
    """400, 413 or 422: the request itself is wrong (an option, a path, a body)."""


class LimitError(RuntimeError):
    """429: a limit is reached (sandboxes, memory, secrets, concurrent execs)."""


class UnavailableError(RuntimeError):
    """503: the daemon cannot serve the call right now."""


class ConnectionError(RuntimeError, builtins.ConnectionError):  # noqa: A001
    """The daemon could not be reached, or the connection broke before an answer.

    Attributes:
        sent: whether the request may have reached the daemon (``False`` when
            the connection failed before anything was sent, e.g. refused).
    """

    def __init__(self, message: str, *, sent: bool) -> None:
        RuntimeError.__init__(self, message, status=None, code="connection_failed")
        self.sent = sent


class TimeoutError(RuntimeError, builtins.TimeoutError):  # noqa: A001
    """No answer within the call's time-out (``timeout_ms``)."""

    def __init__(self, message: str) -> None:
        RuntimeError.__init__(self, message, status=None, code="timeout")


_NOTICE = re.compile(r"^(npm (notice|WARN|warn)\b|\[notice\]|WARNING:|DEPRECATION:)")
_NPM_ERROR = re.compile(r"^npm (ERR!|error)(?= |$) *")
_NPM_META = re.compile(r"^(code|errno|syscall|path|dest|signal|command|cwd|"
                       r"A complete log of this run|Log files were not written)\b|^/|^$")


def _noise(line: str) -> bool:
    """Notices, warnings, and npm's lines about its run (its error code, where its log is)."""
    if _NOTICE.match(line):
        return True
    m = _NPM_ERROR.match(line)
    return m is not None and _NPM_META.match(line[m.end():]) is not None


def error_line(stderr: str) -> str:
    """The line of a failed command's stderr that says what went wrong.

    The first line that names an error ("error" in any case, or npm's "ERR!") and is
    not a notice (npm's "notice" and "WARN" lines, pip's "[notice]", "WARNING:",
    "DEPRECATION:") nor npm's bookkeeping ("code", "errno", "syscall", "path", where its
    log is); else the first line that is neither; else the last line; "" for none. The
    daemon and the TypeScript SDK pick it the same way.
    """
    lines = [line.rstrip("\r \t") for line in stderr.split("\n")]
    lines = [line for line in lines if line]
    plain = [line for line in lines if not _noise(line)]
    for line in plain:
        if "error" in line.lower() or "ERR!" in line:
            return line
    if plain:
        return plain[0]
    return lines[-1] if lines else ""


class CommandError(RuntimeError):
    """``exec(..., check=True)`` ran a command that failed or timed out.

    Attributes:
        argv: the command.
        exit_code: its exit status (``-1`` when it was killed at its time-out).
        stdout, stderr: what it wrote.
        timed_out: whether it was stopped at its ``timeout_ms``.
    """

    def __init__(self, argv: Sequence[str], result: Mapping[str, Any]) -> None:
        self.argv = list(argv)
        self.exit_code: int = int(result.get("exitCode", -1))
        self.stdout: str = str(result.get("stdout", ""))
        self.stderr: str = str(result.get("stderr", ""))
        self.timed_out: bool = bool(result.get("timedOut", False))
        how = "timed out" if self.timed_out else f"exited with status {self.exit_code}"
        line = error_line(self.stderr)
        message = f"{' '.join(self.argv)} {how}" + (f": {line}" if line else "")
        super().__init__(message, status=None, code="command_failed")


class McpServerError(RuntimeError):
    """``mcp.ready()`` found a server ``failed`` or ``refused``.

    Attributes:
        server, server_status, server_error: the first such server's name,
            status and error (as the npm package's ``server``, ...).
        servers: every failed and refused server, as the API shows them.
        gateway: the whole answer of ``GET /v1/sandboxes/{id}/mcp``.
    """

    def __init__(self, servers: Sequence[Mapping[str, Any]], gateway: Mapping[str, Any]) -> None:
        self.servers = [dict(s) for s in servers]
        self.gateway = dict(gateway)
        first = self.servers[0] if self.servers else {}
        self.server: str = str(first.get("name", ""))
        self.server_status: str = str(first.get("status", ""))
        self.server_error: str = str(first.get("error", ""))
        parts = [f"{s.get('name')} is {s.get('status')}: {s.get('error', 'no reason given')}"
                 for s in self.servers]
        code = "mcp_refused" if all(s.get("status") == "refused" for s in self.servers) else "mcp_failed"
        super().__init__("; ".join(parts), status=None, code=code)


_BY_STATUS: dict[int, type[RuntimeError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: BadRequestError,
    422: BadRequestError,
    429: LimitError,
    503: UnavailableError,
}


def error_for_status(status: int, body: bytes) -> RuntimeError:
    """The typed error for an API error answer (``{"error": {code, message}}``)."""
    code, message = f"http_{status}", body.decode("utf-8", "replace").strip() or f"HTTP {status}"
    try:
        err = json.loads(body)["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        pass  # not the API's error shape (a proxy's page, say): keep the raw text
    return _BY_STATUS.get(status, RuntimeError)(message, status=status, code=code)
