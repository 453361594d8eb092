/**
 * withruntime: the client of runtimed's HTTP API, with Runtime Cloud's names.
 *
 * ```ts
 * import { Sandbox } from 'withruntime';
 * await using sbx = await Sandbox.create();
 * console.log((await sbx.exec('echo hello')).stdout);
 * ```
 */
export {
  Runtime, Sandboxes, Sandbox, Files, Network, SandboxMcp, McpCatalog, Secrets, Accounts, Mcp, Catalog,
} from './client.js';
export type { RuntimeOptions, RuntimeOptions as ClientOptions, ExecOptions, ReadyOptions, ListSandboxes } from './client.js';
export { Page } from './page.js';
export { Transport } from './transport.js';
export type { RequestOptions, CallOptions, FetchLike, Call } from './transport.js';
export {
  RuntimeError, AuthenticationError, PermissionDeniedError, NotFoundError, ConflictError, InvalidRequestError,
  RateLimitError, ServiceUnavailableError, AccountBlockedError, ConnectionError, TimeoutError, CommandError,
  McpServerError, errorLine, BadRequestError, UnauthorizedError, ForbiddenError, LimitError, UnavailableError,
} from './errors.js';
export type { RuntimeErrorInit, CommandOutcome } from './errors.js';
export type * from './types.js';
export { VERSION } from './version.js';
