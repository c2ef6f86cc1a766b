import { afterEach, describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { monotonicWallClock } from '../../src/store/shared/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { AcquireOutcome } from '../helpers/store-words.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * The embedded store on a clock the test controls: what a clock that stands still or steps backwards
 * does to fencing tokens and leases. (The Redis store's clock cannot be faked; its "last + 1" rule is
 * covered in test/redis/scripts.test.ts by planting a far-future token.)
 */
describe('embedded store on a fake clock', () => {
  const stores: Worded<MemoryStore>[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });

  const open = (clock: FakeClock) => {
    const store = withWords(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: clock.now }));
    stores.push(store);
    return store;
  };

  const grant = async (store: Worded<MemoryStore>, key: string, ttlMs = 10_000) => {
    const ownerToken = newOwnerToken();
    const outcome: AcquireOutcome = await store.acquire({ id: key, ownerToken, ttlMs, holder: 'h' });
    if (!outcome.acquired) throw new Error(`not granted: ${JSON.stringify(outcome)}`);
    return { ...outcome, ownerToken };
  };

  it('a frozen clock: each grant inside the same microsecond is numbered last + 1', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const first = await grant(store, 'k');
    // The first token is the clock in microseconds (the floor that survives data loss).
    expect(first.fencingToken).toBe(Math.floor(clock.nowMs * 1000));
    let last = first.fencingToken;
    await store.release('k', first.ownerToken);
    for (let i = 0; i < 5; i++) {
      const next = await grant(store, 'k');
      expect(next.fencingToken).toBe(last + 1);
      last = next.fencingToken;
      expect(await store.release('k', next.ownerToken)).toBe(true);
    }
  });

  it('a clock stepping backwards never takes a fencing token backwards', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const before = await grant(store, 'k');
    await store.release('k', before.ownerToken);
    clock.advance(-3_600_000);
    const after = await grant(store, 'k');
    expect(after.fencingToken).toBe(before.fencingToken + 1);
    // Also through a force release and across keys' independent counters.
    await store.forceRelease('k');
    clock.advance(-1_000);
    const third = await grant(store, 'k');
    expect(third.fencingToken).toBe(after.fencingToken + 1);
    expect((await grant(store, 'other')).fencingToken).toBe(Math.floor(clock.nowMs * 1000));
  });

  it('a clock stepping backwards neither cuts nor moves a held lease; a renewal counts from the new now', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const held = await grant(store, 'k', 10_000);
    clock.advance(-5_000);
    // Still held, same end on the store's clock: the lease is not cut short…
    const state = await store.inspect('k');
    expect(state).toMatchObject({ holder: 'h', fencingToken: held.fencingToken, expiresAtMs: held.expiresAtMs });
    expect(state?.ttlRemainingMs).toBe(15_000);
    expect((await store.acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null })).acquired).toBe(false);
    // …and a renewal gives exactly the TTL asked for, from the store's (new) now, keeping the token.
    const renewed = await store.renew('k', held.ownerToken, 2_000);
    expect(renewed).toEqual({ renewed: true, fencingToken: held.fencingToken, expiresAtMs: Math.floor(clock.nowMs) + 2_000 });
    clock.advance(1_999);
    expect((await store.inspect('k'))?.fencingToken).toBe(held.fencingToken);
    clock.advance(1);
    expect(await store.inspect('k')).toBeNull();
    expect(await store.renew('k', held.ownerToken, 2_000)).toEqual({ renewed: false });
  });

  it('a clock moving forwards ends a lease exactly at its expiry, not a millisecond before', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    const held = await grant(store, 'k', 1_000);
    clock.set(held.expiresAtMs - 0.001);
    expect((await store.inspect('k'))?.ttlRemainingMs).toBe(1);
    expect(await store.renew('k', held.ownerToken, 1_000)).toMatchObject({ renewed: true });
    clock.set(held.expiresAtMs + 1_000);
    expect(await store.inspect('k')).toBeNull();
    const next = await grant(store, 'k');
    expect(next.fencingToken).toBeGreaterThan(held.fencingToken);
  });

  it('a waiter that queues as the lease runs out is handed the lock, not left until its wait ends', async () => {
    // The store reads its clock when the call arrives (the lease is live: the caller must wait) and
    // again as it queues the caller; here the lease ends between the two, as a busy machine can make it.
    let reads = 0;
    let endsAt = 0;
    const clock = new FakeClock();
    const store = withWords(
      new MemoryStore({
        fenceGraceMs: 60_000,
        sweepIntervalMs: 0,
        clock: () => (endsAt > 0 && ++reads > 1 ? endsAt + 1 : clock.nowMs),
      }),
    );
    stores.push(store);
    const held = await grant(store, 'k', 1_000);
    endsAt = held.expiresAtMs;
    clock.set(endsAt - 1);
    const startedAt = performance.now();
    const waited = await store.acquire({ id: 'k', ownerToken: newOwnerToken(), ttlMs: 1_000, holder: null, waitMs: 5_000 });
    expect(waited.acquired).toBe(true);
    // Handed over at once, not after the 5 s wait ran out.
    expect(performance.now() - startedAt).toBeLessThan(4_000);
  });

  it('quota slots end on the store clock', async () => {
    const clock = new FakeClock();
    const store = open(clock);
    expect(await store.reserveQuotaSlot('ns', 'a', 1_000, 1)).toEqual({ reserved: true });
    clock.advance(400);
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 1)).toEqual({ reserved: false, retryAfterMs: 600 });
    clock.advance(600);
    expect(await store.reserveQuotaSlot('ns', 'b', 1_000, 1)).toEqual({ reserved: true });
  });

  it('the default clock is the wall clock (Unix ms), and it never goes back', () => {
    const before = Date.now();
    const first = monotonicWallClock();
    const second = monotonicWallClock();
    // performance.timeOrigin + now() drifts from Date.now() only by NTP steps since the process started.
    expect(Math.abs(first - before)).toBeLessThan(60_000);
    expect(second).toBeGreaterThanOrEqual(first);
  });
});
