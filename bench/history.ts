import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { hashApiKey, newApiKey } from '../src/auth/api-keys.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import type { LoopResult, Task, TaskResult } from './protocol.js';
import { startKeyholder, type OwnedProcess } from './procs.js';

/**
 * `npm run bench -- --only history`: what lease history costs. Two keyholder instances on one Redis, one
 * with HISTORY=on and one with HISTORY=off, take turns at the `pairs` loop (acquire + release), A/B/A/B,
 * so a change in the machine's load hits both alike; then the history the `on` instance wrote is
 * weighed in Redis (MEMORY USAGE of its lists and indexes, over the events they hold).
 */
export interface HistoryBenchSettings {
  readonly rounds: number;
  readonly concurrency: number;
  readonly warmMs: number;
  readonly durationMs: number;
}

export interface HistoryBenchResult {
  readonly on: { pairsPerSecond: number[]; cpuMsPerPair: number[] };
  readonly off: { pairsPerSecond: number[]; cpuMsPerPair: number[] };
  events: number;
  lists: number;
  redisBytes: number;
  encodedBytesPerEvent: number;
}

interface Worker {
  run<T extends TaskResult>(task: Task): Promise<T>;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

export async function measureHistory(
  settings: HistoryBenchSettings,
  dir: string,
  worker: Worker,
  owned: OwnedProcess[],
  progress: (line: string) => void,
): Promise<{ result: HistoryBenchResult; text: string }> {
  const redis = await RedisServer.start();
  try {
    const apiKey = newApiKey();
    const keysFile = join(dir, 'api-keys-history.json');
    writeFileSync(
      keysFile,
      JSON.stringify({ keys: [{ id: 'bench', hash: hashApiKey(apiKey), namespace: 'bench', scopes: ['locks', 'admin'] }] }),
    );
    process.env.KEYHOLDER_BENCH_API_KEY = apiKey;
    const common = { KEYHOLDER_API_KEYS_FILE: keysFile, RATE_LIMIT_MAX: '10000000', NAMESPACE_MAX_HELD_LOCKS: '20000' };
    const on = await startKeyholder('keyholder-history-on', redis.url, dir, { ...common, HISTORY: 'on', REDIS_KEY_PREFIX: 'khon:' });
    owned.push(on.proc);
    const off = await startKeyholder('keyholder-history-off', redis.url, dir, { ...common, HISTORY: 'off', REDIS_KEY_PREFIX: 'khoff:' });
    owned.push(off.proc);
    const result: HistoryBenchResult = {
      on: { pairsPerSecond: [], cpuMsPerPair: [] },
      off: { pairsPerSecond: [], cpuMsPerPair: [] },
      events: 0,
      lists: 0,
      redisBytes: 0,
      encodedBytesPerEvent: 0,
    };
    for (let round = 1; round <= settings.rounds; round++) {
      // Alternate which goes first, so neither always runs on a warmer (or busier) machine.
      const order =
        round % 2
          ? ([
              ['on', on],
              ['off', off],
            ] as const)
          : ([
              ['off', off],
              ['on', on],
            ] as const);
      for (const [name, target] of order) {
        const r = await worker.run<LoopResult>({
          kind: 'loop',
          scenario: 'pairs',
          target: target.url,
          concurrency: settings.concurrency,
          warmMs: settings.warmMs,
          durationMs: settings.durationMs,
          tag: `history-${name}-${round}`,
          serverPid: target.proc.pid,
        });
        target.proc.truncateLog();
        result[name].pairsPerSecond.push(r.unitsPerSecond);
        result[name].cpuMsPerPair.push(((r.serverCpuSeconds ?? 0) * 1000) / Math.max(1, r.units));
        progress(`history round ${round}/${settings.rounds} ${name}: ${r.unitsPerSecond.toFixed(0)} pairs/s`);
      }
    }
    // What the history of the `on` instance weighs in Redis: its lists and its shard indexes.
    const client = new Redis(redis.url);
    try {
      let cursor = '0';
      const keys: string[] = [];
      do {
        const [next, batch] = await client.scan(cursor, 'MATCH', 'khon:*', 'COUNT', 1000);
        cursor = next;
        keys.push(...batch.filter((k) => /\}(h[lsr]\/|H$)/.test(k)));
      } while (cursor !== '0');
      let sampledChars = 0;
      let sampled = 0;
      for (const key of keys) {
        result.redisBytes += Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
        if (/\}h[lsr]\//.test(key)) {
          result.lists++;
          result.events += await client.llen(key);
          if (sampled < 2_000) {
            const events = await client.lrange(key, 0, -1);
            sampledChars += events.reduce((n, e) => n + Buffer.byteLength(e), 0);
            sampled += events.length;
          }
        }
      }
      result.encodedBytesPerEvent = sampled ? sampledChars / sampled : 0;
    } finally {
      client.disconnect();
    }
    return { result, text: renderHistory(settings, result) };
  } finally {
    await redis.stop();
  }
}

function renderHistory(settings: HistoryBenchSettings, r: HistoryBenchResult): string {
  const onPairs = median(r.on.pairsPerSecond);
  const offPairs = median(r.off.pairsPerSecond);
  const onCpu = median(r.on.cpuMsPerPair);
  const offCpu = median(r.off.cpuMsPerPair);
  const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`;
  return [
    `## Lease history: cost (HISTORY=on vs off)`,
    '',
    `\`pairs\` (acquire + release on 1,000 keys) at concurrency ${settings.concurrency}, ${settings.rounds} rounds of ${settings.durationMs} ms each, A/B alternating; medians.`,
    '',
    '| | pairs/s | server CPU ms per pair |',
    '|---|---:|---:|',
    `| HISTORY=off | ${offPairs.toFixed(0)} | ${offCpu.toFixed(3)} |`,
    `| HISTORY=on | ${onPairs.toFixed(0)} | ${onCpu.toFixed(3)} |`,
    `| change | ${pct(onPairs, offPairs)} | ${pct(onCpu, offCpu)} |`,
    '',
    `Every round (pairs/s): off ${r.off.pairsPerSecond.map((x) => x.toFixed(0)).join(', ')}; on ${r.on.pairsPerSecond.map((x) => x.toFixed(0)).join(', ')}.`,
    '',
    `Redis memory of the history written: ${r.redisBytes} bytes for ${r.events} events in ${r.lists} lists (and their indexes): ` +
      `**${r.events ? (r.redisBytes / r.events).toFixed(0) : '-'} bytes per event** in Redis; ${r.encodedBytesPerEvent.toFixed(0)} bytes per event encoded.`,
    '',
  ].join('\n');
}
