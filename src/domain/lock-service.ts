import type { LockLimits } from './limits.js';
import { type AcquireOutcome, type LockState, type LockStore, MAX_QUEUE_SHOWN, type QueuedCaller } from './lock-store.js';
import { idempotencyKeyOf } from './idempotency.js';
import { randomBase64url } from './random.js';
import {
  HolderChangedError,
  IdempotencyKeyReusedError,
  InvalidRequestError,
  LockHeldError,
  QuotaExceededError,
  ShuttingDownError,
} from './errors.js';
import { FreshnessGuard } from './freshness.js';
import { WaitGate } from './wait-gate.js';
import {
  type HeldQuery,
  inNamespaces,
  type LeaseGrant,
  type LeaseObserver,
  type LeaseRenewal,
  LeaseRules,
  observeOperation,
  type OperationResult,
} from './lease-rules.js';
import { lockId } from './namespaces.js';
import { type LeaseClaim, NamespaceQuota } from './quota.js';
import { ChangeWatch, type IndexedView, lockWatchSource } from './watch.js';

export type Operation = 'acquire' | 'renew' | 'release' | 'inspect';
export type { OperationResult } from './lease-rules.js';

/**
 * What the lock service reports as it works, so metrics (or anything else) can listen without the
 * lock rules knowing about them. Every method is optional.
 */
export interface LockObserver extends LeaseObserver {
  /** `waitedSeconds`: the part of an acquire's duration spent waiting in the key's queue (0 otherwise). */
  operation?(op: Operation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
}

export interface AcquireOptions {
  readonly holder?: string | null;
  /** Wait up to this long in the key's queue when the lock is held; 0 = answer at once. */
  readonly waitMs?: number;
  /** Aborted when the caller goes away; a wait ends and any lease handed to it is given back. */
  readonly signal?: AbortSignal;
  /**
   * The caller's Idempotency-Key and who sent it: while the lease this acquire grants is live, an acquire
   * by the same caller with the same key gets that lease back instead of lock_held.
   */
  readonly idempotency?: { readonly callerId: string; readonly key: string };
  /** Lock-delay after an expiry (see AcquireInput.lockDelayMs); 0 or absent: none. */
  readonly lockDelayMs?: number;
}

export type LockGrant = LeaseGrant;

/** A store grant and when the command that made it was sent. */
/** (For a replay, also the earlier lease's owner token and holder.) */
type DecidedGrant = Extract<AcquireOutcome, { readonly acquired: true }>;

/** One acquire, as its steps (quota, store, freshness) need it. */
interface LeaseRequest extends LeaseClaim {
  readonly key: string;
  readonly holder: string | null;
  /** The caller-scoped idempotency key the store keeps with the lease (see AcquireOptions.idempotency). */
  readonly idempotencyKey?: string;
  readonly lockDelayMs: number;
  /** Time spent waiting in the key's queue, set when a wait ends. */
  readonly waited: { seconds: number };
}

/** A grant or renewal the HTTP layer is about to send, for the last freshness check. */
export interface FreshLease {
  readonly key: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly decidedAt: number;
}

export type LockRenewal = LeaseRenewal;

/** A held lock as an administrator sees it: where it is and who holds it, never the owner token. */
export interface HeldLockView extends LockState {
  readonly namespace: string;
  readonly key: string;
}

export interface ListHeldQuery extends HeldQuery {
  readonly limit: number;
  readonly cursor?: string;
}

/** What a force release evicted, for the caller's audit trail. */
export interface Eviction {
  readonly holder: string | null;
  readonly fencingToken: number;
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
 * The lock rules: TTL bounds, owner tokens, and the guarantee that a grant or renewal is only reported
 * when it is certain and still fresh. It talks to a LockStore and knows nothing of HTTP or Redis.
 */
export class LockService {
  /** This instance's waiting callers, shared with the other primitives (semaphores, read/write locks). */
  readonly waitGate: WaitGate;

  private readonly quota: NamespaceQuota;
  private readonly freshness: FreshnessGuard;
  /** TTL and wait bounds, waiting grants, renew and release (shared with the other primitives). */
  private readonly rules: LeaseRules;
  /** Blocking queries on this instance (one subscription per watched key). */
  readonly changes: ChangeWatch;
  /** The cap the store keeps inside its lock steps (see LockStore.quotaInside); 0 when the service keeps it. */
  private readonly quotaInStore: number;

  constructor(
    private readonly store: LockStore,
    /** The bounds, also read by the other primitives' services (permits.ts). */
    readonly limits: LockLimits,
    private readonly observer: LockObserver = {},
  ) {
    this.waitGate = new WaitGate(limits);
    const maxHeld = limits.maxHeldLocksPerNamespace ?? 0;
    const inside = store.quotaInside === true && maxHeld >= (store.quotaInsideFrom ?? 0);
    this.quotaInStore = inside ? maxHeld : 0;
    // With the quota inside the store's steps, the service's own slot calls are off (a cap of 0).
    this.quota = new NamespaceQuota(store, inside ? 0 : maxHeld);
    this.freshness = new FreshnessGuard(store);
    const { quota, freshness } = this;
    this.rules = new LeaseRules({
      limits,
      gate: this.waitGate,
      quota,
      freshness,
      observer,
      giveBack: (id, ownerToken) => store.release(id, ownerToken),
    });
    this.changes = new ChangeWatch(lockWatchSource(store));
  }

  /** Aborted at shutdown (for the other primitives' waits on this instance). */
  get closingSignal(): AbortSignal {
    return this.waitGate.signal;
  }

  /** Callers of this instance waiting for a lock right now. */
  get waitingCallers(): number {
    return this.waitGate.count;
  }

  /** Answers every waiting caller with ShuttingDownError; called once shutdown begins. */
  shutdown(): void {
    this.waitGate.shutdown();
    this.changes.closeAll(new ShuttingDownError());
  }

  /**
   * Every method takes the caller's namespace and composes the store's id from it (namespaces.ts), so
   * the same key in two namespaces is two locks with their own fencing sequences. With a cap on locks
   * held per namespace, a grant also takes a quota slot (see NamespaceQuota).
   */
  async acquire(namespace: string, key: string, ttlMs: number, options: AcquireOptions = {}): Promise<LockGrant> {
    const holder = options.holder ?? null;
    const waitMs = options.waitMs ?? 0;
    const waited = { seconds: 0 };
    return this.observe(
      'acquire',
      async () => {
        this.checkTtl(ttlMs);
        this.checkWaitMs(waitMs);
        const lockDelayMs = this.checkLockDelay(options.lockDelayMs ?? 0);
        const { idempotency } = options;
        const request: LeaseRequest = {
          lockDelayMs,
          namespace,
          key,
          id: lockId(namespace, key),
          ownerToken: newOwnerToken(),
          ttlMs,
          holder,
          idempotencyKey: idempotency ? idempotencyKeyOf(idempotency.callerId, idempotency.key, { ttlMs, holder, lockDelayMs }) : undefined,
          waited,
        };
        const grant = await this.grantWithinQuota(request, waitMs, options.signal);
        if (grant.replayed) {
          // The earlier lease already holds its quota slot; the one taken for this call is not needed.
          // (A store with the quota inside takes none for a replay.)
          await this.quota.free(namespace, request.ownerToken);
        }
        // A replay answers with the earlier lease: its owner token and holder, not this call's.
        return {
          key,
          ownerToken: grant.replayed?.ownerToken ?? request.ownerToken,
          fencingToken: grant.fencingToken,
          ttlMs,
          expiresAtMs: grant.expiresAtMs,
          holder: grant.replayed ? grant.replayed.holder : holder,
          decidedAt: grant.decidedAt,
        };
      },
      waited,
    );
  }

  private async acquireNow(request: LeaseRequest): Promise<DecidedGrant> {
    const { id, ownerToken, ttlMs, holder, idempotencyKey, lockDelayMs } = request;
    const outcome = await this.store.acquire({
      key: id,
      ownerToken,
      ttlMs,
      holder,
      idempotencyKey,
      lockDelayMs,
      maxHeldInNamespace: this.quotaInside(),
    });
    if (!outcome.acquired) throw this.refusal(request, outcome);
    await this.freshness.refuseIfLate({ id, ownerToken: outcome.replayed?.ownerToken ?? ownerToken, ttlMs, decidedAt: outcome.decidedAt });
    return outcome;
  }

  private acquireWaiting(request: LeaseRequest, waitMs: number, callerSignal: AbortSignal | undefined): Promise<DecidedGrant> {
    const { namespace, id, ttlMs, holder, idempotencyKey, lockDelayMs } = request;
    return this.rules.grantWaiting({
      namespace,
      id,
      ttlMs,
      callerSignal,
      waited: request.waited,
      acquire: async (signal) => {
        const outcome = await this.store.acquire({
          key: id,
          ownerToken: request.ownerToken,
          ttlMs,
          holder,
          waitMs,
          signal,
          idempotencyKey,
          lockDelayMs,
          maxHeldInNamespace: this.quotaInside(),
        });
        if (!outcome.acquired) throw this.refusal(request, outcome);
        return outcome;
      },
      ownerOf: (outcome) => outcome.replayed?.ownerToken ?? request.ownerToken,
    });
  }

  async renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<LockRenewal> {
    return this.observe('renew', () =>
      this.rules.renew(namespace, key, ownerToken, ttlMs, (id) => this.store.renew(id, ownerToken, ttlMs)),
    );
  }

  async release(namespace: string, key: string, ownerToken: string): Promise<void> {
    return this.observe('release', () => this.rules.release(namespace, key, ownerToken, (id) => this.store.release(id, ownerToken)));
  }

  /** The first callers queued for the lock, head first (at most MAX_QUEUE_SHOWN). Never owner tokens. */
  async queue(namespace: string, key: string): Promise<QueuedCaller[]> {
    return this.observe('inspect', () => this.store.queue(lockId(namespace, key), MAX_QUEUE_SHOWN));
  }

  async inspect(namespace: string, key: string): Promise<LockState | null> {
    return this.observe('inspect', () => this.store.inspect(lockId(namespace, key)));
  }

  /**
   * A blocking query (Consul's): the lock's state and watch index, answered at once when the index
   * differs from `index` (or `index` is undefined, or waitMs is 0), otherwise as soon as it changes,
   * otherwise after `waitMs` with the unchanged state. Clients compare indexes for inequality only.
   * `onChange`: see ChangeWatch.wait.
   */
  async watch(
    namespace: string,
    key: string,
    index: number | undefined,
    waitMs: number,
    signal?: AbortSignal,
    onChange?: (view: IndexedView) => void,
  ): Promise<IndexedView> {
    const id = lockId(namespace, key);
    // A blocking query's time is mostly waiting, not work: only immediate answers are timed as inspects.
    return this.rules.watch(this.changes, id, { namespace, index, waitMs, signal, onChange }, () =>
      this.observe('inspect', () => this.changes.current(id)),
    );
  }

  /**
   * An administrator's override: frees the lock whoever holds it. The store keeps the fencing sequence,
   * so the next grant's token is above the evicted one, and the evicted owner token stops working.
   * Returns what was evicted (for the audit log), or null when the lock was not held. With
   * `fencingToken`, only that lease is evicted; another live one is left alone (HolderChangedError).
   */
  async forceRelease(namespace: string, key: string, fencingToken?: number): Promise<Eviction | null> {
    const id = lockId(namespace, key);
    const outcome = await this.store.forceRelease(id, fencingToken);
    if (!outcome.released) {
      // Nothing changed; which answer that is (nobody holds it, or someone else does) is read after.
      const current = fencingToken === undefined ? null : await this.store.inspect(id);
      if (current !== null && fencingToken !== undefined) throw new HolderChangedError(key, fencingToken, current);
      return null;
    }
    await this.quota.free(namespace, outcome.evictedOwnerToken);
    return { holder: outcome.holder, fencingToken: outcome.fencingToken };
  }

  /** One page of held locks, in one namespace or all of them. Never shows owner tokens. */
  async listHeld(query: ListHeldQuery): Promise<{ locks: HeldLockView[]; nextCursor: string | null }> {
    const prefix = this.rules.listPrefix(query);
    const page = await this.store.list({ prefix, limit: query.limit, cursor: query.cursor });
    const locks = inNamespaces(page.locks, (parsed, { key: _id, ...state }): HeldLockView => ({ ...parsed, ...state }));
    return { locks, nextCursor: page.nextCursor };
  }

  /**
   * The late-grant check again, as the answer is about to leave the process (the HTTP layer calls it
   * just before writing; see FreshnessGuard). Throws StoreUnavailableError, after giving the lease
   * back, when the lease may have run out since the store decided it.
   */
  async confirmFresh(namespace: string, lease: FreshLease): Promise<void> {
    const { key, ownerToken, ttlMs, decidedAt } = lease;
    await this.freshness.refuseIfLate({ id: lockId(namespace, key), ownerToken, ttlMs, decidedAt });
  }

  /** The lock-delay asked for, checked against the bounds. */
  checkLockDelay(lockDelayMs: number): number {
    const max = this.limits.maxLockDelayMs ?? 0;
    if (!Number.isInteger(lockDelayMs) || lockDelayMs < 0 || lockDelayMs > max) {
      throw new InvalidRequestError('lockDelayMs', `must be an integer from 0 to ${max}`);
    }
    return lockDelayMs;
  }

  checkWaitMs(waitMs: number): void {
    this.rules.checkWaitMs(waitMs);
  }

  /**
   * The grant, with the quota the service keeps (a store with the quota inside checks it in its own step).
   * A retried acquire whose first answer was lost must get its lease back even at the namespace's cap:
   * that lease already counts against the quota, so the refusal is checked once for a replay.
   */
  private async grantWithinQuota(request: LeaseRequest, waitMs: number, signal: AbortSignal | undefined): Promise<DecidedGrant> {
    try {
      return waitMs === 0
        ? await this.quota.grantNow(request, () => this.acquireNow(request))
        : await this.quota.grantWaiting(request, waitMs, () => this.acquireWaiting(request, waitMs, signal));
    } catch (error) {
      // (A store with the quota inside looks for the replay before the cap, in the same step.)
      if (!(error instanceof QuotaExceededError) || request.idempotencyKey === undefined || this.quotaInStore > 0) throw error;
      // The key reused for another request is that answer, not the quota's; other failures leave the quota's.
      const replay = await this.acquireNow(request).catch((lookError: unknown) => {
        if (lookError instanceof IdempotencyKeyReusedError) throw lookError;
        return undefined;
      });
      if (replay?.replayed) return replay;
      // Not a replay: a lease this look granted over the cap is given straight back, unseen.
      if (replay) await this.store.release(request.id, request.ownerToken).catch(() => undefined);
      throw error;
    }
  }

  /**
   * The store's share of the quota, when it keeps it inside its lock steps (undefined: none). A plain
   * property, not an object spread into the store's input: this runs on every acquire, and V8 builds
   * a literal with a spread in it on a much slower path.
   */
  private quotaInside(): number | undefined {
    return this.quotaInStore > 0 ? this.quotaInStore : undefined;
  }

  private refusal(request: LeaseRequest, outcome: Extract<AcquireOutcome, { readonly acquired: false }>): Error {
    return outcome.quotaFull
      ? new QuotaExceededError(request.namespace, this.quotaInStore, outcome.retryAfterMs)
      : new LockHeldError(request.key, outcome.retryAfterMs);
  }

  checkTtl(ttlMs: number): void {
    this.rules.checkTtl(ttlMs);
  }

  private observe<T>(op: Operation, run: () => Promise<T>, waited?: { readonly seconds: number }): Promise<T> {
    return observeOperation(run, (result, seconds) => this.observer.operation?.(op, result, seconds, waited?.seconds ?? 0));
  }
}
