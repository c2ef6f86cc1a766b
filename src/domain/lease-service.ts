import { withReleaseRequest } from './permit-values.js';
import { performance } from 'node:perf_hooks';
import {
  type DomainError,
  HolderChangedError,
  IdempotencyKeyReusedError,
  InvalidRequestError,
  LockHeldError,
  NotOwnerError,
  QuotaExceededError,
  ShuttingDownError,
} from './errors.js';
import { type DecidedLease, FreshnessGuard, giveBackForCallerGone, isFresh, type KeptBecause } from './freshness.js';
import { idempotencyKeyOf } from './idempotency.js';
import {
  type HeldQuery,
  KEEP_FOR_KEY,
  KEEP_RENEWAL,
  type LeaseGrant,
  type LeaseObserver,
  type LeaseRenewal,
  LeaseRules,
  observeOperation,
  type OperationResult,
  resultOf,
  type WatchQuery,
} from './lease-rules.js';
import type { EvictedLease, LeaseAcquireOutcome, LeaseKind, LeaseReads, LeaseStore } from './lease-store.js';
import type { LeaseLimits } from './limits.js';
import type { Grant, IndexedLockState, QueuedCaller, ReleaseRequest, ReleaseRequestInput } from './lock-values.js';
import { lockId } from './namespaces.js';
import { type IndexedPermitState, MAX_QUEUE_SHOWN } from './permit-values.js';
import { type LeaseClaim, leaseMayBeLive, leaseSlotId, NamespaceQuota, QUOTA_SLOT_MARGIN_MS } from './quota.js';
import { randomBase64url } from './random.js';
import { WaitGate } from './wait-gate.js';
import { ChangeWatch, type IndexedView, lockWatchSource, permitWatchSource } from './watch.js';

export type LeaseOperation = 'acquire' | 'renew' | 'release' | 'inspect';

/** What the lease service reports as it works (metrics listen here); every method is optional. */
export interface LeaseServiceObserver extends LeaseObserver {
  /** `waitedSeconds`: the part of an acquire's duration spent waiting in the key's queue (0 otherwise). */
  operation?(kind: LeaseKind, op: LeaseOperation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
  /**
   * A lock set's acquire, renewal or release ended (one report per call, whatever its number of keys).
   * `waitedSeconds`: the part of an acquire's duration spent waiting for a busy key to change (0 otherwise).
   */
  setOperation?(op: LockSetOperation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
}

/** What a lock set can be asked: it has no inspect of its own (each key is inspected as a lock). */
export type LockSetOperation = Exclude<LeaseOperation, 'inspect'>;

/** How a primitive words a refusal: the room is taken, or the caller's capacity is not the live one. */
export interface LeaseRefusals {
  /** `weight`: what the refused caller asked for (a read/write lock tells the modes apart by it). */
  full(key: string, retryAfterMs: number, weight: number): DomainError;
  mismatch(key: string, requestedCapacity: number, liveCapacity: number, retryAfterMs: number): DomainError;
}

/** One acquire of one key, in the engine's words: the vocabularies fill it in. */
export interface LeaseAsk {
  readonly kind: LeaseKind;
  readonly namespace: string;
  readonly key: string;
  readonly capacity: number;
  readonly weight: number;
  readonly ttlMs: number;
  readonly holder: string | null;
  /** Wait up to this long in the key's FIFO queue; 0 = answer at once. */
  readonly waitMs: number;
  /** Aborted when the caller goes away; a wait ends and any lease handed to it is given back. */
  readonly signal?: AbortSignal;
  /** The caller's Idempotency-Key and who sent it (locks): see AcquireOptions.idempotency. */
  readonly idempotency?: { readonly callerId: string; readonly key: string };
  /** Lock-delay after an expiry (locks); 0 or absent: none. */
  readonly lockDelayMs?: number;
}

/** Several keys of one namespace held under one owner token, all or none (see LockSetService). */
export interface LeaseSetAsk {
  readonly namespace: string;
  readonly keys: readonly string[];
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly waitMs: number;
  readonly lockDelayMs: number;
  readonly signal?: AbortSignal;
}

export interface LeaseSetGrant {
  readonly ownerToken: string;
  /** Each key with its own fencing token, in the order the keys were asked for. */
  readonly locks: ReadonlyArray<{ readonly key: string; readonly fencingToken: number }>;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
  /** performance.now() when the store command that granted the set was sent (see FreshnessGuard). */
  readonly decidedAt: number;
}

export interface LeaseSetRenewal {
  readonly locks: ReadonlyArray<{ readonly key: string; readonly fencingToken: number }>;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  /** performance.now() when the renewing store command was sent (see FreshnessGuard). */
  readonly decidedAt: number;
  /** Someone asked the holder of one of the keys to let go (ReleaseRequest). */
  readonly releaseRequested?: ReleaseRequest;
}

/** What a force release evicted, for the caller's audit trail. */
export interface Eviction {
  readonly holder: string | null;
  readonly fencingToken: number;
}

/** A grant or renewal the HTTP layer is about to send, for the last freshness check. */
export interface FreshLease {
  readonly key: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly decidedAt: number;
  /** Asked with an Idempotency-Key: kept, not given back, when late (LeaseGrant.idempotent). */
  readonly idempotent?: boolean;
  /** A renewal's answer: kept, not given back, when late (the lease was the caller's already). */
  readonly renewal?: true;
  /** A lock set's lease: every one of these keys (`key` is the first), given back together. */
  readonly keys?: readonly string[];
}

/** A key's view as a blocking query answers it: a lock's indexed state, or a permit key's. */
export type WatchViewOf<K extends LeaseKind> = K extends 'lock' ? IndexedView : LeaseReads[K]['indexed'];

/** A store grant of one key and when the command that made it was sent (for a replay, the earlier lease). */
interface DecidedGrant extends Grant {
  readonly decidedAt: number;
  /** Handed over after waiting in the key's queue (LeaseAcquireOutcome.queued). */
  readonly queued?: true;
  readonly replayed?: { readonly ownerToken: string; readonly holder: string | null };
}

/** One acquire, as its steps (quota, store, freshness) need it. */
interface Request extends LeaseClaim {
  readonly ask: LeaseAsk;
  readonly idempotencyKey?: string;
  readonly lockDelayMs: number;
}

/** The engine's parts for one kind of key: its give-back, quota, late-grant guard, rules and watch. */
interface Lane {
  readonly quota: NamespaceQuota;
  readonly freshness: FreshnessGuard;
  readonly rules: LeaseRules;
  readonly changes: ChangeWatch<IndexedView> | ChangeWatch<IndexedPermitState>;
}

/**
 * 16 bytes = 128 bits from the OS CSPRNG: unguessable, so only the caller that was granted a lease can
 * renew or release it. base64url keeps it URL- and JSON-safe (22 characters).
 */
const OWNER_TOKEN_BYTES = 16;

export function newOwnerToken(): string {
  return randomBase64url(OWNER_TOKEN_BYTES);
}

/** 200 characters: a sentence for the holder's log, not a document; it travels with every renewal. */
export const MAX_RELEASE_REASON = 200;

/** 16: enough for a transfer between a handful of accounts; a set is one script over all its keys. */
export const MAX_LOCK_SET_KEYS = 16;

/**
 * The late-answer rule with the quota: a lease given back takes its quota slots with it (`freeSlots`), as
 * after the store's answer; one that may live on (kept, or its give-back failed) keeps them counting.
 */
async function refuseIfLateFreeing(
  guard: FreshnessGuard,
  lease: DecidedLease,
  keep: { readonly keep: KeptBecause } | undefined,
  freeSlots: () => Promise<void>,
): Promise<void> {
  try {
    await guard.refuseIfLate(lease, keep);
  } catch (error) {
    if (!leaseMayBeLive(error)) await freeSlots();
    throw error;
  }
}

/**
 * The lease engine's rules, for every primitive: TTL, wait and lock-delay bounds, owner tokens, the
 * namespace quota (one slot per lease; or inside the store's lock steps), the instance's wait caps,
 * FIFO waiting with the give-back of a lease whose caller left, idempotent replays, the late-grant
 * guard, blocking queries, force release and listings. The lock, semaphore, read/write lock and lock
 * set services only translate their words into a lease of some capacity and weight, and back. It talks
 * to one LeaseStore and knows nothing of HTTP or Redis.
 */
export class LeaseService {
  /** This instance's waiting callers (shared by every primitive's service built on the same gate). */
  readonly waitGate: WaitGate;
  /** The cap the store keeps inside its lock steps (see LeaseStore.quotaInside); 0 when the service keeps it. */
  private readonly quotaInStore: number;
  /**
   * A cap the lease service counts through the quota-slot calls, with a store that counts quota inside its
   * steps: its leases say so (LeaseAcquire.quotaOutside).
   */
  private readonly quotaOutsideStore: boolean;
  private readonly maxHeld: number;
  private readonly lanes = new Map<LeaseKind, Lane>();

  constructor(
    private readonly store: LeaseStore,
    readonly limits: LeaseLimits,
    private readonly observer: LeaseServiceObserver = {},
    gate?: WaitGate,
  ) {
    this.waitGate = gate ?? new WaitGate(limits);
    this.maxHeld = limits.maxHeldLocksPerNamespace ?? 0;
    const inside = store.quotaInside === true && this.maxHeld >= (store.quotaInsideFrom ?? 0);
    this.quotaInStore = inside ? this.maxHeld : 0;
    this.quotaOutsideStore = store.quotaInside === true && this.maxHeld > 0 && !inside;
  }

  /** Aborted at shutdown (for every wait on this instance). */
  get closingSignal(): AbortSignal {
    return this.waitGate.signal;
  }

  /** Answers every waiting caller with ShuttingDownError; called once shutdown begins. */
  shutdown(): void {
    this.waitGate.shutdown();
    for (const lane of this.lanes.values()) lane.changes.closeAll(new ShuttingDownError());
  }

  /** Blocking queries on `kind`'s keys (one subscription per watched key on this instance). */
  changesOf<K extends LeaseKind>(kind: K): ChangeWatch<WatchViewOf<K>> {
    // (The lane of `kind` was made by newWatch(kind): its views are that kind's.)
    return this.lane(kind).changes as unknown as ChangeWatch<WatchViewOf<K>>;
  }

  checkTtl(ttlMs: number): void {
    this.lane('lock').rules.checkTtl(ttlMs);
  }

  checkWaitMs(waitMs: number): void {
    this.lane('lock').rules.checkWaitMs(waitMs);
  }

  /** The lock-delay asked for, checked against the bounds. */
  checkLockDelay(lockDelayMs: number): number {
    const max = this.limits.maxLockDelayMs ?? 0;
    if (!Number.isInteger(lockDelayMs) || lockDelayMs < 0 || lockDelayMs > max) {
      throw new InvalidRequestError('lockDelayMs', `must be an integer from 0 to ${max}`);
    }
    return lockDelayMs;
  }

  /**
   * One lease on one key. Every method takes the caller's namespace and composes the store's id from it
   * (namespaces.ts), so the same key in two namespaces is two keys with their own fencing sequences.
   */
  async acquire(ask: LeaseAsk, refusals: LeaseRefusals): Promise<LeaseGrant> {
    // Timed inline, not through observe(): this is the hot path, and a wrapper costs a closure and an
    // async frame more on every acquire. The report is the same: how it ended, its duration, its wait.
    const started = performance.now();
    const { kind, namespace, key, ttlMs, holder, waitMs, idempotency } = ask;
    // Only a waiting acquire learns how long it waited.
    // Stryker disable next-line ObjectLiteral: grantWaiting sets seconds before it is read; unset, a report reads 0 as well
    const waited = waitMs > 0 ? { seconds: 0 } : undefined;
    try {
      const lane = this.lane(kind);
      lane.rules.checkTtl(ttlMs);
      lane.rules.checkWaitMs(waitMs);
      const lockDelayMs = this.checkLockDelay(ask.lockDelayMs ?? 0);
      const request: Request = {
        ask,
        lockDelayMs,
        namespace,
        id: lockId(namespace, key),
        ownerToken: newOwnerToken(),
        ttlMs,
        idempotencyKey: idempotency ? idempotencyKeyOf(idempotency.callerId, idempotency.key, { ttlMs, holder, lockDelayMs }) : undefined,
      };
      let grant: DecidedGrant;
      if (waited === undefined && lane.quota.uncapped) {
        // The common acquire (no wait, no quota kept here): the store call in this frame, not in one
        // more async method behind a closure. The same steps as acquireOnce.
        grant = this.decide(request, refusals, await this.storeAcquire(request, undefined));
        // (Awaited only when late: an await of undefined still costs a promise and a turn.)
        const late = this.refuseIfLate(lane, request, grant);
        if (late !== undefined) await late;
      } else {
        try {
          grant = await this.grantWithinQuota(lane, request, refusals, waited);
        } catch (error) {
          grant = await this.replayOverQuota(lane, request, refusals, error);
        }
      }
      if (grant.replayed) {
        // The earlier lease already holds its quota slot; the one taken for this call is not needed.
        // (A store with the quota inside takes none for a replay.)
        await lane.quota.free(namespace, request.ownerToken, request.id);
      }
      // A replay answers with the earlier lease: its owner token and holder, not this call's.
      const answer: { -readonly [K in keyof LeaseGrant]: LeaseGrant[K] } = {
        key,
        ownerToken: grant.replayed?.ownerToken ?? request.ownerToken,
        fencingToken: grant.fencingToken,
        ttlMs,
        expiresAtMs: grant.expiresAtMs,
        holder: grant.replayed ? grant.replayed.holder : holder,
        decidedAt: grant.decidedAt,
        idempotent: request.idempotencyKey !== undefined,
      };
      if (grant.replayed) answer.replayed = true;
      this.report(kind, 'acquire', 'ok', started, waited);
      return answer;
    } catch (error) {
      this.report(kind, 'acquire', resultOf(error), started, waited);
      throw error;
    }
  }

  /**
   * The grant, with the quota the service keeps (a store with the quota inside checks it in its own step).
   * A retried acquire whose first answer was lost must get its lease back even at the namespace's cap:
   * that lease already counts against the quota, so the refusal is checked once for a replay.
   */
  private grantWithinQuota(
    lane: Lane,
    request: Request,
    refusals: LeaseRefusals,
    waited: { seconds: number } | undefined,
  ): Promise<DecidedGrant> {
    const { waitMs } = request.ask;
    // Stryker disable next-line LogicalOperator: waited is undefined exactly when waitMs is 0 (acquire), so && decides as || does
    return waitMs === 0 || waited === undefined
      ? lane.quota.grantNow(request, () => this.acquireOnce(lane, request, refusals, undefined))
      : lane.quota.grantWaiting(request, waitMs, () => this.acquireWaiting(lane, request, refusals, waited));
  }

  /**
   * When the grant failed on the quota this service keeps: a retried acquire whose first answer was lost
   * must get its lease back even at the namespace's cap (that lease already counts against the quota),
   * so the refusal is checked once for a replay. Any other failure is thrown as it is.
   */
  private async replayOverQuota(lane: Lane, request: Request, refusals: LeaseRefusals, error: unknown): Promise<DecidedGrant> {
    const { kind } = request.ask;
    // (A store with the quota inside looks for the replay before the cap, in the same step.)
    if (!(error instanceof QuotaExceededError) || request.idempotencyKey === undefined || this.quotaInside(kind) !== undefined) throw error;
    // The key reused for another request is that answer, not the quota's; other failures leave the quota's.
    const replay = await this.acquireOnce(lane, request, refusals, undefined).catch((lookError: unknown) => {
      if (lookError instanceof IdempotencyKeyReusedError) throw lookError;
      return undefined;
    });
    if (replay?.replayed) return replay;
    // Not a replay: a lease this look granted over the cap is given straight back, unseen.
    if (replay) await this.store.release(kind, [request.id], request.ownerToken).catch(() => undefined);
    throw error;
  }

  /** One store call; without `signal` (no wait) the answer is also checked for freshness here. */
  private async acquireOnce(lane: Lane, request: Request, refusals: LeaseRefusals, signal: AbortSignal | undefined): Promise<DecidedGrant> {
    const grant = this.decide(request, refusals, await this.storeAcquire(request, signal));
    const late = signal === undefined ? this.refuseIfLate(lane, request, grant) : undefined;
    if (late !== undefined) await late;
    return grant;
  }

  /** The store's acquire for `request`; with `signal`, waiting in the key's queue until it aborts. */
  private storeAcquire(request: Request, signal: AbortSignal | undefined): Promise<LeaseAcquireOutcome> {
    const { ask, id, ownerToken, ttlMs, idempotencyKey, lockDelayMs } = request;
    const { kind, capacity, weight, holder } = ask;
    return this.store.acquire({
      kind,
      ids: [id],
      capacity,
      weight,
      ownerToken,
      ttlMs,
      holder,
      waitMs: signal === undefined ? undefined : ask.waitMs,
      signal,
      idempotencyKey,
      lockDelayMs,
      maxHeldInNamespace: this.quotaInside(kind),
      quotaOutside: kind === 'lock' && this.quotaOutsideStore ? true : undefined,
    });
  }

  /** The store's answer as a grant, or the primitive's refusal (thrown). */
  private decide(request: Request, refusals: LeaseRefusals, outcome: LeaseAcquireOutcome): DecidedGrant {
    const { ask } = request;
    if (!outcome.acquired) {
      if (outcome.reason === 'mismatch') throw refusals.mismatch(ask.key, ask.capacity, outcome.capacity, outcome.retryAfterMs);
      throw outcome.quotaFull
        ? new QuotaExceededError(ask.namespace, this.quotaInStore, outcome.retryAfterMs)
        : refusals.full(ask.key, outcome.retryAfterMs, ask.weight);
    }
    return {
      fencingToken: outcome.fencingTokens[0] as number,
      expiresAtMs: outcome.expiresAtMs,
      decidedAt: outcome.decidedAt,
      replayed: outcome.replayed,
      queued: outcome.queued,
    };
  }

  /**
   * The late-grant guard on a grant that did not wait. A prompt answer (the common case) is checked
   * here without a call: undefined, nothing to await.
   */
  private refuseIfLate(lane: Lane, request: Request, grant: DecidedGrant): Promise<void> | undefined {
    const { ttlMs } = request;
    const { decidedAt } = grant;
    // Stryker disable next-line ObjectLiteral: a lease read as not fresh goes to FreshnessGuard.refuseIfLate, which checks it again in full
    if (isFresh({ ttlMs, decidedAt })) return undefined;
    const lease = { id: request.id, ownerToken: grant.replayed?.ownerToken ?? request.ownerToken, ttlMs, decidedAt };
    return lane.freshness.refuseIfLate(lease, request.idempotencyKey === undefined ? undefined : KEEP_FOR_KEY);
  }

  private acquireWaiting(lane: Lane, request: Request, refusals: LeaseRefusals, waited: { seconds: number }): Promise<DecidedGrant> {
    const { namespace, id, ttlMs, ask } = request;
    return lane.rules.grantWaiting({
      namespace,
      id,
      ttlMs,
      callerSignal: ask.signal,
      waited,
      acquire: (signal) => this.acquireOnce(lane, request, refusals, signal),
      ownerOf: (grant) => grant.replayed?.ownerToken ?? request.ownerToken,
      idempotent: request.idempotencyKey !== undefined,
    });
  }

  /**
   * The store's share of the quota, when it keeps it inside its lock steps (undefined: none). A plain
   * value, not an object spread into the store's input: this runs on every acquire, and V8 builds a
   * literal with a spread in it on a much slower path.
   */
  private quotaInside(kind: LeaseKind): number | undefined {
    return kind === 'lock' && this.quotaInStore > 0 ? this.quotaInStore : undefined;
  }

  async renew(kind: LeaseKind, namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<LeaseRenewal> {
    return this.observe(kind, 'renew', () =>
      this.lane(kind).rules.renew(namespace, key, ownerToken, ttlMs, async (id) => {
        const outcome = await this.store.renew(kind, [id], ownerToken, ttlMs);
        if (!outcome.renewed) return outcome;
        const { expiresAtMs, releaseRequested } = outcome;
        // A lock set's key renewed alone, its quota counted through the quota-slot calls although the
        // store counts this cap inside its lock steps (the lane's own quota then keeps no slots): its
        // slot, left at the set's end, would stop counting a lease that lives on.
        // (Under a cap the lane's quota keeps, it carries the slot itself: NamespaceQuota.extend.)
        const capInside = outcome.quotaOutside === true ? this.quotaInside(kind) : undefined;
        if (capInside !== undefined) await this.extendQuotaSlots(namespace, ownerToken, [id], expiresAtMs, capInside);
        return withReleaseRequest(
          { renewed: true as const, fencingToken: outcome.fencingTokens[0] as number, expiresAtMs },
          releaseRequested,
        );
      }),
    );
  }

  /** Timed inline, as acquire is (the other half of every lock pair): no wrapper's closure and async frame. */
  async release(kind: LeaseKind, namespace: string, key: string, ownerToken: string): Promise<void> {
    const started = performance.now();
    try {
      const { rules } = this.lane(kind);
      rules.refuseIfNotReleased(await rules.releaseInStore(namespace, key, ownerToken), key);
    } catch (error) {
      this.report(kind, 'release', resultOf(error), started, undefined);
      throw error;
    }
    this.report(kind, 'release', 'ok', started, undefined);
  }

  async inspect<K extends LeaseKind>(kind: K, namespace: string, key: string): Promise<LeaseReads[K]['state'] | null> {
    return this.observe(kind, 'inspect', () => this.store.inspect(kind, lockId(namespace, key)));
  }

  /** The first callers queued for the key, head first (at most MAX_QUEUE_SHOWN). Never owner tokens. */
  async queue(kind: LeaseKind, namespace: string, key: string): Promise<QueuedCaller[]> {
    return this.observe(kind, 'inspect', () => this.store.queue(kind, lockId(namespace, key), MAX_QUEUE_SHOWN));
  }

  /**
   * A blocking query (Consul's): the key's state and watch index, answered at once when the index
   * differs from `index` (or `index` is undefined, or waitMs is 0), otherwise as soon as it changes,
   * otherwise after `waitMs` with the unchanged state. Clients compare indexes for inequality only.
   * `onChange`: see ChangeWatch.wait.
   */
  async watch<K extends LeaseKind>(kind: K, namespace: string, key: string, query: WatchQuery<WatchViewOf<K>>): Promise<WatchViewOf<K>> {
    const id = lockId(namespace, key);
    const changes = this.changesOf(kind);
    // A blocking query's time is mostly waiting, not work: only immediate answers are timed as inspects.
    return this.lane(kind).rules.watch(changes, id, { namespace, ...query }, () =>
      this.observe(kind, 'inspect', () => changes.current(id)),
    );
  }

  /**
   * An administrator's override: ends every live lease on the key, or with `fencingToken` only that one.
   * The store keeps the fencing sequence, so the next grant's token is above the evicted ones, and the
   * evicted owner tokens stop working. Returns what was evicted (for the audit log). When the named lease
   * is no longer live but another is: HolderChangedError (nothing was changed).
   */
  async forceRelease(kind: LeaseKind, namespace: string, key: string, fencingToken?: number): Promise<Eviction[]> {
    const id = lockId(namespace, key);
    const evicted: EvictedLease[] = await this.store.forceRelease(kind, id, fencingToken);
    if (evicted.length === 0 && fencingToken !== undefined)
      await this.refuseIfHolderChanged(kind, id, key, fencingToken, 'nothing was released');
    // Retired, not only freed: a renewal of an evicted lease may have had its store step just before the
    // eviction, and its slot's extend still on the way would otherwise count the slot again.
    const quota = this.lane(kind).quota;
    // A lock set's key under a cap the store counts inside its lock steps took its unit through the
    // quota-slot calls (the lane's quota keeps none then): its eviction gave back nothing of it.
    const capInside = this.quotaInside(kind);
    await Promise.all(
      evicted.map((e) =>
        e.quotaOutside === true && capInside !== undefined
          ? this.retireQuotaSlot(namespace, e.ownerToken, id, e.expiresAtMs, capInside)
          : quota.retire(namespace, e.ownerToken, id, e.expiresAtMs),
      ),
    );
    return evicted.map(({ holder, fencingToken: token }) => ({ holder, fencingToken: token }));
  }

  /**
   * Asks the holder of the lease with `fencingToken` to let go, without evicting it (see ReleaseRequest).
   * The request names its lease, so it never reaches a newer holder: when that lease is no longer live
   * but another is, HolderChangedError; when none is, null (nothing changed either way).
   */
  async requestRelease(
    kind: LeaseKind,
    namespace: string,
    key: string,
    fencingToken: number,
    request: ReleaseRequestInput,
  ): Promise<ReleaseRequest | null> {
    if (request.reason !== null && request.reason.length > MAX_RELEASE_REASON) {
      throw new InvalidRequestError('reason', `must be at most ${MAX_RELEASE_REASON} characters`);
    }
    const id = lockId(namespace, key);
    const stored = await this.store.requestRelease(kind, id, fencingToken, request);
    if (stored !== null) return stored;
    await this.refuseIfHolderChanged(kind, id, key, fencingToken, 'nothing was asked');
    return null;
  }

  /**
   * After an operator's call that named the lease with `fencingToken` changed nothing: HolderChangedError
   * when another lease holds the key now (read after, in a second call), nothing when none does.
   */
  private async refuseIfHolderChanged(kind: LeaseKind, id: string, key: string, fencingToken: number, unchanged: string): Promise<void> {
    const state = await this.store.inspect(kind, id);
    const current = state === null ? undefined : 'holders' in state ? state.holders[0] : state;
    if (current !== undefined) throw new HolderChangedError(key, fencingToken, current, unchanged);
  }

  /** One page of the keys with live leases, in one namespace or all of them; the vocabulary reads the entries. */
  listHeld<K extends LeaseKind>(kind: K, query: HeldQuery & { limit: number; cursor?: string }): Promise<LeaseReads[K]['page']> {
    const prefix = this.lane(kind).rules.listPrefix(query);
    return this.store.list(kind, { prefix, limit: query.limit, cursor: query.cursor });
  }

  /**
   * The late-grant check again, as the answer is about to leave the process (the HTTP layer calls it
   * just before writing; see FreshnessGuard). Throws StoreUnavailableError, after giving the lease
   * back, when the lease may have run out since the store decided it.
   */
  async confirmFresh(kind: LeaseKind, namespace: string, lease: FreshLease): Promise<void> {
    const { key, ownerToken, ttlMs, decidedAt } = lease;
    const keep = lease.renewal === true ? KEEP_RENEWAL : lease.idempotent === true ? KEEP_FOR_KEY : undefined;
    if (lease.keys === undefined) {
      const lane = this.lane(kind);
      const id = lockId(namespace, key);
      await refuseIfLateFreeing(lane.freshness, { id, ownerToken, ttlMs, decidedAt }, keep, () =>
        lane.quota.free(namespace, ownerToken, id),
      );
      return;
    }
    // A lock set: a late grant gives back every key of the set (and their quota slots), a late renewal
    // keeps them, as one key's would be.
    const ids = lease.keys.map((each) => lockId(namespace, each));
    await this.refuseSetIfLate(namespace, ids, { id: ids[0] as string, ownerToken, ttlMs, decidedAt }, keep);
  }

  /** The late-answer rule for a set's lease, given back (with its quota slots) unless kept. */
  private async refuseSetIfLate(
    namespace: string,
    ids: readonly string[],
    lease: DecidedLease,
    keep: { readonly keep: KeptBecause } | undefined,
  ): Promise<void> {
    const guard = new FreshnessGuard({ release: () => this.store.release('lock', ids, lease.ownerToken) });
    await refuseIfLateFreeing(guard, lease, keep, () => this.freeQuotaSlots(namespace, lease.ownerToken, ids));
  }

  /**
   * A lock set: several keys of the caller's namespace held under ONE owner token, all or none, in one
   * atomic store step, so nobody ever sees part of a set held and two overlapping sets asked for in any
   * order cannot deadlock: nothing is held while a set waits.
   *
   * Waiting (waitMs): the set is not queued. The caller sleeps until the busy key it was refused on
   * changes (a blocking query on that key: no polling) or its lease or lock-delay ends, then asks for
   * the whole set again, until waitMs runs out. Fair FIFO order is NOT promised for sets.
   *
   * Quota: with a per-namespace cap, a set takes one quota slot per key, before it is asked for.
   */
  async acquireSet(ask: LeaseSetAsk): Promise<LeaseSetGrant> {
    const started = performance.now();
    const { namespace, ttlMs, waitMs } = ask;
    // Only a set that may wait learns how long it waited.
    const waited = waitMs > 0 ? { seconds: 0 } : undefined;
    try {
      const ordered = this.checkKeys(ask.keys);
      this.checkTtl(ttlMs);
      this.checkWaitMs(waitMs);
      const lockDelayMs = this.checkLockDelay(ask.lockDelayMs);
      const ownerToken = newOwnerToken();
      const deadline = performance.now() + waitMs;
      // A set that may wait is an open wait like a queued acquire: admitted by the wait gate (namespace
      // and instance caps) for the whole call, and counted on the busy key while it waits on it.
      const leave = waitMs > 0 ? this.waitGate.enter(namespace) : undefined;
      let grant: LeaseSetGrant;
      try {
        const ids = ordered.map((key) => lockId(namespace, key));
        await this.reserveQuotaSlots(namespace, ownerToken, ids, ttlMs + waitMs);
        try {
          const granting = this.grantSet({ ...ask, lockDelayMs }, ordered, ownerToken, deadline, waited);
          grant = await (waited === undefined ? granting : this.reportingWait(granting, waited));
        } catch (error) {
          // A set the store may have granted keeps its slots (leaseMayBeLive).
          if (!leaseMayBeLive(error)) await this.freeQuotaSlots(namespace, ownerToken, ids);
          throw error;
        }
      } finally {
        leave?.();
      }
      this.observer.setOperation?.('acquire', 'ok', (performance.now() - started) / 1000, waited?.seconds ?? 0);
      return grant;
    } catch (error) {
      this.observer.setOperation?.('acquire', resultOf(error), (performance.now() - started) / 1000, waited?.seconds ?? 0);
      throw error;
    }
  }

  /**
   * For a set that may wait: its wait reported as a queued acquire's is (keyholder_lock_wait_seconds),
   * the time spent waiting for busy keys to change, 0 for a set granted at once.
   */
  private async reportingWait(granting: Promise<LeaseSetGrant>, waited: { seconds: number }): Promise<LeaseSetGrant> {
    let granted = false;
    try {
      const grant = await granting;
      granted = true;
      return grant;
    } finally {
      this.observer.waited?.(waited.seconds, granted);
    }
  }

  private async grantSet(
    ask: LeaseSetAsk,
    ordered: readonly string[],
    ownerToken: string,
    deadline: number,
    waited: { seconds: number } | undefined,
  ): Promise<LeaseSetGrant> {
    const { namespace, ttlMs, holder, lockDelayMs, signal } = ask;
    const ids = ordered.map((key) => lockId(namespace, key));
    for (;;) {
      // A caller that has left takes nothing, not even free keys (nobody would release them), as a queued
      // lock acquire does.
      signal?.throwIfAborted();
      // A set's quota is counted through the quota-slot calls: a one-key set goes through the plain lock step
      // (acquire.lua), whose lease must then say it took no unit there (field b = 0), as lock-set-acquire.lua's do.
      const outcome = await this.store.acquire({
        kind: 'lock',
        ids,
        capacity: 1,
        weight: 1,
        ownerToken,
        ttlMs,
        holder,
        lockDelayMs,
        quotaOutside: this.store.quotaInside === true && this.maxHeld > 0 ? true : undefined,
      });
      if (outcome.acquired) {
        if (signal?.aborted === true) {
          // The caller left while the set was being granted: given back, as a lease handed to a queued caller
          // that left is (one that could not be given back keeps its quota slots: acquireSet frees them only
          // for a refusal that holds nothing).
          await giveBackForCallerGone(
            this.store.release('lock', ids, ownerToken),
            'the caller left as its lock set was granted, and the set could not be given back: it ends by itself',
          );
          signal.throwIfAborted();
        }
        const guard = new FreshnessGuard({ release: () => this.store.release('lock', ids, ownerToken) });
        await guard.refuseIfLate({ id: ids[0] as string, ownerToken, ttlMs, decidedAt: outcome.decidedAt });
        return {
          ownerToken,
          locks: this.inAskedOrder(ask.keys, ordered, outcome.fencingTokens),
          ttlMs,
          expiresAtMs: outcome.expiresAtMs,
          holder,
          decidedAt: outcome.decidedAt,
        };
      }
      // (A set is of capacity-1 keys: never a mismatch.)
      const busyId = outcome.reason === 'full' ? outcome.busyId : (ids[0] as string);
      const leftMs = deadline - performance.now();
      const busyKey = ordered[ids.indexOf(busyId)] ?? ordered[0];
      if (leftMs <= 0) throw new LockHeldError(busyKey ?? '', outcome.retryAfterMs);
      const waitStarted = performance.now();
      try {
        await this.waitForChange(busyId, Math.min(leftMs, outcome.retryAfterMs), signal);
      } finally {
        if (waited !== undefined) waited.seconds += (performance.now() - waitStarted) / 1000;
      }
    }
  }

  renewSet(namespace: string, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseSetRenewal> {
    return this.observeSet('renew', () => this.renewSetOnce(namespace, keys, ownerToken, ttlMs));
  }

  private async renewSetOnce(namespace: string, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LeaseSetRenewal> {
    const ordered = this.checkKeys(keys);
    this.checkTtl(ttlMs);
    const ids = ordered.map((key) => lockId(namespace, key));
    const decidedAt = performance.now();
    const outcome = await this.store.renew('lock', ids, ownerToken, ttlMs);
    if (!outcome.renewed) {
      // A lost lease, as a single key's (LeaseRules.renew): keyholder_lost_leases_total, the alarm.
      this.observer.lostLease?.('renew');
      throw new NotOwnerError(keys.join(','));
    }
    try {
      // A late answer is refused but the set's lease is kept, as one key's renewal is (LeaseRules.renew).
      await this.refuseSetIfLate(namespace, ids, { id: ids[0] as string, ownerToken, ttlMs, decidedAt }, KEEP_RENEWAL);
    } finally {
      // Renewed either way: its quota units last as long.
      await this.extendQuotaSlots(namespace, ownerToken, ids, outcome.expiresAtMs, this.maxHeld);
    }
    const locks = this.inAskedOrder(keys, ordered, outcome.fencingTokens);
    const { expiresAtMs, releaseRequested } = outcome;
    return withReleaseRequest({ locks, ttlMs, expiresAtMs, decidedAt }, releaseRequested);
  }

  releaseSet(namespace: string, keys: readonly string[], ownerToken: string): Promise<void> {
    return this.observeSet('release', () => this.releaseSetOnce(namespace, keys, ownerToken));
  }

  private async releaseSetOnce(namespace: string, keys: readonly string[], ownerToken: string): Promise<void> {
    const ordered = this.checkKeys(keys);
    const ids = ordered.map((key) => lockId(namespace, key));
    const released = await this.store.release('lock', ids, ownerToken);
    if (!released) {
      this.observer.lostLease?.('release');
      throw new NotOwnerError(keys.join(','));
    }
    // Each key's slot: a key of the list the set did not hold (any more) names none.
    await this.freeQuotaSlots(namespace, ownerToken, ids);
  }

  /** 1 to 16 distinct keys; the store gets them sorted, so a set is the same set in any order. */
  private checkKeys(keys: readonly string[]): string[] {
    if (keys.length < 1 || keys.length > MAX_LOCK_SET_KEYS) {
      throw new InvalidRequestError('keys', `must hold 1 to ${MAX_LOCK_SET_KEYS} keys`);
    }
    const ordered = [...new Set(keys)].sort();
    if (ordered.length !== keys.length) throw new InvalidRequestError('keys', 'must not repeat a key');
    return ordered;
  }

  private inAskedOrder(keys: readonly string[], ordered: readonly string[], fencingTokens: readonly number[]) {
    const tokens = new Map(ordered.map((key, i) => [key, fencingTokens[i] as number]));
    return keys.map((key) => ({ key, fencingToken: tokens.get(key) as number }));
  }

  /** Sleeps until `id` changes, its lease or lock-delay may have ended (at most `waitMs`), or the caller leaves. */
  private async waitForChange(id: string, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
    const closing = this.closingSignal;
    if (closing.aborted) throw new ShuttingDownError();
    const changes = this.changesOf('lock');
    const view = await changes.current(id);
    // Freed since the set was refused: ask again at once.
    if (view.state === null && view.lockDelayUntilMs === undefined) return;
    // A lock-delay ends with nothing written (no change wakes the watch): sleep no longer than it runs,
    // so the set asks again then (and waits on whichever key is still busy), not at the longest busy end.
    // Its end is on the store's clock: where this instance's clock reads it as past (ahead of the store's),
    // how long is left is unknown here, and the set sleeps what the store's refusal said (waitMs), where a
    // sleep of 1 ms had it ask again about every millisecond until the delay ended.
    // Stryker disable next-line LogicalOperator: a lock-delay runs only while no lease is live (IndexedLockState), so || decides as &&
    const byClock = view.state === null && view.lockDelayUntilMs !== undefined ? Math.ceil(view.lockDelayUntilMs - Date.now()) + 1 : waitMs;
    const delayLeftMs = byClock > 1 ? byClock : waitMs;
    const leaveKey = this.waitGate.enterKey(id);
    const waitSignal = this.waitGate.waitSignal(signal);
    try {
      await changes.wait(id, view.index, Math.max(1, Math.min(waitMs, delayLeftMs)), waitSignal.signal);
    } finally {
      waitSignal.done();
      leaveKey();
    }
  }

  private async reserveQuotaSlots(namespace: string, ownerToken: string, ids: readonly string[], ttlMs: number): Promise<void> {
    const max = this.maxHeld;
    if (max <= 0) return;
    for (let i = 0; i < ids.length; i++) {
      const slot = await this.store.reserveQuotaSlot(
        namespace,
        leaseSlotId(ownerToken, ids[i] as string),
        ttlMs + QUOTA_SLOT_MARGIN_MS,
        max,
      );
      if (!slot.reserved) {
        // Stryker disable next-line MethodExpression: slots from i on were never reserved; freeing an unknown slot does nothing
        await this.freeQuotaSlots(namespace, ownerToken, ids.slice(0, i));
        throw new QuotaExceededError(namespace, max, slot.retryAfterMs);
      }
    }
  }

  /** Each key's slot (of `ownerToken`'s lease) counted to `expiresAtMs`, under `max` (0: no cap, no call). */
  private async extendQuotaSlots(
    namespace: string,
    ownerToken: string,
    ids: readonly string[],
    expiresAtMs: number,
    max: number,
  ): Promise<void> {
    if (max <= 0) return;
    await Promise.all(
      ids.map((id) => this.store.extendQuotaSlot(namespace, leaseSlotId(ownerToken, id), expiresAtMs, max).catch(() => undefined)),
    );
  }

  /** One lease's slot, retired under `max` (see NamespaceQuota.retire). */
  private async retireQuotaSlot(namespace: string, ownerToken: string, id: string, untilMs: number, max: number): Promise<void> {
    await this.store.retireQuotaSlot(namespace, leaseSlotId(ownerToken, id), untilMs, max).catch(() => undefined);
  }

  private async freeQuotaSlots(namespace: string, ownerToken: string, ids: readonly string[]): Promise<void> {
    const max = this.maxHeld;
    if (max <= 0) return;
    await Promise.all(ids.map((id) => this.store.freeQuotaSlot(namespace, leaseSlotId(ownerToken, id), max).catch(() => undefined)));
  }

  /** The parts for `kind`, made on first use: its leases are given back through its own store steps. */
  private lane(kind: LeaseKind): Lane {
    const known = this.lanes.get(kind);
    if (known !== undefined) return known;
    const { store, limits, observer } = this;
    const giveBack = (id: string, ownerToken: string) => store.release(kind, [id], ownerToken);
    const slots = {
      reserveQuotaSlot: store.reserveQuotaSlot.bind(store),
      extendQuotaSlot: store.extendQuotaSlot.bind(store),
      freeQuotaSlot: store.freeQuotaSlot.bind(store),
      retireQuotaSlot: store.retireQuotaSlot.bind(store),
      release: giveBack,
    };
    // With the quota inside the store's lock steps, the service's own quota-slot calls are off (a cap of 0).
    const quota = new NamespaceQuota(slots, this.quotaInside(kind) === undefined ? this.maxHeld : 0);
    const freshness = new FreshnessGuard({ release: giveBack });
    const rules = new LeaseRules({ limits, gate: this.waitGate, quota, freshness, observer, giveBack });
    const lane: Lane = { quota, freshness, rules, changes: this.newWatch(kind) };
    this.lanes.set(kind, lane);
    return lane;
  }

  private newWatch(kind: LeaseKind): Lane['changes'] {
    const { store } = this;
    if (kind === 'lock') {
      return new ChangeWatch(
        lockWatchSource({
          watchChanges: (id, onChange) => store.watchChanges('lock', id, onChange),
          inspectIndexed: (id): Promise<IndexedLockState> => store.inspectIndexed('lock', id),
        }),
      );
    }
    return new ChangeWatch(
      permitWatchSource(store, kind),
      // An immediate inspect reads up to 100 holders and answers them all: callers asking together
      // (a dashboard's panels, a poller's workers) share one read and one answer body.
      true,
    );
  }

  /** One operation's end for the observer, as observe() reports it (for the calls timed inline). */
  private report(
    kind: LeaseKind,
    op: LeaseOperation,
    result: OperationResult,
    started: number,
    waited: { readonly seconds: number } | undefined,
  ): void {
    this.observer.operation?.(kind, op, result, (performance.now() - started) / 1000, waited?.seconds ?? 0);
  }

  private observeSet<T>(op: LockSetOperation, run: () => Promise<T>): Promise<T> {
    return observeOperation(run, (result, seconds) => this.observer.setOperation?.(op, result, seconds, 0));
  }

  private observe<T>(kind: LeaseKind, op: LeaseOperation, run: () => Promise<T>, waited?: { readonly seconds: number }): Promise<T> {
    return observeOperation(run, (result, seconds) => this.observer.operation?.(kind, op, result, seconds, waited?.seconds ?? 0));
  }
}
