import { describe, expect, it } from 'vitest';
import { createHistoryStore } from '../../src/store/create-history.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';

/** A Redis store keeps its lease history in Redis, under the store's key prefix (no server needed to tell). */
describe('history store from a Redis configuration', () => {
  it('Redis keeps it in Redis, under the key prefix', async () => {
    const limits = { eventsPerKey: 5, keysPerNamespace: 10, retentionMs: 60_000 };
    const history = createHistoryStore(
      {
        kind: 'redis',
        connection: { mode: 'standalone', url: 'redis://127.0.0.1:1' },
        keyPrefix: 'kh-test:',
        commandTimeoutMs: 200,
        replicaAcks: null,
      },
      limits,
    );
    expect(history).toBeInstanceOf(RedisHistory);
    expect((history as RedisHistory).listKey({ namespace: 'ns', primitive: 'lock', key: 'k' }).startsWith('kh-test:')).toBe(true);
    await history.close();
  });
});
