/**
 * Leader election with keyholder: three replicas campaign for `leader:db`; the leader renews and writes
 * to a fenced resource; the others watch the lock with blocking queries. The demo stops the leader with SIGSTOP several times and
 * prints each failover.
 *
 *   npx tsx examples/leader-election/demo.ts [--rounds 5] [--ttl-ms 2000]
 */
import { parseArgs } from 'node:util';
import { startKeyholder } from '../lib/keyholder-server.js';
import { markdownTable } from '../lib/table.js';
import { runElection } from './election.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    replicas: { type: 'string', default: '3' },
    'ttl-ms': { type: 'string', default: '2000' },
    'write-ms': { type: 'string', default: '100' },
  },
});
const ttlMs = Number(values['ttl-ms']);
const keyholder = await startKeyholder();
try {
  const result = await runElection({
    keyholderUrl: keyholder.url,
    replicas: Number(values.replicas),
    ttlMs,
    writeMs: Number(values['write-ms']),
    rounds: Number(values.rounds),
  });
  console.log(
    markdownTable(
      ['round', 'stopped leader', 'new leader', 'failover (ms)', 'bound: TTL (ms)', 'old leader\'s writes after waking: rejected', 'accepted'],
      result.rounds.map((r, i) => [i + 1, r.oldLeader, r.newLeader, r.failoverMs, ttlMs, r.staleWritesRejected, r.staleWritesAccepted]),
    ),
  );
  console.log(
    `\n${result.elections} elections; the resource accepted ${result.acceptedWrites} writes and refused ${result.rejectedWrites} (stale fencing token).`,
  );
} finally {
  await keyholder.stop();
}
