import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeyholder, type RunningKeyholder } from '../../examples/lib/keyholder-server.js';
import { runSale, type SaleOptions, type SaleResult } from '../../examples/flash-sale/sale.js';
import { POSTGRES_ADMIN_URL, createTestDatabase } from '../helpers/postgres.js';

/**
 * The flash-sale example, shortened: 3 buyer processes, 30 units, 2 holders stopped past their TTL in
 * the lock modes. The three sales run at once (each in its own database, on its own product key).
 */
describe('examples/flash-sale', () => {
  let keyholder: RunningKeyholder;
  const results = new Map<SaleOptions['mode'], SaleResult>();

  beforeAll(async () => {
    // Fails with the fix when PostgreSQL is missing (the sale creates its own databases).
    await (await createTestDatabase()).drop();
    keyholder = await startKeyholder();
    const common = { keyholderUrl: keyholder.url, postgresUrl: POSTGRES_ADMIN_URL, buyers: 3, units: 30, ttlMs: 300, workMs: 20, pauses: 2, pauseMs: 900 };
    const runs = await Promise.all((['none', 'lock', 'fenced'] as const).map((mode) => runSale({ ...common, mode })));
    for (const r of runs) results.set(r.mode, r);
  }, 300_000);

  afterAll(async () => {
    await keyholder?.stop();
  });

  it('without a lock, concurrent read-check-writes oversell', () => {
    const r = results.get('none')!;
    expect(r.ordersConfirmed).toBeGreaterThan(r.units);
    expect(r.oversold).toBeGreaterThan(0);
  });

  it('with a lock but no fencing, a holder woken after its lease ended writes a stale value and oversells', () => {
    const r = results.get('lock')!;
    expect(r.pauses).toBe(2);
    expect(r.staleWritesApplied).toBeGreaterThanOrEqual(1);
    expect(r.oversold).toBeGreaterThanOrEqual(1);
  });

  it('with fenced writes, nothing is oversold and every paused holder\'s write is rejected', () => {
    const r = results.get('fenced')!;
    expect(r.pauses).toBe(2);
    expect(r.oversold).toBe(0);
    expect(r.ordersConfirmed).toBe(r.units);
    expect(r.finalUnits).toBe(0);
    expect(r.staleWritesApplied).toBe(0);
    expect(r.staleWritesRejected).toBeGreaterThanOrEqual(r.pauses);
    expect(r.lostLeases).toBeGreaterThanOrEqual(r.pauses);
  });
});
