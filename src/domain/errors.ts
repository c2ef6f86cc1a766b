import type { ErrorCode } from './error-codes.js';

/**
 * Domain errors. Each carries a stable machine-readable `code` that clients may switch on and, where a
 * retry can succeed, `retryAfterMs`. Each code's status, title and metrics outcome are in the one
 * table of codes (error-codes.ts), so nothing here knows about HTTP.
 */

/** One offending request field and what is wrong with it. */
export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export abstract class DomainError extends Error {
  abstract readonly code: ErrorCode;
  /** When set, the earliest a retry may succeed, in ms. */
  readonly retryAfterMs?: number;
  /** For invalid_request: each offending field. */
  readonly fields?: readonly FieldError[];
  /** For a waitMs out of bounds: the longest this instance takes, so a caller that chose its wait can ask within it. */
  readonly maxWaitMs?: number;
  /**
   * The failed call left its lease live on purpose (keptLease): an idempotent acquire whose answer could
   * not be delivered keeps it for a retry with its key. Its quota slot keeps counting (quota.ts).
   */
  leaseKept = false;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    // Each error is named after its class (LockHeldError, ...), as logs and stack traces show it.
    this.name = new.target.name;
  }
}

/** Marks `error` as leaving its lease live on purpose (DomainError.leaseKept). */
export function keptLease<E extends DomainError>(error: E): E {
  error.leaseKept = true;
  return error;
}

/** A refusal of one key that a retry may get past: `retryAfterMs` is the earliest it can. */
abstract class KeyRefusal extends DomainError {
  constructor(
    readonly key: string,
    override readonly retryAfterMs: number,
    message: string,
  ) {
    super(message);
  }
}

/** Whether `err` is one of the errors above (and so has a row in the error table). */
export function isDomainError(err: unknown): err is DomainError {
  return err instanceof DomainError;
}

/** The request is well-formed JSON but breaks a lock rule (for example a TTL outside the bounds). */
export class InvalidRequestError extends DomainError {
  readonly code = 'invalid_request';
  override readonly fields: readonly FieldError[];
  override readonly maxWaitMs: number | undefined;
  constructor(
    readonly field: string,
    message: string,
    bound: { readonly maxWaitMs?: number } = {},
  ) {
    super(`${field}: ${message}`);
    this.fields = [{ field, message: this.message }];
    this.maxWaitMs = bound.maxWaitMs;
  }
}

/** Someone else holds the lock. `retryAfterMs` is the time left on their lease: the earliest it can free up. */
export class LockHeldError extends KeyRefusal {
  readonly code = 'lock_held';
  constructor(key: string, retryAfterMs: number) {
    super(key, retryAfterMs, `lock "${key}" is held by another owner`);
  }
}

/**
 * The owner token does not hold the lock: it expired, was released, or was taken over. The caller's
 * critical section may have run unprotected; it must not assume it still holds anything.
 */
export class NotOwnerError extends DomainError {
  readonly code = 'not_owner';
  constructor(readonly key: string) {
    super(`this owner token does not hold lock "${key}" (it expired, was released, or was never granted)`);
  }
}

/**
 * The store could not give a certain answer (down, slow past the command timeout, or the answer came
 * back too late to be useful). Nothing was granted; the caller should retry later. 1 s by default:
 * about one reconnect attempt of the Redis client.
 */
export class StoreUnavailableError extends DomainError {
  readonly code = 'store_unavailable';
  /**
   * The call was sent and its answer is missing (a timeout, a connection lost after the write): the store
   * may have done what it was asked. A lease it may have granted keeps its quota slot (quota.ts).
   */
  readonly outcomeUnknown: boolean;
  constructor(
    message: string,
    override readonly retryAfterMs = 1000,
    options?: { cause?: unknown; outcomeUnknown?: boolean },
  ) {
    super(message, options);
    this.outcomeUnknown = options?.outcomeUnknown === true;
  }
}

/**
 * The wait queue is full (for this key, for this namespace on this instance, or on this instance). Queues are capped so waiting callers
 * cannot exhaust memory; the caller should retry later or not wait.
 */
export class TooManyWaitersError extends DomainError {
  readonly code = 'too_many_waiters';
  constructor(
    readonly scope: 'key' | 'namespace' | 'instance',
    override readonly retryAfterMs = 1000,
  ) {
    super(
      scope === 'key'
        ? 'too many callers are already waiting for this lock'
        : scope === 'namespace'
          ? 'this namespace has too many callers waiting on this instance'
          : 'this instance has too many waiting callers',
    );
  }
}

/**
 * This instance is over its load budget (event-loop delay, requests in flight, open waits or open
 * connections) and refused the request before any store work: nothing was read or changed. Distinct from
 * store_unavailable, which is about the store, so operators are not sent to a healthy Redis. 1 s: a
 * few of the delay samples that decide it; another instance may have room sooner.
 */
export class OverloadedError extends DomainError {
  readonly code = 'overloaded';
  constructor(
    readonly budget: 'event_loop_delay' | 'requests_in_flight' | 'open_waits' | 'connections' | 'store_queue',
    override readonly retryAfterMs = 1000,
    message = `this instance is over its ${budget.replace(/_/g, ' ')} budget and refused before any store work; retry after Retry-After, or on another instance`,
  ) {
    super(message);
  }
}

/**
 * The instance is shutting down: waiting requests are answered at once instead of holding up the exit.
 * 1 s: enough for a load balancer to have taken the instance out; the retry goes to another one.
 */
export class ShuttingDownError extends DomainError {
  readonly code = 'shutting_down';
  override readonly retryAfterMs = 1000;
  constructor() {
    super('the server is shutting down; retry on another instance');
  }
}

/**
 * An acquire's Idempotency-Key names a live lease that was asked for with other fields (ttlMs, holder,
 * lockDelayMs). Answering with that lease would hand the caller a grant it did not ask for (a lease that
 * ends long before the ttlMs it sent); taking a new one would break the key's promise. Nothing was
 * changed; a retry helps only with the original request or a new key.
 */
export class IdempotencyKeyReusedError extends DomainError {
  readonly code = 'idempotency_key_reused';
  constructor() {
    super(
      'this Idempotency-Key was sent with another acquire of this lock (other ttlMs, holder or lockDelayMs); send the same request or a new key',
    );
  }
}

/**
 * A force release or a release request named the lease it meant (by fencing token), and that lease is no longer
 * live while another one is: the holder changed since the operator looked. Nothing was changed; the
 * operator looks again (`current` is a lease live when the store answered).
 */
export class HolderChangedError extends DomainError {
  readonly code = 'holder_changed';
  constructor(
    readonly key: string,
    readonly fencingToken: number,
    readonly current: { readonly holder: string | null; readonly fencingToken: number },
    /** What did not happen (a force release: nothing was released; a release request: nothing was asked). */
    unchanged = 'nothing was released',
  ) {
    super(
      `"${key}" is no longer held by the lease with fencing token ${fencingToken} (now: fencing token ${current.fencingToken}` +
        `${current.holder === null ? '' : `, holder "${current.holder}"`}); ${unchanged}`,
    );
  }
}

/** The caller went away while waiting; there is nobody to answer. */
export class WaitAbortedError extends DomainError {
  readonly code = 'wait_aborted';
  constructor() {
    super('the caller disconnected while waiting');
  }
}

/**
 * A waiting call's API key no longer allows it: a reload of the keys removed the key, or took away the
 * scope or the namespace the call was let in with, while it waited. Answered as the call would be if it
 * were sent now (401 or 403); whatever the wait was for is not granted.
 */
export class AccessLostError extends DomainError {
  constructor(
    readonly code: 'unauthenticated' | 'forbidden',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The namespace already holds as many locks as it may hold at once. Nothing was granted; a slot frees
 * up when one of its leases is released or expires, at the latest after `retryAfterMs`.
 */
export class QuotaExceededError extends DomainError {
  readonly code = 'quota_exceeded';
  constructor(
    readonly namespace: string,
    readonly maxHeldLocks: number,
    override readonly retryAfterMs: number,
  ) {
    super(`namespace "${namespace}" already holds its limit of ${maxHeldLocks} locks at once`);
  }
}

/** One API key sent more requests in the window than it may; `retryAfterMs` is when the window frees up. */
export class RateLimitedError extends DomainError {
  readonly code = 'rate_limited';
  /** Read by @fastify/rate-limit, which sends the status of the error it is given. */
  readonly statusCode = 429;
  constructor(override readonly retryAfterMs: number) {
    super(`too many requests for this API key; retry in ${Math.max(1, Math.ceil(retryAfterMs / 1000))} s`);
  }
}

/**
 * Every permit of the semaphore is held by a live lease (or others are queued first). `retryAfterMs` is
 * the time left on the earliest-ending permit: the earliest one can free up.
 */
export class SemaphoreFullError extends KeyRefusal {
  readonly code = 'semaphore_full';
  constructor(key: string, retryAfterMs: number) {
    super(key, retryAfterMs, `semaphore "${key}" has no free permit`);
  }
}

/**
 * The caller's `limit` is not the one the semaphore's live permits were granted under. Two limits for one
 * semaphore would make "at most limit holders" mean nothing, so the caller is refused until every live
 * permit has ended (`retryAfterMs`: the latest of them, as far as the store knows the earliest).
 */
export class LimitMismatchError extends KeyRefusal {
  readonly code = 'limit_mismatch';
  constructor(
    key: string,
    readonly requestedLimit: number,
    readonly liveLimit: number,
    retryAfterMs: number,
  ) {
    super(key, retryAfterMs, `semaphore "${key}" is held with limit ${liveLimit}; this request asked for limit ${requestedLimit}`);
  }
}

/**
 * The read/write lock is held in a mode that excludes the caller (a writer, or readers when the caller
 * writes), or a writer is queued ahead. `retryAfterMs`: time left on the earliest-ending lease.
 */
export class RwLockHeldError extends KeyRefusal {
  readonly code = 'rwlock_held';
  constructor(
    key: string,
    readonly mode: 'read' | 'write',
    retryAfterMs: number,
  ) {
    super(key, retryAfterMs, `read/write lock "${key}" cannot be taken for ${mode} now`);
  }
}

/**
 * A refusal of one key in a primitive's own words, for a primitive that needs no class of its own: it
 * refuses with its own code (a row of error-codes.ts) and message, so a new capacity and weight primitive
 * adds no class here.
 */
export class PrimitiveRefusal extends KeyRefusal {
  constructor(
    readonly code: ErrorCode,
    key: string,
    retryAfterMs: number,
    message: string,
  ) {
    super(key, retryAfterMs, message);
  }
}
