import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * An instance started before its Redis answers (pods of a deployment start in any order; Redis is
 * still starting, or stopped): it starts all the same (/livez 200, /readyz 503), and turns ready by
 * itself once Redis answers, within one reconnect period (the client retries at least every second,
 * client.ts) plus a connection and an answer of this process, both measured on this machine in the test.
 */
const RECONNECT_MAX_DELAY_MS = 1_000;

const get = (server: KeyholderProcess, path: string) => fetch(`${server.url}${path}`, { signal: AbortSignal.timeout(5_000) });
const acquire = (server: KeyholderProcess, key: string) =>
  fetch(`${server.url}/v1/locks/${key}/acquire`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ttlMs: 10_000 }),
    signal: AbortSignal.timeout(5_000),
  });

/** What a fresh connection to `redis` costs now (ms): the instance's reconnect needs about as much. */
async function connectCostMs(redis: RedisServer): Promise<number> {
  const started = performance.now();
  const probe = redis.client();
  try {
    await probe.ping();
  } finally {
    probe.disconnect();
  }
  return performance.now() - started;
}

/**
 * Starts an instance on `redis` (env: how to reach it) while it does not answer; `answer` makes it
 * answer. The bound: a reconnect period, plus `extraMs`, plus twice a connection and an answer of the
 * instance as measured.
 */
async function readyOnceRedisAnswers(
  env: Record<string, string>,
  redis: RedisServer,
  answer: () => Promise<void>,
  what: string,
  extraMs = 0,
): Promise<void> {
  const server = await KeyholderProcess.start({ env: { ...env, LOG_LEVEL: 'warn' }, waitFor: 'livez' });
  try {
    // What one answer of this process costs now (a /readyz poll pays it once more).
    const livezStarted = performance.now();
    expect((await get(server, '/livez')).status).toBe(200);
    const livezMs = performance.now() - livezStarted;
    const notReady = await get(server, '/readyz');
    expect(notReady.status).toBe(503);
    expect(((await notReady.json()) as { code?: string }).code).toBe('store_unavailable');
    expect((await acquire(server, 'before')).status).toBe(503);

    await answer();
    const answeredAt = performance.now();
    const connectMs = await connectCostMs(redis);
    await eventually(async () => expect((await get(server, '/readyz')).status).toBe(200), 15_000);
    const readyMs = performance.now() - answeredAt;
    const boundMs = RECONNECT_MAX_DELAY_MS + extraMs + 2 * connectMs + 2 * livezMs + 500;
    console.log(
      `[start] ${what}: /readyz 200 ${Math.round(readyMs)} ms after Redis answered (bound ${Math.round(boundMs)} ms: connect ${Math.round(connectMs)} ms, /livez ${Math.round(livezMs)} ms)`,
    );
    expect(readyMs).toBeLessThanOrEqual(boundMs);
    expect((await acquire(server, 'after')).status).toBe(200);
  } finally {
    await server.stop();
  }
}

describe('an instance started before Redis answers', () => {
  it('Redis not running yet: /readyz 503, then 200 within a reconnect period and a connect once Redis is up', async () => {
    const redis = await RedisServer.start();
    try {
      await redis.kill();
      await readyOnceRedisAnswers({ REDIS_URL: redis.url }, redis, () => redis.launch(), 'started before Redis was up');
    } finally {
      await redis.stop();
    }
  });

  it('Redis paused (its port accepts, nothing answers): /readyz 503, then 200 within the same bound once it is resumed', async () => {
    const redis = await RedisServer.start();
    try {
      redis.pause();
      await readyOnceRedisAnswers({ REDIS_URL: redis.url }, redis, () => Promise.resolve(redis.resume()), 'started while Redis was paused');
    } finally {
      await redis.stop();
    }
  });

  it('a Redis Cluster none of whose nodes runs yet: /readyz 503, then 200 within the same bound and a slot map refresh once it is back', async () => {
    const cluster = await RedisCluster.start();
    try {
      // Every node down; each comes back with its cluster configuration (nodes.conf), as after a power cut.
      for (const server of cluster.servers) await server.kill();
      await readyOnceRedisAnswers(
        { REDIS_CLUSTER_NODES: cluster.nodesEnv },
        cluster.servers[0] as RedisServer,
        async () => {
          await Promise.all(cluster.servers.map((server) => server.launch()));
          await cluster.waitUntilHealthy();
        },
        'started before a Redis Cluster was up',
        // The Cluster client reads the slot map again at least every second (client.ts).
        1_000,
      );
    } finally {
      await cluster.stop();
    }
  });
});
