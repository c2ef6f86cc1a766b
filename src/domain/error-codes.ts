/**
 * Every error code keyholder answers with, listed once. Everything else is derived from this table or
 * tested against it: the HTTP answers (src/http/problem.ts), the OpenAPI enum and the TypeScript
 * client's types (`npm run openapi`), the metrics, docs/api.md's table, and the Python and Go clients'
 * maps (test/ops/error-codes.test.ts). Adding a code is a row here, then `npm run openapi`; the tests
 * then name every list that must say how it handles the new code.
 *
 * The status is part of each code's public contract (the README and both clients promise it), so it is
 * written here as a number; nothing here depends on HTTP.
 */

/**
 * How a lock operation that ended in an error is counted in keyholder_lock_operations_total. The
 * labels predate this table and dashboards use them, so they are not the codes themselves.
 */
export type FailureOutcome =
  'held' | 'not_owner' | 'invalid' | 'too_many_waiters' | 'aborted' | 'quota_exceeded' | 'limit_mismatch' | 'error';

export interface ErrorCodeRow {
  readonly status: number;
  /** The problem's `title`: fixed per code (the `detail` says what happened this time). */
  readonly title: string;
  /** The same call may succeed later: the clients retry it, with backoff, within their deadline. */
  readonly retryable: boolean;
  /** The metrics outcome of a lock operation that failed with this code. */
  readonly outcome: FailureOutcome;
  /** Never sent under its own name: answered as this code (which the API documents) instead. */
  readonly sentAs?: string;
}

export const ERROR_CODES = Object.freeze({
  invalid_request: { status: 400, title: 'Invalid request', retryable: false, outcome: 'invalid' },
  not_found: { status: 404, title: 'Not found', retryable: false, outcome: 'error' },
  method_not_allowed: { status: 405, title: 'Method not allowed', retryable: false, outcome: 'error' },
  // The request did not arrive in time, so the server did nothing with it: a starved client sees it.
  request_timeout: { status: 408, title: 'Request timeout', retryable: true, outcome: 'error' },
  payload_too_large: { status: 413, title: 'Request body too large', retryable: false, outcome: 'error' },
  headers_too_large: { status: 431, title: 'Request header fields too large', retryable: false, outcome: 'error' },
  expectation_failed: { status: 417, title: 'Expectation failed', retryable: false, outcome: 'error' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type', retryable: false, outcome: 'error' },
  // Not retried by the clients: the caller decides (waitMs, or its own loop after retryAfterMs).
  lock_held: { status: 409, title: 'Lock is held', retryable: false, outcome: 'held' },
  too_many_waiters: { status: 429, title: 'Too many waiting callers', retryable: true, outcome: 'too_many_waiters' },
  not_owner: { status: 409, title: 'Not the lock owner', retryable: false, outcome: 'not_owner' },
  unauthenticated: { status: 401, title: 'Authentication required', retryable: false, outcome: 'error' },
  forbidden: { status: 403, title: 'Forbidden', retryable: false, outcome: 'error' },
  rate_limited: { status: 429, title: 'Too many requests', retryable: true, outcome: 'error' },
  quota_exceeded: { status: 429, title: 'Lock quota exceeded', retryable: true, outcome: 'quota_exceeded' },
  store_unavailable: { status: 503, title: 'Lock store unavailable', retryable: true, outcome: 'error' },
  // Not store_unavailable: this instance refused before any store work, and the store may be fine.
  overloaded: { status: 503, title: 'Server overloaded', retryable: true, outcome: 'error' },
  shutting_down: { status: 503, title: 'Server is shutting down', retryable: true, outcome: 'aborted' },
  internal_error: { status: 500, title: 'Internal server error', retryable: false, outcome: 'error' },
  semaphore_full: { status: 409, title: 'No free permit', retryable: false, outcome: 'held' },
  // 409, not 400: the same request succeeds once the live permits (granted under another limit) end.
  limit_mismatch: { status: 409, title: 'Semaphore limit differs', retryable: false, outcome: 'limit_mismatch' },
  rwlock_held: { status: 409, title: 'Read/write lock is held', retryable: false, outcome: 'held' },
  // 422, as the IETF httpapi Idempotency-Key draft answers a key reused with another payload: the
  // request is well-formed but cannot be processed as the key promised.
  idempotency_key_reused: { status: 422, title: 'Idempotency-Key reused', retryable: false, outcome: 'invalid' },
  // 409: a conditional force release found another lease than the one it named; nothing changed.
  holder_changed: { status: 409, title: 'The holder changed', retryable: false, outcome: 'error' },
  // The caller disconnected while waiting: nobody reads this answer. 409, as for a wait that ran out.
  wait_aborted: { status: 409, title: 'Lock is held', retryable: false, outcome: 'aborted', sentAs: 'lock_held' },
} as const satisfies Record<string, ErrorCodeRow>);

/** Every code an error can carry, sent or not. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes the API answers with (the OpenAPI enum). Clients switch on these, never on `title`. */
export type ProblemCode = { [C in ErrorCode]: (typeof ERROR_CODES)[C] extends { readonly sentAs: string } ? never : C }[ErrorCode];

function isSent(code: ErrorCode): code is ProblemCode {
  return !('sentAs' in ERROR_CODES[code]);
}

/** Every ProblemCode, in the table's order. */
export const PROBLEM_CODES = Object.freeze((Object.keys(ERROR_CODES) as ErrorCode[]).filter(isSent)) as unknown as readonly [
  ProblemCode,
  ...ProblemCode[],
];

/** The code a problem with `code` is sent as. */
export function sentCodeOf(code: ErrorCode): ProblemCode {
  const row: ErrorCodeRow = ERROR_CODES[code];
  return (row.sentAs ?? code) as ProblemCode;
}
