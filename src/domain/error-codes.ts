/**
 * Every error code keyholder answers with, listed once. Everything else is derived from this table or
 * tested against it: the HTTP answers (src/http/problem.ts), the OpenAPI enum, the TypeScript client's
 * types and docs/api.md's table of errors (`npm run openapi`), the metrics, and the Python and Go
 * clients' maps (test/ops/error-codes.test.ts: they may map a code to a class of their own, and must not
 * map a code that is not here). Adding a code is a row here, then `npm run openapi`.
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
  /**
   * What the code means to a caller, and what to do: docs/api.md's table of errors is generated from it
   * (`npm run openapi`). Every sent code has one; markdown, relative to docs/.
   */
  readonly meaning?: string;
}

export const ERROR_CODES = Object.freeze({
  invalid_request: {
    status: 400,
    title: 'Invalid request',
    retryable: false,
    outcome: 'invalid',
    meaning: 'a field is missing or malformed; `errors[]` names each field',
  },
  not_found: {
    status: 404,
    title: 'Not found',
    retryable: false,
    outcome: 'error',
    meaning: 'no such route',
  },
  method_not_allowed: {
    status: 405,
    title: 'Method not allowed',
    retryable: false,
    outcome: 'error',
    meaning: 'the route exists, but not with this method; `Allow` lists the ones it takes',
  },
  // The request did not arrive in time, so the server did nothing with it: a starved client sees it.
  request_timeout: {
    status: 408,
    title: 'Request timeout',
    retryable: true,
    outcome: 'error',
    meaning: 'the headers or the body did not arrive in time; the connection closes',
  },
  payload_too_large: {
    status: 413,
    title: 'Request body too large',
    retryable: false,
    outcome: 'error',
    meaning: 'the body is over 10 KiB, twice the largest valid one (refused before `100 Continue` when the client asks)',
  },
  headers_too_large: {
    status: 431,
    title: 'Request header fields too large',
    retryable: false,
    outcome: 'error',
    meaning: 'the request line and headers are over 16 KiB',
  },
  expectation_failed: {
    status: 417,
    title: 'Expectation failed',
    retryable: false,
    outcome: 'error',
    meaning: 'an `Expect` other than `100-continue`',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    retryable: false,
    outcome: 'error',
    meaning: 'the body is not `application/json`',
  },
  // Not retried by the clients: the caller decides (waitMs, or its own loop after retryAfterMs).
  lock_held: {
    status: 409,
    title: 'Lock is held',
    retryable: false,
    outcome: 'held',
    meaning:
      'someone else holds the lock (or others are queued for it); retry after `Retry-After` seconds (`retryAfterMs` is exact), or wait with `waitMs`',
  },
  too_many_waiters: {
    status: 429,
    title: 'Too many waiting callers',
    retryable: true,
    outcome: 'too_many_waiters',
    meaning: 'the wait queue of this lock, of this namespace on this instance, or of this instance is full; retry after `Retry-After`',
  },
  not_owner: {
    status: 409,
    title: 'Not the lock owner',
    retryable: false,
    outcome: 'not_owner',
    meaning: 'this owner token holds no live lease on the key (expired, released, never granted)',
  },
  unauthenticated: {
    status: 401,
    title: 'Authentication required',
    retryable: false,
    outcome: 'error',
    meaning:
      'no API key, or not a valid one; `WWW-Authenticate: Bearer realm="keyholder"` (plus `error="invalid_token"` when a key was sent). The answer is the same for every invalid key: it never says whether a key or id exists',
  },
  forbidden: {
    status: 403,
    title: 'Forbidden',
    retryable: false,
    outcome: 'error',
    meaning: "the key lacks the route's scope ([Security](security.md#scopes-and-namespaces))",
  },
  rate_limited: {
    status: 429,
    title: 'Too many requests',
    retryable: true,
    outcome: 'error',
    meaning: 'too many requests for this key; retry after `Retry-After`',
  },
  quota_exceeded: {
    status: 429,
    title: 'Lock quota exceeded',
    retryable: true,
    outcome: 'quota_exceeded',
    meaning: 'the namespace holds its cap of locks; `Retry-After` = when its earliest slot ends',
  },
  store_unavailable: {
    status: 503,
    title: 'Lock store unavailable',
    retryable: true,
    outcome: 'error',
    meaning:
      'the store did not give a certain answer (down, slower than the command timeout, or the answer arrived too late to trust); **nothing was granted**; retry after `Retry-After`',
  },
  // Not store_unavailable: this instance refused before any store work, and the store may be fine.
  overloaded: {
    status: 503,
    title: 'Server overloaded',
    retryable: true,
    outcome: 'error',
    meaning:
      'this instance is over its load budget (event-loop delay, requests in flight, or callers waiting) and refused the request at once, **before any store work**: nothing was read or changed, and the store may be fine; retry after `Retry-After` (1 s), or on another instance. Renewals and releases are refused only at four times the requests-in-flight budget, never for delay or waits ([Limits](limits.md#load-budget-overload_))',
  },
  shutting_down: {
    status: 503,
    title: 'Server is shutting down',
    retryable: true,
    outcome: 'aborted',
    meaning: 'the instance is shutting down (also the answer to callers still waiting then); retry on another instance',
  },
  // Only /readyz answers it: the instance listens (its /livez answers) but has not run its warm-up yet.
  warming_up: {
    status: 503,
    title: 'Server is warming up',
    retryable: true,
    outcome: 'error',
    meaning:
      'answered by `/readyz` only: the instance has just started and is still running its warm-up (`WARM_UP_*`); route elsewhere until it answers 200',
  },
  internal_error: {
    status: 500,
    title: 'Internal server error',
    retryable: false,
    outcome: 'error',
    meaning: 'a bug; details are logged, never sent',
  },
  semaphore_full: {
    status: 409,
    title: 'No free permit',
    retryable: false,
    outcome: 'held',
    meaning: 'every permit of the semaphore is held (or others are queued); `Retry-After` = when the first permit ends',
  },
  // 409, not 400: the same request succeeds once the live permits (granted under another limit) end.
  limit_mismatch: {
    status: 409,
    title: 'Semaphore limit differs',
    retryable: false,
    outcome: 'limit_mismatch',
    meaning: "the semaphore's live permits were granted with another `limit`; `Retry-After` = when the last of them ends",
  },
  rwlock_held: {
    status: 409,
    title: 'Read/write lock is held',
    retryable: false,
    outcome: 'held',
    meaning:
      'the read/write lock is held in a mode that excludes this one, or a writer is queued ahead; `Retry-After` = when the first lease ends',
  },
  // 422, as the IETF httpapi Idempotency-Key draft answers a key reused with another payload: the
  // request is well-formed but cannot be processed as the key promised.
  idempotency_key_reused: {
    status: 422,
    title: 'Idempotency-Key reused',
    retryable: false,
    outcome: 'invalid',
    meaning:
      "the acquire's `Idempotency-Key` was sent before with another `ttlMs`, `holder` or `lockDelayMs`, and the lease it granted is live; nothing was changed; send the original body or a new key",
  },
  // 409: a conditional force release found another lease than the one it named; nothing changed.
  holder_changed: {
    status: 409,
    title: 'The holder changed',
    retryable: false,
    outcome: 'error',
    meaning:
      'a force release or a release request named its lease (`fencingToken`) and another lease holds the key now: the holder changed since it was read; nothing was released or asked; look again',
  },
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
