import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { cpuSeconds } from './cpu.js';
import { KeyholderProcess } from '../test/helpers/keyholder-process.js';
import { RedisServer } from '../test/helpers/redis-server.js';

/**
 * A new instance's first seconds of traffic, with and without the start's warm-up (WARM_UP_*): each
 * round starts a compiled keyholder on one Redis, waits for /readyz 200, and at once sends it `callers`
 * concurrent acquire+release pairs (a key per caller) for `seconds`. Measured per second: pairs done,
 * CPU of the process per pair (from /proc, independent of the load but for cache effects), 503
 * `overloaded` refusals, and how long the process's threads waited for a CPU (the load it ran under).
 * Rounds alternate warm and cold (warm first in odd rounds).
 *
 *   npx tsx bench/warm-start.ts [rounds=5] [callers=50] [seconds=2]
 */
const rounds = Number(process.argv[2] ?? 5);
const callers = Number(process.argv[3] ?? 50);
const seconds = Number(process.argv[4] ?? 2);

interface Second {
  pairs: number;
  overloaded: number;
  other: number;
  cpuMs: number;
  waitMs: number;
}

function runQueueWaitMs(pid: number): number {
  let waitMs = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      waitMs += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
    } catch {
      // The thread ended.
    }
  }
  return waitMs;
}

/** The pair counts at which CPU is read: the windows [0, 500), [500, 1000), ... */
const EDGES = [0, 500, 1000, 2000, 4000];

async function round(redis: RedisServer, warm: boolean): Promise<{ seconds: Second[]; windows: number[]; warmUp: unknown }> {
  const server = await KeyholderProcess.start({
    compiled: true,
    env: {
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `ws${Math.random().toString(36).slice(2, 8)}:`,
      LOG_LEVEL: 'info',
      // The production budget: the helper turns it off for ordinary tests.
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '100',
      WARM_UP_CYCLES: warm ? '3000' : '0',
    },
  });
  const pid = server.pid!;
  const pool = new Pool(server.url, { connections: callers, pipelining: 1 });
  const bins: Second[] = Array.from({ length: seconds }, () => ({ pairs: 0, overloaded: 0, other: 0, cpuMs: 0, waitMs: 0 }));
  const started = performance.now();
  const endAt = started + seconds * 1000;
  const binOf = (): Second | undefined => bins[Math.floor((performance.now() - started) / 1000)];
  const post = async (path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
  };
  const worker = async (n: number): Promise<void> => {
    while (performance.now() < endAt) {
      const acquired = await post(`/v1/locks/warm-start-${n}/acquire`, { ttlMs: 10_000 });
      if (acquired.status !== 200) {
        const bin = binOf();
        if (bin) bin[acquired.json.code === 'overloaded' ? 'overloaded' : 'other']++;
        if (acquired.json.code === 'overloaded') await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const released = await post(`/v1/locks/warm-start-${n}/release`, { ownerToken: acquired.json.ownerToken });
      const bin = binOf();
      if (bin) bin[released.status === 200 ? 'pairs' : 'other']++;
      if (released.status === 200 && ++pairsDone === EDGES[cpuAtEdge.length]) cpuAtEdge.push(cpuSeconds(pid));
    }
  };
  // Fixed-work windows too: CPU at the pair counts in EDGES (how much the throughput was does not matter).
  let pairsDone = 0;
  const cpuAtEdge: number[] = [cpuSeconds(pid)];
  // CPU and run-queue wait sampled at each second's edge.
  let lastCpu = cpuSeconds(pid);
  let lastWait = runQueueWaitMs(pid);
  const sampler = (async () => {
    for (let s = 0; s < seconds; s++) {
      await new Promise((r) => setTimeout(r, started + (s + 1) * 1000 - performance.now()));
      const cpu = cpuSeconds(pid);
      const wait = runQueueWaitMs(pid);
      bins[s]!.cpuMs = (cpu - lastCpu) * 1000;
      bins[s]!.waitMs = wait - lastWait;
      lastCpu = cpu;
      lastWait = wait;
    }
  })();
  await Promise.all([...Array.from({ length: callers }, (_, n) => worker(n)), sampler]);
  await pool.close();
  const warmUp = server.jsonLogs().find((l) => l.msg === 'warm-up done; ready');
  await server.stop();
  const windows = cpuAtEdge.slice(1).map((cpu, i) => ((cpu - cpuAtEdge[i]!) * 1000) / (EDGES[i + 1]! - EDGES[i]!));
  return { seconds: bins, windows, warmUp: warmUp ? { cycles: warmUp.cycles, ms: warmUp.ms } : null };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const redis = await RedisServer.start();
const results: Record<'warm' | 'cold', Second[][]> = { warm: [], cold: [] };
const windowResults: Record<'warm' | 'cold', number[][]> = { warm: [], cold: [] };
try {
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? [true, false] : [false, true];
    for (const warm of order) {
      const load = loadavg()[0]!.toFixed(1);
      const { seconds: bins, windows, warmUp } = await round(redis, warm);
      results[warm ? 'warm' : 'cold'].push(bins);
      windowResults[warm ? 'warm' : 'cold'].push(windows);
      const text = bins
        .map(
          (b, s) =>
            `s${s + 1}: ${b.pairs} pairs, ${b.pairs ? (b.cpuMs / b.pairs).toFixed(3) : '-'} ms CPU/pair, ${b.overloaded} overloaded, ${b.other} other, waited ${Math.round(b.waitMs)} ms`,
        )
        .join(' | ');
      const byWork = windows.map((ms, i) => `pairs ${EDGES[i]}-${EDGES[i + 1]}: ${ms.toFixed(3)}`).join(', ');
      console.log(
        `round ${r + 1} ${warm ? 'warm' : 'cold'} (load ${load}) ${JSON.stringify(warmUp)}: ${text}\n  CPU ms/pair by work: ${byWork}`,
      );
    }
  }
} finally {
  await redis.stop();
}
for (const kind of ['warm', 'cold'] as const) {
  for (let s = 0; s < seconds; s++) {
    const per = results[kind].map((bins) => (bins[s]!.pairs ? bins[s]!.cpuMs / bins[s]!.pairs : NaN)).filter(Number.isFinite);
    const shed = results[kind].map((bins) => bins[s]!.overloaded);
    console.log(
      `${kind} s${s + 1}: CPU/pair median ${median(per).toFixed(3)} ms (${Math.min(...per).toFixed(3)}-${Math.max(...per).toFixed(3)}), overloaded median ${median(shed)} (${Math.min(...shed)}-${Math.max(...shed)})`,
    );
  }
}
for (const kind of ['warm', 'cold'] as const) {
  for (let i = 0; i + 1 < EDGES.length; i++) {
    const per = windowResults[kind].map((w) => w[i]).filter((x): x is number => x !== undefined);
    if (per.length === 0) continue;
    console.log(
      `${kind} pairs ${EDGES[i]}-${EDGES[i + 1]}: CPU/pair median ${median(per).toFixed(3)} ms (${Math.min(...per).toFixed(3)}-${Math.max(...per).toFixed(3)}, ${per.length} rounds)`,
    );
  }
}
console.log(
  `load now ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
