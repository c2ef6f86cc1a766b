/**
 * The flash sale, three ways: no lock, a lock without fencing, a lock with fenced writes; the last two
 * with lock holders stopped (SIGSTOP) past their lease. Prints one table row per way.
 *
 *   npx tsx examples/flash-sale/demo.ts [--buyers 10] [--units 100] [--pauses 5] [--ttl-ms 500] [--work-ms 20] [--broken-lock]
 *
 * --broken-lock runs the lock modes against a stub that grants every acquire (examples/lib/broken-lock-server.ts)
 * instead of keyholder: what the table looks like when the lock does not work.
 *
 * Needs PostgreSQL (POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/postgres; the user must
 * be allowed to CREATE DATABASE) and starts its own keyholder server process.
 */
import { parseArgs } from 'node:util';
import { startBrokenLock } from '../lib/broken-lock-server.js';
import { startKeyholder } from '../lib/keyholder-server.js';
import { markdownTable } from '../lib/table.js';
import { runSale, type SaleResult } from './sale.js';
import type { Mode } from './buyer.js';

export const SALE_TABLE_HEADER = [
  'mode',
  'buyers',
  'units',
  'orders confirmed',
  'oversold',
  'holders paused',
  'stale writes applied',
  'stale holders refused',
  'lost leases',
  'refused while lease held',
  'time (s)',
];

const LABELS: Record<Mode, string> = { none: 'no lock', lock: 'lock, no fencing', fenced: 'lock + fenced write' };

export function saleRow(r: SaleResult): Array<string | number> {
  const lockOnly = (n: number) => (r.mode === 'none' ? '-' : n);
  return [
    LABELS[r.mode],
    r.buyers,
    r.units,
    r.ordersConfirmed,
    r.oversold,
    lockOnly(r.pauses),
    lockOnly(r.staleWritesApplied),
    lockOnly(r.staleWritesRejected),
    lockOnly(r.lostLeases),
    lockOnly(r.refusedWhileHeld),
    (r.durationMs / 1000).toFixed(1),
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      buyers: { type: 'string', default: '10' },
      units: { type: 'string', default: '100' },
      pauses: { type: 'string', default: '5' },
      'ttl-ms': { type: 'string', default: '500' },
      'work-ms': { type: 'string', default: '20' },
      'broken-lock': { type: 'boolean', default: false },
    },
  });
  const ttlMs = Number(values['ttl-ms']);
  const lock = values['broken-lock'] ? await startBrokenLock() : await startKeyholder();
  try {
    const rows: Array<Array<string | number>> = [];
    for (const mode of ['none', 'lock', 'fenced'] as const) {
      const result = await runSale({
        mode,
        keyholderUrl: lock.url,
        postgresUrl: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
        buyers: Number(values.buyers),
        units: Number(values.units),
        ttlMs,
        workMs: Number(values['work-ms']),
        pauses: Number(values.pauses),
        pauseMs: ttlMs * 3,
      });
      rows.push(saleRow(result));
      process.stderr.write(`${LABELS[mode]}: done\n`);
    }
    console.log(markdownTable(SALE_TABLE_HEADER, rows));
  } finally {
    await lock.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
