import { Redis } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { withWords } from '../test/helpers/store-words.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import { newOwnerToken } from '../src/domain/lease-service.js';
import { commandMicros } from './redis-stats.js';

const NS = 'ns';
async function main() {
  const server = await RedisServer.start();
  const stats = new Redis(server.url);
  const store = withWords(new RedisStore({ url: server.url, keyPrefix: 'kh:', commandTimeoutMs: 5000, fenceGraceMs: 1000 }));
  await new Promise((r) => setTimeout(r, 300));
  await store.acquire({ id: `${NS}/anchor`, ownerToken: 'anchor'.padEnd(22, 'x'), ttlMs: 120_000, holder: null, maxHeldInNamespace: 20000 });
  const pair = async (i: number) => {
    const key = `${NS}/timed:${i % 10_000}`;
    const ownerToken = newOwnerToken();
    const got = await store.acquire({ id: key, ownerToken, ttlMs: 30_000, holder: null, maxHeldInNamespace: Number(process.env.MAXQ ?? 20000) });
    if (!got.acquired || !(await store.release(key, ownerToken))) throw new Error(`timed pair ${key} refused`);
  };
  for (let i = 0; i < 3000; i++) await pair(i);
  const results: string[] = [];
  for (let round = 0; round < 5; round++) {
    await stats.config('RESETSTAT');
    const n = 20000; let next = 0;
    await Promise.all(Array.from({ length: 50 }, async () => { while (next < n) await pair(next++); }));
    let scripts = 0, inside = 0;
    for (const [name, usec] of commandMicros(await stats.info('commandstats'))) {
      if (name === 'evalsha' || name === 'eval') scripts += usec; else if (name !== 'config|resetstat' && name !== 'info') inside += usec;
    }
    results.push(`${(scripts / n).toFixed(1)}/${(inside / n).toFixed(1)}`);
  }
  console.log('per pair scripts/inside:', results.join('  '));
  stats.disconnect(); await store.close(); await server.stop();
}
await main();
