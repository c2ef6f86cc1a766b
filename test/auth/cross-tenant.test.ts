import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
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
/**
 * A's work per round: 2 workers x 125 cycles of acquire, renew, inspect, release (1,000 requests), so a
 * round's p99 is its 10th slowest request. With 160 it was the 2nd slowest: two requests that met one
 * stall of a shared machine decided it, and rounds of the same kind varied up to 10x.
 */
const WORKERS = 2;
const CYCLES = 125;
/** The server's resident memory must stay under this during every attack (see docs/limits.md). */
const MEMORY_BOUND_MB = 512;

/**
 * The rate limit is per API key, and each of B's attacks is sized by one key of B's (1,000 counted
 * requests per 10 s; a key per attacked round, see keysOfB). Team A's work runs under 20 keys of its
 * namespace (a team with many services has many keys), so its 1,000-request rounds are never near a
 * limit: a measure is 10 rounds x 500 counted requests (acquire and inspect), 250 per key, and even
 * two measures in one window are 500 of a key's 1,000.
 */
const A_KEYS = 20;
const keys = makeKeys([
  ...Array.from({ length: A_KEYS }, (_v, i) => ({ id: `team-a-key-${i}`, namespace: 'team-a', scopes: ['locks' as const] })),
  ...Array.from({ length: ROUNDS }, (_v, i) => ({ id: `team-b-key-${i}`, namespace: 'team-b', scopes: ['locks' as const] })),
  // Another of team B's services: the one that changes the watched semaphore (its calls are not the
  // attack's, and the watchers' queries spend the first key's limit).
  { id: 'team-b-churn-key', namespace: 'team-b', scopes: ['locks'] },
]);
const headersOfA = Array.from({ length: A_KEYS }, (_v, i) => bearer(keys.plain[`team-a-key-${i}`] ?? ''));
/**
 * B's key for each attacked round of a measure: each round's attack starts with its key's window
 * unspent, so every round measures the same attack. With one key, a round that began less than a
 * window after the one before found it spent: its 2,000 watchers (or 1,200 blocking callers) were all
 * refused at once with 429 and nothing waited (measured: 2 of 5 watcher rounds, 0 watchers answered).
 */
const keysOfB = Array.from({ length: ROUNDS }, (_v, i) => keys.plain[`team-b-key-${i}`] ?? '');
const keyB2 = keys.plain['team-b-churn-key'] ?? '';
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
  // B's permits (all but the last of 10,000) are taken first, without a rate limit (the state stays in Redis).
  server = await KeyholderProcess.start({ env });
  await attacker('fill-semaphore', 0).done;
  await server.stop();
  // 1,000 counted requests per 10 s per key: A's work (over 20 keys) is under it, B's floods are not.
  server = await KeyholderProcess.start({ env: { ...env, RATE_LIMIT_MAX: '1000', RATE_LIMIT_WINDOW_MS: '10000' } });
  // One round unmeasured: the first case's first rounds otherwise measured a server and client still
  // compiling their hot paths (its first baseline round was often 2-4x its later ones).
  await roundOfA();
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

function attacker(mode: string, round: number): Attack {
  const child = spawn(process.execPath, [ATTACKER, mode, server.url, keysOfB[round] ?? '', keyB2], { stdio: ['ignore', 'pipe', 'pipe'] });
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
  A: Record<string, string>,
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
        // Each cycle under the next of A's keys: every key gets the same share of A's counted requests.
        const A = headersOfA[(w * CYCLES + i) % A_KEYS] ?? {};
        const grant = note('acquire', await call(A, 'POST', `/v1/locks/${key}/acquire`, { ttlMs: 5_000 }));
        const ownerToken = grant.body.ownerToken;
        note('renew', await call(A, 'POST', `/v1/locks/${key}/renew`, { ownerToken, ttlMs: 5_000 }));
        note('inspect', await call(A, 'GET', `/v1/locks/${key}`));
        note('release', await call(A, 'POST', `/v1/locks/${key}/release`, { ownerToken }));
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

/** Descriptors the server has open now: its sockets (clients' and Redis's) and files. */
const serverFds = () => readdirSync(`/proc/${server.pid}/fd`).length;

/** The server's callers with an open wait now (its keyholder_waiting_callers gauge). */
async function serverWaitingCallers(): Promise<number> {
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^keyholder_waiting_callers (\d+)/m.exec(metrics)?.[1] ?? NaN);
}

/**
 * Waits until the server has let go of an attack that ended: its sockets closed (back to `fdsBefore`,
 * give or take A's own keep-alive connections) and no open wait left. A baseline round that began while
 * the server still closed 2,000 sockets measured B's attack, not A alone: measured, the watchers case's
 * baseline rounds after the first were 2-4x its first.
 */
async function untilSettled(fdsBefore: number): Promise<number> {
  const started = performance.now();
  while (serverFds() > fdsBefore + 8 || (await serverWaitingCallers()) > 0) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return Math.round(performance.now() - started);
}

/** A's rounds alone and under `mode`, interleaved; the attacker runs only during the attacked rounds. */
async function measure(mode: string) {
  const baseline: number[] = [];
  const attacked: number[] = [];
  const errors: string[] = [];
  let peakRssMb = serverRssMb();
  /** Each attacked round's answers to B (status counts) and B's requests per second. */
  const attackerSaw: { statuses: Record<string, number>; perSecond: number; takenInMs?: number; watchersSaw?: Record<string, number> }[] =
    [];
  // The server's and Redis's CPU time in A's rounds alone and attacked: what serving B cost them
  // (printed, not asserted; it tells a slower A apart from a machine that was busy anyway).
  const cpu = { aloneServer: 0, aloneRedis: 0, attackedServer: 0, attackedRedis: 0, attackedAttacker: 0 };
  /** How long the server took to let go of each attack (ms, printed). */
  const settledMs: number[] = [];
  const aloneAll: number[] = [];
  const attackedAll: number[] = [];
  const aloneRound = async () => {
    const server0 = cpuMs(server.pid);
    const redis0 = cpuMs(redis.pid);
    const alone = await roundOfA();
    cpu.aloneServer += cpuMs(server.pid) - server0;
    cpu.aloneRedis += cpuMs(redis.pid) - redis0;
    errors.push(...alone.errors);
    baseline.push(p99(alone.latencies));
    aloneAll.push(...alone.latencies);
  };
  const attackedRound = async (round: number) => {
    const fdsBefore = serverFds();
    const attack = attacker(mode, round);
    await attack.ready;
    const sampler = setInterval(() => (peakRssMb = Math.max(peakRssMb, serverRssMb())), 100);
    const server0 = cpuMs(server.pid);
    const redis0 = cpuMs(redis.pid);
    const attacker0 = cpuMs(attack.child.pid);
    try {
      const under = await roundOfA();
      cpu.attackedServer += cpuMs(server.pid) - server0;
      cpu.attackedRedis += cpuMs(redis.pid) - redis0;
      cpu.attackedAttacker += cpuMs(attack.child.pid) - attacker0;
      errors.push(...under.errors);
      attacked.push(p99(under.latencies));
      attackedAll.push(...under.latencies);
    } finally {
      attack.child.kill('SIGTERM');
      try {
        attackerSaw.push(JSON.parse((await attack.done).trim().split('\n').pop() ?? '{}') as (typeof attackerSaw)[number]);
        settledMs.push(await untilSettled(fdsBefore));
      } finally {
        clearInterval(sampler);
        peakRssMb = Math.max(peakRssMb, serverRssMb());
      }
    }
  };
  // Alone, attacked, attacked, alone, alone, attacked...: the machine's load drifting up or down over a
  // measure (other work starting or ending) weighs on both kinds alike, not always on the later one.
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      await aloneRound();
      await attackedRound(round);
    } else {
      await attackedRound(round);
      await aloneRound();
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
    // Printed, not asserted: A's p99 over all its requests of each kind.
    pooledBaselineP99: p99(aloneAll),
    pooledAttackedP99: p99(attackedAll),
    peakRssMb: Math.round(peakRssMb),
    cpuMs: cpu,
    settledMs,
    attackerSaw: attackerSaw.map(
      (r) =>
        `${r.perSecond}/s ${JSON.stringify(r.statuses)}${r.takenInMs === undefined ? '' : ` opening taken in ${r.takenInMs} ms`}` +
        `${r.watchersSaw ? ` watchers ${JSON.stringify(r.watchersSaw)}` : ''}`,
    ),
    errors: errors.slice(0, 5),
  };
  console.log(`cross-tenant ${JSON.stringify(result)}`);
  // An error of A's is told apart by what the server logged (warnings and up) around it.
  if (errors.length > 0) console.log(`cross-tenant server log:\n${server.logs.slice(-30).join('\n')}`);
  const refusedB = attackerSaw.reduce((n, r) => n + (r.statuses['429'] ?? 0), 0);
  /** Answers of 200 the watchers' sockets received in each attacked round (watchers mode only). */
  const watchersAnswered = attackerSaw.map((r) => r.watchersSaw?.['200'] ?? 0);
  return { ...result, errorCount: errors.length, refusedB, watchersAnswered };
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
    const r = await measure('watchers');
    expectUnhurt(r);
    // In every attacked round the semaphore changed while A was measured and the waiting watchers were
    // answered, to sockets that never read (measured: 999 a round, B's rate limit's worth; the rest
    // are refused at once): the attack is the one named, not 2,000 idle connections.
    expect(r.watchersAnswered).toHaveLength(ROUNDS);
    expect(Math.min(...r.watchersAnswered)).toBeGreaterThan(0);
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
