import type { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { openSharedRateLimit } from '../../src/store/shared-rate-limit.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';

/** Every client made (the rate limiter keeps its own out of reach). */
const made = vi.hoisted(() => [] as unknown[]);
vi.mock('../../src/store/redis/client.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/store/redis/client.js')>();
  return {
    ...real,
    createRedisClient: (...args: Parameters<typeof real.createRedisClient>) => {
      const client = real.createRedisClient(...args);
      made.push(client);
      return client;
    },
  };
});

/**
 * Shutting down while Redis is gone: the lock store's clients (commands and subscriber) and the shared
 * rate limiter's client end when closed, at once. ioredis's quit() then disconnect() left a client that
 * waited between two connection attempts 'reconnecting' for ever, with a 2 s timer armed on its dead
 * socket: a process told to stop stayed up, and its clients never told their callers they were closed.
 */

/** The timers keeping this process alive (the clients' reconnect timers among them). */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Closes with `close` clients that wait to reconnect, and checks that each ends: at once, 'end', its timer gone. */
async function expectEndedOnClose(clients: Redis[], close: () => Promise<void>): Promise<void> {
  for (const client of clients) {
    await vi.waitFor(() => expect(client.status).toBe('reconnecting'), { timeout: 5_000, interval: 10 });
  }
  const ended = clients.map((client) => new Promise<'end'>((resolve) => client.once('end', () => resolve('end'))));
  const before = timers();
  const started = performance.now();
  await close();
  const closedMs = performance.now() - started;
  const after = timers();
  for (const [i, client] of clients.entries()) {
    expect(await Promise.race([ended[i], sleep(1_000).then(() => `still ${client.status}`)])).toBe('end');
  }
  // Each client's reconnect timer gone, none added (a QUIT's deadline, a dead socket's end timer).
  expect(after).toBeLessThanOrEqual(before - clients.length);
  // A QUIT waited out for seconds, or a timer, would show here; 500 ms is far above a busy machine's turn.
  expect(closedMs).toBeLessThan(500);
}

describe('closed while Redis is gone', () => {
  it('the lock store ends its command and subscriber clients at once', async () => {
    const own = await RedisServer.start();
    let store: RedisStore | undefined;
    try {
      store = await openRedisStore(own, { keyPrefix: 'close:', commandTimeoutMs: 777 });
      const parts = store as unknown as { redis: Redis; subscriber: Redis };
      await vi.waitFor(() => expect(parts.subscriber.status).toBe('ready'), { timeout: 5_000, interval: 10 });
      await own.kill();
      const closing = store;
      store = undefined;
      await expectEndedOnClose([parts.redis, parts.subscriber], () => closing.close());
    } finally {
      await store?.close();
      await own.stop();
    }
  });

  it('the shared rate limiter ends its client at once', async () => {
    const own = await RedisServer.start();
    const limit = openSharedRateLimit(
      { kind: 'redis', connection: { mode: 'standalone', url: own.url }, keyPrefix: 'close:', commandTimeoutMs: 777, replicaAcks: null },
      () => undefined,
    );
    if (limit === undefined) throw new Error('not opened');
    const client = made.at(-1) as Redis;
    try {
      await eventually(() => limit.allowance.handOut('probe', 1, 1_000, 60_000), 10_000);
      expect(client.status).toBe('ready');
      await own.kill();
      await expectEndedOnClose([client], () => limit.close());
      await expect(limit.allowance.handOut('caller', 1, 5, 60_000)).rejects.toThrow();
    } finally {
      await own.stop();
    }
  });
});
