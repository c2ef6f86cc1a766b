import { Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedisClient, type RedisClient } from '../../src/store/redis/client.js';
import { confirmOnReplicas, dataNodes, ownerOf, subscriberFor } from '../../src/store/redis/nodes.js';
import { freePort } from '../helpers/redis-server.js';

/**
 * How keyholder's Redis clients are set up, for each way of reaching Redis (one server, Sentinel,
 * Cluster): fail fast and closed, reconnect for ever with a bounded back-off, follow failovers. Read
 * from the clients ioredis builds, pointed at a port nothing listens on: no Redis is needed to see
 * the policy, and the tests with real Sentinels and Clusters (test/redis) show it at work.
 */

const opened: RedisClient[] = [];
function track<T extends RedisClient>(client: T): T {
  opened.push(client);
  return client;
}

afterEach(() => {
  for (const client of opened.splice(0)) client.disconnect();
});

/** The nodes a Cluster client starts from (ioredis keeps them in a field its typings mark private). */
const startupNodes = (cluster: Cluster): unknown => (cluster as unknown as { startupNodes: unknown }).startupNodes;

const nowhere = async () => ({ host: '127.0.0.1', port: await freePort() });

/** What every connection mode shares: the fail-fast, reconnect-for-ever policy. */
function expectFailFast(options: Redis['options'], commandTimeoutMs: number): void {
  // No ioredis commandTimeout: the deadline is keyholder's own, which a busy event loop does not trip
  // (armDeadline; test/redis/command-deadline.test.ts). Connecting may take longer, never under a second.
  expect(options.commandTimeout).toBeUndefined();
  expect(options.connectTimeout).toBe(Math.max(commandTimeoutMs, 1000));
  // A command while disconnected fails at once; one in flight when the connection drops is not re-sent.
  expect(options.enableOfflineQueue).toBe(false);
  expect(options.maxRetriesPerRequest).toBe(0);
  expect(options.lazyConnect).toBe(false);
  // Back after an outage as soon as possible: a loading Redis is asked again every 100 ms, and the
  // ready check is the only round trip before the connection is ready (no CLIENT SETINFO).
  expect(options.maxLoadingRetryTime).toBe(100);
  expect(options.disableClientInfo).toBe(true);
}

describe('Redis clients: one server', () => {
  it('fails fast, reconnects after 50 ms more per attempt up to once a second, and pipelines only when asked', async () => {
    const { port } = await nowhere();
    const redis = track(createRedisClient(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 2500 }));
    expect(redis).toBeInstanceOf(Redis);
    expect(redis.options.port).toBe(port);
    expectFailFast(redis.options, 2500);
    // Connecting may take longer than a command, never less than a second.
    expect(redis.options.connectTimeout).toBe(2500);
    expect(redis.options.enableAutoPipelining).toBe(false);
    const retry = redis.options.retryStrategy!;
    expect([1, 2, 10, 20, 21, 1000].map((attempt) => retry(attempt))).toEqual([50, 100, 500, 1000, 1000, 1000]);

    const quick = track(createRedisClient(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 200, autoPipelining: true }));
    expect(quick.options.connectTimeout).toBe(1000);
    expect(quick.options.enableAutoPipelining).toBe(true);
    expect(
      track(createRedisClient(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 200, autoPipelining: false })).options.enableAutoPipelining,
    ).toBe(false);
  });

  it('a plain connection target is the same as a URL', async () => {
    const { port } = await nowhere();
    const redis = track(createRedisClient({ mode: 'standalone', url: `redis://127.0.0.1:${port}` }, { commandTimeoutMs: 300 }));
    expect(redis.options.port).toBe(port);
    expect(redis.options.sentinels).toBeFalsy();
    expectFailFast(redis.options, 300);
  });

  it('the hand-over subscriber queues its SUBSCRIBE until connected and waits for replies as long as it takes', async () => {
    const { port } = await nowhere();
    const redis = track(createRedisClient(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 300, autoPipelining: true }));
    const subscriber = track(subscriberFor(redis));
    if (!(subscriber instanceof Redis)) throw new Error('expected a client of one server');
    expect(subscriber.options.port).toBe(port);
    expect(subscriber.options.enableOfflineQueue).toBe(true);
    expect(subscriber.options.enableAutoPipelining).toBe(false);
    expect(subscriber.options.commandTimeout).toBeUndefined();
    expect(subscriber.options.maxRetriesPerRequest).toBeNull();
  });

  it('one server is its only data node and the owner of every key', async () => {
    const redis = track(createRedisClient(`redis://127.0.0.1:${(await nowhere()).port}`, { commandTimeoutMs: 300 }));
    expect(dataNodes(redis)).toEqual([redis]);
    expect(ownerOf(redis, 'kh:{a}')).toBe('single');
  });
});

describe('Redis clients: through Sentinel', () => {
  it('asks the given sentinels for the named primary, follows a switch at once, and backs off up to once a second', async () => {
    const a = await nowhere();
    const b = await nowhere();
    const redis = track(
      createRedisClient(
        { mode: 'sentinel', sentinels: [{ ...a, extra: 'not passed on' } as typeof a, b], name: 'keyholder' },
        { commandTimeoutMs: 300 },
      ),
    );
    expect(redis).toBeInstanceOf(Redis);
    const options = redis.options;
    expect(options.sentinels).toEqual([a, b]);
    expect(options.name).toBe('keyholder');
    expect(options.role).toBe('master');
    expect(options.failoverDetector).toBe(true);
    expectFailFast(options, 300);
    expect(options.sentinelCommandTimeout).toBe(1000);
    const retry = options.sentinelRetryStrategy!;
    expect([1, 2, 5, 10, 11, 500].map((attempt) => retry(attempt))).toEqual([100, 200, 500, 1000, 1000, 1000]);
    const slow = track(createRedisClient({ mode: 'sentinel', sentinels: [a], name: 'keyholder' }, { commandTimeoutMs: 4000 }));
    expect(slow.options.sentinelCommandTimeout).toBe(4000);
  });

  it('a primary demoted under the client (READONLY) makes it reconnect without re-sending; other errors do not', async () => {
    const redis = track(
      createRedisClient({ mode: 'sentinel', sentinels: [await nowhere()], name: 'keyholder' }, { commandTimeoutMs: 300 }),
    );
    const reconnectOnError = redis.options.reconnectOnError!;
    expect(reconnectOnError(new Error("READONLY You can't write against a read only replica."))).toBe(1);
    expect(reconnectOnError(new Error('ERR unknown command, READONLY'))).toBe(false);
    expect(reconnectOnError(new Error('LOADING Redis is loading the dataset in memory'))).toBe(false);
  });
});

describe('Redis clients: a Cluster', () => {
  async function cluster(commandTimeoutMs = 300) {
    const a = await nowhere();
    const b = await nowhere();
    const client = track(
      createRedisClient({ mode: 'cluster', nodes: [{ ...a, extra: 'not passed on' } as typeof a, b] }, { commandTimeoutMs }),
    );
    if (!(client instanceof Cluster)) throw new Error('expected a Cluster client');
    return { client, a, b };
  }

  it('starts from the given nodes, fails fast and closed, and never re-sends a command whose outcome is unknown', async () => {
    const { client, a, b } = await cluster();
    expect(startupNodes(client)).toEqual([a, b]);
    const options = client.options;
    expect(options.enableOfflineQueue).toBe(false);
    expect(options.enableAutoPipelining).toBe(false);
    expect(options.lazyConnect).toBe(false);
    expect(options.redisOptions).toMatchObject({ connectTimeout: 1000, maxRetriesPerRequest: 0 });
    expect(options.redisOptions?.commandTimeout).toBeUndefined();
    // Per-node connections do not reconnect on their own nor queue: the cluster client does.
    const perNode = options.redisOptions as Record<string, unknown>;
    expect(perNode.retryStrategy).toBeUndefined();
    expect(perNode.enableOfflineQueue).toBeUndefined();
    expect(options.retryDelayOnFailover).toBe(0);
    expect(options.retryDelayOnClusterDown).toBe(0);
    expect(options.retryDelayOnMoved).toBe(0);
    expect(options.retryDelayOnTryAgain).toBe(20);
    expect(options.enableReadyCheck).toBe(false);
  });

  it('reconnects with the same back-off as one server, and reads the slot map every second, within the command timeout or a second', async () => {
    const { client } = await cluster(300);
    const retry = client.options.clusterRetryStrategy!;
    expect([1, 2, 10, 20, 21, 1000].map((attempt) => retry(attempt, new Error('down')))).toEqual([50, 100, 500, 1000, 1000, 1000]);
    expect(client.options.slotsRefreshInterval).toBe(1000);
    expect(client.options.slotsRefreshTimeout).toBe(1000);
    const slow = (await cluster(3000)).client;
    expect(slow.options.slotsRefreshTimeout).toBe(3000);
    const pipelining = track(
      createRedisClient({ mode: 'cluster', nodes: [await nowhere()] }, { commandTimeoutMs: 300, autoPipelining: true }),
    );
    expect((pipelining as Cluster).options.enableAutoPipelining).toBe(true);
  });

  it('the hand-over subscriber starts from the same nodes, queues until connected and waits for replies as long as it takes', async () => {
    const { client, a, b } = await cluster();
    const subscriber = track(subscriberFor(client));
    if (!(subscriber instanceof Cluster)) throw new Error('expected a Cluster subscriber');
    expect(startupNodes(subscriber)).toEqual([a, b]);
    expect(subscriber.options.enableOfflineQueue).toBe(true);
    expect(subscriber.options.enableAutoPipelining).toBe(false);
    expect(subscriber.options.redisOptions).toMatchObject({ connectTimeout: 1000, maxRetriesPerRequest: null });
    expect(subscriber.options.redisOptions?.commandTimeout).toBeUndefined();
  });

  it('before the slot map is known no key has an owner, and WAIT reports no replica (the grant is rolled back)', async () => {
    const { client, a } = await cluster();
    expect(ownerOf(client, 'kh:{a}')).toBeNull();
    await expect(confirmOnReplicas(client, 'kh:{a}', null, 1, 100)).resolves.toBe(0);
    await expect(confirmOnReplicas(client, 'kh:{a}', `${a.host}:${a.port}`, 1, 100)).resolves.toBe(0);
  });
});
