import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSharedRateLimit } from '../../src/store/shared-rate-limit.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * The rate limiter's counts shared between instances (src/store/shared-rate-limit.ts): only a Redis
 * store carries them; each instance then takes its batches of allowance from one window per caller,
 * through its own client, which close() ends.
 */
let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.startShared();
});
afterAll(async () => {
  await redis.stop();
});

const settings = (keyPrefix: string) =>
  ({ kind: 'redis', connection: { mode: 'standalone', url: redis.url }, keyPrefix, commandTimeoutMs: 1_000, replicaAcks: null }) as const;

describe('shared rate limit', () => {
  it('is not opened for a store that cannot carry it: each instance counts on its own', () => {
    expect(openSharedRateLimit({ kind: 'memory' }, () => undefined)).toBeUndefined();
    expect(
      openSharedRateLimit({ kind: 'etcd', endpoints: ['http://127.0.0.1:1'], keyPrefix: 'x/', commandTimeoutMs: 1_000 }, () => undefined),
    ).toBeUndefined();
  });

  it('on Redis, two instances take their batches from one window; a closed one takes none', async () => {
    const lost: Error[] = [];
    const [a, b] = [openSharedRateLimit(settings('rl:'), (e) => lost.push(e)), openSharedRateLimit(settings('rl:'), (e) => lost.push(e))];
    if (a === undefined || b === undefined) throw new Error('not opened');
    // The client connects in the background.
    await eventually(() => a.allowance.handOut('probe', 1, 1_000, 60_000), 10_000);
    expect(await a.allowance.handOut('caller', 3, 5, 60_000)).toMatchObject({ granted: 3 });
    expect(await b.allowance.handOut('caller', 3, 5, 60_000)).toMatchObject({ granted: 2 });
    expect(await b.allowance.handOut('caller', 3, 5, 60_000)).toMatchObject({ granted: 0 });
    // Another prefix is another set of counts.
    const c = openSharedRateLimit(settings('other:'), () => undefined);
    if (c === undefined) throw new Error('not opened');
    await eventually(() => c.allowance.handOut('probe', 1, 1_000, 60_000), 10_000);
    expect(await c.allowance.handOut('caller', 1, 5, 60_000)).toMatchObject({ granted: 1 });
    await c.close();
    await a.close();
    await expect(a.allowance.handOut('caller', 1, 5, 60_000)).rejects.toThrow();
    expect(await b.allowance.handOut('other caller', 1, 5, 60_000)).toMatchObject({ granted: 1 });
    await b.close();
    expect(lost).toEqual([]);
  });
});
