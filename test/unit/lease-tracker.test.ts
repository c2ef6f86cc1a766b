import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LeaseTracker } from '../../src/observability/lease-tracker.js';

/** The tracker behind keyholder_locks_held, keyholder_lock_hold_seconds and keyholder_leases_expired_total. */
describe('LeaseTracker: a lock set is one lease per key', () => {
  let released: number[];
  let expired: number[];
  let tracker: LeaseTracker;
  beforeEach(() => {
    released = [];
    expired = [];
    tracker = new LeaseTracker({ released: (s) => released.push(s), expired: (s) => expired.push(s) });
  });
  afterEach(() => {
    tracker.clear();
  });

  it('counts each key, releases and evicts keys one by one, and expires each key at its own end', async () => {
    tracker.grantedSet('set', ['a', 'b', 'c', 'd'], 10_000);
    tracker.granted('lock', 10_000);
    expect(tracker.size).toBe(5);

    tracker.released('set', ['a']);
    expect(tracker.size).toBe(4);
    expect(released).toHaveLength(1);
    tracker.evicted('set', 'b');
    expect(tracker.size).toBe(3);
    expect(released).toHaveLength(1);

    // d renewed alone to a short end, and the lock too: they run out, c keeps the set's end.
    tracker.renewed('set', ['d'], 1);
    tracker.renewed('lock', ['lock'], 1);
    await vi.waitFor(() => expect(expired).toHaveLength(2), { timeout: 5_000, interval: 20 });
    expect(tracker.size).toBe(1);

    // A set's release naming every key frees what is left of it (c), and nothing twice.
    tracker.released('set', ['a', 'b', 'c', 'd']);
    expect(tracker.size).toBe(0);
    expect(released).toHaveLength(2);
  });

  it("counts a key whose lease ran out before the set's release (not swept yet) as expired, not released", async () => {
    tracker.grantedSet('set', ['a', 'b'], 10_000);
    const renewedAt = performance.now();
    tracker.renewed('set', ['a'], 5);
    // Past a's end, and before the first sweep (1 s after the grant) as long as the machine is not starved.
    await vi.waitFor(() => expect(performance.now()).toBeGreaterThan(renewedAt + 10), { timeout: 900, interval: 5 });
    tracker.released('set', ['a', 'b']);
    expect(tracker.size).toBe(0);
    expect(expired).toHaveLength(1);
    expect(released).toHaveLength(1);
  });
});
