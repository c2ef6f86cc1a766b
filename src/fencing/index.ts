/**
 * Fencing at the protected resource: the check that turns a lease into a safety guarantee. Copy the
 * module, or import it (`keyholder/fencing` once built): SQL (./sql.ts) and HTTP (./http.ts).
 */
export {
  FENCE_COLUMN_TYPE,
  type FencedUpdate,
  type FencedWriteResult,
  type Queryable,
  fencedUpdate,
  fencedUpdateSql,
  quoteIdent,
} from './sql.js';
export {
  FENCING_TOKEN_HEADER,
  type FenceCommit,
  FenceRegister,
  type FenceVerdict,
  type FencingMiddlewareOptions,
  fencedWrite,
  fencingMiddleware,
} from './http.js';
