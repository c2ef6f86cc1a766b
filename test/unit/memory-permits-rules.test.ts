import { afterEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError, TooManyWaitersError, WaitAbortedError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { PermitKind } from '../../src/domain/permit-values.js';
import type { PermitAcquireOutcome } from '../helpers/store-words.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The embedded store's semaphores and read/write locks, where the shared contract (semaphore.contract.ts,
 * rwlock.contract.ts) cannot be exact on a real clock: the time left it answers, to the millisecond;
 * what the sweep forgets and keeps; listing pages; the queue cap; a waiter that gives up or is failed by
 * a closing store; the watch index over an expiry. On a clock the test moves, so nothing here sleeps.
 */
const GRACE_MS = 60_000;
const WRITE = 100;

describe('embedded store: semaphores and read/write locks', () => {
  const stores: Worded<MemoryStore>[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });
  const open = (clock: FakeClock, options: { maxWaitersPerKey?: number } = {}) => {
    const store = withWords(new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 0, clock: clock.now, ...options }));
    stores.push(store);
    return store;
  };
  const take = (
    store: Worded<MemoryStore>,
    key: string,
    call: {
      weight?: number;
      capacity?: number;
      ttlMs?: number;
      waitMs?: number;
      signal?: AbortSignal;
      holder?: string | null;
      kind?: PermitKind;
    } = {},
  ): Promise<PermitAcquireOutcome & { ownerToken: string }> => {
    const ownerToken = newOwnerToken();
    return store.permits
      .acquirePermit({
        kind: call.kind ?? 'semaphore',
        id: key,
        ownerToken,
        ttlMs: call.ttlMs ?? 10_000,
        holder: call.holder ?? null,
        weight: call.weight ?? 1,
        capacity: call.capacity ?? 2,
        waitMs: call.waitMs ?? 0,
        signal: call.signal,
      })
      .then((outcome) => ({ ...outcome, ownerToken }));
  };
  const granted = async (outcome: Promise<PermitAcquireOutcome & { ownerToken: string }>) => {
    const o = await outcome;
    if (!o.acquired) throw new Error(`not granted: ${JSON.stringify(o)}`);
    return o;
  };
  const waiters = async (store: Worded<MemoryStore>, key: string, kind: PermitKind = 'semaphore') =>
    (await store.permits.inspectPermits(kind, key))?.waiters;

  it('a refusal says exactly how long until room frees up: the earliest lease when full, the last one on a limit mismatch', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    await granted(take(store, 'k', { ttlMs: 3_000 }));
    await granted(take(store, 'k', { ttlMs: 1_000 }));
    clock.advance(250);
    expect(await take(store, 'k')).toMatchObject({ acquired: false, reason: 'full', retryAfterMs: 750 });
    expect(await take(store, 'k', { capacity: 5 })).toMatchObject({
      acquired: false,
      reason: 'mismatch',
      capacity: 2,
      retryAfterMs: 2_750,
    });
    const state = await store.permits.inspectPermits('semaphore', 'k');
    expect(state?.holders.map((h) => h.ttlRemainingMs)).toEqual([2_750, 750]);
  });

  it('inspect lists the holders in grant order (fencing token), whatever order they renew in', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const leases = [];
    for (const holder of ['a', 'b', 'c']) leases.push(await granted(take(store, 'k', { capacity: 3, holder })));
    clock.advance(10);
    for (const lease of [...leases].reverse()) await store.permits.renewPermit('semaphore', 'k', lease.ownerToken, 5_000);
    const state = await store.permits.inspectPermits('semaphore', 'k');
    expect(state?.holders.map((h) => h.holder)).toEqual(['a', 'b', 'c']);
    expect(state?.holders.map((h) => h.fencingToken)).toEqual(leases.map((l) => l.fencingToken));
  });

  it('a lease is over at its expiry instant: its owner can then neither renew nor release it', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const lease = await granted(take(store, 'k', { ttlMs: 1_000 }));
    clock.set(lease.expiresAtMs);
    expect(await store.permits.renewPermit('semaphore', 'k', lease.ownerToken, 5_000)).toEqual({ renewed: false });
    expect(await store.permits.releasePermit('semaphore', 'k', lease.ownerToken)).toBe(false);
    expect(await store.permits.inspectPermits('semaphore', 'k')).toBeNull();
    // Unknown keys answer the same, never an error.
    expect(await store.permits.inspectPermits('semaphore', 'unknown')).toBeNull();
    expect(await store.permits.renewPermit('semaphore', 'unknown', lease.ownerToken, 5_000)).toEqual({ renewed: false });
    expect(await store.permits.releasePermit('rwlock', 'k', lease.ownerToken)).toBe(false);
  });

  it('an empty holder label is no label', async () => {
    const store = open(new FakeClock());
    await granted(take(store, 'k', { holder: '' }));
    expect((await store.permits.inspectPermits('semaphore', 'k'))?.holders[0]?.holder).toBeNull();
  });

  it('the sweep forgets a key once its last lease and the grace period are over; never one with a live lease or a waiter', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const start = Math.floor(clock.nowMs);
    const short = await granted(take(store, 'k', { ttlMs: 1_000 }));
    const long = await granted(take(store, 'k', { ttlMs: 5_000 }));
    await granted(take(store, 'live', { ttlMs: 10 * GRACE_MS }));
    // A renewal to a shorter lease does not shorten what is kept (the longest end so far counts).
    expect((await store.permits.renewPermit('semaphore', 'k', long.ownerToken, 2_000)).renewed).toBe(true);
    await store.permits.releasePermit('semaphore', 'k', short.ownerToken);
    clock.set(start + 5_000 + GRACE_MS - 1);
    store.sweep();
    expect(store.engine.has('semaphore', 'k')).toBe(true);
    clock.set(start + 5_000 + GRACE_MS);
    store.sweep();
    expect(store.engine.has('semaphore', 'k')).toBe(false);
    expect(store.engine.has('semaphore', 'live')).toBe(true);

    // A renewal that moves the lease later keeps the key longer.
    const renewed = await granted(take(store, 'r', { ttlMs: 1_000 }));
    clock.advance(500);
    expect((await store.permits.renewPermit('semaphore', 'r', renewed.ownerToken, 3_000)).renewed).toBe(true);
    const renewedEnd = Math.floor(clock.nowMs) + 3_000;
    clock.set(renewedEnd + GRACE_MS - 1);
    store.sweep();
    expect(store.engine.has('semaphore', 'r')).toBe(true);
    clock.set(renewedEnd + GRACE_MS);
    store.sweep();
    expect(store.engine.has('semaphore', 'r')).toBe(false);

    // A caller still queued keeps its key, even past every lease's end and grace.
    // Its lease is long in real time too: the store's hand-over timer (real) must not fire during the test.
    const held = await granted(take(store, 'q', { capacity: 1, ttlMs: GRACE_MS }));
    const queued = take(store, 'q', { capacity: 1, waitMs: 10 * GRACE_MS }).catch((err: unknown) => err);
    clock.set(held.expiresAtMs + 2 * GRACE_MS);
    store.sweep();
    expect(store.engine.has('semaphore', 'q')).toBe(true);
    await store.close();
    expect(await queued).toBeInstanceOf(StoreUnavailableError);
  });

  it('lists keys with live leases in id order, a page at a time; not expired, released or other kinds; a cursor must come from here', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    for (const key of ['p/c', 'p/a', 'p/b']) await granted(take(store, key));
    await granted(take(store, 'p/expired', { ttlMs: 1_000 }));
    const released = await granted(take(store, 'p/released'));
    await store.permits.releasePermit('semaphore', 'p/released', released.ownerToken);
    await granted(take(store, 'p/rw', { kind: 'rwlock' }));
    await granted(take(store, 'q/other'));
    clock.advance(1_000);
    const all = await store.permits.listPermits('semaphore', { prefix: 'p/', limit: 10 });
    expect(all.entries.map((e) => e.id)).toEqual(['p/a', 'p/b', 'p/c']);
    expect(all.nextCursor).toBeNull();
    expect(all.entries[0]?.state).toMatchObject({ capacity: 2, waiters: 0, holders: [expect.objectContaining({ ttlRemainingMs: 9_000 })] });
    expect((await store.permits.listPermits('semaphore', { prefix: 'p/', limit: 3 })).nextCursor).toBeNull();
    const first = await store.permits.listPermits('semaphore', { prefix: 'p/', limit: 2 });
    expect(first.entries.map((e) => e.id)).toEqual(['p/a', 'p/b']);
    expect(first.nextCursor).toBe('p/b');
    const rest = await store.permits.listPermits('semaphore', { prefix: 'p/', limit: 2, cursor: 'p/b' });
    expect(rest.entries.map((e) => e.id)).toEqual(['p/c']);
    expect(rest.nextCursor).toBeNull();
    expect((await store.permits.listPermits('rwlock', { prefix: 'p/', limit: 10 })).entries.map((e) => e.id)).toEqual(['p/rw']);
    // Without a prefix: every key of that kind, and only of that kind.
    expect((await store.permits.listPermits('rwlock', { prefix: '', limit: 10 })).entries.map((e) => e.id)).toEqual(['p/rw']);
    for (const cursor of ['q/other', 'p/\u0001', 'not a cursor']) {
      await expect(store.permits.listPermits('semaphore', { prefix: 'p/', limit: 2, cursor })).rejects.toMatchObject({
        code: 'invalid_request',
      });
    }
  });

  it('caps the callers queued on one key', async () => {
    const store = open(new FakeClock(), { maxWaitersPerKey: 2 });
    await granted(take(store, 'k', { capacity: 1 }));
    const waits = [0, 1].map(() => take(store, 'k', { capacity: 1, waitMs: 60_000 }).catch((err: unknown) => err));
    await expect(take(store, 'k', { capacity: 1, waitMs: 60_000 })).rejects.toBeInstanceOf(TooManyWaitersError);
    expect(await waiters(store, 'k')).toBe(2);
    await store.close();
    for (const wait of await Promise.all(waits)) expect(wait).toBeInstanceOf(StoreUnavailableError);
  });

  it('a waiter whose caller leaves gets the reason it was given; a writer leaving the head lets the readers behind it in', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const reader = await granted(take(store, 'k', { kind: 'rwlock', capacity: WRITE }));
    const writerLeaves = new AbortController();
    const writer = take(store, 'k', { kind: 'rwlock', weight: WRITE, capacity: WRITE, waitMs: 60_000, signal: writerLeaves.signal }).catch(
      (err: unknown) => err,
    );
    const laterReader = take(store, 'k', { kind: 'rwlock', capacity: WRITE, waitMs: 60_000 });
    expect(await waiters(store, 'k', 'rwlock')).toBe(2);
    const why = new Error('the client went away');
    writerLeaves.abort(why);
    expect(await writer).toBe(why);
    const second = await granted(laterReader);
    expect(second.fencingToken).toBeGreaterThan(reader.fencingToken);
    expect(await waiters(store, 'k', 'rwlock')).toBe(0);

    // A reason that is no Error answers WaitAbortedError; a waiter behind others leaving lets nobody in.
    await granted(take(store, 's', { capacity: 1 }));
    const headLeaves = new AbortController();
    const head = take(store, 's', { capacity: 1, waitMs: 60_000 }).catch((err: unknown) => err);
    const behind = take(store, 's', { capacity: 1, waitMs: 60_000, signal: headLeaves.signal }).catch((err: unknown) => err);
    headLeaves.abort('bye');
    expect(await behind).toBeInstanceOf(WaitAbortedError);
    expect(await waiters(store, 's')).toBe(1);
    await store.close();
    expect(await head).toBeInstanceOf(StoreUnavailableError);
  });

  it('a writer that gives up at the head, by leaving or because its wait ran out, lets the readers behind it in at once', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    // The reader's lease outlasts the test in real time too: only the writer leaving can let the others in.
    await granted(take(store, 'k', { kind: 'rwlock', capacity: WRITE, ttlMs: 10 * GRACE_MS }));
    const soon = <T>(p: Promise<T>) => Promise.race([p, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), 2_000))]);
    const leaves = new AbortController();
    const writer = take(store, 'k', { kind: 'rwlock', weight: WRITE, capacity: WRITE, waitMs: 60_000, signal: leaves.signal }).catch(
      (err: unknown) => err,
    );
    const reader = take(store, 'k', { kind: 'rwlock', capacity: WRITE, waitMs: 60_000 });
    leaves.abort(new Error('gone'));
    await writer;
    expect(await soon(reader)).toMatchObject({ acquired: true });
    const timedOut = take(store, 'k', { kind: 'rwlock', weight: WRITE, capacity: WRITE, waitMs: 50 });
    const another = take(store, 'k', { kind: 'rwlock', capacity: WRITE, waitMs: 60_000 });
    expect(await timedOut).toMatchObject({ acquired: false, reason: 'full' });
    expect(await soon(another)).toMatchObject({ acquired: true });
  });

  it('a queued caller is woken when the EARLIEST lease ends, not the last one', async () => {
    const store = withWords(new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 0 }));
    stores.push(store);
    await granted(take(store, 'k', { ttlMs: 200 }));
    await granted(take(store, 'k', { ttlMs: 60_000 }));
    // Woken at the last lease's end instead, this wait would run out first.
    await granted(take(store, 'k', { waitMs: 5_000 }));
  });

  it('the watch index counts an expiry once: dropping the ended lease later neither raises nor lowers it', async () => {
    const clock = new FakeClock(1_000_000);
    const store = open(clock);
    const lease = await granted(take(store, 'k', { ttlMs: 1_000 }));
    const held = (await store.permits.inspectPermitsIndexed('semaphore', 'k')).index;
    clock.set(lease.expiresAtMs);
    const ended = await store.permits.inspectPermitsIndexed('semaphore', 'k');
    expect(ended).toEqual({ state: null, index: held + 1 });
    // Nothing live to evict: a force release changes nothing, the index included.
    expect(await store.permits.forceReleasePermits('semaphore', 'k')).toEqual([]);
    expect((await store.permits.inspectPermitsIndexed('semaphore', 'k')).index).toBe(held + 1);
  });

  it('a closed store rejects every permit method, and fails its queued callers at once', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    await granted(take(store, 'k', { capacity: 1 }));
    const queued = take(store, 'k', { capacity: 1, waitMs: 60_000 }).catch((err: unknown) => err);
    await store.close();
    expect(await queued).toBeInstanceOf(StoreUnavailableError);
    const p = store.permits;
    for (const call of [
      () => take(store, 'k'),
      () => p.renewPermit('semaphore', 'k', 'x', 1_000),
      () => p.releasePermit('semaphore', 'k', 'x'),
      () => p.inspectPermits('semaphore', 'k'),
      () => p.inspectPermitsIndexed('semaphore', 'k'),
      () => p.watchPermitChanges('semaphore', 'k', () => undefined),
      () => p.forceReleasePermits('semaphore', 'k'),
      () => p.listPermits('semaphore', { prefix: '', limit: 10 }),
    ]) {
      await expect(call()).rejects.toBeInstanceOf(StoreUnavailableError);
    }
  });

  it('a closed store leaves no timer behind, not even for a lease that would have been handed on', async () => {
    vi.useFakeTimers();
    try {
      const store = withWords(new MemoryStore({ fenceGraceMs: GRACE_MS, sweepIntervalMs: 1_000 }));
      await granted(take(store, 'k', { capacity: 1 }));
      const queued = take(store, 'k', { capacity: 1, waitMs: 60_000 }).catch((err: unknown) => err);
      const lock = await store.acquire({ id: 'l', ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null });
      expect(lock.acquired).toBe(true);
      // A held lock nobody waits for sets no timer of its own: only the sweep's and the queued caller's.
      const beforeClose = vi.getTimerCount();
      const lockWaiter = store
        .acquire({ id: 'l', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 60_000 })
        .catch((err: unknown) => err);
      expect(vi.getTimerCount()).toBeGreaterThan(beforeClose);
      await store.close();
      await Promise.all([queued, lockWaiter]);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
