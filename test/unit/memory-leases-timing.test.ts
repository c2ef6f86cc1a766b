import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import type { LeaseAcquire, LeaseAcquireOutcome } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';

/**
 * The embedded store's lease engine through its port (`store.leases`), on fake timers whose clock is
 * the store's: a queued caller is handed the key by ONE timer set for the lease's end (or its
 * lock-delay's end), never by polling; a store with nobody queued holds no timer (nothing keeps the
 * process alive); a lease ends, and a lock-delay runs out, exactly at its millisecond.
 */
const START = Date.UTC(2030, 0, 1);
let store: MemoryStore;

beforeEach(() => {
  vi.useFakeTimers({ now: START, toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: () => Date.now() });
});

afterEach(async () => {
  await store.close();
  vi.useRealTimers();
});

let tokens = 0;
const lock = (key: string, ask: Partial<LeaseAcquire> = {}): Promise<LeaseAcquireOutcome> =>
  store.leases.acquire({
    kind: 'lock',
    ids: [key],
    capacity: 1,
    weight: 1,
    ownerToken: `owner-${++tokens}`,
    ttlMs: 10_000,
    holder: null,
    ...ask,
  });

/** Runs the next timer; how far the clock moved to reach it. */
async function nextTimer(): Promise<number> {
  const before = Date.now();
  await vi.advanceTimersToNextTimerAsync();
  return Date.now() - before;
}

describe('embedded lease engine: hand-over timing', () => {
  it('a queued caller is handed the key by one timer, just after the lease ends', async () => {
    expect((await lock('k')).acquired).toBe(true);
    let answer: LeaseAcquireOutcome | undefined;
    void lock('k', { waitMs: 60_000 }).then((a) => (answer = a));
    // The wait's own timer (60 s) and the hand-over's (the lease's last millisecond, then 1 more).
    expect(vi.getTimerCount()).toBe(2);
    expect(await nextTimer()).toBe(10_001);
    expect(answer).toMatchObject({ acquired: true, expiresAtMs: START + 10_001 + 10_000 });
    expect(vi.getTimerCount()).toBe(0);
  });

  it('after a lease that asked for a lock-delay expires, the queued caller is handed the key when the delay ends', async () => {
    expect((await lock('d', { ttlMs: 1_000, lockDelayMs: 5_000 })).acquired).toBe(true);
    let answer: LeaseAcquireOutcome | undefined;
    void lock('d', { waitMs: 60_000 }).then((a) => (answer = a));
    expect(await nextTimer()).toBe(1_001);
    expect(answer).toBeUndefined();
    // One timer for the rest of the delay (it ends at START + 6000), then 1 ms more: not a poll.
    expect(await nextTimer()).toBe(5_000);
    expect(answer).toMatchObject({ acquired: true, expiresAtMs: START + 6_001 + 10_000 });
  });

  it('a store with nobody queued holds no timer', async () => {
    const held = await lock('idle');
    expect(vi.getTimerCount()).toBe(0);
    await store.leases.renew('lock', ['idle'], 'owner-' + tokens, 20_000);
    expect(held.acquired).toBe(true);
    await store.leases.release('lock', ['idle'], 'owner-' + tokens);
    expect(vi.getTimerCount()).toBe(0);
    const semaphore = { kind: 'semaphore' as const, ids: ['s'], capacity: 2, weight: 1, ttlMs: 10_000, holder: null };
    expect((await store.leases.acquire({ ...semaphore, ownerToken: 'a' })).acquired).toBe(true);
    expect((await store.leases.acquire({ ...semaphore, ownerToken: 'b' })).acquired).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('embedded lease engine: ends to the millisecond', () => {
  it('a lease ends at its expiresAtMs: the key is free then, not a millisecond later', async () => {
    const first = await lock('e', { ttlMs: 1_000 });
    expect(first).toMatchObject({ acquired: true, expiresAtMs: START + 1_000 });
    vi.setSystemTime(START + 999);
    expect((await lock('e')).acquired).toBe(false);
    vi.setSystemTime(START + 1_000);
    expect((await lock('e')).acquired).toBe(true);
  });

  it('a lock-delay refuses with the time left on it, and ends at its millisecond', async () => {
    expect((await lock('l', { ttlMs: 1_000, lockDelayMs: 5_000 })).acquired).toBe(true);
    vi.setSystemTime(START + 2_000);
    expect(await lock('l')).toStrictEqual({ acquired: false, reason: 'full', retryAfterMs: 4_000, busyId: 'l' });
    vi.setSystemTime(START + 5_999);
    expect(await lock('l')).toMatchObject({ acquired: false, retryAfterMs: 1 });
    vi.setSystemTime(START + 6_000);
    expect((await lock('l')).acquired).toBe(true);
  });

  it("the store's lock count counts locks only, not semaphores or read/write locks", async () => {
    await store.leases.acquire({ kind: 'semaphore', ids: ['n'], capacity: 2, weight: 1, ownerToken: 's', ttlMs: 10_000, holder: null });
    await store.leases.acquire({ kind: 'rwlock', ids: ['n'], capacity: 2, weight: 1, ownerToken: 'r', ttlMs: 10_000, holder: null });
    expect(store.size).toBe(0);
    await lock('n');
    expect(store.size).toBe(1);
  });
});

describe('embedded lease engine: closing with callers queued', () => {
  it('every queued caller is answered StoreUnavailableError, none granted, even one whose weight now fits', async () => {
    const semaphore = { kind: 'semaphore' as const, ids: ['c'], capacity: 2, ttlMs: 10_000, holder: null };
    expect((await store.leases.acquire({ ...semaphore, weight: 1, ownerToken: 'held' })).acquired).toBe(true);
    // The head asks for the whole capacity; the one behind it would fit beside the holder, but FIFO.
    const head = store.leases.acquire({ ...semaphore, weight: 2, ownerToken: 'head', waitMs: 60_000 });
    const behind = store.leases.acquire({ ...semaphore, weight: 1, ownerToken: 'behind', waitMs: 60_000 });
    await store.close();
    await expect(head).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(behind).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(vi.getTimerCount()).toBe(0);
  });
});
