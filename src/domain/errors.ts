/**
 * Domain errors. Each carries a stable machine-readable `code` that clients may switch on; the HTTP
 * layer maps codes to statuses in one table (src/http/problem.ts), so nothing here knows about HTTP.
 */
export type DomainErrorCode =
  | 'invalid_request'
  | 'lock_held'
  | 'not_owner'
  | 'store_unavailable'
  | 'too_many_waiters'
  | 'shutting_down'
  | 'quota_exceeded';

export abstract class DomainError extends Error {
  abstract readonly code: DomainErrorCode;
}

/** The request is well-formed JSON but breaks a lock rule (for example a TTL outside the bounds). */
export class InvalidRequestError extends DomainError {
  readonly code = 'invalid_request';
  override readonly name = 'InvalidRequestError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** Someone else holds the lock. `retryAfterMs` is the time left on their lease: the earliest it can free up. */
export class LockHeldError extends DomainError {
  readonly code = 'lock_held';
  override readonly name = 'LockHeldError';
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
  ) {
    super(`lock "${key}" is held by another owner`);
  }
}

/**
 * The owner token does not hold the lock: it expired, was released, or was taken over. The caller's
 * critical section may have run unprotected; it must not assume it still holds anything.
 */
export class NotOwnerError extends DomainError {
  readonly code = 'not_owner';
  override readonly name = 'NotOwnerError';
  constructor(readonly key: string) {
    super(`this owner token does not hold lock "${key}" (it expired, was released, or was never granted)`);
  }
}

/**
 * The store could not give a certain answer (down, slow past the command timeout, or the answer came
 * back too late to be useful). Nothing was granted; the caller should retry later.
 */
export class StoreUnavailableError extends DomainError {
  readonly code = 'store_unavailable';
  override readonly name = 'StoreUnavailableError';
  constructor(
    message: string,
    readonly retryAfterMs = 1000,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The wait queue is full (for this key, for this namespace on this instance, or on this instance). Queues are capped so waiting callers
 * cannot exhaust memory; the caller should retry later or not wait.
 */
export class TooManyWaitersError extends DomainError {
  readonly code = 'too_many_waiters';
  override readonly name = 'TooManyWaitersError';
  constructor(
    readonly scope: 'key' | 'namespace' | 'instance',
    readonly retryAfterMs = 1000,
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

/** The instance is shutting down: waiting requests are answered at once instead of holding up the exit. */
export class ShuttingDownError extends DomainError {
  readonly code = 'shutting_down';
  override readonly name = 'ShuttingDownError';
  constructor() {
    super('the server is shutting down; retry on another instance');
  }
}

/** The caller went away while waiting; there is nobody to answer. */
export class WaitAbortedError extends Error {
  override readonly name = 'WaitAbortedError';
  constructor() {
    super('the caller disconnected while waiting');
  }
}

/**
 * The namespace already holds as many locks as it may hold at once. Nothing was granted; a slot frees
 * up when one of its leases is released or expires, at the latest after `retryAfterMs`.
 */
export class QuotaExceededError extends DomainError {
  readonly code = 'quota_exceeded';
  override readonly name = 'QuotaExceededError';
  constructor(
    readonly namespace: string,
    readonly maxHeldLocks: number,
    readonly retryAfterMs: number,
  ) {
    super(`namespace "${namespace}" already holds its limit of ${maxHeldLocks} locks at once`);
  }
}
