/**
 * Leader election, three ways: no lock, a lock without fencing, a lock with a fenced log. Three replicas
 * append to one shared log; in the lock ways the demo stops the leader with SIGSTOP several times and
 * resumes it after another replica has taken over. Prints one row per way, then each failover of the
 * fenced way.
 *
 *   npx tsx examples/leader-election/demo.ts [--rounds 5] [--ttl-ms 2000] [--broken-lock]
 *
 * --broken-lock runs the lock ways against a stub that grants every acquire (examples/lib/broken-lock-server.ts)
 * instead of keyholder: what the table looks like when the lock does not work.
 */
import { parseArgs } from 'node:util';
import { startBrokenLock } from '../lib/broken-lock-server.js';
import { startKeyholder } from '../lib/keyholder-server.js';
import { markdownTable } from '../lib/table.js';
import { runElection, type ElectionResult } from './election.js';
import type { ElectionMode } from './replica.js';

export const ELECTION_LABELS: Record<ElectionMode, string> = {
  none: 'no lock',
  lock: 'lock, no fencing',
  fenced: 'lock + fenced log',
};

export const ELECTION_TABLE_HEADER = [
  'mode',
  'replicas',
  'leaders stopped',
  'log entries',
  'out-of-turn entries',
  "stopped leaders' appends after waking: accepted",
  'refused',
  'refused while lease held',
  'elections',
];

export function electionRow(r: ElectionResult): Array<string | number> {
  const lockOnly = (n: number) => (r.mode === 'none' ? '-' : n);
  const sum = (pick: (round: ElectionResult['rounds'][number]) => number) => r.rounds.reduce((total, round) => total + pick(round), 0);
  return [
    ELECTION_LABELS[r.mode],
    r.replicas,
    lockOnly(r.rounds.length),
    r.entries,
    r.outOfTurn,
    lockOnly(sum((round) => round.staleWritesAccepted)),
    lockOnly(sum((round) => round.staleWritesRejected)),
    lockOnly(r.refusedWhileHeld),
    lockOnly(r.elections),
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '5' },
      replicas: { type: 'string', default: '3' },
      'ttl-ms': { type: 'string', default: '2000' },
      'write-ms': { type: 'string', default: '100' },
      'broken-lock': { type: 'boolean', default: false },
    },
  });
  const ttlMs = Number(values['ttl-ms']);
  const broken = values['broken-lock'];
  const lock = broken ? await startBrokenLock() : await startKeyholder();
  try {
    const results: ElectionResult[] = [];
    for (const mode of ['none', 'lock', 'fenced'] as const) {
      results.push(
        await runElection({
          mode,
          keyholderUrl: lock.url,
          replicas: Number(values.replicas),
          ttlMs,
          writeMs: Number(values['write-ms']),
          // Against a broken lock, two leaders need no stopped one.
          rounds: broken ? 0 : Number(values.rounds),
          minEntries: 30,
        }),
      );
      process.stderr.write(`${ELECTION_LABELS[mode]}: done\n`);
    }
    console.log(markdownTable(ELECTION_TABLE_HEADER, results.map(electionRow)));
    const fenced = results.find((r) => r.mode === 'fenced')!;
    if (fenced.rounds.length > 0) {
      console.log(
        `\n${markdownTable(
          ['round (lock + fenced log)', 'stopped leader', 'new leader', 'failover (ms)', 'bound: TTL (ms)'],
          fenced.rounds.map((r, i) => [i + 1, r.oldLeader, r.newLeader, r.failoverMs, ttlMs]),
        )}`,
      );
    }
  } finally {
    await lock.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
