import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  IdempotencyKeyReusedError,
  InvalidRequestError,
  isDomainError,
  LockHeldError,
  NotOwnerError,
  QuotaExceededError,
  RateLimitedError,
  ShuttingDownError,
  StoreUnavailableError,
  TooManyWaitersError,
  WaitAbortedError,
} from '../../src/domain/errors.js';
import { nextFencingToken } from '../../src/domain/fencing.js';
import { compareIdempotencyKeys, idempotencyKeyOf, idempotencyScope } from '../../src/domain/idempotency.js';
import { FreshnessGuard, LATE_REPLY_FRACTION } from '../../src/domain/freshness.js';
import { ownLag } from '../../src/domain/own-lag.js';
import type { LeaseLimits } from '../../src/domain/limits.js';
import type { AcquireOutcome } from '../helpers/store-words.js';
import { type LockObserver, LockService, newOwnerToken } from '../../src/domain/lock-service.js';
import { lockId, parseLockId } from '../../src/domain/namespaces.js';
import { NamespaceQuota, QUOTA_SLOT_MARGIN_MS } from '../../src/domain/quota.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { withLeases } from '../helpers/with-leases.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { withWords } from '../helpers/store-words.js';

/**
 * The lock rules one unit at a time, on the embedded store with a clock the test moves: TTL and wait
 * bounds, the waiter caps, the quota's slot bookkeeping, the late-grant guard's threshold, what the
 * observer hears, and the error table's fields. Fast and in-process, so the mutation run
 * (test/mutants) uses it on every mutant it reaches.
 */
const LIMITS: LeaseLimits = {
  minTtlMs: 100,
  maxTtlMs: 100_000,
  maxWaitMs: 5_000,
  maxWaitersPerKey: 10,
  maxWaitersPerInstance: 3,
  maxWaitersPerNamespace: 2,
  maxHeldLocksPerNamespace: 0,
};

function setUp(limits: Partial<LeaseLimits> = {}, observer: LockObserver = {}) {
  const clock = new FakeClock();
  const store = withWords(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: clock.now }));
  const locks = new LockService(store, { ...LIMITS, ...limits }, observer);
  return { clock, store, locks };
}

/** Resolves when `locks` has `n` callers waiting (the store answers the queue length as inspect's `waiters`). */
const waitersAre = (locks: LockService, n: number) => vi.waitFor(() => expect(locks.waitingCallers).toBe(n), { timeout: 5_000 });

describe('namespaces: lock ids', () => {
  it('an id splits back into exactly its namespace and key', () => {
    expect(lockId('team-a', 'x:y')).toBe('team-a/x:y');
    expect(parseLockId('team-a/x:y')).toEqual({ namespace: 'team-a', key: 'x:y' });
    expect(parseLockId('a/b')).toEqual({ namespace: 'a', key: 'b' });
  });

  it('ids no namespace produced are null', () => {
    expect(parseLockId('no-separator')).toBeNull();
    expect(parseLockId('/key')).toBeNull(); // empty namespace
    expect(parseLockId('team-a/')).toBeNull(); // empty key
    expect(parseLockId('team-a/x/y')).toBeNull(); // a key never holds the separator
    expect(parseLockId('-team/key')).toBeNull(); // namespaces start with a letter or digit
    expect(parseLockId('{team}/key')).toBeNull(); // braces would be a Redis hash tag
    expect(parseLockId(`${'n'.repeat(65)}/key`)).toBeNull();
    expect(parseLockId(`${'n'.repeat(64)}/key`)).toEqual({ namespace: 'n'.repeat(64), key: 'key' });
  });
});

describe('idempotency: the key the store keeps', () => {
  it('is 22 characters, the same for the same caller and key, and different across callers or keys', () => {
    const scope = idempotencyScope('caller', 'retry-1');
    expect(scope).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(idempotencyScope('caller', 'retry-1')).toBe(scope);
    expect(idempotencyScope('other', 'retry-1')).not.toBe(scope);
    expect(idempotencyScope('caller', 'retry-2')).not.toBe(scope);
    // The separator keeps (caller "ab", key "c") apart from (caller "a", key "bc").
    expect(idempotencyScope('ab', 'c')).not.toBe(idempotencyScope('a', 'bc'));
  });

  it('carries a fingerprint of what shapes the grant: the same request replays, another one under the same key is a reuse', () => {
    const grant = { ttlMs: 5_000, holder: 'w1', lockDelayMs: 0 };
    const stored = idempotencyKeyOf('caller', 'retry-1', grant);
    expect(stored.startsWith(`${idempotencyScope('caller', 'retry-1')}:`)).toBe(true);
    expect(compareIdempotencyKeys(stored, idempotencyKeyOf('caller', 'retry-1', { ...grant }))).toBe('replay');
    for (const changed of [{ ttlMs: 3_600_000 }, { holder: 'w2' }, { holder: null }, { lockDelayMs: 1_000 }]) {
      expect(compareIdempotencyKeys(stored, idempotencyKeyOf('caller', 'retry-1', { ...grant, ...changed }))).toBe('reused');
    }
    // "" is no holder, as the stores read it.
    expect(idempotencyKeyOf('c', 'k', { ...grant, holder: '' })).toBe(idempotencyKeyOf('c', 'k', { ...grant, holder: null }));
    expect(compareIdempotencyKeys(stored, idempotencyKeyOf('other', 'retry-1', grant))).toBe('other');
    expect(compareIdempotencyKeys(null, stored)).toBe('other');
  });
});

describe('fencing: next token', () => {
  it('is last + 1 when the last token is at or ahead of the clock, else the clock in microseconds', () => {
    expect(nextFencingToken(5_000_000, 1_000)).toBe(5_000_001);
    expect(nextFencingToken(999_999, 1_000)).toBe(1_000_000);
    expect(nextFencingToken(1_000_000, 1_000)).toBe(1_000_001);
    expect(nextFencingToken(0, 1_000.0007)).toBe(1_000_000);
  });
});

describe('errors: codes and retry hints', () => {
  it('each error carries its code, its retry hint and what the caller needs', () => {
    const invalid = new InvalidRequestError('ttlMs', 'too short');
    expect(invalid).toMatchObject({ code: 'invalid_request', field: 'ttlMs', message: 'ttlMs: too short' });
    expect(invalid.fields).toEqual([{ field: 'ttlMs', message: 'ttlMs: too short' }]);
    expect(new LockHeldError('k', 250)).toMatchObject({ code: 'lock_held', key: 'k', retryAfterMs: 250 });
    expect(new NotOwnerError('k')).toMatchObject({ code: 'not_owner', key: 'k' });
    expect(new StoreUnavailableError('down')).toMatchObject({ code: 'store_unavailable', retryAfterMs: 1000 });
    expect(new StoreUnavailableError('down', 5)).toMatchObject({ retryAfterMs: 5 });
    expect(new ShuttingDownError()).toMatchObject({ code: 'shutting_down', retryAfterMs: 1000 });
    expect(new WaitAbortedError()).toMatchObject({ code: 'wait_aborted' });
    expect(new QuotaExceededError('ns', 3, 40)).toMatchObject({
      code: 'quota_exceeded',
      namespace: 'ns',
      maxHeldLocks: 3,
      retryAfterMs: 40,
    });
    expect(new RateLimitedError(10)).toMatchObject({ code: 'rate_limited', statusCode: 429, retryAfterMs: 10 });
  });

  it('too_many_waiters names its scope; rate_limited rounds its retry up to whole seconds, at least 1', () => {
    expect(new TooManyWaitersError('key')).toMatchObject({ code: 'too_many_waiters', scope: 'key', retryAfterMs: 1000 });
    expect(new TooManyWaitersError('key').message).toMatch(/this lock/);
    expect(new TooManyWaitersError('namespace', 7)).toMatchObject({ scope: 'namespace', retryAfterMs: 7 });
    expect(new TooManyWaitersError('namespace').message).toMatch(/^this namespace/);
    expect(new TooManyWaitersError('instance').message).toMatch(/^this instance/);
    expect(new RateLimitedError(10).message).toMatch(/retry in 1 s/);
    expect(new RateLimitedError(2_001).message).toMatch(/retry in 3 s/);
  });

  it('isDomainError tells domain errors from others', () => {
    expect(isDomainError(new NotOwnerError('k'))).toBe(true);
    expect(isDomainError(new Error('x'))).toBe(false);
    expect(isDomainError('not_owner')).toBe(false);
  });
});

describe('freshness: the late-grant guard', () => {
  // The store is to blame here, never this process: a stall of the event loop before these cases ran
  // (another file's work in a shared worker, a busy host) would otherwise turn the answer into
  // `overloaded`.
  beforeEach(() => void vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0));
  afterEach(() => vi.restoreAllMocks());

  it('hands out a reply that came back within half the lease; gives back and refuses one that came later', async () => {
    expect(LATE_REPLY_FRACTION).toBe(0.5);
    const { store } = setUp();
    const guard = new FreshnessGuard(store);
    const ownerToken = newOwnerToken();
    const grant = await store.acquire({ id: 'k', ownerToken, ttlMs: 1_000, holder: null });
    expect(grant.acquired).toBe(true);
    // 0.4 of the lease gone: still fresh (a guard at 0.5 * ttl, not ttl / 0.5 or ttl * 0.5 * 0.5).
    await guard.refuseIfLate({ id: 'k', ownerToken, ttlMs: 1_000, decidedAt: performance.now() - 400 });
    expect(await store.inspect('k')).not.toBeNull();
    // 0.6 of the lease gone: refused, and the lease is given back.
    await expect(guard.refuseIfLate({ id: 'k', ownerToken, ttlMs: 1_000, decidedAt: performance.now() - 600 })).rejects.toThrow(
      StoreUnavailableError,
    );
    expect(await store.inspect('k')).toBeNull();
  });

  it('refuses even when giving the lease back fails', async () => {
    const { store } = setUp();
    await store.close();
    const guard = new FreshnessGuard(store);
    await expect(guard.refuseIfLate({ id: 'k', ownerToken: 'o', ttlMs: 1_000, decidedAt: performance.now() - 10_000 })).rejects.toThrow(
      StoreUnavailableError,
    );
  });
});

describe('lock service: bounds', () => {
  it('ttlMs must be an integer inside the configured bounds, for acquire and renew', async () => {
    const { locks } = setUp();
    for (const ttlMs of [99, 100_001, 150.5, Number.NaN]) {
      await expect(locks.acquire('ns', 'k', ttlMs)).rejects.toMatchObject({ code: 'invalid_request', field: 'ttlMs' });
    }
    const low = await locks.acquire('ns', 'low', 100);
    const high = await locks.acquire('ns', 'high', 100_000);
    expect(high.ttlMs).toBe(100_000);
    await expect(locks.renew('ns', 'low', low.ownerToken, 100_001)).rejects.toMatchObject({ field: 'ttlMs' });
    await expect(locks.renew('ns', 'low', low.ownerToken, 99)).rejects.toMatchObject({ field: 'ttlMs' });
    expect((await locks.renew('ns', 'low', low.ownerToken, 100)).ttlMs).toBe(100);
  });

  it('waitMs must be an integer from 0 to the configured maximum', async () => {
    const { locks } = setUp();
    for (const waitMs of [-1, 5_001, 0.5]) {
      await expect(locks.acquire('ns', 'k', 1_000, { waitMs })).rejects.toMatchObject({ code: 'invalid_request', field: 'waitMs' });
    }
    // The maximum itself is allowed (the key is free, so the grant is immediate).
    const grant = await locks.acquire('ns', 'k', 1_000, { waitMs: 5_000 });
    expect(grant.fencingToken).toBeGreaterThan(0);
  });
});

describe('lock service: the grant it reports', () => {
  it('carries the key, its own owner token, the holder label, the store lease, and when the store decided', async () => {
    const { locks, clock } = setUp();
    const before = performance.now();
    const grant = await locks.acquire('ns', 'k', 2_000, { holder: 'worker-1' });
    expect(grant).toMatchObject({ key: 'k', ttlMs: 2_000, holder: 'worker-1', expiresAtMs: Math.floor(clock.nowMs) + 2_000 });
    expect(grant.ownerToken).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(grant.decidedAt).toBeGreaterThanOrEqual(before);
    expect(grant.decidedAt).toBeLessThanOrEqual(performance.now());
    expect((await locks.acquire('ns', 'other', 2_000)).holder).toBeNull();
    // Namespaces are separate locks.
    expect((await locks.acquire('ns2', 'k', 2_000)).key).toBe('k');
    await expect(locks.acquire('ns', 'k', 2_000)).rejects.toMatchObject({ code: 'lock_held', key: 'k', retryAfterMs: 2_000 });
  });

  it('renew reports the renewed lease; renew and release of a lost lease are not_owner and reported as lost', async () => {
    const lost: string[] = [];
    const { locks, clock } = setUp({}, { lostLease: (op) => lost.push(op) });
    const grant = await locks.acquire('ns', 'k', 1_000);
    clock.advance(500);
    const renewed = await locks.renew('ns', 'k', grant.ownerToken, 3_000);
    expect(renewed).toMatchObject({
      key: 'k',
      fencingToken: grant.fencingToken,
      ttlMs: 3_000,
      expiresAtMs: Math.floor(clock.nowMs) + 3_000,
    });
    expect(lost).toEqual([]);
    clock.advance(3_001);
    await expect(locks.renew('ns', 'k', grant.ownerToken, 1_000)).rejects.toBeInstanceOf(NotOwnerError);
    await expect(locks.release('ns', 'k', grant.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    expect(lost).toEqual(['renew', 'release']);
  });

  it('an acquire repeated with the same idempotency key and request gets the live lease back exactly; another request under the key is refused', async () => {
    const { locks } = setUp({ maxHeldLocksPerNamespace: 2 });
    const idempotency = { callerId: 'caller', key: 'retry-1' };
    const first = await locks.acquire('ns', 'k', 2_000, { holder: 'first', idempotency });
    const again = await locks.acquire('ns', 'k', 2_000, { holder: 'first', idempotency });
    // The same lease, marked as the earlier one answered again (history records no second grant).
    expect(first.replayed).toBeUndefined();
    expect(again).toEqual({ ...first, decidedAt: again.decidedAt, replayed: true });
    // Any field that shapes the grant, changed, is the key reused for another request.
    await expect(locks.acquire('ns', 'k', 2_000, { holder: 'second', idempotency })).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
    await expect(locks.acquire('ns', 'k', 90_000, { holder: 'first', idempotency })).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
    // The replay's own slot was given back: the namespace's second slot is free for another lock.
    const other = await locks.acquire('ns', 'other', 2_000);
    await expect(locks.acquire('ns', 'third', 2_000)).rejects.toBeInstanceOf(QuotaExceededError);
    await locks.release('ns', 'other', other.ownerToken);
    // Another caller with the same key is not the same request.
    await expect(locks.acquire('ns', 'k', 2_000, { idempotency: { callerId: 'other', key: 'retry-1' } })).rejects.toBeInstanceOf(
      LockHeldError,
    );
  });
});

describe('lock service: what the observer hears', () => {
  it('each operation with its result: ok, the domain error code, or error for anything else', async () => {
    const seen: Array<[string, string]> = [];
    const durations: number[] = [];
    const { locks, store } = setUp(
      {},
      {
        operation: (op, result, seconds) => {
          seen.push([op, result]);
          durations.push(seconds);
        },
      },
    );
    const grant = await locks.acquire('ns', 'k', 1_000);
    await expect(locks.acquire('ns', 'k', 1_000)).rejects.toThrow();
    await locks.renew('ns', 'k', grant.ownerToken, 1_000);
    await locks.inspect('ns', 'k');
    await locks.release('ns', 'k', grant.ownerToken);
    await store.close();
    await expect(locks.inspect('ns', 'k')).rejects.toThrow();
    expect(seen).toEqual([
      ['acquire', 'ok'],
      ['acquire', 'lock_held'],
      ['renew', 'ok'],
      ['inspect', 'ok'],
      ['release', 'ok'],
      ['inspect', 'store_unavailable'],
    ]);
    for (const seconds of durations) {
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThan(5);
    }
    const broken = new LockService(
      withLeases(store, () => ({ inspect: () => Promise.reject(new TypeError('bug')) })),
      LIMITS,
      {
        operation: (op, result) => seen.push([op, result]),
      },
    );
    await expect(broken.inspect('ns', 'k')).rejects.toThrow(TypeError);
    expect(seen.at(-1)).toEqual(['inspect', 'error']);
  });

  it('a waiter is reported with how long it waited and whether it was granted', async () => {
    const waits: Array<[number, boolean]> = [];
    const { locks } = setUp({}, { waited: (seconds, granted) => waits.push([seconds, granted]) });
    const holder = await locks.acquire('ns', 'k', 60_000);
    const granted = locks.acquire('ns', 'k', 1_000, { waitMs: 5_000 });
    await waitersAre(locks, 1);
    await locks.release('ns', 'k', holder.ownerToken);
    await granted;
    await locks.acquire('ns', 'k2', 60_000);
    await expect(locks.acquire('ns', 'k2', 1_000, { waitMs: 20 })).rejects.toBeInstanceOf(LockHeldError);
    expect(waits.map(([, ok]) => ok)).toEqual([true, false]);
    expect(waits[1]?.[0]).toBeGreaterThanOrEqual(0.015);
    expect(waits[1]?.[0]).toBeLessThan(5);
  });
});

describe('lock service: waiting callers', () => {
  it('caps waiters per namespace, then per instance, and counts them back down as they finish', async () => {
    const { locks } = setUp({ maxWaitersPerNamespace: 2, maxWaitersPerInstance: 3 });
    const held = await Promise.all(['a', 'b', 'c'].map((key) => locks.acquire('ns', key, 60_000)));
    await locks.acquire('other', 'x', 60_000);
    const wait = (ns: string, key: string) => locks.acquire(ns, key, 1_000, { waitMs: 5_000 });
    const w1 = wait('ns', 'a');
    const w2 = wait('ns', 'b');
    await waitersAre(locks, 2);
    await expect(wait('ns', 'c')).rejects.toMatchObject({ code: 'too_many_waiters', scope: 'namespace' });
    const w3 = wait('other', 'x');
    await waitersAre(locks, 3);
    await expect(wait('third', 'y')).rejects.toMatchObject({ code: 'too_many_waiters', scope: 'instance' });
    // As each waiter is granted, its place is free again, for its namespace and for the instance.
    await locks.release('ns', 'a', held[0]!.ownerToken);
    await w1;
    await waitersAre(locks, 2);
    const w4 = wait('ns', 'c');
    await waitersAre(locks, 3);
    // ns has two waiting again (w2, w4): still at its cap.
    await expect(wait('ns', 'c')).rejects.toMatchObject({ scope: 'namespace' });
    await locks.release('ns', 'b', held[1]!.ownerToken);
    await locks.release('ns', 'c', held[2]!.ownerToken);
    await Promise.all([w2, w4]);
    await waitersAre(locks, 1);
    locks.shutdown();
    await expect(w3).rejects.toBeInstanceOf(ShuttingDownError);
    expect(locks.waitingCallers).toBe(0);
  });

  it('with no namespace cap configured, the instance cap alone applies', async () => {
    const { locks } = setUp({ maxWaitersPerNamespace: undefined, maxWaitersPerInstance: 2 });
    await locks.acquire('ns', 'a', 60_000);
    const waits = [1, 2].map(() => locks.acquire('ns', 'a', 1_000, { waitMs: 5_000 }).catch((err: unknown) => err));
    await waitersAre(locks, 2);
    await expect(locks.acquire('ns', 'a', 1_000, { waitMs: 5_000 })).rejects.toMatchObject({ scope: 'instance' });
    locks.shutdown();
    for (const outcome of await Promise.all(waits)) expect(outcome).toBeInstanceOf(ShuttingDownError);
  });

  it('after shutdown a caller that asks to wait is refused at once; one that does not wait is still answered', async () => {
    const { locks } = setUp();
    locks.shutdown();
    await expect(locks.acquire('ns', 'k', 1_000, { waitMs: 1_000 })).rejects.toBeInstanceOf(ShuttingDownError);
    expect((await locks.acquire('ns', 'k', 1_000)).key).toBe('k');
  });

  it('a caller that leaves while waiting is answered wait_aborted and holds nothing', async () => {
    const { locks } = setUp();
    const holder = await locks.acquire('ns', 'k', 60_000);
    const caller = new AbortController();
    const leaving = locks.acquire('ns', 'k', 1_000, { waitMs: 5_000, signal: caller.signal });
    await waitersAre(locks, 1);
    caller.abort(new WaitAbortedError());
    await expect(leaving).rejects.toBeInstanceOf(WaitAbortedError);
    expect(locks.waitingCallers).toBe(0);
    expect((await locks.inspect('ns', 'k'))?.fencingToken).toBe(holder.fencingToken);
  });
});

describe('lock service: quota and administration', () => {
  it("a force release frees the evicted lease's quota slot and says what it evicted; a free lock evicts nothing", async () => {
    const { locks } = setUp({ maxHeldLocksPerNamespace: 1 });
    const grant = await locks.acquire('ns', 'a', 60_000, { holder: 'w' });
    await expect(locks.acquire('ns', 'b', 60_000)).rejects.toBeInstanceOf(QuotaExceededError);
    expect(await locks.forceRelease('ns', 'a')).toEqual({ holder: 'w', fencingToken: grant.fencingToken });
    expect(await locks.forceRelease('ns', 'a')).toBeNull();
    expect((await locks.acquire('ns', 'b', 60_000)).key).toBe('b');
  });

  it('a release frees the slot; a renew moves it to the lease end', async () => {
    const { locks, clock } = setUp({ maxHeldLocksPerNamespace: 1 });
    const grant = await locks.acquire('ns', 'a', 1_000);
    await locks.renew('ns', 'a', grant.ownerToken, 10_000);
    // Past the grant's own slot (ttl + margin) but inside the renewed lease: the slot still counts.
    clock.advance(1_000 + QUOTA_SLOT_MARGIN_MS + 1);
    await expect(locks.acquire('ns', 'b', 1_000)).rejects.toMatchObject({ code: 'quota_exceeded', retryAfterMs: 10_000 - 2_001 });
    await locks.release('ns', 'a', grant.ownerToken);
    await locks.acquire('ns', 'b', 1_000);
  });

  it('listing: one namespace by key prefix, or all namespaces; never ids no namespace produced', async () => {
    const { locks, store } = setUp();
    await locks.acquire('ns', 'job:1', 60_000, { holder: 'h' });
    await locks.acquire('ns', 'other', 60_000);
    await locks.acquire('ns2', 'job:2', 60_000);
    await store.acquire({ id: 'legacy-id', ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null });
    const page = await locks.listHeld({ namespace: 'ns', prefix: 'job:', limit: 10 });
    expect(page.locks.map((l) => [l.namespace, l.key, l.holder])).toEqual([['ns', 'job:1', 'h']]);
    expect(page.nextCursor).toBeNull();
    const all = await locks.listHeld({ prefix: '', limit: 10 });
    expect(all.locks.map((l) => `${l.namespace}/${l.key}`)).toEqual(['ns/job:1', 'ns/other', 'ns2/job:2']);
    await expect(locks.listHeld({ prefix: 'job:', limit: 10 })).rejects.toMatchObject({ field: 'prefix' });
    const first = await locks.listHeld({ namespace: 'ns', prefix: '', limit: 1 });
    expect(first.nextCursor).not.toBeNull();
    const second = await locks.listHeld({ namespace: 'ns', prefix: '', limit: 1, cursor: first.nextCursor ?? undefined });
    expect(second.locks.map((l) => l.key)).toEqual(['other']);
  });

  it('confirmFresh gives back a lease that ran past half its TTL since the store decided it', async () => {
    const { locks } = setUp();
    const grant = await locks.acquire('ns', 'k', 1_000);
    await locks.confirmFresh('ns', grant);
    // Decided 600 ms ago on paper; this process was not held up meanwhile (pinned: a busy test host would be).
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    await expect(locks.confirmFresh('ns', { ...grant, decidedAt: performance.now() - 600 }))
      .rejects.toBeInstanceOf(StoreUnavailableError)
      .finally(() => lag.mockRestore());
    expect(await locks.inspect('ns', 'k')).toBeNull();
  });
});

describe('quota: slots', () => {
  /** A store whose calls the test sees, over the real embedded store. */
  function recording() {
    const { store, clock } = setUp();
    const calls: string[] = [];
    const spied = {
      reserveQuotaSlot: (ns: string, id: string, ttlMs: number, max: number) => {
        calls.push(`reserve ${ttlMs} ${max}`);
        return store.reserveQuotaSlot(ns, id, ttlMs, max);
      },
      extendQuotaSlot: (ns: string, id: string, end: number) => {
        calls.push(`extend ${end}`);
        return store.extendQuotaSlot(ns, id, end);
      },
      freeQuotaSlot: (ns: string, id: string) => {
        calls.push('free');
        return store.freeQuotaSlot(ns, id);
      },
      retireQuotaSlot: (ns: string, id: string, until: number) => {
        calls.push(`retire ${until}`);
        return store.retireQuotaSlot(ns, id, until);
      },
      release: (id: string, owner: string) => {
        calls.push(`release ${id}`);
        return store.release(id, owner);
      },
    };
    return { store, clock, calls, spied };
  }
  const granted = async (outcome: Promise<AcquireOutcome>) => {
    const result = await outcome;
    if (!result.acquired) throw new LockHeldError('k', result.retryAfterMs);
    return result;
  };
  const claim = (ownerToken: string, id = 'ns/k') => ({ namespace: 'ns', id, ownerToken, ttlMs: 1_000 });

  it('no cap: no slot bookkeeping at all', async () => {
    const { calls, spied } = recording();
    const quota = new NamespaceQuota(spied, 0);
    expect(await quota.grantNow(claim('o'), async () => ({ fencingToken: 1, expiresAtMs: 2 }))).toEqual({
      fencingToken: 1,
      expiresAtMs: 2,
    });
    await quota.grantWaiting(claim('o'), 100, async () => ({ fencingToken: 1, expiresAtMs: 2 }));
    await quota.extend('ns', 'o', 'ns/k', 5);
    await quota.free('ns', 'o', 'ns/k');
    await quota.retire('ns', 'o', 'ns/k', 5);
    expect(calls).toEqual([]);
  });

  it('an immediate grant reserves ttl + margin; a waiting one wait + ttl + margin; a renew extends; a release frees', async () => {
    const { calls, spied } = recording();
    const quota = new NamespaceQuota(spied, 2);
    await quota.grantNow(claim('a'), async () => ({ fencingToken: 1, expiresAtMs: 2 }));
    await quota.grantWaiting(claim('b'), 300, async () => ({ fencingToken: 1, expiresAtMs: 2 }));
    await quota.extend('ns', 'a', 'ns/k', 99_999);
    await quota.free('ns', 'a', 'ns/k');
    expect(calls).toEqual([
      `reserve ${1_000 + QUOTA_SLOT_MARGIN_MS} 2`,
      `reserve ${300 + 1_000 + QUOTA_SLOT_MARGIN_MS} 2`,
      'extend 99999',
      'free',
    ]);
  });

  it('over the cap: the lease granted alongside is given back, and the error says when a slot frees up', async () => {
    const { store, clock, calls, spied } = recording();
    const quota = new NamespaceQuota(spied, 1);
    await store.reserveQuotaSlot('ns', 'taken', 5_000, 1);
    clock.advance(1_000);
    const owner = newOwnerToken();
    const lease = () => granted(store.acquire({ id: 'ns/k', ownerToken: owner, ttlMs: 1_000, holder: null }));
    await expect(quota.grantNow(claim(owner), lease)).rejects.toMatchObject({
      code: 'quota_exceeded',
      maxHeldLocks: 1,
      retryAfterMs: 4_000,
    });
    expect(calls).toContain('release ns/k');
    expect(await store.inspect('ns/k')).toBeNull();
    await expect(quota.grantWaiting(claim(owner), 100, lease)).rejects.toMatchObject({ code: 'quota_exceeded', retryAfterMs: 4_000 });
    expect(await store.inspect('ns/k')).toBeNull();
  });

  it('a refused or failed lease gives its slot back; a failed slot reservation fails the grant', async () => {
    const { store, calls, spied } = recording();
    const quota = new NamespaceQuota(spied, 1);
    await expect(quota.grantNow(claim('a'), () => Promise.reject(new LockHeldError('k', 5)))).rejects.toBeInstanceOf(LockHeldError);
    await expect(quota.grantWaiting(claim('b'), 100, () => Promise.reject(new LockHeldError('k', 5)))).rejects.toBeInstanceOf(
      LockHeldError,
    );
    expect(calls.filter((c) => c === 'free')).toHaveLength(2);
    // Both slots are free again: the cap of 1 lets a third through.
    expect(await store.reserveQuotaSlot('ns', 'c', 1_000, 1)).toEqual({ reserved: true });
    const failing = { ...spied, reserveQuotaSlot: () => Promise.reject(new StoreUnavailableError('down')) };
    const owner = newOwnerToken();
    const lease = () => granted(store.acquire({ id: 'ns/x', ownerToken: owner, ttlMs: 1_000, holder: null }));
    await expect(new NamespaceQuota(failing, 5).grantNow(claim(owner, 'ns/x'), lease)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await store.inspect('ns/x')).toBeNull();
  });

  it('give-backs are best effort: a failing extend or free does not fail the caller', async () => {
    const failing = {
      reserveQuotaSlot: async () => ({ reserved: true as const }),
      extendQuotaSlot: () => Promise.reject(new StoreUnavailableError('down')),
      freeQuotaSlot: () => Promise.reject(new StoreUnavailableError('down')),
      retireQuotaSlot: () => Promise.reject(new StoreUnavailableError('down')),
      release: async () => true,
    };
    const quota = new NamespaceQuota(failing, 1);
    await quota.extend('ns', 'o', 'ns/k', 5);
    await quota.free('ns', 'o', 'ns/k');
    await quota.retire('ns', 'o', 'ns/k', 5);
    await expect(quota.grantWaiting(claim('o'), 100, () => Promise.reject(new LockHeldError('k', 5)))).rejects.toBeInstanceOf(
      LockHeldError,
    );
  });
});
