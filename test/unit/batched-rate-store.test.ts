import { describe, expect, it } from 'vitest';
import { BatchedRateStore, type AllowanceSource } from '../../src/http/rate-limit.js';

/** The shared window as rate-allowance.lua keeps it, in memory: one counter per caller, never above max. */
function sharedWindow(): AllowanceSource & { calls: number; handedOut: number } {
  const source = {
    calls: 0,
    handedOut: 0,
    async handOut(_key: string, wanted: number, max: number) {
      source.calls++;
      await Promise.resolve();
      const granted = Math.max(0, Math.min(wanted, max - source.handedOut));
      source.handedOut += granted;
      return { granted, windowLeftMs: 60_000, handedOut: source.handedOut };
    },
  };
  return source;
}

function incr(store: BatchedRateStore, max: number): Promise<{ current: number; ttl: number }> {
  return new Promise((resolve, reject) =>
    store.incr('key:a', (err, res) => (err || !res ? reject(err ?? new Error('no result')) : resolve(res)), 60_000, max),
  );
}

describe('BatchedRateStore', () => {
  it('three instances sharing one window let exactly max requests through, in far fewer shared calls', async () => {
    const shared = sharedWindow();
    const instances = [new BatchedRateStore(shared), new BatchedRateStore(shared), new BatchedRateStore(shared)];
    const max = 1000;
    const answers = await Promise.all(Array.from({ length: 1500 }, (_, i) => incr(instances[i % 3] as BatchedRateStore, max)));
    const allowed = answers.filter((a) => a.current <= max).length;
    expect(allowed).toBeLessThanOrEqual(max);
    // Allowance held unspent by one instance when another runs dry are the only shortfall: a few.
    expect(allowed).toBeGreaterThanOrEqual(max - 3 * 8);
    expect(shared.calls).toBeLessThan(allowed / 2);
  });

  it('requests taking turns on two instances: max allowed in all, then refused on both', async () => {
    const shared = sharedWindow();
    const [one, two] = [new BatchedRateStore(shared), new BatchedRateStore(shared)];
    for (let i = 0; i < 20; i++) expect((await incr(i % 2 ? two : one, 20)).current).toBeLessThanOrEqual(20);
    expect((await incr(one, 20)).current).toBeGreaterThan(20);
    expect((await incr(two, 20)).current).toBeGreaterThan(20);
  });
});
