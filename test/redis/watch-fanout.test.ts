import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { LockService } from '../../src/domain/lock-service.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Blocking queries at scale: 1,000 watchers of one key spread over two keyholder instances (two
 * RedisStores on one Redis). A change must wake every one of them, and cost the same Redis work whether
 * 10 or 1,000 watch: the changing script (with its one PUBLISH), then one state read per instance.
 * Counted from Redis's own INFO commandstats, not from the client.
 */
let server: RedisServer;
let stores: RedisStore[];
let services: LockService[];

beforeAll(async () => {
  server = await RedisServer.start();
  stores = [await openRedisStore(server, { keyPrefix: 'fanout:' }), await openRedisStore(server, { keyPrefix: 'fanout:' })];
  services = stores.map((store) => new LockService(store, DEFAULT_LIMITS));
});
afterAll(async () => {
  for (const store of stores ?? []) await store.close();
  await server?.stop();
});

/** Every command Redis has run so far (scripts, and the commands scripts ran), from INFO commandstats. */
/**
 * Not counted: INFO itself, and (un)subscriptions, which belong to no change: a key's subscription
 * outlives its last watcher by a few seconds (LINGER_MS), so the earlier case's UNSUBSCRIBE may fall
 * inside the later one's window.
 */
const HOUSEKEEPING = new Set(['info', 'subscribe', 'unsubscribe']);

async function commandsRun(): Promise<number> {
  const client = server.client();
  try {
    const info = await client.info('commandstats');
    let total = 0;
    for (const [, name, calls] of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) if (!HOUSEKEEPING.has(name ?? '')) total += Number(calls);
    return total;
  } finally {
    client.disconnect();
  }
}

/** Starts `count` watchers of `key` at `index`, half on each instance; resolves with each one's wake time. */
function watchers(key: string, index: number, count: number): Array<Promise<{ at: number; index: number }>> {
  return Array.from({ length: count }, (_v, i) =>
    (services[i % 2] as LockService).watch('team', key, index, 30_000).then((view) => ({ at: performance.now(), index: view.index })),
  );
}

/** Waits until every instance holds `count` watchers in total (the blocking queries are in place). */
async function settled(count: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (services.reduce((n, s) => n + s.changes.size, 0) === count) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('watchers did not settle');
}

/** Redis commands run for one release, with `count` watchers waiting for it; and the watchers' wake-ups. */
async function oneChange(name: string, count: number) {
  const lease = await services[0]?.acquire('team', name, 30_000);
  if (!lease) throw new Error('no lease');
  const index = 2 * lease.fencingToken;
  const woken = watchers(name, index, count);
  await settled(count);
  const before = await commandsRun();
  const sentAt = performance.now();
  await services[1]?.release('team', name, lease.ownerToken);
  const wakes = await Promise.all(woken);
  const commands = (await commandsRun()) - before;
  const latencies = wakes.map((w) => w.at - sentAt).sort((x, y) => x - y);
  return { commands, wakes, latencies };
}

describe('watch fan-out on Redis', () => {
  it('1,000 watchers on one key are all woken by one change, for the same Redis work as 10', async () => {
    const few = await oneChange('fanout-10', 10);
    const many = await oneChange('fanout-1000', 1_000);
    expect(many.wakes).toHaveLength(1_000);
    // Every watcher got the new state: free, index 2t + 1.
    expect(new Set(many.wakes.map((w) => w.index)).size).toBe(1);
    // One release script (its PUBLISH and hash commands inside) + one inspect per instance: the same for
    // 1,000 watchers as for 10, and far below one command per watcher.
    expect(many.commands).toBe(few.commands);
    expect(many.commands).toBeLessThan(20);
    const p99 = many.latencies[Math.floor(many.latencies.length * 0.99) - 1] ?? NaN;
    // Measured, not asserted here (speed is the benchmark's job; npm run bench reports it under load).
    console.log(
      `watch fan-out: 1000 watchers, ${many.commands} Redis commands per change, wake p50 ${many.latencies[499]?.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`,
    );
    expect(services.reduce((n, s) => n + s.changes.size, 0)).toBe(0);
  });
});
