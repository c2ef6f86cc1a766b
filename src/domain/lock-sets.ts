import { performance } from 'node:perf_hooks';
import { InvalidRequestError, LockHeldError, NotOwnerError, QuotaExceededError, ShuttingDownError } from './errors.js';
import { FreshnessGuard } from './freshness.js';
import type { LockLimits } from './limits.js';
import { newOwnerToken, type LockService } from './lock-service.js';
import type { LockSetStore, LockStore } from './lock-store.js';
import { lockId } from './namespaces.js';
import { SLOT_MARGIN_MS } from './quota.js';

/** 16: enough for a transfer between a handful of accounts; a set is one script over all its keys. */
export const MAX_LOCK_SET_KEYS = 16;

export interface LockSetOptions {
  readonly holder?: string | null;
  /** Retry for up to this long while some key of the set is busy (see acquire). */
  readonly waitMs?: number;
  readonly lockDelayMs?: number;
  readonly signal?: AbortSignal;
}

export interface LockSetGrant {
  readonly ownerToken: string;
  /** Each key with its own fencing token, in the order the keys were asked for. */
  readonly locks: ReadonlyArray<{ readonly key: string; readonly fencingToken: number }>;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
}

export interface LockSetRenewal {
  readonly locks: ReadonlyArray<{ readonly key: string; readonly fencingToken: number }>;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
}

/**
 * Lock sets: several keys of the caller's namespace held under ONE owner token, all or none. The store
 * decides each step over the whole set atomically (one Lua script on Redis: the namespace's keys share
 * one Cluster slot), so nobody ever sees part of a set held, and two overlapping sets asked for in any
 * order cannot deadlock: nothing is held while a set waits.
 *
 * Waiting (waitMs): the set is not queued. The caller sleeps until the busy key it was refused on
 * changes (a blocking query on that key: no polling) or its lease or lock-delay ends, then asks for
 * the whole set again, until waitMs runs out. Fair FIFO order is NOT promised for sets: a plain
 * acquirer (or the key's queued waiters, which a set never jumps) may get a key first.
 *
 * Quota: with a per-namespace cap, a set takes one quota slot per key, before it is asked for.
 */
export class LockSetService {
  constructor(
    private readonly store: LockStore,
    private readonly limits: LockLimits,
    private readonly locks: LockService,
  ) {}

  async acquire(namespace: string, keys: readonly string[], ttlMs: number, options: LockSetOptions = {}): Promise<LockSetGrant> {
    // Refused before any check or count on a store without lock sets.
    this.sets();
    const ordered = this.checkKeys(keys);
    this.locks.checkTtl(ttlMs);
    const waitMs = options.waitMs ?? 0;
    this.locks.checkWaitMs(waitMs);
    const lockDelayMs = this.locks.checkLockDelay(options.lockDelayMs ?? 0);
    const holder = options.holder ?? null;
    const ownerToken = newOwnerToken();
    const ids = ordered.map((key) => lockId(namespace, key));
    const deadline = performance.now() + waitMs;
    // A set that may wait is an open wait like a queued acquire: admitted by the wait gate (namespace
    // and instance caps) for the whole call, and counted on the busy key while it waits on it.
    const leave = waitMs > 0 ? this.locks.waitGate.enter(namespace) : undefined;
    try {
      return await this.acquireCounted(
        namespace,
        { ordered, keys, ids, ownerToken, ttlMs, holder, lockDelayMs, deadline, waitMs },
        options.signal,
      );
    } finally {
      leave?.();
    }
  }

  private async acquireCounted(
    namespace: string,
    asked: {
      readonly ordered: readonly string[];
      readonly keys: readonly string[];
      readonly ids: readonly string[];
      readonly ownerToken: string;
      readonly ttlMs: number;
      readonly holder: string | null;
      readonly lockDelayMs: number;
      readonly deadline: number;
      readonly waitMs: number;
    },
    signal: AbortSignal | undefined,
  ): Promise<LockSetGrant> {
    const sets = this.sets();
    const { ordered, keys, ids, ownerToken, ttlMs, holder, lockDelayMs, deadline, waitMs } = asked;
    await this.reserveSlots(namespace, ownerToken, ordered.length, ttlMs + waitMs);
    let granted = false;
    try {
      for (;;) {
        const outcome = await sets.acquireSet({ keys: ids, ownerToken, ttlMs, holder, lockDelayMs });
        if (outcome.acquired) {
          granted = true;
          const guard = new FreshnessGuard({ release: () => sets.releaseSet(ids, ownerToken) });
          await guard.refuseIfLate({ id: ids[0] as string, ownerToken, ttlMs, decidedAt: outcome.decidedAt });
          const tokens = new Map(ordered.map((key, i) => [key, outcome.fencingTokens[i] as number]));
          return {
            ownerToken,
            locks: keys.map((key) => ({ key, fencingToken: tokens.get(key) as number })),
            ttlMs,
            expiresAtMs: outcome.expiresAtMs,
            holder,
          };
        }
        const leftMs = deadline - performance.now();
        const busyKey = ordered[ids.indexOf(outcome.busyKey)] ?? ordered[0];
        if (leftMs <= 0) throw new LockHeldError(busyKey ?? '', outcome.retryAfterMs);
        await this.waitForChange(outcome.busyKey, Math.min(leftMs, outcome.retryAfterMs), signal);
      }
    } finally {
      if (!granted) await this.freeSlots(namespace, ownerToken, ordered.length);
    }
  }

  async renew(namespace: string, keys: readonly string[], ownerToken: string, ttlMs: number): Promise<LockSetRenewal> {
    const sets = this.sets();
    const ordered = this.checkKeys(keys);
    this.locks.checkTtl(ttlMs);
    const outcome = await sets.renewSet(
      ordered.map((key) => lockId(namespace, key)),
      ownerToken,
      ttlMs,
    );
    if (!outcome.renewed) throw new NotOwnerError(keys.join(','));
    if ((this.limits.maxHeldLocksPerNamespace ?? 0) > 0) {
      const max = this.limits.maxHeldLocksPerNamespace ?? 0;
      await Promise.all(
        ordered.map((_k, i) => this.store.extendSlot(namespace, slotId(ownerToken, i), outcome.expiresAtMs, max).catch(() => undefined)),
      );
    }
    const tokens = new Map(ordered.map((key, i) => [key, outcome.fencingTokens[i] as number]));
    return { locks: keys.map((key) => ({ key, fencingToken: tokens.get(key) as number })), ttlMs, expiresAtMs: outcome.expiresAtMs };
  }

  async release(namespace: string, keys: readonly string[], ownerToken: string): Promise<void> {
    const sets = this.sets();
    const ordered = this.checkKeys(keys);
    const released = await sets.releaseSet(
      ordered.map((key) => lockId(namespace, key)),
      ownerToken,
    );
    if (!released) throw new NotOwnerError(keys.join(','));
    await this.freeSlots(namespace, ownerToken, ordered.length);
  }

  private sets(): LockSetStore {
    return this.store.lockSets;
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

  /** Sleeps until `id` changes, its lease or lock-delay may have ended (at most `waitMs`), or the caller leaves. */
  private async waitForChange(id: string, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
    const closing = this.locks.closingSignal;
    if (closing.aborted) throw new ShuttingDownError();
    const view = await this.locks.changes.current(id);
    // Freed since the set was refused: ask again at once.
    if (view.state === null && view.lockDelayUntilMs === undefined) return;
    const leaveKey = this.locks.waitGate.enterKey(id);
    try {
      await this.locks.changes.wait(id, view.index, Math.max(1, waitMs), signal ? AbortSignal.any([signal, closing]) : closing);
    } finally {
      leaveKey();
    }
  }

  private async reserveSlots(namespace: string, ownerToken: string, count: number, ttlMs: number): Promise<void> {
    const max = this.limits.maxHeldLocksPerNamespace ?? 0;
    if (max <= 0) return;
    for (let i = 0; i < count; i++) {
      const slot = await this.store.reserveSlot(namespace, slotId(ownerToken, i), ttlMs + SLOT_MARGIN_MS, max);
      if (!slot.reserved) {
        await this.freeSlots(namespace, ownerToken, i);
        throw new QuotaExceededError(namespace, max, slot.retryAfterMs);
      }
    }
  }

  private async freeSlots(namespace: string, ownerToken: string, count: number): Promise<void> {
    const max = this.limits.maxHeldLocksPerNamespace ?? 0;
    if (max <= 0) return;
    await Promise.all(
      Array.from({ length: count }, (_v, i) => this.store.freeSlot(namespace, slotId(ownerToken, i), max).catch(() => undefined)),
    );
  }
}

/** A set's i-th quota slot: one per key, all named after the set's owner token. */
function slotId(ownerToken: string, i: number): string {
  return `${ownerToken}.${i}`;
}
