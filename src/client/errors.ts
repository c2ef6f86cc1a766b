import type { components } from './openapi-types.js';

/** The statuses a call is retried on (see KeyholderError.retryable). */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/** An application/problem+json body as the server sends it (RFC 9457 plus `code`). */
export type Problem = components['schemas']['Problem'];
/** The server's stable error codes. */
export type ProblemCode = Problem['code'];

/**
 * Codes the client gives errors that no keyholder problem body carried: `unreachable` (no answer),
 * `tls_failed` (the server's certificate was not trusted), `redirected` (a 3xx, never followed) and
 * `invalid_response` (an answer that is not what keyholder sends).
 */
export type ClientErrorCode = 'unreachable' | 'tls_failed' | 'redirected' | 'invalid_response';

/**
 * Every error the client throws. `code` is the server's problem code, or one of ClientErrorCode when the
 * client itself refused or got no answer. `retryAfterMs` is the server's hint, when it gave one.
 */
export class KeyholderError extends Error {
  override readonly name: string = 'KeyholderError';
  constructor(
    message: string,
    readonly code: ProblemCode | ClientErrorCode,
    readonly status: number | undefined,
    readonly problem: Problem | undefined,
    readonly retryAfterMs: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /**
   * 503, 429 and 408 answers, lost connections, and a load balancer's 502 and 504: the same call may
   * succeed later. (408: the request did not arrive in time, so the server did nothing with it; a starved
   * client process sees it. 502/504: the balancer's own answer, which says no more about the call than a
   * lost connection does, e.g. while an instance restarts.)
   */
  get retryable(): boolean {
    return this.code === 'unreachable' || (this.status !== undefined && RETRIED_STATUSES.has(this.status));
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
/**
 * 400 invalid_request (and 413/415): `problem.errors` names each offending field; 422
 * idempotency_key_reused: the Idempotency-Key was sent before with another request.
 */
export const InvalidRequestError = errorClass('InvalidRequestError', [
  'invalid_request',
  'payload_too_large',
  'unsupported_media_type',
  'idempotency_key_reused',
]);
/** 401 unauthenticated: no API key, or not a valid one. */
export const UnauthenticatedError = errorClass('UnauthenticatedError', ['unauthenticated']);
/** 403 forbidden: the API key lacks the scope the route needs. */
export const ForbiddenError = errorClass('ForbiddenError', ['forbidden']);
/** 404 not_found: for a force release, nobody held the lock. */
export const NotFoundError = errorClass('NotFoundError', ['not_found']);
/** 409 holder_changed: a force release named a lease (fencingToken) that another one has replaced; nothing changed. */
export const HolderChangedError = errorClass('HolderChangedError', ['holder_changed']);

/**
 * The server's TLS certificate was refused (untrusted, self-signed, expired, wrong host) or the handshake
 * failed. Not retried: trying again meets the same certificate, and a caller who is being intercepted must
 * hear it, not see "unreachable". Trust a private CA with the client's `dispatcher` option.
 */
export class TlsError extends KeyholderError {
  override readonly name = 'TlsError';
}

/**
 * The server answered 3xx. Redirects are never followed: following one would send a renew's or release's
 * owner token (the body, on a 307 or 308) to whichever host the Location names, perhaps over plain http,
 * and take that host's answer for a grant. `location` is where it pointed.
 */
export class RedirectError extends KeyholderError {
  override readonly name = 'RedirectError';
  constructor(
    message: string,
    status: number,
    readonly location: string | null,
  ) {
    super(message, 'redirected', status, undefined, undefined);
  }
}

/**
 * A success status whose body is not what keyholder answers (or another 2xx than 200): nothing is taken
 * from it. Not retried, since whatever answered is not the keyholder API; if it was an acquire that the
 * server did grant, that lease ends by its TTL.
 */
export class InvalidResponseError extends KeyholderError {
  override readonly name = 'InvalidResponseError';
}

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
export type HolderChangedError = InstanceType<typeof HolderChangedError>;

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

/** Statuses a proxy or load balancer answers with when the service behind it could not answer. */
const GATEWAY_STATUSES = new Set([502, 503, 504]);

/** Turns a non-2xx answer into the error class of its problem `code`. */
export function errorFromResponse(response: Response, body: unknown): KeyholderError {
  const headerMs = parseRetryAfter(response.headers.get('retry-after'));
  if (!isProblem(body)) {
    const code: ProblemCode = response.status >= 500 ? 'store_unavailable' : 'internal_error';
    // A proxy's or balancer's page: for 502, 503 and 504 the service behind it could not answer.
    const Class = GATEWAY_STATUSES.has(response.status) ? UnavailableError : KeyholderError;
    return new Class(`HTTP ${response.status} without a problem body`, code, response.status, undefined, headerMs);
  }
  // The body's milliseconds are more precise than the header's whole seconds; either is a lower bound.
  const retryAfterMs = typeof body.retryAfterMs === 'number' ? Math.max(body.retryAfterMs, 0) : headerMs;
  const Class = ERROR_CLASSES[body.code] ?? KeyholderError;
  return new Class(body.detail ?? body.title ?? body.code, body.code, response.status, body, retryAfterMs);
}

/**
 * OpenSSL's certificate verification results as Node names them (`err.code`, see node:tls), less the
 * ones that are not about the certificate. Handshake failures come as ERR_TLS_* and ERR_SSL_*.
 */
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CRL_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
]);

/** The first error in `err`'s cause chain whose code says TLS failed (fetch wraps it: TypeError → cause). */
function tlsFailure(err: unknown): (Error & { code: string }) | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (CERTIFICATE_CODES.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) return e as Error & { code: string };
  }
  return undefined;
}

/**
 * A request that got no answer: a TlsError when TLS failed (not retried), otherwise an UnavailableError
 * `unreachable` (connection refused or reset, DNS, or the per-request timeout; retried).
 */
export function noAnswer(url: string, cause: unknown): KeyholderError {
  const tls = tlsFailure(cause);
  if (tls)
    return new TlsError(`TLS with ${url} failed: ${tls.code}: ${tls.message}`, 'tls_failed', undefined, undefined, undefined, { cause });
  const why = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
  return new UnavailableError(`no answer from ${url}: ${why}`, 'unreachable', undefined, undefined, undefined, { cause });
}
