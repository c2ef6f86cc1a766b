import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { HistoryAppend } from '../src/domain/history.js';
import { RedisHistory } from '../src/store/redis/redis-history.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import { commandDeltas, commandMicros, commandStats } from './redis-stats.js';

/**
 * `tsx bench/history-redis.ts`: what the Redis history store costs Redis per list written, nothing else
 * running against that Redis. Batches shaped as the HTTP A/B's (`npm run bench -- --only history`) at
 * some 1,000 pairs/s: `--lists` keys a batch, each a short pair folded into its grant (one record), keys
 * taken in turn from 10,000 while a namespace keeps 5,000, so every list is new and evicts one (the worst
 * case). Redis CPU from INFO cpu (µs resolution, unlike /proc's ticks), per command from INFO
 * commandstats; a warm-up fills the shards to their cap first. Run it on two builds in turn for an A/B:
 * it uses the store's public API only.
 */
const { values: args } = parseArgs({
  options: {
    lists: { type: 'string', default: '100' },
    batches: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '5' },
    keys: { type: 'string', default: '10000' },
  },
});
const listsPerBatch = Number(args.lists);
const batches = Number(args.batches);
const rounds = Number(args.rounds);
const distinctKeys = Number(args.keys);
const limits = { eventsPerKey: 50, keysPerNamespace: 5000, retentionMs: 2 * 86_400_000 };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

let next = 0;
function batch(): HistoryAppend[] {
  const at = Date.now();
  const out: HistoryAppend[] = [];
  for (let i = 0; i < listsPerBatch; i++) {
    const n = next++;
    out.push({
      namespace: 'bench',
      primitive: 'lock',
      key: `bench-pair:${n % distinctKeys}`,
      record: {
        kind: 'granted',
        at,
        lease: n.toString(36).padStart(16, '0'),
        fencingToken: at * 1000 + i,
        holder: null,
        expiresAt: at + 30_000,
        releasedAt: at + 20,
      },
    });
  }
  return out;
}

async function main(): Promise<void> {
  const redis = await RedisServer.start();
  const stats = redis.client();
  const cpu = async () => {
    const info = await stats.info('cpu');
    return Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
  };
  const store = new RedisHistory({ connection: { mode: 'standalone', url: redis.url }, keyPrefix: 'kh:', commandTimeoutMs: 5000, limits });
  const perList: number[] = [];
  const calls: Record<string, number[]> = {};
  const micros: Record<string, number[]> = {};
  try {
    // Every shard at its cap before anything is measured: from then on each list evicts one.
    for (let i = 0; i < Math.ceil(distinctKeys / listsPerBatch); i++) await store.append(batch());
    for (let round = 0; round < rounds; round++) {
      const info0 = await stats.info('commandstats');
      const cpu0 = await cpu();
      for (let i = 0; i < batches; i++) await store.append(batch());
      const cpu1 = await cpu();
      const info1 = await stats.info('commandstats');
      const lists = batches * listsPerBatch;
      perList.push(((cpu1 - cpu0) * 1e6) / lists);
      for (const [name, n] of Object.entries(commandDeltas(commandStats(info0), commandStats(info1)))) (calls[name] ??= []).push(n / lists);
      for (const [name, n] of Object.entries(commandDeltas(commandMicros(info0), commandMicros(info1))))
        (micros[name] ??= []).push(n / lists);
    }
  } finally {
    stats.disconnect();
    await store.close();
    await redis.stop();
  }
  const byCommand = (m: Record<string, number[]>) =>
    Object.entries(m)
      .filter(([name]) => !['info', 'hello', 'client', 'select', 'quit'].includes(name))
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, xs]) => `${name} ${median(xs).toFixed(2)}`)
      .join(', ');
  process.stdout.write(
    `history store, Redis only: ${rounds} rounds of ${batches} batches of ${listsPerBatch} new lists (load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}):\n` +
      `  Redis CPU per list: ${median(perList).toFixed(2)} µs (rounds: ${perList.map((x) => x.toFixed(2)).join(', ')})\n` +
      `  calls per list:     ${byCommand(calls)}\n` +
      `  µs per list:        ${byCommand(micros)} (a script's own figure includes its commands')\n`,
  );
}

await main();
