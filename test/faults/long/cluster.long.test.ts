import { Command } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_NAMESPACE, lockId } from '../../../src/domain/namespaces.js';
import { KeySpace } from '../../../src/store/redis/keys.js';
import { RedisStore } from '../../../src/store/redis/redis-store.js';
import { RedisCluster } from '../../helpers/redis-cluster.js';
import { eventually } from '../../helpers/redis-store.js';
import type { Driver } from '../driver.js';
import {
  failoverUnderTraffic,
  REDIS_KEY_PREFIX,
  replicatedRedisEnv,
  SAFE,
  withInstances,
  type FailoverInjection,
  type FailoverResult,
} from '../failover.js';
import { printScenario, publishTable } from '../report.js';
import { withWords } from '../../helpers/store-words.js';

/**
 * Redis Cluster under traffic: 3 masters + 3 replicas on loopback, three keyholder instances given
 * every node, 32 clients on six locks of one namespace. Some seconds in, the master serving those
 * locks is killed with SIGKILL (its replica is promoted), or its replica takes over by CLUSTER
 * FAILOVER, or their slot is moved to another master mid-traffic. The history checker judges the
 * whole run: calls that meet the switch answer 503, none is a wrong grant.
 */
const NODE_TIMEOUT_MS = 1_000;
/** Leases longer than the failover takes, so a grant lost in it would still be in use when the lock is handed out again. */
const TTL_MS = 10_000;
const RUN_MS = 20_000;
const FAULT_AT_MS = 4_000;
const LOCK_PREFIX = 'cluster';
const results: FailoverResult[] = [];

afterAll(() => {
  if (results.length > 0) publishTable(results, 'faults-cluster.md');
});

/** The Redis key of a lock the driver uses (the instances run open: the default namespace). */
const space = new KeySpace(REDIS_KEY_PREFIX);
const lockKeyOf = (name: string) => space.lock(lockId(DEFAULT_NAMESPACE, name));
/**
 * The Redis key of the first lock the driver uses: the fault is aimed at its master, or its slot. A
 * namespace's locks spread over every master (16 shard tags, keys.ts), so the six locks are chosen to
 * share it with this one (see locksOn): the fault then hits all of the run's locks.
 */
const targetKey = lockKeyOf(`${LOCK_PREFIX}-k0`);
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

/**
 * Six lock names (`cluster-k<i>`, k0 first) whose keys lie on targetKey's master ('master': the scenarios
 * that kill or fail over that master), or in its very slot ('slot': the one that moves that slot).
 */
async function locksOn(cluster: RedisCluster, where: 'master' | 'slot'): Promise<string[]> {
  const slotOf = (key: string) => new Command('exists', [key]).getSlot();
  const targetSlot = slotOf(targetKey);
  const targetMaster = await cluster.masterOf(targetKey);
  const names: string[] = [];
  for (let i = 0; names.length < 6; i++) {
    if (i > 1_000) throw new Error(`fewer than 6 of 1,000 lock names on the target's ${where}`);
    const name = `${LOCK_PREFIX}-k${i}`;
    const key = lockKeyOf(name);
    const on = where === 'slot' ? slotOf(key) === targetSlot : slotOf(key) === targetSlot || (await cluster.masterOf(key)) === targetMaster;
    if (on) names.push(name);
  }
  return names;
}

async function run(
  name: string,
  acks: number,
  where: 'master' | 'slot',
  inject: (cluster: RedisCluster, driver: Driver, urls: readonly string[]) => Promise<FailoverInjection>,
): Promise<FailoverResult> {
  const cluster = await RedisCluster.start({ nodeTimeoutMs: NODE_TIMEOUT_MS });
  try {
    const env = replicatedRedisEnv({ REDIS_CLUSTER_NODES: cluster.nodesEnv }, acks);
    const keys = await locksOn(cluster, where);
    console.log(`[faults] ${name}: locks ${keys.join(', ')} on the target's ${where} (port ${await cluster.masterOf(targetKey)})`);
    const r = await withInstances(env, (urls) =>
      failoverUnderTraffic({
        name,
        urls,
        keyPrefix: LOCK_PREFIX,
        keys,
        durationMs: RUN_MS,
        ttlMs: TTL_MS,
        inject: async (driver) => {
          await sleep(FAULT_AT_MS);
          return inject(cluster, driver, urls);
        },
      }),
    );
    results.push(r);
    printScenario(r);
    return r;
  } finally {
    await cluster.stop();
  }
}

/**
 * A second namespace's traffic while a master is down: a store in this process taking and giving back
 * a lock, every 50 ms, in a namespace served by another master. Counts what it got while the fault
 * lasted, to show a Cluster loses only the dead master's namespaces.
 */
async function bystander(cluster: RedisCluster, killedPort: number) {
  const keys = new KeySpace(REDIS_KEY_PREFIX);
  let namespace = 'bystander-0';
  for (let i = 1; (await cluster.masterOf(keys.lock(lockId(namespace, 'x')))) === killedPort; i++) namespace = `bystander-${i}`;
  const store = withWords(
    new RedisStore({
      connection: cluster.connection,
      keyPrefix: REDIS_KEY_PREFIX,
      commandTimeoutMs: 1_000,
      fenceGraceMs: 60_000,
    }),
  );
  await eventually(() => store.ping(), 10_000);
  const id = lockId(namespace, 'x');
  const counts = { grants: 0, failures: 0 };
  let running = true;
  const loop = (async () => {
    for (let n = 0; running; n++) {
      try {
        const ownerToken = `bystander-owner-token-${n}`;
        const outcome = await store.acquire({ id, ownerToken, ttlMs: 5_000, holder: null });
        if (outcome.acquired) {
          counts.grants++;
          await store.release(id, ownerToken);
        }
      } catch {
        counts.failures++;
      }
      await sleep(50);
    }
  })();
  return {
    namespace,
    stop: async () => {
      running = false;
      await loop;
      await store.close();
      return counts;
    },
  };
}

const TIMEOUT_MS = 180_000;

describe('Redis Cluster under traffic', () => {
  it(
    'acks on: kill -9 a master; 503s during the failover, 0 overlaps, 0 token-order violations, then recovery',
    async () => {
      let other = { grants: 0, failures: 0 };
      let readyWhileDown = 0;
      const r = await run('C1 cluster master kill -9, 1 replica ack', 1, 'master', async (cluster, driver, urls) => {
        const side = await bystander(cluster, await cluster.masterOf(targetKey));
        const oldMaster = await cluster.killMasterOf(targetKey);
        const faultAtMs = driver.clock.nowMs();
        // The other masters answer, so the instances stay ready: a load balancer must not take them all out.
        const ready = await fetch(`${urls[0] ?? ''}/readyz`, { signal: AbortSignal.timeout(5_000) }).catch(() => null);
        readyWhileDown = ready?.status ?? 0;
        const newMaster = await cluster.waitForFailover(targetKey, oldMaster);
        const promotedAtMs = driver.clock.nowMs();
        other = await side.stop();
        console.log(
          `[faults] C1: namespace ${side.namespace} on another master, kill to promotion: ${other.grants} grants, ${other.failures} failures`,
        );
        // A supervisor restarts the dead node: it rejoins as a replica of the promoted one. Until then
        // the promoted master has no replica to acknowledge grants: its locks answer 503 until then.
        await cluster.restart(oldMaster);
        await cluster.waitUntilHealthy();
        const rejoinedAtMs = driver.clock.nowMs();
        return {
          faultAtMs,
          // No replica may start an election before the node timeout: nothing of that slot can answer until then.
          blindUntilMs: faultAtMs + NODE_TIMEOUT_MS,
          description:
            `master ${oldMaster} kill -9; replica ${newMaster} promoted after ${Math.round(promotedAtMs - faultAtMs)} ms, ` +
            `old master back as replica after ${Math.round(rejoinedAtMs - faultAtMs)} ms; acks 1`,
        };
      });
      expect(r.counts).toMatchObject(SAFE);
      expect(r.overlapsWithGrantsBeforeFault).toBe(0);
      expect(r.figures.firstGrantAfterFaultMs).toBeGreaterThan(0);
      // Another master's namespace was served while this one was down, and the instances stayed ready.
      expect(other.grants).toBeGreaterThan(0);
      expect(readyWhileDown).toBe(200);
    },
    TIMEOUT_MS,
  );

  it(
    'acks off: CLUSTER FAILOVER on a replica (no data lost by design); 0 overlaps, 0 token-order violations',
    async () => {
      const r = await run('C2 cluster manual failover, no acks', 0, 'master', async (cluster, driver) => {
        const faultAtMs = driver.clock.nowMs();
        const { from, to } = await cluster.manualFailover(targetKey);
        return {
          faultAtMs,
          blindUntilMs: faultAtMs,
          description: `CLUSTER FAILOVER: replica ${to} took over from ${from} after ${Math.round(driver.clock.nowMs() - faultAtMs)} ms; acks 0`,
        };
      });
      expect(r.counts).toMatchObject(SAFE);
      expect(r.figures.firstGrantAfterFaultMs).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );

  it(
    'acks on: a slot moved to another master mid-traffic (ASK, TRYAGAIN, MOVED); 0 overlaps, 0 token-order violations',
    async () => {
      const r = await run('C3 cluster slot moved mid-traffic, 1 replica ack', 1, 'slot', async (cluster, driver) => {
        const faultAtMs = driver.clock.nowMs();
        const { from, to, keys } = await cluster.moveSlotOf(targetKey);
        return {
          faultAtMs,
          blindUntilMs: faultAtMs,
          description: `the namespace's slot moved from ${from} to ${to} (${keys} keys) in ${Math.round(driver.clock.nowMs() - faultAtMs)} ms; acks 1`,
        };
      });
      expect(r.counts).toMatchObject(SAFE);
      expect(r.figures.firstGrantAfterFaultMs).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );
});
