import { afterAll, describe, expect, it } from 'vitest';
import { SentinelTopology } from '../../helpers/redis-sentinel.js';
import { failoverUnderTraffic, replicatedRedisEnv, SAFE, withInstances, type FailoverResult } from '../failover.js';
import { printScenario, publishTable } from '../report.js';

/**
 * Sentinel failover under traffic: 1 primary + 1 replica + 3 sentinels, three keyholder instances
 * following the primary through the sentinels, 32 clients. The primary is killed with SIGKILL a few
 * seconds in; the sentinels promote the replica; the history checker judges the whole run.
 *
 * The replica normally holds everything the primary answered (loopback replication takes
 * microseconds), so the run that shows what replica acknowledgement buys first cuts the replication
 * link (the replica falls silently behind, as it does on a congested network), then kills the primary.
 */
const DOWN_AFTER_MS = 1_000;
/**
 * Leases of 10 s (held up to ~3 s): longer than the failover takes, so a grant lost in the failover
 * can still be in use when the new primary hands the lock out again, which is the harm to look for.
 */
const TTL_MS = 10_000;
const RUN_MS = 20_000;
const FAULT_AT_MS = 4_000;
const LINK_CUT_MS = 600;
const results: FailoverResult[] = [];

afterAll(() => {
  if (results.length > 0) publishTable(results, 'faults-sentinel.md');
});

async function run(name: string, acks: number, cutLinkFirst: boolean): Promise<FailoverResult> {
  const topology = await SentinelTopology.start({ replicas: 1, sentinels: 3, downAfterMs: DOWN_AFTER_MS, replicationProxy: true });
  try {
    const env = replicatedRedisEnv({ REDIS_SENTINELS: topology.sentinelsEnv, REDIS_SENTINEL_NAME: SentinelTopology.NAME }, acks);
    const r = await withInstances(env, (urls) =>
      failoverUnderTraffic({
        name,
        urls,
        keyPrefix: 'sentinel',
        durationMs: RUN_MS,
        ttlMs: TTL_MS,
        inject: async (driver) => {
          const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
          await sleep(FAULT_AT_MS - (cutLinkFirst ? LINK_CUT_MS : 0));
          if (cutLinkFirst) {
            for (const proxy of topology.linkProxies) proxy.set({ kind: 'blackhole' });
            await sleep(LINK_CUT_MS);
          }
          const oldPrimary = await topology.killPrimary();
          const faultAtMs = driver.clock.nowMs();
          const newPrimary = await topology.waitForNewPrimary(oldPrimary);
          const promotedAtMs = driver.clock.nowMs();
          // A supervisor restarts the dead server as a replica of the new primary. Until a replica is
          // back, a primary with one replica left has none to acknowledge grants: with acks on, every
          // grant is refused (503) until then. That is the price of REDIS_MIN_REPLICA_ACKS with one replica.
          await topology.rejoin(oldPrimary);
          const rejoinedAtMs = driver.clock.nowMs();
          return {
            faultAtMs,
            // The sentinels cannot even agree the primary is down before DOWN_AFTER_MS: nobody can answer until then.
            blindUntilMs: faultAtMs + DOWN_AFTER_MS,
            description:
              `${cutLinkFirst ? `replication link cut ${LINK_CUT_MS} ms, then ` : ''}primary ${oldPrimary} kill -9; ` +
              `replica ${newPrimary} promoted after ${Math.round(promotedAtMs - faultAtMs)} ms, old primary rejoined as replica after ${Math.round(rejoinedAtMs - faultAtMs)} ms; acks ${acks}`,
          };
        },
      }),
    );
    results.push(r);
    printScenario(r);
    return r;
  } finally {
    await topology.stop();
  }
}

const TIMEOUT_MS = 180_000;

describe('Sentinel failover under traffic', () => {
  it(
    'acks on: kill -9 the primary; 0 overlaps, 0 token-order violations, service back after the failover',
    async () => {
      const r = await run('S1 sentinel failover, 1 replica ack', 1, false);
      expect(r.counts).toMatchObject(SAFE);
      expect(r.overlapsWithGrantsBeforeFault).toBe(0);
      expect(r.figures.firstGrantAfterFaultMs).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );

  it(
    'acks on, replica behind: grants the replica lacks are refused (503), none is lost in the failover',
    async () => {
      const r = await run('S2 replica cut off then failover, 1 replica ack', 1, true);
      expect(r.counts).toMatchObject(SAFE);
      expect(r.overlapsWithGrantsBeforeFault).toBe(0);
    },
    TIMEOUT_MS,
  );

  it(
    'acks off, replica behind: grants are lost in the failover (reported); fencing tokens still only go up',
    async () => {
      const r = await run('S3 replica cut off then failover, no acks', 0, true);
      // What can go wrong without acknowledgement is reported, not asserted: the lost grants' holders
      // overlap with the next holders. Token order must hold either way (the clock floor).
      console.log(
        `[faults] without replica acks: ${r.counts.overlaps} overlaps (${r.overlapsWithGrantsBeforeFault} with grants answered before the kill), ` +
          `${r.counts.grantsDuringLease} grants during another's lease, ${r.counts.staleWritesAccepted} stale writes accepted, ` +
          `${r.staleWritesRejected} stale writes rejected by fencing`,
      );
      expect(r.counts).toMatchObject({ tokenRegressions: 0, duplicateTokens: 0 });
    },
    TIMEOUT_MS,
  );
});
