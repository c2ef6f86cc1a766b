import { describe, expect, it, vi } from 'vitest';
import {
  HolderChangedError,
  IdempotencyKeyReusedError,
  LockHeldError,
  QuotaExceededError,
  TooManyWaitersError,
} from '../../src/domain/errors.js';
import { type LockObserver, LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { withLeases } from '../helpers/with-leases.js';
import { embeddedStoreForFile, LIMITS, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * The lock service's answers that the HTTP tests check end to end, here in-process over the embedded
 * store: the queue view, the administrator's force release (with and without a fencing token), the
 * time an acquire spent waiting as the observer hears it, what an idempotent acquire at the
 * namespace's cap answers (the quota's refusal, or the idempotency key's), a blocking query's
 * onChange, and the waiting callers a blocking query or a waiting lock set counts while, and only
 * while, it waits.
 */
const store = embeddedStoreForFile();

describe('lock service answers', () => {
  it('queue: the callers waiting for the lock, head first, with their holders', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    expect(await locks.queue(ns, 'q')).toEqual([]);
    const held = await locks.acquire(ns, 'q', 60_000, { holder: 'owner' });
    const leave = new AbortController();
    const first = locks.acquire(ns, 'q', 60_000, { holder: 'first', waitMs: 30_000, signal: leave.signal }).catch((e: unknown) => e);
    await vi.waitFor(async () => expect(await locks.queue(ns, 'q')).toHaveLength(1), { timeout: 5_000 });
    const second = locks.acquire(ns, 'q', 60_000, { holder: 'second', waitMs: 30_000, signal: leave.signal }).catch((e: unknown) => e);
    await vi.waitFor(async () => expect(await locks.queue(ns, 'q')).toHaveLength(2), { timeout: 5_000 });
    const queue = await locks.queue(ns, 'q');
    expect(queue.map((q) => [q.position, q.holder])).toEqual([
      [1, 'first'],
      [2, 'second'],
    ]);
    // The queue is a view for people: never an owner token.
    expect(JSON.stringify(queue)).not.toContain(held.ownerToken);
    leave.abort();
    await Promise.all([first, second]);
    await locks.release(ns, 'q', held.ownerToken);
  });

  it('force release: evicts whoever holds the lock, or answers null when nobody does', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    expect(await locks.forceRelease(ns, 'f')).toBeNull();
    const held = await locks.acquire(ns, 'f', 60_000, { holder: 'alice' });
    expect(await locks.forceRelease(ns, 'f')).toEqual({ holder: 'alice', fencingToken: held.fencingToken });
    expect(await locks.inspect(ns, 'f')).toBeNull();
    expect(await locks.forceRelease(ns, 'f')).toBeNull();
  });

  it('force release of one lease: evicts it while it holds, answers null when the lock is free, holder_changed when another holds', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const first = await locks.acquire(ns, 'g', 60_000, { holder: 'alice' });
    // The lease named is gone and nobody else holds the lock: nothing to do.
    await locks.release(ns, 'g', first.ownerToken);
    expect(await locks.forceRelease(ns, 'g', first.fencingToken)).toBeNull();
    // Someone else holds it now: their lease is left alone, and the answer says who holds it.
    const second = await locks.acquire(ns, 'g', 60_000, { holder: 'bob' });
    const refused = await locks.forceRelease(ns, 'g', first.fencingToken).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HolderChangedError);
    expect(refused).toMatchObject({ fencingToken: first.fencingToken, current: { holder: 'bob', fencingToken: second.fencingToken } });
    expect((refused as Error).message).toContain('holder "bob"');
    expect((await locks.inspect(ns, 'g'))?.fencingToken).toBe(second.fencingToken);
    // A holder without a name is not named.
    await locks.release(ns, 'g', second.ownerToken);
    const third = await locks.acquire(ns, 'g', 60_000);
    const anonymous = await locks.forceRelease(ns, 'g', first.fencingToken).catch((e: unknown) => e);
    expect(anonymous).toBeInstanceOf(HolderChangedError);
    expect((anonymous as Error).message).not.toContain('holder');
    // The lease named is the one holding: evicted.
    expect(await locks.forceRelease(ns, 'g', third.fencingToken)).toEqual({ holder: null, fencingToken: third.fencingToken });
    expect(await locks.inspect(ns, 'g')).toBeNull();
  });

  it('the observer hears how long an acquire waited in the queue; 0 for one that did not wait', async () => {
    const heard: Array<{ op: string; result: string; seconds: number; waited: number }> = [];
    const observer: LockObserver = { operation: (op, result, seconds, waited) => heard.push({ op, result, seconds, waited }) };
    const locks = new LockService(store, LIMITS, observer);
    const ns = uniqueNamespace();
    const held = await locks.acquire(ns, 'w', 60_000);
    const waiting = locks.acquire(ns, 'w', 60_000, { waitMs: 30_000 });
    await vi.waitFor(async () => expect((await locks.inspect(ns, 'w'))?.waiters).toBe(1), { timeout: 5_000 });
    await locks.release(ns, 'w', held.ownerToken);
    const granted = await waiting;
    const acquires = heard.filter((h) => h.op === 'acquire');
    expect(acquires).toHaveLength(2);
    expect(acquires[0]).toMatchObject({ result: 'ok', waited: 0 });
    expect(acquires[1]?.result).toBe('ok');
    expect(acquires[1]?.waited).toBeGreaterThan(0);
    expect(acquires[1]?.waited).toBeLessThanOrEqual(acquires[1]?.seconds ?? 0);
    await locks.release(ns, 'w', granted.ownerToken);
  });

  it('at the cap, an idempotent acquire that is not a replay is refused by the quota, and a key reused for another request says so', async () => {
    const locks = new LockService(store, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const idempotency = { callerId: 'c', key: 'k1' };
    const held = await locks.acquire(ns, 'a', 60_000, { idempotency });
    // Another caller's acquire of the held lock: the quota's refusal, not the lock's.
    const other = await locks.acquire(ns, 'a', 60_000, { idempotency: { callerId: 'd', key: 'k1' } }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(QuotaExceededError);
    expect(other).not.toBeInstanceOf(LockHeldError);
    // The same key with another TTL is another request: that is the answer, not the cap.
    await expect(locks.acquire(ns, 'a', 30_000, { idempotency })).rejects.toBeInstanceOf(IdempotencyKeyReusedError);
    // The retry of the same request still gets its lease back.
    expect(await locks.acquire(ns, 'a', 60_000, { idempotency })).toMatchObject({ ownerToken: held.ownerToken });
    await locks.release(ns, 'a', held.ownerToken);
  });

  it('a blocking query calls onChange with the new view before it answers; what onChange throws is the answer', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const start = await locks.watch(ns, 'c', undefined, 0);
    const seen: number[] = [];
    const changed = locks.watch(ns, 'c', start.index, 30_000, undefined, (view) => seen.push(view.index));
    await vi.waitFor(() => expect(locks.changes.size).toBe(1), { timeout: 5_000 });
    const held = await locks.acquire(ns, 'c', 60_000);
    const view = await changed;
    expect(view.state?.fencingToken).toBe(held.fencingToken);
    expect(seen).toEqual([view.index]);
    const broken = new Error('the answer could not be written');
    const failing = locks
      .watch(ns, 'c', view.index, 30_000, undefined, () => {
        throw broken;
      })
      .catch((e: unknown) => e);
    await vi.waitFor(() => expect(locks.changes.size).toBe(1), { timeout: 5_000 });
    await locks.release(ns, 'c', held.ownerToken);
    expect(await failing).toBe(broken);
  });

  it('a blocking query is a waiting caller while it waits, and no longer once answered', async () => {
    const locks = new LockService(store, { ...LIMITS, maxWaitersPerKey: 1 });
    const ns = uniqueNamespace();
    const start = await locks.watch(ns, 'b', undefined, 0);
    const watching = locks.watch(ns, 'b', start.index, 30_000);
    await vi.waitFor(() => expect(locks.waitingCallers).toBe(1), { timeout: 5_000 });
    await expect(locks.watch(ns, 'b', start.index, 30_000)).rejects.toBeInstanceOf(TooManyWaitersError);
    const held = await locks.acquire(ns, 'b', 60_000);
    await watching;
    expect(locks.waitingCallers).toBe(0);
    // Its place on the key is free again.
    const next = locks.watch(ns, 'b', (await locks.watch(ns, 'b', undefined, 0)).index, 30_000);
    await vi.waitFor(() => expect(locks.waitingCallers).toBe(1), { timeout: 5_000 });
    await locks.release(ns, 'b', held.ownerToken);
    await next;
    expect(locks.waitingCallers).toBe(0);
  });

  it('a lock set that waits for a busy key is a waiting caller on that key while it waits, and no longer once granted', async () => {
    const locks = new LockService(store, { ...LIMITS, maxWaitersPerKey: 1 });
    const sets = new LockSetService(store, { ...LIMITS, maxWaitersPerKey: 1 }, locks);
    const ns = uniqueNamespace();
    const held = await locks.acquire(ns, 'b', 60_000);
    const waiting = sets.acquire(ns, ['a', 'b'], 60_000, { waitMs: 30_000 });
    await vi.waitFor(() => expect(locks.waitingCallers).toBe(1), { timeout: 5_000 });
    // Waiting on the busy key (counted there before its wait begins).
    await vi.waitFor(() => expect(locks.changes.size).toBe(1), { timeout: 5_000 });
    await locks.release(ns, 'b', held.ownerToken);
    const set = await waiting;
    expect(locks.waitingCallers).toBe(0);
    // Both places are free again: a caller may wait on the key the set waited on.
    const after = locks.acquire(ns, 'b', 60_000, { waitMs: 30_000 });
    await vi.waitFor(() => expect(locks.waitingCallers).toBe(1), { timeout: 5_000 });
    await sets.release(ns, ['a', 'b'], set.ownerToken);
    const granted = await after;
    expect(locks.waitingCallers).toBe(0);
    await locks.release(ns, 'b', granted.ownerToken);
  });

  it('a store that keeps the quota inside its lock steps is given the cap with every acquire, from the smallest cap it keeps', async () => {
    /** The embedded store, claiming to keep caps of 2 or more itself; what the service asks of it is recorded. */
    const asked: Array<number | undefined> = [];
    let slotCalls = 0;
    const inside = withLeases(store, (own) => ({
      quotaInside: true,
      quotaInsideFrom: 2,
      acquire: (request) => {
        asked.push(request.maxHeldInNamespace);
        return own.acquire(request);
      },
      reserveQuotaSlot: (...args) => {
        slotCalls++;
        return own.reserveQuotaSlot(...args);
      },
    }));
    const ns = uniqueNamespace();
    // A cap the store keeps (exactly its smallest): passed along, no slot taken by the service.
    const kept = new LockService(inside, { ...LIMITS, maxHeldLocksPerNamespace: 2 });
    const now = await kept.acquire(ns, 'a', 60_000);
    const waited = await kept.acquire(ns, 'b', 60_000, { waitMs: 1_000 });
    expect(asked).toEqual([2, 2]);
    expect(slotCalls).toBe(0);
    // A cap below it: the service keeps it with slots, and the store is given none.
    asked.length = 0;
    const own = new LockService(inside, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const other = uniqueNamespace();
    const held = await own.acquire(other, 'a', 60_000);
    expect(asked).toEqual([undefined]);
    expect(slotCalls).toBe(1);
    // No cap at all: nothing to keep, for the store or the service.
    asked.length = 0;
    const uncapped = new LockService(inside, { ...LIMITS, maxHeldLocksPerNamespace: 0 });
    const free = await uncapped.acquire(other, 'c', 60_000);
    expect(asked).toEqual([undefined]);
    expect(slotCalls).toBe(1);
    for (const [service, namespace, key, grant] of [
      [kept, ns, 'a', now],
      [kept, ns, 'b', waited],
      [own, other, 'a', held],
      [uncapped, other, 'c', free],
    ] as const) {
      await service.release(namespace, key, grant.ownerToken);
    }
  });
});
