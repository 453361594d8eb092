/**
 * withruntime: the client of runtimed's HTTP API.
 *
 * ```ts
 * import { Runtime, Sandbox } from 'withruntime';
 * await using sbx = await Sandbox.create();
 * const { stdout } = await sbx.exec(['echo', 'hi'], { check: true });
 * ```
 */
export { Runtime, Sandboxes, Sandbox, Files, Network, Mcp, Catalog, Secrets, Accounts } from './client.js';
export type { RuntimeOptions, ExecOptions, ReadyOptions } from './client.js';
export type { CallOptions, FetchLike } from './transport.js';
export {
  RuntimeError, BadRequestError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError, LimitError,
  UnavailableError, ConnectionError, TimeoutError, CommandError, McpServerError, errorLine,
} from './errors.js';
export type { RuntimeErrorInit } from './errors.js';
export type * from './types.js';
export { VERSION } from './version.js';
