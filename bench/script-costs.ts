import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { newOwnerToken } from '../src/domain/lease-service.js';
import { KeySpace } from '../src/store/redis/keys.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import { FLOOR_ACQUIRE, FLOOR_RELEASE } from './floor-lock-scripts.js';
import { commandDeltas, commandMicros, commandStats } from './redis-stats.js';
import { withWords, type Worded } from '../test/helpers/store-words.js';

/**
 * `npx tsx bench/script-costs.ts`: what the lock scripts cost Redis, without HTTP and independent of
 * load: commands run per acquire + release pair (INFO commandstats), unwatched and watched, and bytes
 * per held lock with the namespace quota on (used_memory over 10,000 held locks, MEMORY USAGE of one
 * lock record and of the quota shards), and Redis's own time per pair (INFO commandstats usec: the script
 * calls, the commands inside them, and the rest, which is the script's own Lua and its calling) beside
 * the lock floor's two scripts (floor-lock-scripts.ts), 50 pairs in flight. Runs on its own redis-server.
 */

const PREFIX = 'kh:';
const NAMESPACE = 'ns';
const PAIRS = 2000;
const HELD = 10_000;
/** The calls that run a script or function (the lock pair's are functions where Redis allows them). */
const SCRIPT_CALLS = new Set(['evalsha', 'eval', 'fcall']);

function usedMemory(info: string): number {
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1]);
}

async function perPair(stats: Redis, pairs: number, run: () => Promise<void>): Promise<{ total: number; breakdown: string }> {
  const before = commandStats(await stats.info('commandstats'));
  await run();
  const after = commandStats(await stats.info('commandstats'));
  const deltas = Object.entries(commandDeltas(before, after)).map(([name, d]): [string, number] => [name, d / pairs]);
  deltas.sort((a, b) => b[1] - a[1]);
  const inside = deltas.filter(([name]) => !SCRIPT_CALLS.has(name)).reduce((s, [, n]) => s + n, 0);
  return { total: inside, breakdown: deltas.map(([n, c]) => `${n} ${c.toFixed(2)}`).join(', ') };
}

async function pairs(store: Worded<RedisStore>, key: (i: number) => string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const ownerToken = `owner-token-${i.toString().padStart(10, '0')}`;
    const got = await store.acquire({ id: key(i), ownerToken, ttlMs: 30_000, holder: null, maxHeldInNamespace: HELD * 2 });
    if (!got.acquired) throw new Error(`acquire ${key(i)} refused`);
    if (!(await store.release(key(i), ownerToken))) throw new Error(`release ${key(i)} refused`);
  }
}

/**
 * Redis's own time per pair while `pair` runs `n` times, 50 at once: in the script calls (EVALSHA and
 * EVAL, which includes the commands they run), in those commands, and the difference.
 */
async function redisTimePerPair(stats: Redis, n: number, pair: (i: number) => Promise<void>): Promise<string> {
  await stats.config('RESETSTAT');
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < n) await pair(next++);
    }),
  );
  let scripts = 0;
  let inside = 0;
  for (const [name, usec] of commandMicros(await stats.info('commandstats'))) {
    if (SCRIPT_CALLS.has(name)) scripts += usec;
    else if (name !== 'config|resetstat' && name !== 'info') inside += usec;
  }
  const us = (v: number) => (v / n).toFixed(1).padStart(5);
  return `${us(scripts)} us in scripts = ${us(inside)} in their commands + ${us(scripts - inside)} of Lua and calling`;
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const stats = new Redis(server.url);
  const store = withWords(new RedisStore({ url: server.url, keyPrefix: PREFIX, commandTimeoutMs: 5000, fenceGraceMs: 1000 }));
  try {
    for (
      let i = 0;
      i < 50 &&
      !(await store.ping().then(
        () => true,
        () => false,
      ));
      i++
    )
      await sleep(100);
    await pairs(store, (i) => `${NAMESPACE}/warm:${i}`, 50);

    const plain = await perPair(stats, PAIRS, () => pairs(store, (i) => `${NAMESPACE}/pair:${i % 10_000}`, PAIRS));
    console.log(`commands inside scripts per pair (unwatched): ${plain.total.toFixed(2)}  [${plain.breakdown}]`);

    const stop = await store.watchChanges(`${NAMESPACE}/watched`, () => undefined);
    const watched = await perPair(stats, PAIRS, () => pairs(store, () => `${NAMESPACE}/watched`, PAIRS));
    stop();
    console.log(`commands inside scripts per pair (one key, watched): ${watched.total.toFixed(2)}  [${watched.breakdown}]`);

    // Time, 30,000 pairs over 10,000 keys with the quota on; another lease of the namespace is held
    // throughout, as under load. The owner tokens are the service's own (newOwnerToken), which the lock
    // record keeps as 16 bytes: a made-up token is kept as given, a longer record and other code.
    const timed = 30_000;
    await store.acquire({
      id: `${NAMESPACE}/anchor`,
      ownerToken: 'anchor'.padEnd(22, 'x'),
      ttlMs: 120_000,
      holder: null,
      maxHeldInNamespace: HELD * 2,
    });
    const keyholderPair = async (i: number) => {
      const key = `${NAMESPACE}/timed:${i % 10_000}`;
      const ownerToken = newOwnerToken();
      const got = await store.acquire({ id: key, ownerToken, ttlMs: 30_000, holder: null, maxHeldInNamespace: HELD * 2 });
      if (!got.acquired || !(await store.release(key, ownerToken))) throw new Error(`timed pair ${key} refused`);
    };
    const floor = new Redis(server.url, { enableAutoPipelining: true });
    const floorSha = [
      (await floor.script('LOAD', FLOOR_ACQUIRE)) as string,
      (await floor.script('LOAD', FLOOR_RELEASE)) as string,
    ] as const;
    const floorPair = async (i: number) => {
      const key = `floor:{timed:${i % 10_000}}`;
      const ownerToken = `owner-${i}`.padEnd(22, 'x');
      const token = (await floor.evalsha(floorSha[0], 2, key, `${key}f`, ownerToken, 30_000)) as number;
      if (token === 0 || (await floor.evalsha(floorSha[1], 1, key, ownerToken)) !== 1) throw new Error(`floor pair ${key} refused`);
    };
    for (let i = 0; i < 2_000; i++) {
      await keyholderPair(i);
      await floorPair(i);
    }
    console.log(`Redis time per pair, keyholder:  ${await redisTimePerPair(stats, timed, keyholderPair)}`);
    console.log(`Redis time per pair, floor-lock: ${await redisTimePerPair(stats, timed, floorPair)}`);
    floor.disconnect();
    // The memory figures start from an empty Redis: the floor's fencing counters never expire.
    await stats.flushall();

    await sleep(1500);
    const keys = new KeySpace(PREFIX);
    const base = usedMemory(await stats.info('memory'));
    for (let i = 0; i < HELD; i++) {
      const got = await store.acquire({
        id: `${NAMESPACE}/mem:${i}`,
        ownerToken: newOwnerToken(),
        ttlMs: 120_000,
        holder: null,
        maxHeldInNamespace: HELD * 2,
      });
      if (!got.acquired) throw new Error('memory: acquire refused');
    }
    const held = usedMemory(await stats.info('memory'));
    const lockBytes = Number(await stats.call('MEMORY', 'USAGE', keys.lock(`${NAMESPACE}/mem:0`)));
    let quotaBytes = 0;
    for (const shard of keys.quotaShards(NAMESPACE)) {
      for (const key of [shard.count, shard.ends]) quotaBytes += Number((await stats.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    }
    console.log(`used_memory per held lock (${HELD}, quota on): ${((held - base) / HELD).toFixed(1)} B`);
    console.log(
      `MEMORY USAGE: lock record ${lockBytes} B; quota shards ${quotaBytes} B in all, ${(quotaBytes / HELD).toFixed(1)} B per held lock`,
    );
    // The same locks without the quota: what the lock record alone costs (its hash, key and expiry).
    const beforeBare = usedMemory(await stats.info('memory'));
    for (let i = 0; i < HELD; i++) {
      const got = await store.acquire({
        id: `bare/mem:${i}`,
        ownerToken: newOwnerToken(),
        ttlMs: 120_000,
        holder: null,
        maxHeldInNamespace: 0,
      });
      if (!got.acquired) throw new Error('memory: acquire refused');
    }
    const bare = usedMemory(await stats.info('memory'));
    console.log(`used_memory per held lock (${HELD}, quota off): ${((bare - beforeBare) / HELD).toFixed(1)} B`);
    console.log(`keys: ${await stats.dbsize()}`);
  } finally {
    await store.close();
    stats.disconnect();
    await server.stop();
  }
}

await main();
