import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { until, withClient } from '../helpers/redis-admin.js';
import { SentinelTopology } from '../helpers/redis-sentinel.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * Sentinels often watch several masters. A failover of another master they watch leaves keyholder's
 * connection to its own, healthy, primary alone (no call on it answered 503); a failover of its own
 * master is still followed at once.
 */
const OTHER = 'other';
let topology: SentinelTopology;
let otherPrimary: RedisServer;
let otherReplica: RedisServer;
let sentinelPort: number;

beforeAll(async () => {
  topology = await SentinelTopology.start({ replicas: 1, sentinels: 1, downAfterMs: 120_000 });
  sentinelPort = (topology.sentinels[0] as { port: number }).port;
  otherPrimary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
  otherReplica = await RedisServer.start({
    args: ['--repl-diskless-sync-delay', '0', '--replicaof', '127.0.0.1', String(otherPrimary.port)],
  });
  await withClient(sentinelPort, (c) => c.call('SENTINEL', 'MONITOR', OTHER, '127.0.0.1', String(otherPrimary.port), '1'));
  await until(
    'the other replica to sync',
    30_000,
    () => withClient(otherPrimary.port, async (c) => (/slave0:.*state=online/.test(await c.info('replication')) ? true : undefined)),
    50,
  );
  await until(
    'the sentinel to see the other replica',
    30_000,
    () =>
      withClient(sentinelPort, async (c) => (((await c.call('SENTINEL', 'replicas', OTHER)) as unknown[]).length > 0 ? true : undefined)),
    50,
  );
}, 90_000);
afterAll(async () => {
  await topology?.stop();
  await otherReplica?.stop();
  await otherPrimary?.stop();
});

/** Resolves with the next `+switch-master` announcement naming `name`, once subscribed (`subscribed`). */
async function nextSwitch(name: string): Promise<{ announced: Promise<void>; close: () => void }> {
  const listener = new Redis({ host: '127.0.0.1', port: sentinelPort, maxRetriesPerRequest: 0 });
  const announced = new Promise<void>((resolve) => {
    listener.on('message', (_channel: string, message: string) => {
      if (message.split(' ')[0] === name) resolve();
    });
  });
  await listener.subscribe('+switch-master');
  return { announced, close: () => listener.disconnect() };
}

describe('Sentinel failover announcements', () => {
  it("another master's failover leaves the connection alone; the store's own master's is followed", async () => {
    let connections = 0;
    const store = new RedisStore({
      connection: topology.connection,
      keyPrefix: 'switches:',
      commandTimeoutMs: 1_000,
      fenceGraceMs: 60_000,
      log: { info: (_obj, msg) => (msg === 'connected to Redis' ? connections++ : undefined), warn: () => undefined },
    });
    try {
      await eventually(() => store.ping(), 10_000);
      // Each of the store's two connections (calls, subscriber) subscribes its failover detector once made.
      await until(
        'the failover detectors subscribed',
        10_000,
        () =>
          withClient(sentinelPort, async (c) => {
            const subscribed = String(await c.call('CLIENT', 'LIST')).match(/ sub=1 /g) ?? [];
            return subscribed.length >= 2 ? true : undefined;
          }),
        20,
      );
      expect(connections).toBe(1);

      const other = await nextSwitch(OTHER);
      await SentinelTopology.failover(sentinelPort, OTHER);
      await other.announced;
      other.close();
      // The announcement reached the store's detector with this test's: one round trip later it was read.
      await store.ping();
      await store.ping();
      expect(connections).toBe(1);

      const own = await nextSwitch(SentinelTopology.NAME);
      const oldPrimary = await topology.primaryPort();
      await SentinelTopology.failover(sentinelPort, SentinelTopology.NAME);
      await own.announced;
      own.close();
      await topology.waitForNewPrimary(oldPrimary);
      await eventually(async () => expect(connections).toBe(2), 10_000);
      await eventually(() => store.ping(), 10_000);
    } finally {
      await store.close();
    }
  });
});
