import type { components } from './openapi-types.js';

/** An application/problem+json body as the server sends it (RFC 9457 plus `code`). */
export type Problem = components['schemas']['Problem'];
/** The server's stable error codes. */
export type ProblemCode = Problem['code'];

/**
 * Every error the client throws. `code` is the server's problem code, or `unreachable` when no answer
 * came back (connection refused or reset, timeout). `retryAfterMs` is the server's hint, when it gave one.
 */
export class KeyholderError extends Error {
  override readonly name: string = 'KeyholderError';
  constructor(
    message: string,
    readonly code: ProblemCode | 'unreachable',
    readonly status: number | undefined,
    readonly problem: Problem | undefined,
    readonly retryAfterMs: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /**
   * 503, 429 and 408 answers and lost connections: the same call may succeed later. (408: the request did
   * not arrive in time, so the server did nothing with it; a starved client process sees it.)
   */
  get retryable(): boolean {
    return this.code === 'unreachable' || this.status === 503 || this.status === 429 || this.status === 408;
  }
}

/** A subclass of KeyholderError whose instances are named `Name`. */
interface ErrorClass<Name extends string = string> {
  new (...args: ConstructorParameters<typeof KeyholderError>): KeyholderError & { readonly name: Name };
  readonly prototype: KeyholderError & { readonly name: Name };
}

/** One table from problem code to error class (errorClass fills it); an unknown code still becomes a KeyholderError. */
const ERROR_CLASSES: Partial<Record<ProblemCode, ErrorClass>> = {};

/**
 * The KeyholderError subclass for the problem `codes`, so callers can catch by class (`instanceof`). Its
 * name is given, not read from the class, so it survives a bundler that renames classes.
 */
function errorClass<const Name extends string>(name: Name, codes: readonly ProblemCode[]): ErrorClass<Name> {
  const Class = class extends KeyholderError {
    override readonly name: Name = name;
  };
  Object.defineProperty(Class, 'name', { value: name });
  for (const code of codes) ERROR_CLASSES[code] = Class;
  return Class;
}

/** 409 lock_held: another owner holds the lock (or, with waitMs, it stayed held for the whole wait). */
export const LockHeldError = errorClass('LockHeldError', ['lock_held']);
/** 409 not_owner: this owner token no longer holds the lock (expired, released, or force-released). */
export const NotOwnerError = errorClass('NotOwnerError', ['not_owner']);
/**
 * 503, or no answer at all: the server or its store could not give a certain answer (store_unavailable),
 * the server is shutting down, or it is over its load budget (overloaded, refused before any store
 * work). Nothing was granted; retryable.
 */
export const UnavailableError = errorClass('UnavailableError', ['store_unavailable', 'shutting_down', 'overloaded']);
/** 429 rate_limited: too many requests for this API key. */
export const RateLimitedError = errorClass('RateLimitedError', ['rate_limited']);
/** 429 quota_exceeded: the namespace holds its limit of locks at once. */
export const QuotaExceededError = errorClass('QuotaExceededError', ['quota_exceeded']);
/** 429 too_many_waiters: the lock's (or the instance's) wait queue is full. */
export const TooManyWaitersError = errorClass('TooManyWaitersError', ['too_many_waiters']);
/** 400 invalid_request (and 413/415): `problem.errors` names each offending field. */
export const InvalidRequestError = errorClass('InvalidRequestError', ['invalid_request', 'payload_too_large', 'unsupported_media_type']);
/** 401 unauthenticated: no API key, or not a valid one. */
export const UnauthenticatedError = errorClass('UnauthenticatedError', ['unauthenticated']);
/** 403 forbidden: the API key lacks the scope the route needs. */
export const ForbiddenError = errorClass('ForbiddenError', ['forbidden']);
/** 404 not_found: for a force release, nobody held the lock. */
export const NotFoundError = errorClass('NotFoundError', ['not_found']);

// The instance types under the classes' names, as `class` declarations would give them.
export type LockHeldError = InstanceType<typeof LockHeldError>;
export type NotOwnerError = InstanceType<typeof NotOwnerError>;
export type UnavailableError = InstanceType<typeof UnavailableError>;
export type RateLimitedError = InstanceType<typeof RateLimitedError>;
export type QuotaExceededError = InstanceType<typeof QuotaExceededError>;
export type TooManyWaitersError = InstanceType<typeof TooManyWaitersError>;
export type InvalidRequestError = InstanceType<typeof InvalidRequestError>;
export type UnauthenticatedError = InstanceType<typeof UnauthenticatedError>;
export type ForbiddenError = InstanceType<typeof ForbiddenError>;
export type NotFoundError = InstanceType<typeof NotFoundError>;

/**
 * The reason `lease.signal` aborts: the lease can no longer be trusted. `cause` is the NotOwnerError
 * when the server refused a renewal; absent when the safe deadline passed without a confirmed renewal.
 */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly key: string,
    readonly reason: 'not_owner' | 'deadline' | 'renew_failed',
    options?: { cause?: unknown },
  ) {
    super(
      reason === 'deadline'
        ? `lease on "${key}" passed its safe deadline without a confirmed renewal`
        : reason === 'not_owner'
          ? `lease on "${key}" was lost: the server refused the renewal (not_owner)`
          : `lease on "${key}" could not be renewed`,
      options,
    );
  }
}

function isProblem(body: unknown): body is Problem {
  return typeof body === 'object' && body !== null && typeof (body as { code?: unknown }).code === 'string';
}

/** Retry-After in whole seconds (the only form the server sends); an HTTP date is read too. */
export function parseRetryAfter(header: string | null): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** Turns a non-2xx answer into the error class of its problem `code`. */
export function errorFromResponse(response: Response, body: unknown): KeyholderError {
  const headerMs = parseRetryAfter(response.headers.get('retry-after'));
  if (!isProblem(body)) {
    const code: ProblemCode = response.status >= 500 ? 'store_unavailable' : 'internal_error';
    const Class = response.status === 503 ? UnavailableError : KeyholderError;
    return new Class(`HTTP ${response.status} without a problem body`, code, response.status, undefined, headerMs);
  }
  // The body's milliseconds are more precise than the header's whole seconds; either is a lower bound.
  const retryAfterMs = typeof body.retryAfterMs === 'number' ? Math.max(body.retryAfterMs, 0) : headerMs;
  const Class = ERROR_CLASSES[body.code] ?? KeyholderError;
  return new Class(body.detail ?? body.title ?? body.code, body.code, response.status, body, retryAfterMs);
}

/** No answer: connection refused or reset, DNS, or the per-request timeout. */
export function unreachable(url: string, cause: unknown): UnavailableError {
  const why = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
  return new UnavailableError(`no answer from ${url}: ${why}`, 'unreachable', undefined, undefined, undefined, { cause });
}
