import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { LockHeldError } from '../../src/domain/errors.js';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { embeddedStoreForFile, LIMITS, uniqueNamespace } from '../helpers/embedded-domain.js';
import { withLeases } from '../helpers/with-leases.js';

/**
 * A waiting lock set refused on a key in its lock-delay: the delay ends with nothing written, so the set
 * sleeps until the delay's end as this instance's clock reads it, and asks again then, not before; and
 * where this instance's clock reads the end as come or past (the store's clock behind), how long is left
 * is unknown here: the set sleeps what the store's refusal said, never asking again every millisecond.
 */
const memory = embeddedStoreForFile();

afterEach(() => {
  vi.useRealTimers();
});

/**
 * The store, with the sets' acquires (two keys) refused as busy on their first key while `busy()` says
 * so, and that key read as free in a lock-delay ending at `delayEnd()`. Counts the sets' acquires.
 */
function delayedKey(busy: () => boolean, delayEnd: () => number, retryAfterMs: number) {
  let attempts = 0;
  let busyId = '';
  const store = withLeases(memory, (own): Partial<LeaseStore> => ({
    acquire: async (request) => {
      if (request.ids.length < 2) return own.acquire(request);
      attempts++;
      busyId = request.ids[0] as string;
      if (busy()) return { acquired: false, reason: 'full', busyId, retryAfterMs };
      return own.acquire(request);
    },
    inspectIndexed: async (kind: Parameters<LeaseStore['inspectIndexed']>[0], id: string) => {
      if (kind === 'lock' && id === busyId) return { state: null, lastFencingToken: 1, lockDelayUntilMs: delayEnd() };
      return own.inspectIndexed(kind, id);
    },
  }));
  const locks = new LockService(store, LIMITS);
  return { sets: new LockSetService(store, LIMITS, locks), attempts: () => attempts };
}

describe('a waiting lock set refused on a key in its lock-delay', () => {
  it("asks again once the delay's end has passed by this instance's clock, not before it", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const end = Date.now() + 100;
    const { sets, attempts } = delayedKey(
      () => Date.now() < end,
      () => end,
      5_000,
    );
    const granting = sets.acquire(uniqueNamespace(), ['a', 'b'], 30_000, { waitMs: 10_000 });
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts()).toBe(1);
    // Up to the delay's end: asleep.
    await vi.advanceTimersByTimeAsync(100);
    expect(attempts()).toBe(1);
    // Just past it: asked again, and granted.
    await vi.advanceTimersByTimeAsync(5);
    const grant = await granting;
    expect(grant.locks.map((l) => l.key)).toStrictEqual(['a', 'b']);
    expect(attempts()).toBe(2);
  });

  it("whose end this instance's clock reads as now or past sleeps what the store's refusal said", async () => {
    for (const behindMs of [0, 50]) {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const started = Date.now();
      // The store's clock behind this instance's: the key still refused for 200 ms.
      const { sets, attempts } = delayedKey(
        () => Date.now() < started + 200,
        () => started - behindMs,
        200,
      );
      const granting = sets.acquire(uniqueNamespace(), ['a', 'b'], 30_000, { waitMs: 10_000 });
      await vi.advanceTimersByTimeAsync(150);
      // Not once a millisecond: asleep for the store's 200 ms.
      expect(attempts()).toBe(1);
      await vi.advanceTimersByTimeAsync(60);
      await granting;
      expect(attempts()).toBe(2);
      vi.useRealTimers();
    }
  });
});

describe('a lock set that may not wait', () => {
  it('is refused at its first busy key after one store step, even where the clock has not moved since it asked', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    // performance.now() read again within one tick of its clock: no time left is no time left.
    const frozen = vi.spyOn(performance, 'now').mockReturnValue(performance.now());
    onTestFinished(() => frozen.mockRestore());
    const { sets, attempts } = delayedKey(
      () => true,
      () => Date.now() + 1_000,
      1_000,
    );
    let refusal: unknown;
    const asking = sets.acquire(uniqueNamespace(), ['a', 'b'], 30_000).catch((error: unknown) => (refusal = error));
    await vi.advanceTimersByTimeAsync(5);
    expect(refusal).toBeInstanceOf(LockHeldError);
    expect(attempts()).toBe(1);
    await asking;
  });
});
