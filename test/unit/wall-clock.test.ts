import { describe, expect, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { forwardWallClock, sharedWallClock } from '../../src/store/shared/clock.js';

/**
 * The clock an etcd-backed instance judges lease ends on. Several instances judge the same leases, so
 * each must follow the wall clock NTP keeps in step, including a step after it started, and never
 * read it backwards.
 */
describe('forward wall clock', () => {
  it('follows the wall clock, a step forward at once', () => {
    let wall = 1_000;
    const clock = forwardWallClock(() => wall);
    expect(clock()).toBe(1_000);
    wall = 1_250;
    expect(clock()).toBe(1_250);
    // NTP stepped the host's clock 5 s ahead: every instance of a fleet in step now reads it.
    wall = 6_250;
    expect(clock()).toBe(6_250);
  });

  it('stands still after a step back until the wall clock passes it, then follows it again', () => {
    let wall = 10_000;
    const clock = forwardWallClock(() => wall);
    expect(clock()).toBe(10_000);
    wall = 7_000;
    expect(clock()).toBe(10_000);
    wall = 9_999;
    expect(clock()).toBe(10_000);
    wall = 10_001;
    expect(clock()).toBe(10_001);
  });

  it('reads the host wall clock by default, as every etcd store of the process does', async () => {
    const before = Date.now();
    const read = sharedWallClock();
    expect(read).toBeGreaterThanOrEqual(before);
    expect(read).toBeLessThanOrEqual(Date.now());
    // No call reaches etcd: the client connects on its first call.
    const store = new EtcdStore({ endpoints: ['127.0.0.1:1'], keyPrefix: 'clock/', commandTimeoutMs: 100, fenceGraceMs: 1_000 });
    try {
      expect(store.clock).toBe(sharedWallClock);
    } finally {
      await store.close();
    }
  });
});
