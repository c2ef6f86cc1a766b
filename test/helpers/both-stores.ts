import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, vi } from 'vitest';
import type { LockStore } from '../../src/domain/lock-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from './redis-server.js';

/**
 * The two stores an HTTP test runs on, for `describe.each`: the embedded store and a Redis store (on a
 * redis-server this file's hooks start and stop), each opened fresh under its own key prefix. Call it
 * at the top of a test file: it registers the redis-server's beforeAll and afterAll.
 */
export function embeddedAndRedis(prefix: string): Array<[string, () => Promise<LockStore>]> {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const openRedis = async (): Promise<LockStore> => {
    const store = new RedisStore({
      url: redis.url,
      keyPrefix: `${prefix}-${randomUUID()}:`,
      commandTimeoutMs: 1_000,
      fenceGraceMs: 60_000,
    });
    await vi.waitFor(() => store.ping(), { timeout: 2_000, interval: 10 });
    return store;
  };
  return [
    ['embedded', async () => new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 })],
    ['redis', openRedis],
  ];
}
