import { performance } from 'node:perf_hooks';
import type { LockLimits } from '../config.js';
import type { LockState, LockStore } from '../store/store.js';
import { randomBase64url } from './random.js';
import {
  InvalidRequestError,
  LockHeldError,
  NotOwnerError,
  ShuttingDownError,
  StoreUnavailableError,
  TooManyWaitersError,
  WaitAbortedError,
} from './errors.js';

export type Operation = 'acquire' | 'renew' | 'release' | 'inspect';
export type Outcome =
  | 'acquired'
  | 'held'
  | 'renewed'
  | 'released'
  | 'not_owner'
  | 'inspected'
  | 'invalid'
  | 'too_many_waiters'
  | 'aborted'
  | 'error';

/**
 * What the lock service reports as it works, so metrics (or anything else) can listen without the
 * lock rules knowing about them. Every method is optional.
 */
export interface LockObserver {
  operation?(op: Operation, outcome: Outcome, durationSeconds: number): void;
  /** A renew or release arrived after its lease was gone: the caller's critical section ran unprotected. */
  lostLease?(op: 'renew' | 'release'): void;
  /** A caller that asked to wait was answered after `seconds` in the queue (granted or not). */
  waited?(seconds: number, granted: boolean): void;
}

export interface AcquireOptions {
  readonly holder?: string | null;
  /** Wait up to this long in the key's queue when the lock is held; 0 = answer at once. */
  readonly waitMs?: number;
  /** Aborted when the caller goes away; a wait ends and any lease handed to it is given back. */
  readonly signal?: AbortSignal;
}

export interface LockGrant {
  readonly key: string;
  readonly ownerToken: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
}

export interface LockRenewal {
  readonly key: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
}

/**
 * 16 bytes = 128 bits from the OS CSPRNG: unguessable, so only the caller that was granted a lease can
 * renew or release it. base64url keeps it URL- and JSON-safe (22 characters).
 */
const OWNER_TOKEN_BYTES = 16;

export function newOwnerToken(): string {
  return randomBase64url(OWNER_TOKEN_BYTES);
}

/**
 * A reply that took longer than this fraction of the lease to come back (a paused process, a stalled
 * network) may describe a lease that is already gone or nearly so; it is not handed out as a success.
 */
const LATE_REPLY_FRACTION = 0.5;

/**
 * The lock rules: TTL bounds, owner tokens, and the guarantee that a grant or renewal is only reported
 * when it is certain and still fresh. It talks to a LockStore and knows nothing of HTTP or Redis.
 */
export class LockService {
  /** Aborted at shutdown: every wait ends at once instead of holding up the exit. */
  private readonly closing = new AbortController();
  private waiting = 0;

  constructor(
    private readonly store: LockStore,
    private readonly limits: LockLimits,
    private readonly observer: LockObserver = {},
  ) {}

  /** Callers of this instance waiting for a lock right now. */
  get waitingCallers(): number {
    return this.waiting;
  }

  /** Answers every waiting caller with ShuttingDownError; called once shutdown begins. */
  shutdown(): void {
    this.closing.abort(new ShuttingDownError());
  }

  get storeKind(): LockStore['kind'] {
    return this.store.kind;
  }

  async acquire(key: string, ttlMs: number, options: AcquireOptions = {}): Promise<LockGrant> {
    const holder = options.holder ?? null;
    const waitMs = options.waitMs ?? 0;
    return this.observe('acquire', async () => {
      this.checkTtl(ttlMs);
      if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > this.limits.maxWaitMs) {
        throw new InvalidRequestError('waitMs', `must be an integer from 0 to ${this.limits.maxWaitMs}`);
      }
      const ownerToken = newOwnerToken();
      if (waitMs === 0) {
        const outcome = await this.store.acquire({ key, ownerToken, ttlMs, holder });
        if (!outcome.acquired) throw new LockHeldError(key, outcome.retryAfterMs);
        await this.refuseIfLate(key, ownerToken, ttlMs, outcome.decidedAt);
        return { key, ownerToken, fencingToken: outcome.fencingToken, ttlMs, expiresAtMs: outcome.expiresAtMs, holder };
      }
      return this.acquireWaiting(key, ownerToken, ttlMs, holder, waitMs, options.signal);
    });
  }

  private async acquireWaiting(
    key: string,
    ownerToken: string,
    ttlMs: number,
    holder: string | null,
    waitMs: number,
    callerSignal: AbortSignal | undefined,
  ): Promise<LockGrant> {
    if (this.closing.signal.aborted) throw new ShuttingDownError();
    if (this.waiting >= this.limits.maxWaitersPerInstance) throw new TooManyWaitersError('instance');
    const signal = callerSignal ? AbortSignal.any([callerSignal, this.closing.signal]) : this.closing.signal;
    const started = performance.now();
    this.waiting++;
    let granted = false;
    try {
      const outcome = await this.store.acquire({ key, ownerToken, ttlMs, holder, waitMs, signal });
      if (!outcome.acquired) throw new LockHeldError(key, outcome.retryAfterMs);
      granted = true;
      // The caller left while the grant was on its way: nobody will use this lease, give it back.
      if (callerSignal?.aborted) {
        await this.store.release(key, ownerToken).catch(() => undefined);
        throw new WaitAbortedError();
      }
      await this.refuseIfLate(key, ownerToken, ttlMs, outcome.decidedAt);
      return { key, ownerToken, fencingToken: outcome.fencingToken, ttlMs, expiresAtMs: outcome.expiresAtMs, holder };
    } finally {
      this.waiting--;
      this.observer.waited?.((performance.now() - started) / 1000, granted);
    }
  }

  async renew(key: string, ownerToken: string, ttlMs: number): Promise<LockRenewal> {
    return this.observe('renew', async () => {
      this.checkTtl(ttlMs);
      const sentAt = performance.now();
      const outcome = await this.store.renew(key, ownerToken, ttlMs);
      if (!outcome.renewed) {
        this.observer.lostLease?.('renew');
        throw new NotOwnerError(key);
      }
      await this.refuseIfLate(key, ownerToken, ttlMs, sentAt);
      return { key, fencingToken: outcome.fencingToken, ttlMs, expiresAtMs: outcome.expiresAtMs };
    });
  }

  async release(key: string, ownerToken: string): Promise<void> {
    return this.observe('release', async () => {
      const released = await this.store.release(key, ownerToken);
      if (!released) {
        this.observer.lostLease?.('release');
        throw new NotOwnerError(key);
      }
    });
  }

  async inspect(key: string): Promise<LockState | null> {
    return this.observe('inspect', () => this.store.inspect(key));
  }

  private checkTtl(ttlMs: number): void {
    const { minTtlMs, maxTtlMs } = this.limits;
    if (!Number.isInteger(ttlMs) || ttlMs < minTtlMs || ttlMs > maxTtlMs) {
      throw new InvalidRequestError('ttlMs', `must be an integer from ${minTtlMs} to ${maxTtlMs}`);
    }
  }

  /**
   * If the store's answer arrived late, the lease it describes may have run out while the reply was in
   * flight; reporting it as held would let two callers believe they hold the lock. Give the lease back
   * and report the store as unavailable instead.
   */
  private async refuseIfLate(key: string, ownerToken: string, ttlMs: number, sentAt: number): Promise<void> {
    const elapsedMs = performance.now() - sentAt;
    if (elapsedMs < ttlMs * LATE_REPLY_FRACTION) return;
    await this.store.release(key, ownerToken).catch(() => undefined);
    throw new StoreUnavailableError(
      `the store answered after ${Math.round(elapsedMs)} ms, too late to trust a ${ttlMs} ms lease; it was given back`,
    );
  }

  private async observe<T>(op: Operation, run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let outcome: Outcome = 'error';
    try {
      const result = await run();
      outcome = SUCCESS[op];
      return result;
    } catch (err) {
      if (err instanceof LockHeldError) outcome = 'held';
      else if (err instanceof NotOwnerError) outcome = 'not_owner';
      else if (err instanceof InvalidRequestError) outcome = 'invalid';
      else if (err instanceof TooManyWaitersError) outcome = 'too_many_waiters';
      else if (err instanceof WaitAbortedError || err instanceof ShuttingDownError) outcome = 'aborted';
      throw err;
    } finally {
      this.observer.operation?.(op, outcome, (performance.now() - started) / 1000);
    }
  }
}

const SUCCESS: Record<Operation, Outcome> = {
  acquire: 'acquired',
  renew: 'renewed',
  release: 'released',
  inspect: 'inspected',
};
