# Generated from api/openapi.yaml (components.schemas) by sdk/scripts/gen-types.mjs: do not edit.
# Regenerate with `node sdk/scripts/gen-types.mjs` (sdk/typescript/test/types-gen.test.mjs checks it is current).
"""The API's wire types as TypedDicts, exactly as api/openapi.yaml gives them.

Keys a schema requires are in a base class, the others in a ``total=False`` class
(the standard library of Python 3.10 has no ``NotRequired``). Answers may carry keys
that are not listed: the daemon adds fields, never renames them. The SDK's public
names are in ``withruntime.models``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

__all__ = [
    "FileWritten",
    "UploadBegin",
    "Upload",
    "Error",
    "ErrorError",
    "ErrorErrorDetails",
    "ErrorErrorDetailsIssuesItem",
    "ErrorCode",
    "FileEntry",
    "FileList",
    "FileStat",
    "Time",
    "StringMap",
    "Network",
    "NetworkAnswer",
    "NetworkInput",
    "SandboxCreate",
    "SandboxUpdate",
    "SandboxStatus",
    "Sandbox",
    "SandboxMcp",
    "ExecRequest",
    "ExecResult",
    "Fingerprint",
    "McpIsolation",
    "McpCatalogServerStart",
    "McpTools",
    "McpCustomServerStart",
    "McpStartRequest",
    "McpServerStatus",
    "McpServerPhase",
    "McpServer",
    "McpServerPackage",
    "McpStatus",
    "McpStatusHeaders",
    "McpStopAll",
    "CatalogSetting",
    "CatalogEntry",
    "CatalogEntryEnvItem",
    "SecretRule",
    "SecretScope",
    "SecretInput",
    "Secret",
    "Cost",
    "UsageRow",
    "Usage",
    "UsageRates",
    "UsageTotal",
    "AccountUsage",
    "AccountOptions",
    "Account",
    "AccountCreated",
    "AccountKey",
    "EventSeq",
    "EventKind",
    "EgressRefusedEvent",
    "EgressAllowedEvent",
    "EgressTruncatedEvent",
    "LimitReachedEvent",
    "SecretUsedEvent",
    "SecretMisdirectedEvent",
    "McpInstallingEvent",
    "McpInstalledEvent",
    "McpStartingEvent",
    "SecretReflectedEvent",
    "McpReadyEvent",
    "McpFailedEvent",
    "McpRefusedEvent",
    "McpExitedEvent",
    "McpStoppedEvent",
    "McpClientDroppedEvent",
    "SandboxPausedEvent",
    "SandboxResumedEvent",
    "SandboxExitedEvent",
    "SandboxStoppedEvent",
    "SandboxStartedEvent",
    "EventsDroppedEvent",
    "Event",
    "JsonRpcMessage",
    "JsonRpcMessages",
    "JsonRpcError",
    "JsonRpcErrorError",
]


class FileWritten(TypedDict):
    path: str
    size: int


class _UploadBeginRequired(TypedDict):
    #: a file under /workspace
    path: str
    size: int
    #: the whole file's
    sha256: str


class UploadBegin(_UploadBeginRequired, total=False):
    #: its permission bits (644 when left out)
    mode: str


class _UploadRequired(TypedDict):
    uploadId: str
    #: the size of every chunk but the last (1 MiB)
    chunkBytes: int
    path: str
    size: int


class Upload(_UploadRequired, total=False):
    #: the mode asked for: no chmod is needed after the commit
    mode: str


class Error(TypedDict):
    error: ErrorError


class _ErrorErrorRequired(TypedDict):
    code: ErrorCode
    #: the answer's HTTP status
    status: int
    #: what is wrong and what to do
    message: str
    #: the answer's x-request-id; quote it when you report a problem
    requestId: str


class ErrorError(_ErrorErrorRequired, total=False):
    #: more about the error: `issues` of a refused body, one {field, message} per
    #: wrong field
    details: ErrorErrorDetails


class ErrorErrorDetails(TypedDict, total=False):
    """more about the error: `issues` of a refused body, one {field, message} per
    wrong field
    """

    issues: list[ErrorErrorDetailsIssuesItem]
    #: feature_unavailable's: the fields runtimed cannot honour
    fields: list[str]


class _ErrorErrorDetailsIssuesItemRequired(TypedDict):
    field: str
    message: str


class ErrorErrorDetailsIssuesItem(_ErrorErrorDetailsIssuesItemRequired, total=False):
    #: the unknown fields, when field is empty
    fields: str


#: Runtime Cloud's codes where it has one: 400 invalid_request (a body, query or field
#: that is wrong: the message names each), exec_failed; 401 unauthorized; 403
#: forbidden, read_only, permission_denied; 404 not_found, route_not_found,
#: file_not_found; 405 method_not_allowed; 409 name_taken, not_running, conflict,
#: busy (a sandbox being created or removed, or the first request with an
#: Idempotency-Key still under way), is_a_directory, not_a_directory, file_exists,
#: not_empty, upload_incomplete (a commit before every chunk came); 413 too_large;
#: 501 feature_unavailable (a field of Runtime Cloud's runtimed cannot honour, named);
#: 422 idempotency_key_reused (the key came with another request); 429 limit_reached;
#: 500 internal_error; 501 unavailable (what Runtime Cloud serves and a self-hosted
#: daemon does not); 503 unavailable (the daemon is stopping); 507 disk_full.
ErrorCode: TypeAlias = Literal[
    "invalid_request",
    "exec_failed",
    "unauthorized",
    "forbidden",
    "read_only",
    "permission_denied",
    "not_found",
    "route_not_found",
    "file_not_found",
    "method_not_allowed",
    "name_taken",
    "not_running",
    "conflict",
    "busy",
    "is_a_directory",
    "not_a_directory",
    "file_exists",
    "not_empty",
    "upload_incomplete",
    "too_large",
    "idempotency_key_reused",
    "limit_reached",
    "internal_error",
    "unavailable",
    "feature_unavailable",
    "disk_full",
]


class _FileEntryRequired(TypedDict):
    name: str
    #: absolute
    path: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    #: permission bits in octal, e.g. "644"
    mode: str
    #: UTC, to the millisecond
    modifiedAt: str
    #: as the sandbox sees it (65534 for a host owner)
    uid: int
    gid: int
    #: root, user, nobody, or the uid
    owner: str
    #: root, user, nogroup, or the gid
    group: str


class FileEntry(_FileEntryRequired, total=False):
    #: the target a symlink names
    symlinkTarget: str


class FileList(TypedDict):
    data: list[FileEntry]
    #: there were more than limit (or too many to look at)
    truncated: bool


class _FileStatRequired(TypedDict):
    exists: bool
    path: str


class FileStat(_FileStatRequired, total=False):
    """a FileEntry with exists true, or only exists false and the path asked about"""

    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mode: str
    modifiedAt: str
    uid: int
    gid: int
    owner: str
    group: str
    symlinkTarget: str


#: RFC 3339, UTC
Time: TypeAlias = str


StringMap: TypeAlias = dict[str, str]


class _NetworkRequired(TypedDict):
    #: whether public addresses may be reached at all (private and metadata addresses never are)
    internet: bool


class Network(_NetworkRequired, total=False):
    #: the hosts allowed (names, *.suffix, addresses or CIDR ranges), besides those of the
    #: sandbox's catalog MCP servers; empty: no host but those; absent: any public host
    allow: list[str]
    #: hosts (names, *.suffix, addresses or CIDR ranges, with an optional :port) never reached
    deny: list[str]
    #: host:port pairs reached beyond the allow list
    connect: list[str]


class _NetworkAnswerRequired(TypedDict):
    internet: bool
    #: Runtime Cloud's: true, as a runtimed sandbox reaches every port of a host it may reach
    openPorts: bool


class NetworkAnswer(_NetworkAnswerRequired, total=False):
    """the Network, and Runtime Cloud's openPorts"""

    allow: list[str]
    deny: list[str]
    connect: list[str]


class NetworkInput(TypedDict, total=False):
    #: default: True
    internet: bool
    #: absent or null: any public host; []: no host (but the sandbox's catalog MCP
    #: servers' own); a list: only those hosts (and the catalog servers')
    allow: list[str] | None
    #: never reached, whatever allow says
    deny: list[str] | None
    #: host:port pairs reached beyond the allow list
    connect: list[str] | None


class SandboxCreate(TypedDict, total=False):
    #: unique; usable wherever an id is
    name: str | None
    #: default: 1024
    memoryMiB: int
    #: at most the host's online CPUs (more is refused with 400 naming both) (default: 1)
    cpus: float
    #: Runtime Cloud's name for cpus (both given, they must agree)
    vcpu: float
    #: default: 2048
    diskMiB: int
    #: pause it after this long without use; 0 never (default: 300)
    idlePauseSeconds: int
    #: keys are names (letters, digits, _ . -) or contain a '/' (under 128 bytes) (default: {})
    labels: dict[str, str]
    #: environment variables of every exec (default: {})
    env: dict[str, str]
    #: default: {"internet": True}
    network: NetworkInput
    #: when a sandbox of this name exists, answer it (200, reused: true), woken if paused and started again if stopped, instead of 409 (default: False)
    getOrCreate: bool


class SandboxUpdate(TypedDict, total=False):
    name: str | None
    labels: dict[str, str] | None
    #: a value sets a variable, null removes it; the others stay
    env: dict[str, str | None] | None
    idlePauseSeconds: int | None
    #: true (or null) only
    autoWake: bool | None
    #: true (or null) only
    persistent: bool | None
    maxTotalCostMicros: None
    tailscale: None
    user: None


SandboxStatus: TypeAlias = Literal["creating", "running", "paused", "stopped", "failed"]


class _SandboxRequired(TypedDict):
    id: str
    name: str | None
    status: SandboxStatus
    #: Runtime Cloud's word for where it is (what its SDKs read and wait on); a sandbox that failed is stopped
    state: Literal["starting", "running", "pausing", "paused", "resuming", "stopping", "stopped"]
    createdAt: Time
    memoryMiB: int
    cpus: float
    diskMiB: int
    idlePauseSeconds: int
    labels: StringMap
    env: StringMap
    network: Network


class Sandbox(_SandboxRequired, total=False):
    #: this is the answer to an earlier request with the same Idempotency-Key
    replayed: bool
    #: only in getOrCreate's answer when the name was taken: that sandbox, woken if it was paused and started again if it was stopped
    reused: bool
    #: cpus, under Runtime Cloud's name
    vcpu: float
    #: present once MCP servers were started in it
    mcp: SandboxMcp


class SandboxMcp(TypedDict):
    """present once MCP servers were started in it"""

    servers: list[McpServer]


class ExecRequest(TypedDict, total=False):
    """argv or command, one of them"""

    #: the program and its arguments (no shell)
    argv: list[str]
    #: a command line, run by bash -c (Runtime Cloud's form); not with argv
    command: str
    #: added to the sandbox's env (default: {})
    env: dict[str, str]
    #: default: "/workspace"
    cwd: str
    #: given to the program on its standard input
    stdin: str | None
    #: its standard input as base64 (not with stdin)
    stdinBase64: str
    #: default: 60000
    timeoutMs: int
    #: true: the answer is application/x-ndjson, one event a line while it runs: {type: start, processId}, {type: stdout|stderr, offset, data, base64?} (offset counts the bytes of both streams together; base64 when data is not the bytes as UTF-8), then {type: exit, exitCode, state, timedOut, durationMs} or {type: error, error}. No output limit; a reader that leaves (or leaves 16 MiB unread) ends the program. (default: False)
    stream: bool


class _ExecResultRequired(TypedDict):
    #: 128+N when killed by signal N
    exitCode: int
    #: at most 1 MiB, then a note of what was dropped; invalid UTF-8 becomes U+FFFD
    stdout: str
    stderr: str
    timedOut: bool
    durationMs: int


class ExecResult(_ExecResultRequired, total=False):
    #: the answer to an earlier request with the same Idempotency-Key
    replayed: bool


#: a tool-list fingerprint (docs/gateway.md, "The fingerprint"), 16 to 64 hex digits
Fingerprint: TypeAlias = str


#: one process for all clients, or one per client session (default: "shared")
McpIsolation: TypeAlias = Literal["shared", "session"]


class _McpCatalogServerStartRequired(TypedDict):
    #: a catalog entry's id
    id: str


class McpCatalogServerStart(_McpCatalogServerStartRequired, total=False):
    #: defaults to the id
    name: str
    #: {ENV: SECRET}: the secret SECRET as variable ENV (default: {})
    secrets: dict[str, str]
    #: default: {}
    env: dict[str, str]
    #: default: []
    args: list[str]
    fingerprint: Fingerprint | None
    isolation: McpIsolation
    tools: McpTools


#: the only tools of the server that clients see (tools/list) and may call; a call
#: to any other is refused (mcp.refused). Absent: all of them. The fingerprint
#: gate judges the whole list the server offers either way.
McpTools: TypeAlias = list[str]


class _McpCustomServerStartRequired(TypedDict):
    name: str
    #: the stdio server's argv
    command: list[str]


class McpCustomServerStart(_McpCustomServerStartRequired, total=False):
    #: default: {}
    secrets: dict[str, str]
    #: default: {}
    env: dict[str, str]
    #: default: []
    args: list[str]
    fingerprint: Fingerprint | None
    isolation: McpIsolation
    tools: McpTools


class _McpStartRequestRequired(TypedDict):
    servers: list[McpCatalogServerStart | McpCustomServerStart]


class McpStartRequest(_McpStartRequestRequired, total=False):
    #: the servers not listed stop; listed ones running with other settings start again with these
    replace: bool
    #: Runtime Cloud's URLs that never expire and are guarded by the headers alone: runtimed's always are
    public: bool
    #: Runtime Cloud's in-sandbox gateway port: runtimed's gateway is its own listener; leave it out
    port: None


#: Runtime Cloud's word (its SDKs' ready() waits while one is installing)
McpServerStatus: TypeAlias = Literal["installing", "ready", "failed"]


#: runtimed's finer word: installing and starting are both Runtime Cloud's
#: installing; failed, refused (its tools are not the reviewed ones) and stopped
#: are its failed
McpServerPhase: TypeAlias = Literal[
    "installing",
    "starting",
    "ready",
    "failed",
    "refused",
    "stopped",
]


class _McpServerRequired(TypedDict):
    name: str
    status: McpServerStatus
    phase: McpServerPhase
    #: why it is not serving (its error, or that it was stopped); null when it is
    message: str | None
    #: its gateway URL: {publicUrl}/mcp/{link}/{name}
    url: str
    #: of the tool list it serves (null before it was seen)
    fingerprint: str | None
    #: the names of the tools clients see (none from a failed or refused server)
    tools: list[str]
    warnings: list[str]
    #: how long it has been in its phase, in whole seconds
    statusSeconds: int


class McpServer(_McpServerRequired, total=False):
    #: the catalog id, for a catalog server
    id: str
    #: the fingerprint approved for it (given, from the catalog, or first seen)
    approved: str
    #: why it failed or was refused, or what it is doing
    error: str
    #: a catalog server's package, as its install names it
    package: McpServerPackage


class McpServerPackage(TypedDict):
    """a catalog server's package, as its install names it"""

    manager: Literal["npm", "pip"]
    name: str
    version: str


class _McpStatusRequired(TypedDict):
    #: a server is installing, starting or ready
    running: bool
    #: Runtime Cloud's in-sandbox gateway port; runtimed's gateway is its own listener
    port: None
    servers: list[McpServer]
    #: the headers a gateway client sends, names to values (empty before the first start)
    headers: McpStatusHeaders
    #: every server's warnings, each as "NAME: warning"
    warnings: list[str]


class McpStatus(_McpStatusRequired, total=False):
    """Runtime Cloud's gateway answer, with runtimed's fields on each server"""

    #: the gateway token (the bearer of headers.Authorization)
    token: str


#: the headers a gateway client sends, names to values (empty before the first start)
#: keys include: Authorization
McpStatusHeaders: TypeAlias = dict[str, str]


class McpStopAll(TypedDict):
    #: a server was running
    stopped: bool


class _CatalogSettingRequired(TypedDict):
    #: the variable
    env: str


class CatalogSetting(_CatalogSettingRequired, total=False):
    #: whether to pass it as a secret
    secret: bool
    required: bool
    description: str


class _CatalogEntryRequired(TypedDict):
    id: str
    name: str
    #: Runtime Cloud's name for name
    title: str
    #: the package's page at its version
    source: str
    #: the day the pinned versions were last reviewed
    checked: str
    #: Runtime Cloud's server options: no catalog server here takes one
    options: list[dict[str, Any]]
    description: str
    #: the npm or PyPI package
    package: str
    #: its exact version
    version: str
    runtime: Literal["node", "python"]
    license: str
    command: list[str]
    #: the hosts it needs; allowed while it runs, whatever the sandbox's allow list or internet say
    egress: list[str]
    settings: list[CatalogSetting]
    #: of the reviewed tool list, or null
    fingerprint: str | None
    #: the settings in Runtime Cloud's form: a secret one lists the hosts its value may reach
    env: list[CatalogEntryEnvItem]


class CatalogEntry(_CatalogEntryRequired, total=False):
    #: Python servers: pinned requirement lines with hashes ("pkg==1.0 --hash=sha256:...")
    lock: list[str]
    #: variables set for the server's process (e.g. PATH); catalog/servers.json's env
    serverEnv: dict[str, str]


class _CatalogEntryEnvItemRequired(TypedDict):
    name: str
    required: bool
    secret: bool


class CatalogEntryEnvItem(_CatalogEntryEnvItemRequired, total=False):
    description: str
    hosts: list[str]


class _SecretRuleRequired(TypedDict):
    #: each exact (/issues) or a prefix ending in /* (/repos/acme/*)
    paths: list[str]


class SecretRule(_SecretRuleRequired, total=False):
    #: absent, every method
    methods: list[str]


class SecretScope(TypedDict, total=False):
    #: a sandbox whose labels hold every pair of one of these maps
    labels: list[dict[str, str]]
    #: sandbox ids
    sandboxes: list[str]


class _SecretInputRequired(TypedDict):
    #: never shown again; visible ASCII and spaces, at most 8 KiB
    value: str
    #: the hosts (names, *.domain, or one address each) it may be sent to
    hosts: list[str]


class SecretInput(_SecretInputRequired, total=False):
    #: a field the proxy sets on every request the secret may go into, replacing the sandbox's
    header: str
    #: the field's text, `{value}` where the value goes (needs header; default `{value}`)
    format: str
    #: a request carries the value if any rule allows it; absent, every request
    rules: list[SecretRule]
    only: SecretScope
    #: the variable sandboxes see the placeholder in (default the secret's name)
    env: str
    #: runtimed's earlier form, one rule with paths; not with rules
    methods: list[str]
    #: runtimed's earlier form, one rule with methods; not with rules
    paths: list[str]


class _SecretRequired(TypedDict):
    name: str
    hosts: list[str]
    env: str
    #: the secret's own placeholder, kept when it is replaced; it becomes the value in
    #: requests from the account's sandboxes (each sandbox also has its own, in env)
    placeholder: str
    createdAt: Time
    updatedAt: Time


class Secret(_SecretRequired, total=False):
    header: str
    format: str
    rules: list[SecretRule]
    only: SecretScope


class Cost(TypedDict):
    cpu: float
    memory: float
    paused: float
    total: float


class UsageRow(TypedDict):
    #: the sandbox's id
    sandbox: str
    #: the account it belongs to (default for the admin's)
    account: str
    name: str | None
    status: Literal["creating", "running", "paused", "stopped", "failed", "removed"]
    cpuSeconds: float
    vcpuHours: float
    runningHours: float
    memoryGiBHours: float
    pausedHours: float
    pausedGBHours: float
    storedGB: float
    cost: Cost


class Usage(TypedDict):
    sandboxes: list[UsageRow]
    #: the totals of each account that has rows (the admin sees all, an account its own)
    accounts: list[AccountUsage]
    total: UsageTotal
    rates: UsageRates


class UsageRates(TypedDict):
    vcpuHour: float
    gibHour: float
    gbMonth: float


class UsageTotal(TypedDict):
    cpuSeconds: float
    vcpuHours: float
    memoryGiBHours: float
    pausedHours: float
    pausedGBHours: float
    cost: Cost


class AccountUsage(TypedDict):
    account: str
    total: UsageTotal


class _AccountOptionsRequired(TypedDict):
    #: 1-63 of a-z, 0-9, '-', '_', '.', starting with a letter or digit; not default
    name: str


class AccountOptions(_AccountOptionsRequired, total=False):
    #: at most this many sandboxes at a time; left out or null, no limit but the daemon's
    maxSandboxes: int | None
    #: at most this much memoryMiB over all its sandboxes; left out or null, no limit
    maxMemoryMiB: int | None


class Account(TypedDict):
    name: str
    createdAt: Time
    #: its removal is under way (or was cut short; remove it again)
    removing: bool
    #: its limit; null: none
    maxSandboxes: int | None
    #: its limit; null: none
    maxMemoryMiB: int | None
    #: how many sandboxes it has now
    sandboxes: int
    #: the memoryMiB of its sandboxes together
    memoryMiB: int


class AccountCreated(TypedDict):
    """an Account and its API key, shown only in this answer"""

    name: str
    createdAt: Time
    removing: bool
    maxSandboxes: int | None
    maxMemoryMiB: int | None
    sandboxes: int
    memoryMiB: int
    #: the account's API key; the daemon keeps only its hash
    apiKey: str


class AccountKey(TypedDict):
    name: str
    #: the new key, shown only in this answer
    apiKey: str


EventSeq: TypeAlias = int


EventKind: TypeAlias = Literal[
    "egress.refused",
    "egress.allowed",
    "egress.truncated",
    "limit.reached",
    "secret.used",
    "secret.misdirected",
    "secret.reflected",
    "mcp.installing",
    "mcp.installed",
    "mcp.starting",
    "mcp.ready",
    "mcp.failed",
    "mcp.refused",
    "mcp.exited",
    "mcp.stopped",
    "mcp.client_dropped",
    "sandbox.paused",
    "sandbox.resumed",
    "sandbox.exited",
    "sandbox.stopped",
    "sandbox.started",
    "events.dropped",
]


class EgressRefusedEvent(TypedDict):
    """a connection or DNS query of the sandbox was refused"""

    seq: EventSeq
    time: Time
    kind: Literal["egress.refused"]
    host: str
    #: 0 for a DNS query
    port: int
    reason: str
    #: where: dns, connect, request, ...
    stage: str


class EgressAllowedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["egress.allowed"]
    host: str
    port: int
    address: str


class EgressTruncatedEvent(TypedDict):
    """an intercepted upstream ended its connection in the middle of an answer (or before
    answering a request it was sent): what it sent reached the sandbox, which saw the
    connection end without a close_notify. A whole answer followed by the end of the
    connection, with or without the upstream's close_notify, raises nothing.
    """

    seq: EventSeq
    time: Time
    kind: Literal["egress.truncated"]
    host: str
    port: int
    reason: str
    #: whether the upstream ended its TLS with a close_notify
    closeNotify: bool


class LimitReachedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["limit.reached"]
    #: connections, connections_per_second, dns_tcp_connections, dns_queries_per_second, new_names_per_second, daemon_connections
    resource: str
    limit: int


class SecretUsedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["secret.used"]
    secret: str
    host: str
    method: str
    path: str


class _SecretMisdirectedEventRequired(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["secret.misdirected"]
    #: null when the placeholder is not this sandbox's
    secret: str | None
    host: str
    reason: str


class SecretMisdirectedEvent(_SecretMisdirectedEventRequired, total=False):
    """a placeholder was sent where its secret may not go; it stayed a placeholder"""

    method: str
    path: str


class McpInstallingEvent(TypedDict):
    """a catalog server's install began"""

    seq: EventSeq
    time: Time
    kind: Literal["mcp.installing"]
    server: str
    manager: Literal["npm", "pip"]
    package: str
    version: str


class McpInstalledEvent(TypedDict):
    """a catalog server's install ended well (it starts next)"""

    seq: EventSeq
    time: Time
    kind: Literal["mcp.installed"]
    server: str
    manager: Literal["npm", "pip"]
    package: str
    version: str
    #: how long the install took
    seconds: float


class McpStartingEvent(TypedDict):
    """a process of the server is being started (restarts counts those after it ended)"""

    seq: EventSeq
    time: Time
    kind: Literal["mcp.starting"]
    server: str
    restarts: int


class SecretReflectedEvent(TypedDict):
    """an answer from host held the value of a secret swapped into that connection, written
    as encoding; it was overwritten with the placeholder before the sandbox read it. Once
    per answer, secret and encoding; a security event (kept apart from routine ones).
    """

    seq: EventSeq
    time: Time
    kind: Literal["secret.reflected"]
    secret: str | None
    host: str
    #: verbatim, base64, base64url, percent, json, or a base64 form with its escapes: base64+json, base64url+percent, ...
    encoding: str


class McpReadyEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["mcp.ready"]
    server: str
    #: from its start to a fingerprinted tool list
    seconds: float


class McpFailedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["mcp.failed"]
    server: str
    error: str
    #: what it was doing when it failed
    phase: Literal["installing", "starting", "running", "stopped", "failed", "refused"]
    #: how long it had been doing it
    seconds: float


class _McpRefusedEventRequired(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["mcp.refused"]
    server: str


class McpRefusedEvent(_McpRefusedEventRequired, total=False):
    """the server's tool list is not the approved one: at start (fingerprint, error), or
    while it ran (fingerprint, approved, blocked, hidden, changes); or a client called
    a tool its tools option does not expose (tool, reason); or a client sent a method
    as a notification (no id) that MCP does not define, which was dropped (method,
    tool for a tools/call, reason; at most a few a second, all counted in /metrics)
    """

    fingerprint: str
    error: str
    approved: str
    blocked: list[str]
    hidden: list[str]
    changes: str
    tool: str
    method: str
    reason: str


class McpExitedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["mcp.exited"]
    server: str
    exitCode: int
    error: str


class McpStoppedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["mcp.stopped"]
    server: str


class McpClientDroppedEvent(TypedDict):
    """a gateway client did not read its stream while answers or notifications came:
    past 16 MiB unsent (or the sandbox's --held-per-sandbox) it is disconnected, not
    buffered without end (a 2025 client may resume with Last-Event-ID)
    """

    seq: EventSeq
    time: Time
    kind: Literal["mcp.client_dropped"]
    server: str
    why: str
    backlogBytes: int


class SandboxPausedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["sandbox.paused"]
    #: api or idle
    reason: str


class SandboxResumedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["sandbox.resumed"]
    #: api, gateway, exec, files, mcp, ...
    reason: str
    wakeMs: float


class SandboxExitedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["sandbox.exited"]
    reason: str


class SandboxStoppedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["sandbox.stopped"]
    #: api, or init process exited
    reason: str


class SandboxStartedEvent(TypedDict):
    seq: EventSeq
    time: Time
    kind: Literal["sandbox.started"]


class EventsDroppedEvent(TypedDict):
    """events beyond the rate limit were dropped before the next one kept; routine and
    security events (docs/egress.md, "Events") have limits of their own
    """

    seq: EventSeq
    time: Time
    kind: Literal["events.dropped"]
    count: int
    limitPerSecond: int
    #: the dropped events were security events
    security: bool


#: one event; `kind` tells which fields it has
Event: TypeAlias = (
    EgressRefusedEvent
    | EgressAllowedEvent
    | EgressTruncatedEvent
    | LimitReachedEvent
    | SecretUsedEvent
    | SecretMisdirectedEvent
    | McpInstallingEvent
    | McpInstalledEvent
    | McpStartingEvent
    | SecretReflectedEvent
    | McpReadyEvent
    | McpFailedEvent
    | McpRefusedEvent
    | McpExitedEvent
    | McpStoppedEvent
    | McpClientDroppedEvent
    | SandboxPausedEvent
    | SandboxResumedEvent
    | SandboxExitedEvent
    | SandboxStoppedEvent
    | SandboxStartedEvent
    | EventsDroppedEvent
)


class _JsonRpcMessageRequired(TypedDict):
    jsonrpc: Literal["2.0"]


class JsonRpcMessage(_JsonRpcMessageRequired, total=False):
    id: str | int | None
    method: str
    params: dict[str, Any]
    result: Any
    error: dict[str, Any]


JsonRpcMessages: TypeAlias = JsonRpcMessage | list[JsonRpcMessage]


class JsonRpcError(TypedDict):
    jsonrpc: Literal["2.0"]
    id: str | int | None
    error: JsonRpcErrorError


class _JsonRpcErrorErrorRequired(TypedDict):
    code: int
    message: str


class JsonRpcErrorError(_JsonRpcErrorErrorRequired, total=False):
    data: Any
