import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * No tenant can hurt another: team A's steady work is measured alone and while team B attacks (real
 * Redis, one keyholder process, B's attack in a process of its own), in interleaved rounds. Each
 * attack must leave A with no error, A's p99 within twice its baseline (medians of the rounds, so one
 * slow moment of a shared machine does not decide), and the server's memory under MEMORY_BOUND_MB.
 */
const ATTACKER = fileURLToPath(new URL('../helpers/tenant-attacks.mjs', import.meta.url));
/**
 * Rounds of each kind, alternated: the median of five ignores two rounds spoiled by the machine (on a
 * busy 2-core machine a round's p99 alone varies 3-5x between rounds of the same kind; measured).
 */
const ROUNDS = 5;
/** A's work per round: 2 workers x 20 cycles of acquire, renew, inspect, release (160 requests). */
const WORKERS = 2;
const CYCLES = 20;
/** The server's resident memory must stay under this during every attack (see docs/limits.md). */
const MEMORY_BOUND_MB = 512;

const { keys, A } = twoTeamsAndAdmin();
const keyB = keys.plain['team-b-key'] ?? '';
let redis: RedisServer;
let server: KeyholderProcess;

beforeAll(async () => {
  redis = await RedisServer.start();
  const env = {
    REDIS_URL: redis.url,
    LOG_LEVEL: 'warn',
    KEYHOLDER_API_KEYS_FILE: keys.writeFile(),
    // B's 10,000 permits plus A's leases.
    NAMESPACE_MAX_HELD_LOCKS: '20000',
  };
  // B's 10,000 permits are taken first, without a rate limit (the state stays in Redis).
  server = await KeyholderProcess.start({ env });
  await attacker('fill-semaphore').done;
  await server.stop();
  // 1,000 counted requests per 10 s per key: A's work is under it, B's floods are not.
  server = await KeyholderProcess.start({ env: { ...env, RATE_LIMIT_MAX: '1000', RATE_LIMIT_WINDOW_MS: '10000' } });
}, 240_000);

afterAll(async () => {
  await server?.stop();
  await redis?.stop();
});

interface Attack {
  /** Resolves with the attacker's output once it has exited. */
  readonly done: Promise<string>;
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
}

function attacker(mode: string): Attack {
  const child = spawn(process.execPath, [ATTACKER, mode, server.url, keyB], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString('utf8');
    if (out.includes('ready\n')) markReady();
  });
  child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const done = new Promise<string>((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`attacker ${mode} exited ${code}: ${err}`)))),
  );
  void done.catch(() => undefined);
  return { child, ready: Promise.race([ready, done.then(() => undefined)]), done };
}

async function call(
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown>; ms: number }> {
  const started = performance.now();
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...A, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = (await res.json()) as Record<string, unknown>;
  return { status: res.status, body: parsed, ms: performance.now() - started };
}

/** One round of A's work: every request's latency, and every answer that was not the expected 200. */
async function roundOfA(): Promise<{ latencies: number[]; errors: string[] }> {
  const latencies: number[] = [];
  const errors: string[] = [];
  const note = (what: string, r: { status: number; body: Record<string, unknown>; ms: number }) => {
    latencies.push(r.ms);
    if (r.status !== 200) errors.push(`${what}: ${r.status} ${String(r.body.code)}`);
    return r;
  };
  await Promise.all(
    Array.from({ length: WORKERS }, async (_v, w) => {
      for (let i = 0; i < CYCLES; i++) {
        const key = `a-${w}-${i % 5}`;
        const grant = note('acquire', await call('POST', `/v1/locks/${key}/acquire`, { ttlMs: 5_000 }));
        const ownerToken = grant.body.ownerToken;
        note('renew', await call('POST', `/v1/locks/${key}/renew`, { ownerToken, ttlMs: 5_000 }));
        note('inspect', await call('GET', `/v1/locks/${key}`));
        note('release', await call('POST', `/v1/locks/${key}/release`, { ownerToken }));
      }
    }),
  );
  return { latencies, errors };
}

function p99(latencies: readonly number[]): number {
  const sorted = [...latencies].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** CPU time a process has used so far (ms; /proc's clock ticks are 10 ms). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The server's resident memory now (MB). */
function serverRssMb(): number {
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/**
 * A's counted requests in one measure (10 rounds x 2 workers x 20 cycles x acquire + inspect = 800) fit
 * in its rate limit (1,000 per 10 s window), but two measures in one window do not: on a quiet machine
 * a measure takes 3-5 s, and A itself was answered 429. So each measure starts in a fresh window of A's
 * (waited for by the window's own reset header), and A's work is under the limit however fast it runs.
 */
async function freshRateWindowForA(): Promise<void> {
  for (;;) {
    const res = await fetch(`${server.url}/v1/locks/a-window-probe`, { headers: A });
    await res.arrayBuffer();
    const remaining = Number(res.headers.get('x-ratelimit-remaining'));
    const resetS = Number(res.headers.get('x-ratelimit-reset'));
    if (!Number.isFinite(remaining) || remaining >= 1_000 - 2) return;
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, resetS) * 1000 + 50));
  }
}

/** A's rounds alone and under `mode`, interleaved; the attacker runs only during the attacked rounds. */
async function measure(mode: string) {
  const baseline: number[] = [];
  const attacked: number[] = [];
  const errors: string[] = [];
  await freshRateWindowForA();
  let peakRssMb = serverRssMb();
  /** Each attacked round's answers to B (status counts) and B's requests per second. */
  const attackerSaw: { statuses: Record<string, number>; perSecond: number }[] = [];
  // The server's and Redis's CPU time in A's rounds alone and attacked: what serving B cost them
  // (printed, not asserted; it tells a slower A apart from a machine that was busy anyway).
  const cpu = { aloneServer: 0, aloneRedis: 0, attackedServer: 0, attackedRedis: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    let server0 = cpuMs(server.pid);
    let redis0 = cpuMs(redis.pid);
    const alone = await roundOfA();
    cpu.aloneServer += cpuMs(server.pid) - server0;
    cpu.aloneRedis += cpuMs(redis.pid) - redis0;
    errors.push(...alone.errors);
    baseline.push(p99(alone.latencies));

    const attack = attacker(mode);
    await attack.ready;
    const sampler = setInterval(() => (peakRssMb = Math.max(peakRssMb, serverRssMb())), 100);
    server0 = cpuMs(server.pid);
    redis0 = cpuMs(redis.pid);
    try {
      const under = await roundOfA();
      cpu.attackedServer += cpuMs(server.pid) - server0;
      cpu.attackedRedis += cpuMs(redis.pid) - redis0;
      errors.push(...under.errors);
      attacked.push(p99(under.latencies));
    } finally {
      clearInterval(sampler);
      peakRssMb = Math.max(peakRssMb, serverRssMb());
      attack.child.kill('SIGTERM');
      attackerSaw.push(JSON.parse((await attack.done).trim().split('\n').pop() ?? '{}') as (typeof attackerSaw)[number]);
    }
  }
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  const shed = metrics.split('\n').filter((l) => l.startsWith('keyholder_requests_shed_total') && !l.endsWith(' 0'));
  const result = {
    mode,
    shed,
    baselineP99: median(baseline),
    attackedP99: median(attacked),
    baseline,
    attacked,
    peakRssMb: Math.round(peakRssMb),
    cpuMs: cpu,
    attackerSaw: attackerSaw.map((r) => `${r.perSecond}/s ${JSON.stringify(r.statuses)}`),
    errors: errors.slice(0, 5),
  };
  console.log(`cross-tenant ${JSON.stringify(result)}`);
  const refusedB = attackerSaw.reduce((n, r) => n + (r.statuses['429'] ?? 0), 0);
  return { ...result, errorCount: errors.length, refusedB };
}

function expectUnhurt(r: Awaited<ReturnType<typeof measure>>) {
  expect(r.errors).toEqual([]);
  expect(r.errorCount).toBe(0);
  expect(r.attackedP99).toBeLessThanOrEqual(2 * r.baselineP99);
  expect(r.peakRssMb).toBeLessThan(MEMORY_BOUND_MB);
}

describe('one tenant cannot hurt another', () => {
  it('B inspecting a 10,000-permit semaphore in a loop', async () => {
    expectUnhurt(await measure('inspect'));
  }, 180_000);

  it("B's 2,000 watchers that never read their sockets, on that semaphore while it changes", async () => {
    expectUnhurt(await measure('watchers'));
  }, 180_000);

  it("B's unbounded blocking queries", async () => {
    expectUnhurt(await measure('blocking'));
  }, 180_000);

  it("B's flood of renewals and releases with made-up owner tokens", async () => {
    const r = await measure('fake-tokens');
    expectUnhurt(r);
    // The flood went past B's rate limit and was refused there: what A was measured beside.
    expect(r.refusedB).toBeGreaterThan(0);
  }, 180_000);
});
