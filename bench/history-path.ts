import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { HistoryRecorder } from '../src/domain/history.js';
import { LeaseHistory } from '../src/http/lease-history.js';
import { RedisHistory } from '../src/store/redis/redis-history.js';
import { RedisServer } from '../test/helpers/redis-server.js';
import { cpuSeconds } from './cpu.js';
import { commandDeltas, commandMicros, commandStats } from './redis-stats.js';

/**
 * `tsx bench/history-path.ts`: the CPU the history path itself costs, per acquire/release pair, in the
 * instance and in Redis: the routes' calls (LeaseHistory: digest, record) and the flushes (encode, one
 * script per shard) at a paced rate, against a run of the same pacing that records nothing. The HTTP
 * A/B (`npm run bench -- --only history`) says what a user sees, but on a shared 2-core machine its
 * pairs/s move by more than the few percent looked for; CPU per pair, measured here with nothing else
 * in the process, moves far less. Its share of the server's CPU per pair (bench A/B, HISTORY=off) is
 * the pairs/s a CPU-bound instance gives up.
 */
const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '2500' },
    'duration-ms': { type: 'string', default: '5000' },
    'flush-ms': { type: 'string', default: '100' },
    rounds: { type: 'string', default: '3' },
    keys: { type: 'string', default: '10000' },
    // Back to back: each batch's pairs (rate x flush-ms) recorded and flushed at once, no pacing. The
    // CPU then holds the history path and next to nothing else (paced, the wake-ups of the pacing
    // loop cost more than history and vary more on a busy machine); a pair's grant and release always
    // share a batch.
    unpaced: { type: 'boolean', default: false },
  },
});
const rate = Number(args.rate);
const durationMs = Number(args['duration-ms']);
const flushMs = Number(args['flush-ms']);
const rounds = Number(args.rounds);
const distinctKeys = Number(args.keys);
/** A pair's grant and its release are this far apart (the pairs loop at c=50 on an idle machine). */
const HELD_MS = 20;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function paced(history: LeaseHistory | null): Promise<number> {
  const tokens = Array.from({ length: 256 }, () => randomBytes(24).toString('base64url'));
  const pending: { due: number; key: string; token: string }[] = [];
  let done = 0;
  let next = 0;
  const started = performance.now();
  while (performance.now() - started < durationMs) {
    const now = performance.now();
    const due = Math.floor(((now - started) * rate) / 1000);
    for (; done < due; done++) {
      const key = `bench-pair:${next++ % distinctKeys}`;
      const token = tokens[done % tokens.length] as string;
      const at = Date.now();
      history?.granted('lock', 'bench', {
        key,
        ownerToken: token,
        fencingToken: at * 1000 + (done % 1000),
        ttlMs: 30_000,
        expiresAtMs: at + 30_000,
        holder: null,
      });
      pending.push({ due: now + HELD_MS, key, token });
    }
    while (pending.length > 0 && (pending[0] as { due: number }).due <= now) {
      const p = pending.shift() as { key: string; token: string };
      history?.released('lock', 'bench', p.key, p.token, Date.now());
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  return done;
}

async function unpaced(history: LeaseHistory | null, recorder: HistoryRecorder): Promise<number> {
  const tokens = Array.from({ length: 256 }, () => randomBytes(24).toString('base64url'));
  const perBatch = Math.max(1, Math.round((rate * flushMs) / 1000));
  let done = 0;
  const started = performance.now();
  while (performance.now() - started < durationMs) {
    const at = Date.now();
    for (let i = 0; i < perBatch; i++) {
      const key = `bench-pair:${(done + i) % distinctKeys}`;
      const ownerToken = tokens[(done + i) % tokens.length] as string;
      const grant = { key, ownerToken, fencingToken: at * 1000 + i, ttlMs: 30_000, expiresAtMs: at + 30_000, holder: null };
      history?.granted('lock', 'bench', grant);
    }
    for (let i = 0; i < perBatch; i++) {
      const key = `bench-pair:${(done + i) % distinctKeys}`;
      history?.released('lock', 'bench', key, tokens[(done + i) % tokens.length] as string, at + HELD_MS);
    }
    done += perBatch;
    await (history ? recorder.flush() : new Promise((r) => setImmediate(r)));
  }
  return done;
}

async function main(): Promise<void> {
  const redis = await RedisServer.start();
  const pid = redis.pid as number;
  const limits = { eventsPerKey: 50, keysPerNamespace: 5000, retentionMs: 2 * 86_400_000 };
  const results = { off: { node: [] as number[], redis: [] as number[] }, on: { node: [] as number[], redis: [] as number[] } };
  // Redis calls per pair of the `on` runs, by command (the script's own commands included).
  const calls: Record<string, number[]> = {};
  // Redis µs per pair of the `on` runs, by command (INFO commandstats; a script's figure includes its commands').
  const micros: Record<string, number[]> = {};
  const stats = redis.client();
  try {
    for (let round = 0; round < rounds; round++) {
      for (const side of round % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const store = new RedisHistory({
          connection: { mode: 'standalone', url: redis.url },
          keyPrefix: 'kh:',
          commandTimeoutMs: 2000,
          limits,
        });
        const recorder = new HistoryRecorder(store, { flushMs, maxBuffered: 50_000 });
        const history = side === 'on' ? new LeaseHistory(recorder) : null;
        await store.read({ namespace: 'bench', primitive: 'lock', key: 'warm' });
        const info0 = await stats.info('commandstats');
        const stats0 = commandStats(info0);
        const micros0 = commandMicros(info0);
        const node0 = process.cpuUsage();
        const redis0 = cpuSeconds(pid);
        const pairs = args.unpaced ? await unpaced(history, recorder) : await paced(history);
        await recorder.flush();
        const node = process.cpuUsage(node0);
        const redisCpu = cpuSeconds(pid) - redis0;
        await recorder.close();
        if (side === 'on') {
          const info1 = await stats.info('commandstats');
          for (const [name, n] of Object.entries(commandDeltas(stats0, commandStats(info1)))) {
            (calls[name] ??= []).push(n / pairs);
          }
          for (const [name, n] of Object.entries(commandDeltas(micros0, commandMicros(info1)))) {
            (micros[name] ??= []).push(n / pairs);
          }
        }
        results[side].node.push((node.user + node.system) / pairs);
        results[side].redis.push((redisCpu * 1e6) / pairs);
      }
    }
  } finally {
    stats.disconnect();
    await redis.stop();
  }
  const nodeUs = median(results.on.node) - median(results.off.node);
  const redisUs = median(results.on.redis) - median(results.off.redis);
  process.stdout.write(
    `history path at ${rate} pairs/s${args.unpaced ? ' (batches of that many pairs per flush, unpaced)' : ''}, flush ${flushMs} ms, ${rounds} rounds of ${durationMs} ms (medians; load ${(
      await import('node:os')
    )
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}):\n` +
      `  instance CPU per pair: ${nodeUs.toFixed(1)} µs (on ${results.on.node.map((x) => x.toFixed(1)).join(', ')}; off ${results.off.node.map((x) => x.toFixed(1)).join(', ')})\n` +
      `  Redis CPU per pair:    ${redisUs.toFixed(1)} µs (on ${results.on.redis.map((x) => x.toFixed(1)).join(', ')}; off ${results.off.redis.map((x) => x.toFixed(1)).join(', ')})\n` +
      `  Redis calls per pair:  ${Object.entries(calls)
        .filter(([name]) => !['lrange', 'info', 'hello', 'client', 'select'].includes(name))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, xs]) => `${name} ${median(xs).toFixed(2)}`)
        .join(', ')}\n` +
      `  Redis µs per pair:     ${Object.entries(micros)
        .filter(([name]) => !['lrange', 'info', 'hello', 'client', 'select'].includes(name))
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, xs]) => `${name} ${median(xs).toFixed(2)}`)
        .join(', ')} (a script's own figure includes its commands')\n`,
  );
}

await main();
