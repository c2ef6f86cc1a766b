import { afterEach, describe, expect, it } from 'vitest';
import { MAX_HOLDERS_SHOWN } from '../../src/domain/permit-values.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Which holders the embedded store's inspect shows when a key has more live leases than it shows
 * (PermitState.holders): the MAX_HOLDERS_SHOWN that end first, ties going to the lower owner token (as a
 * Redis sorted set orders equal scores, so both stores show the same page), listed in grant order.
 */
describe('embedded store: the holders an inspect shows', () => {
  const stores: Worded<MemoryStore>[] = [];
  afterEach(async () => {
    for (const store of stores.splice(0)) await store.close();
  });

  it.each([
    ['a later grant has the lower owner token', (i: number) => String(9_000 - i)],
    ['a later grant has the higher owner token', (i: number) => String(1_000 + i)],
  ])('the ones that end first (ties: the lower owner token), in grant order, with the count of all; %s', async (_name, tokenOf) => {
    const clock = new FakeClock(1_000_000);
    const store = withWords(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, clock: clock.now }));
    stores.push(store);
    // One more than a whole number of pairs: the page is cut between the two leases of a pair.
    const total = MAX_HOLDERS_SHOWN + 41;
    const granted: Array<{ ownerToken: string; expiresAtMs: number; fencingToken: number }> = [];
    for (let i = 0; i < total; i++) {
      // Ends out of grant order (37 and the total share no factor), two leases ending at each moment
      // but the first.
      const slot = (i * 37) % total;
      const ownerToken = tokenOf(i);
      const outcome = await store.permits.acquirePermit({
        kind: 'semaphore',
        id: 'k',
        ownerToken,
        ttlMs: 10_000 + 10 * Math.floor((slot + 1) / 2),
        holder: ownerToken,
        weight: 1,
        capacity: total,
        waitMs: 0,
      });
      if (!outcome.acquired) throw new Error('not granted');
      granted.push({ ownerToken, expiresAtMs: outcome.expiresAtMs, fencingToken: outcome.fencingToken });
    }
    const byEnd = [...granted].sort((a, b) => a.expiresAtMs - b.expiresAtMs || (a.ownerToken < b.ownerToken ? -1 : 1));
    // The page is cut inside a tie, so the owner token decides there.
    expect(byEnd[MAX_HOLDERS_SHOWN - 1]?.expiresAtMs).toBe(byEnd[MAX_HOLDERS_SHOWN]?.expiresAtMs);
    const expected = byEnd.slice(0, MAX_HOLDERS_SHOWN).sort((a, b) => a.fencingToken - b.fencingToken);
    const state = await store.permits.inspectPermits('semaphore', 'k');
    expect(state?.holderCount).toBe(total);
    expect(state?.holders.map((h) => h.holder)).toEqual(expected.map((e) => e.ownerToken));
    expect(state?.holders.map((h) => h.fencingToken)).toEqual(expected.map((e) => e.fencingToken));
    // A lease that has ended is neither shown nor counted.
    clock.advance(10_010);
    const after = await store.permits.inspectPermits('semaphore', 'k');
    expect(after?.holderCount).toBe(total - 3);
    expect(after?.holders.map((h) => h.holder)).toEqual(
      byEnd
        .slice(3, MAX_HOLDERS_SHOWN + 3)
        .sort((a, b) => a.fencingToken - b.fencingToken)
        .map((e) => e.ownerToken),
    );
  });
});
