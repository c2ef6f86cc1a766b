import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeyholder, type RunningKeyholder } from '../../examples/lib/keyholder-server.js';
import { runElection, type ElectionResult } from '../../examples/leader-election/election.js';

/** The leader-election example, shortened: three replica processes, the leader stopped twice. */
describe('examples/leader-election', () => {
  let keyholder: RunningKeyholder;
  let result: ElectionResult;
  const ttlMs = 1500;

  beforeAll(async () => {
    keyholder = await startKeyholder();
    result = await runElection({ keyholderUrl: keyholder.url, replicas: 3, ttlMs, writeMs: 100, rounds: 2 });
  }, 300_000);

  afterAll(async () => {
    await keyholder?.stop();
  });

  it('elects another replica, with a higher fencing token, each time the leader is stopped', () => {
    expect(result.rounds).toHaveLength(2);
    for (const round of result.rounds) {
      expect(round.newLeader).not.toBe(round.oldLeader);
      expect(round.newToken).toBeGreaterThan(round.oldToken);
      // TTL (+ one round trip: followers watch with blocking queries) is the design bound; the slack is for a
      // busy machine's scheduling, not a target.
      expect(round.failoverMs).toBeLessThan(ttlMs + 5_000);
    }
  });

  it('refuses every write the old leader sends after it wakes, and it steps down', () => {
    for (const round of result.rounds) {
      expect(round.staleWritesRejected).toBeGreaterThanOrEqual(1);
      expect(round.staleWritesAccepted).toBe(0);
    }
    expect(result.rejectedWrites).toBeGreaterThanOrEqual(2);
  });
});
