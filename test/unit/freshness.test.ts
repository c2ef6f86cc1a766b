import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { OverloadedError, StoreUnavailableError } from '../../src/domain/errors.js';
import { FreshnessGuard } from '../../src/domain/freshness.js';
import { ownLag } from '../../src/domain/own-lag.js';

/**
 * Who is blamed for a late grant (src/domain/freshness.ts): this instance (503 overloaded) when its own
 * event loop hold-ups were at least half of the wait and, without them, the answer was in time;
 * otherwise the store (503 store_unavailable). Either way the lease is given back. The clock and the
 * hold-ups are the test's.
 */
afterEach(() => {
  vi.restoreAllMocks();
  // The copies made here were built on the test's clock and timer: no later file may import them (the
  // mutation run shares one module cache between files).
  vi.resetModules();
});

/** refuseIfLate for a `ttlMs` lease answered `elapsedMs` after it was decided, `ownMs` of it held up here. */
async function blame(ttlMs: number, elapsedMs: number, ownMs: number, giveBack = true): Promise<{ answer: string; givenBack: number }> {
  let givenBack = 0;
  const guard = new FreshnessGuard({
    release: async () => {
      givenBack++;
      return true;
    },
  });
  vi.spyOn(performance, 'now').mockReturnValue(100_000);
  vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(ownMs);
  const answer = await guard
    .refuseIfLate({ id: 'ns/k', ownerToken: 'o', ttlMs, decidedAt: 100_000 - elapsedMs }, giveBack ? undefined : { keep: 'renewal' })
    .then(
      () => 'fresh',
      (e: unknown) => (e instanceof OverloadedError ? 'overloaded' : e instanceof StoreUnavailableError ? 'store_unavailable' : String(e)),
    );
  vi.restoreAllMocks();
  return { answer, givenBack };
}

describe('the late-grant guard: whose lateness', () => {
  it('an answer within half the lease is fresh, and the lease is kept', async () => {
    expect(await blame(100, 49, 49)).toEqual({ answer: 'fresh', givenBack: 0 });
  });

  it.each([
    // [ttl, elapsed, own hold-ups, answer]
    [100, 80, 80, 'overloaded'],
    [100, 80, 40, 'overloaded'], // exactly half the wait was ours, and the rest (40) was in time
    [100, 80, 39, 'store_unavailable'], // less than half was ours
    [100, 60, 20, 'store_unavailable'], // without the hold-ups it was in time, but they were the smaller part
    [100, 100, 50, 'store_unavailable'], // without the hold-ups it took exactly half the lease: late anyway
    [100, 99, 50, 'overloaded'],
    [100, 120, 60, 'store_unavailable'], // the larger part ours, but late even without it
    [100, 200, 0, 'store_unavailable'],
  ])('a %i ms lease answered after %i ms, %i ms of it held up here: %s, and the lease is given back', async (ttl, elapsed, own, answer) => {
    expect(await blame(ttl, elapsed, own)).toEqual({ answer, givenBack: 1 });
  });
});

describe('the late-grant guard on a renewal', () => {
  it.each([
    [100, 80, 80, 'overloaded'],
    [100, 200, 0, 'store_unavailable'],
  ])('a %i ms renewal answered after %i ms (%i ms held up here): %s, and the lease is kept', async (ttl, elapsed, own, answer) => {
    // The lease was the caller's before the renewal: giving it back would make lateness cost a lease.
    expect(await blame(ttl, elapsed, own, false)).toEqual({ answer, givenBack: 0 });
  });
});

describe('the late-grant guard: its own event loop', () => {
  it('watches the event loop from the moment it is built, so a stall before the first late answer counts', async () => {
    vi.resetModules();
    const { FreshnessGuard: Guard } = await import('../../src/domain/freshness.js');
    let now = 1_000;
    let sample: (() => void) | undefined;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    vi.spyOn(globalThis, 'setInterval').mockImplementation(((fn: () => void) => {
      sample = fn;
      return { unref: () => undefined };
    }) as unknown as typeof setInterval);
    const guard = new Guard({ release: async () => true });
    // The grant is decided at 1000; the loop then stalls until 1090 (the sampling timer, due at 1010, runs then).
    now = 1_090;
    sample?.();
    now = 1_095;
    // (This copy of the module has its own error classes: the code tells them apart.)
    await expect(guard.refuseIfLate({ id: 'ns/k', ownerToken: 'o', ttlMs: 100, decidedAt: 1_000 })).rejects.toMatchObject({
      code: 'overloaded',
    });
  });
});
