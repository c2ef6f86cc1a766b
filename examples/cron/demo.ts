/**
 * Cron at scale: several servers start the same job at every tick, three ways. Prints one row per way.
 *
 *   npx tsx examples/cron/demo.ts [--servers 3] [--ticks 3] [--tick-ms 1000] [--skew-ms 300] [--work-ms 100] [--ttl-ms 10000] [--stalls 1]
 */
import { parseArgs } from 'node:util';
import { startKeyholder } from '../lib/keyholder-server.js';
import { markdownTable } from '../lib/table.js';
import { runSchedule, type CronMode, type CronResult } from './schedule.js';

export const CRON_LABELS: Record<CronMode, string> = {
  none: 'no lock (cron on every server)',
  lock: 'keyholder run, key per tick, kept; result store not fenced',
  fenced: 'keyholder run, key per tick, kept; result store fenced',
};

export function cronRow(r: CronResult): Array<string | number> {
  return [
    CRON_LABELS[r.mode],
    r.servers,
    r.ticks,
    r.runs,
    r.ticksExactlyOnce,
    r.ticksRunTwiceOrMore,
    r.ticksMissed,
    r.stalledRuns,
    r.staleResultsApplied,
    r.staleResultsRefused,
    r.skipped,
    r.lostLeases,
    r.lostBeforeStart,
    r.failed,
  ];
}

export const CRON_TABLE_HEADER = [
  'mode',
  'servers',
  'ticks',
  'runs',
  'ticks run once',
  'ticks run twice or more',
  'ticks missed',
  'stalled runs',
  'stale results kept',
  'stale results refused',
  'skipped (held)',
  'lease lost',
  'lost before start',
  'failed',
];

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '3' },
    ticks: { type: 'string', default: '3' },
    'tick-ms': { type: 'string', default: '1000' },
    'skew-ms': { type: 'string', default: '300' },
    'work-ms': { type: 'string', default: '100' },
    'ttl-ms': { type: 'string', default: '10000' },
    stalls: { type: 'string', default: '1' },
  },
});
const keyholder = await startKeyholder();
try {
  const modes = ['none', 'lock', 'fenced'] as const;
  const results = await Promise.all(
    modes.map((mode) =>
      runSchedule({
        mode,
        keyholderUrl: keyholder.url,
        servers: Number(values.servers),
        ticks: Number(values.ticks),
        tickMs: Number(values['tick-ms']),
        skewMs: Number(values['skew-ms']),
        workMs: Number(values['work-ms']),
        ttlMs: Number(values['ttl-ms']),
        stalls: Number(values.stalls),
      }),
    ),
  );
  console.log(markdownTable(CRON_TABLE_HEADER, results.map(cronRow)));
  for (const failure of results.flatMap((r) => r.failures)) console.error(failure);
} finally {
  await keyholder.stop();
}
