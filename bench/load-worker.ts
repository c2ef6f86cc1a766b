import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { lockId } from '../src/domain/namespaces.js';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import hdr from 'hdr-histogram-js';
import { Redis } from 'ioredis';
import { Client as LiveMutexClient } from 'live-mutex';
import { Mutex } from 'redis-semaphore';
import { Pool } from 'undici';
import { KeySpace } from '../src/store/redis/keys.js';
import { parseAcquire, parseRelease } from '../src/store/redis/replies.js';
import { defineScripts } from '../src/store/redis/scripts.js';
import { cpuSeconds, ioCalls } from './cpu.js';
import { addDeltas, commandDeltas, commandStats } from './redis-stats.js';
import type {
  ChainResult,
  ChainTask,
  ExpiryResult,
  ExpiryTask,
  LoopResult,
  LoopTask,
  MemoryResult,
  MemoryTask,
  Percentiles,
  Task,
  TaskResult,
  WatchClientMessage,
  WatchClientReport,
  WatchResult,
  WatchTask,
  WorkerMessage,
} from './protocol.js';

/**
 * The load generator: a process of its own (forked by bench/run.ts), so the client's CPU is never the
 * server's. HTTP goes through undici pools (one keep-alive connection per concurrent client);
 * latencies are recorded in HDR histograms (microsecond resolution).
 */

/** 10,000 distinct keys for the "per-user lock" scenarios: never two clients on one key at once. */
const DISTINCT_KEYS = 10_000;
/** keyholder runs with API keys on, as in production: bench/run.ts hands the worker one key. */
/** The namespace of the key bench/run.ts creates. */
const BENCH_NAMESPACE = 'bench';

const AUTH_HEADERS: Record<string, string> = process.env.KEYHOLDER_BENCH_API_KEY
  ? { authorization: `Bearer ${process.env.KEYHOLDER_BENCH_API_KEY}` }
  : {};
const JSON_HEADERS = { 'content-type': 'application/json', ...AUTH_HEADERS };

class Latency {
  private readonly histogram = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000_000,
    numberOfSignificantValueDigits: 3,
  });

  record(ms: number): void {
    this.histogram.recordValue(Math.max(1, Math.round(ms * 1000)));
  }

  summary(): Percentiles {
    const at = (p: number) => this.histogram.getValueAtPercentile(p) / 1000;
    return { count: this.histogram.totalCount, p50: at(50), p99: at(99), p999: at(99.9), max: this.histogram.maxValue / 1000 };
  }
}

/** Hand-off timing: each grant on a single-holder key follows the release sent just before it. */
class HandOffClock {
  readonly fromSent = new Latency();
  readonly fromAnswered = new Latency();
  grantsBeforeReleaseAnswer = 0;
  private last: { sentAt: number; answeredAt?: number; nextGrantAt?: number } | undefined;

  granted(at: number, counting: boolean): void {
    const prev = this.last;
    this.last = undefined;
    if (!prev || !counting) return;
    this.fromSent.record(at - prev.sentAt);
    prev.nextGrantAt = at;
    if (prev.answeredAt !== undefined) this.answered(prev.nextGrantAt - prev.answeredAt);
  }

  releaseSent(at: number): { answered(at: number): void } {
    const record: { sentAt: number; answeredAt?: number; nextGrantAt?: number } = { sentAt: at };
    this.last = record;
    return {
      answered: (answeredAt: number) => {
        record.answeredAt = answeredAt;
        if (record.nextGrantAt !== undefined) this.answered(record.nextGrantAt - answeredAt);
      },
    };
  }

  private answered(ms: number): void {
    // The grant reached the client before the release's own answer: the hand-off took no time from
    // the releaser's point of view.
    if (ms < 0) this.grantsBeforeReleaseAnswer++;
    this.fromAnswered.record(Math.max(0, ms));
  }
}

async function post(
  pool: Pool,
  path: string,
  body: unknown,
  headers: Record<string, string> = JSON_HEADERS,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await pool.request({ method: 'POST', path, headers, body: JSON.stringify(body) });
  const json = (await res.body.json()) as Record<string, unknown>;
  return { status: res.statusCode, json };
}

/** An answer's status with its problem code, if any ("503 overloaded"): what an error count is made of. */
function answerName(answer: { status: number; json: Record<string, unknown> }): string {
  const { code, detail } = answer.json;
  if (typeof code !== 'string') return String(answer.status);
  // An overload refusal names the budget it was over in its detail ("over its event loop delay budget").
  const budget = typeof detail === 'string' ? / over its (.+?) budget/.exec(detail)?.[1] : undefined;
  return `${answer.status} ${code}${budget ? ` (${budget})` : ''}`;
}

async function get(pool: Pool, path: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await pool.request({ method: 'GET', path, headers: AUTH_HEADERS });
  const json = (await res.body.json()) as Record<string, unknown>;
  return { status: res.statusCode, json };
}

/** One measured run: counts units and records latencies only inside the measured window. */
class Run {
  measuring = false;
  stopping = false;
  units = 0;
  readonly latency = new Map<string, Latency>();
  readonly errors: Record<string, number> = {};

  record(op: string, ms: number): void {
    if (!this.measuring) return;
    let h = this.latency.get(op);
    if (!h) this.latency.set(op, (h = new Latency()));
    h.record(ms);
  }

  error(op: string, status: number | string): void {
    if (!this.measuring) return;
    const name = `${op} ${status}`;
    this.errors[name] = (this.errors[name] ?? 0) + 1;
  }

  done(): void {
    if (this.measuring) this.units++;
  }
}

type Unit = (run: Run) => Promise<void>;

interface Scenario {
  /** Prepares client `i` (takes its lock, say) and returns its unit of work. */
  client(i: number): Promise<Unit>;
  close(): Promise<void>;
  handOff?: HandOffClock;
  /** The locking work runs in this process (a library, no server): its CPU is this process's own. */
  inProcess?: true;
}

/** The semaphore scenario's keys and their limit. */
const SEMAPHORES = 100;
const SEMAPHORE_LIMIT = 5;

function httpScenario(task: LoopTask): Scenario {
  const pool = new Pool(task.target, { connections: task.concurrency, pipelining: 1, keepAliveTimeout: 60_000 });
  const close = () => pool.close();
  let next = 0;
  const now = () => performance.now();

  switch (task.scenario) {
    // floor-lock answers the same two routes (it ignores the API key).
    case 'floor-lock':
    case 'pairs':
      return {
        close,
        client: async () => async (run) => {
          const key = `bench-pair:${next++ % DISTINCT_KEYS}`;
          const t0 = now();
          const acquired = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 30_000 });
          const t1 = now();
          if (acquired.status !== 200) return run.error('acquire', answerName(acquired));
          run.record('acquire', t1 - t0);
          const released = await post(pool, `/v1/locks/${key}/release`, { ownerToken: acquired.json.ownerToken });
          const t2 = now();
          if (released.status !== 200) return run.error('release', answerName(released));
          run.record('release', t2 - t1);
          run.record('pair', t2 - t0);
          run.done();
        },
      };
    case 'semaphore':
      // Permits on 100 semaphores of limit 5: at c=50 a permit is mostly free, sometimes waited for
      // (waitMs), so the figure is a permit pair's cost with some FIFO hand-offs mixed in.
      return {
        close,
        client: async () => async (run) => {
          const key = `bench-sem:${task.tag}:${next++ % SEMAPHORES}`;
          const t0 = now();
          const acquired = await post(pool, `/v1/semaphores/${key}/acquire`, { limit: SEMAPHORE_LIMIT, ttlMs: 30_000, waitMs: 10_000 });
          const t1 = now();
          if (acquired.status !== 200) return run.error('acquire', answerName(acquired));
          run.record('acquire', t1 - t0);
          const released = await post(pool, `/v1/semaphores/${key}/release`, { ownerToken: acquired.json.ownerToken });
          const t2 = now();
          if (released.status !== 200) return run.error('release', answerName(released));
          run.record('release', t2 - t1);
          run.record('pair', t2 - t0);
          run.done();
        },
      };
    case 'hot': {
      const clock = new HandOffClock();
      const key = `bench-hot:${task.tag}`;
      return {
        close,
        handOff: clock,
        client: async () => async (run) => {
          const t0 = now();
          const acquired = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: 10_000 });
          const t1 = now();
          if (acquired.status !== 200) return run.error('acquire', answerName(acquired));
          clock.granted(t1, run.measuring);
          run.record('acquire', t1 - t0);
          const release = clock.releaseSent(now());
          const released = await post(pool, `/v1/locks/${key}/release`, { ownerToken: acquired.json.ownerToken });
          const t2 = now();
          release.answered(t2);
          if (released.status !== 200) return run.error('release', answerName(released));
          run.record('release', t2 - t1);
          run.done();
        },
      };
    }
    case 'renew':
      return {
        close,
        client: async (i) => {
          const key = `bench-renew:${task.tag}:${i}`;
          const acquired = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 60_000 });
          if (acquired.status !== 200) throw new Error(`renew setup: acquire answered ${acquired.status}`);
          const body = { ownerToken: acquired.json.ownerToken, ttlMs: 60_000 };
          return async (run) => {
            const t0 = now();
            const renewed = await post(pool, `/v1/locks/${key}/renew`, body);
            if (renewed.status !== 200) return run.error('renew', answerName(renewed));
            run.record('renew', now() - t0);
            run.done();
          };
        },
      };
    case 'floor-http':
      return {
        close,
        client: async () => async (run) => {
          const t0 = now();
          const echoed = await post(pool, '/echo', { ttlMs: 30_000 });
          if (echoed.status !== 200) return run.error('request', answerName(echoed));
          run.record('request', now() - t0);
          run.done();
        },
      };
    case 'peer-etcd': {
      const b64 = (s: string) => Buffer.from(s).toString('base64');
      // etcd reads an Authorization header as its own auth token: send it none.
      const etcdPost = (path: string, body: unknown) => post(pool, path, body, { 'content-type': 'application/json' });
      return {
        close,
        client: async () => async (run) => {
          const key = `bench-etcd:${next++ % DISTINCT_KEYS}`;
          const t0 = now();
          // 10 s leases: each pair leaves one lease behind until it runs out, as a crashed holder would.
          const lease = await etcdPost('/v3/lease/grant', { TTL: 10 });
          const t1 = now();
          if (lease.status !== 200 || typeof lease.json.ID !== 'string') return run.error('lease', lease.status);
          const locked = await etcdPost('/v3/lock/lock', { name: b64(key), lease: lease.json.ID });
          const t2 = now();
          if (locked.status !== 200 || typeof locked.json.key !== 'string') return run.error('lock', locked.status);
          const unlocked = await etcdPost('/v3/lock/unlock', { key: locked.json.key });
          const t3 = now();
          if (unlocked.status !== 200) return run.error('unlock', unlocked.status);
          run.record('lease', t1 - t0);
          run.record('lock', t2 - t1);
          run.record('unlock', t3 - t2);
          run.record('pair', t3 - t0);
          run.done();
        },
      };
    }
    case 'floor-redis':
    case 'peer-live-mutex':
    case 'peer-redis-semaphore':
      throw new Error(`${task.scenario} is not an HTTP scenario`);
  }
}

/** The Redis floor: keyholder's own acquire and release scripts, called straight from ioredis. */
function redisScenario(task: LoopTask): Scenario {
  // As the Redis store on one Redis (auto-pipelining off: defineScripts batches each turn's calls into
  // one write), so only the HTTP layer differs.
  const redis = new Redis(task.target, { enableAutoPipelining: false, maxRetriesPerRequest: 0, commandTimeout: 5_000 });
  const scripts = defineScripts(redis);
  const keys = new KeySpace('bench-floor:');
  const instanceId = randomBytes(9).toString('base64url');
  const graceMs = 600_000;
  let next = 0;
  return {
    close: async () => {
      await redis.quit();
    },
    client: async () => async (run) => {
      const key = `bench-pair:${next++ % DISTINCT_KEYS}`;
      const ownerToken = randomBytes(16).toString('base64url');
      const t0 = performance.now();
      const acquired = parseAcquire(
        await scripts.run('acquire', {
          keys: keys.lockKeys(key),
          ownerToken,
          ttlMs: 30_000,
          holder: '',
          graceMs,
          waitMs: 0,
          waiterId: '-',
          instanceId,
          maxWaiters: 1000,
          livenessMs: 3000,
          channelPrefix: keys.grantChannelPrefix(),
          lockName: key,
          idempotencyKey: '',
          maxQuotaSlots: 0,
        }),
      );
      const t1 = performance.now();
      if (acquired.kind !== 'granted') return run.error('acquire', acquired.kind);
      run.record('acquire', t1 - t0);
      const released = parseRelease(
        await scripts.run('release', {
          keys: keys.lockKeys(key),
          ownerToken,
          graceMs,
          channelPrefix: keys.grantChannelPrefix(),
          lockName: key,
        }),
      );
      const t2 = performance.now();
      if (!released) return run.error('release', 'not_owner');
      run.record('release', t2 - t1);
      run.record('pair', t2 - t0);
      run.done();
    },
  };
}

/**
 * The live-mutex peer: one client (one TCP connection) per concurrent caller, as the HTTP scenarios
 * have one keep-alive connection each, on distinct keys. The broker answers lock and unlock; there is
 * no token to check against a resource.
 */
function liveMutexScenario(task: LoopTask): Scenario {
  const { hostname, port } = new URL(task.target);
  const clients: LiveMutexClient[] = [];
  let next = 0;
  return {
    close: async () => {
      for (const client of clients) client.close();
    },
    client: async () => {
      const client = await new LiveMutexClient({ host: hostname, port: Number(port), noDelay: true }).ensure();
      clients.push(client);
      return async (run) => {
        const key = `bench-lmx:${next++ % DISTINCT_KEYS}`;
        const t0 = performance.now();
        const lock = await client.acquire(key, { ttl: 30_000 });
        const t1 = performance.now();
        run.record('acquire', t1 - t0);
        await client.release(key, { id: lock.id });
        const t2 = performance.now();
        run.record('release', t2 - t1);
        run.record('pair', t2 - t0);
        run.done();
      };
    },
  };
}

/**
 * The redis-semaphore peer: its Mutex in this process against the bench's Redis (one connection, as an
 * application would share), on distinct keys. No service in between: the figures are a library's, and
 * a caller that finds the key held polls (retryInterval) rather than queueing.
 */
function redisSemaphoreScenario(task: LoopTask): Scenario {
  const redis = new Redis(task.target, { maxRetriesPerRequest: 0, commandTimeout: 5_000 });
  let next = 0;
  return {
    inProcess: true,
    close: async () => {
      await redis.quit();
    },
    client: async () => async (run) => {
      const mutex = new Mutex(redis, `bench-rsem:${next++ % DISTINCT_KEYS}`, { lockTimeout: 30_000, acquireTimeout: 10_000 });
      const t0 = performance.now();
      await mutex.acquire();
      const t1 = performance.now();
      run.record('acquire', t1 - t0);
      await mutex.release();
      const t2 = performance.now();
      run.record('release', t2 - t1);
      run.record('pair', t2 - t0);
      run.done();
    },
  };
}

function scenarioFor(task: LoopTask): Scenario {
  switch (task.scenario) {
    case 'floor-redis':
      return redisScenario(task);
    case 'peer-live-mutex':
      return liveMutexScenario(task);
    case 'peer-redis-semaphore':
      return redisSemaphoreScenario(task);
    default:
      return httpScenario(task);
  }
}

/** User + system CPU seconds of this process so far. */
function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

async function runLoop(task: LoopTask): Promise<LoopResult> {
  const scenario = scenarioFor(task);
  const units = await Promise.all(Array.from({ length: task.concurrency }, (_, i) => scenario.client(i)));
  const run = new Run();
  const clients = units.map(async (unit) => {
    while (!run.stopping) {
      try {
        await unit(run);
      } catch (err) {
        run.error('exception', (err as Error).message.slice(0, 60));
      }
    }
  });
  const cpu = () => ({
    server: scenario.inProcess ? ownCpuSeconds() : task.serverPid === undefined ? undefined : cpuSeconds(task.serverPid),
    redis: task.redisPid === undefined ? undefined : cpuSeconds(task.redisPid),
    serverIo: task.serverPid === undefined ? undefined : ioCalls(task.serverPid),
    redisIo: task.redisPid === undefined ? undefined : ioCalls(task.redisPid),
  });
  const stats = task.redisUrl ? new Redis(task.redisUrl, { maxRetriesPerRequest: 1 }) : undefined;
  const commands = async () => (stats ? commandStats(await stats.info('commandstats')) : undefined);
  await sleep(task.warmMs);
  const commandsBefore = await commands();
  const cpuBefore = cpu();
  const startedAt = performance.now();
  run.measuring = true;
  await sleep(task.durationMs);
  run.measuring = false;
  const seconds = (performance.now() - startedAt) / 1000;
  const cpuAfter = cpu();
  const commandsAfter = await commands();
  stats?.disconnect();
  run.stopping = true;
  await Promise.all(clients);
  await scenario.close();
  const diff = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : b - a);
  const latency: Record<string, Percentiles> = {};
  for (const [op, h] of run.latency) latency[op] = h.summary();
  return {
    units: run.units,
    seconds,
    unitsPerSecond: run.units / seconds,
    latency,
    errors: run.errors,
    serverCpuSeconds: diff(cpuBefore.server, cpuAfter.server),
    redisCpuSeconds: diff(cpuBefore.redis, cpuAfter.redis),
    serverIoCalls: diff(cpuBefore.serverIo, cpuAfter.serverIo),
    redisIoCalls: diff(cpuBefore.redisIo, cpuAfter.redisIo),
    ...(commandsBefore && commandsAfter ? { redisCommands: commandDeltas(commandsBefore, commandsAfter) } : {}),
    ...(scenario.handOff
      ? {
          handOffFromReleaseSent: scenario.handOff.fromSent.summary(),
          handOffFromReleaseAnswered: scenario.handOff.fromAnswered.summary(),
          grantsBeforeReleaseAnswer: scenario.handOff.grantsBeforeReleaseAnswer,
        }
      : {}),
  };
}

function usedMemory(info: string): number {
  const match = /^used_memory:(\d+)/m.exec(info);
  if (!match) throw new Error('INFO memory has no used_memory');
  return Number(match[1]);
}

/** MEMORY STATS as numbers (its nested db.N entries are skipped). */
async function memoryStats(redis: Redis): Promise<Record<string, number>> {
  const flat = (await redis.call('MEMORY', 'STATS')) as unknown[];
  const out: Record<string, number> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const value = flat[i + 1];
    if (typeof value === 'number') out[String(flat[i])] = value;
  }
  return out;
}

async function countKeys(redis: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [nextCursor, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = nextCursor;
    n += found.length;
  } while (cursor !== '0');
  return n;
}

/** Runs `fn` over 0..n-1 with at most `concurrency` calls in flight. */
async function forEachLimited(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/**
 * POST, retried after Retry-After while the instance refuses with 503 overloaded (before any store work:
 * its load budget on a busy machine), as the TS and Python clients do. The memory figures count what is
 * held, not how fast it was taken.
 */
async function postPastOverload(pool: Pool, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  for (;;) {
    const res = await post(pool, path, body);
    if (res.status !== 503 || res.json.code !== 'overloaded') return res;
    await sleep(Number(res.json.retryAfterMs ?? 1000));
  }
}

async function runMemory(task: MemoryTask): Promise<MemoryResult> {
  const redis = new Redis(task.redisUrl, { maxRetriesPerRequest: 1 });
  const pool = new Pool(task.keyholderUrl, { connections: 50 });
  const keys = new KeySpace(task.keyPrefix);
  // The bench key's namespace is part of each lock's id in Redis (src/domain/namespaces.ts).
  const id = (key: string) => lockId(BENCH_NAMESPACE, key);
  const pattern = keys.lockPattern(id('bench-mem:'));
  try {
    // Warm-up: one acquire and release of a lock outside the measured ones, so that the baseline already
    // has what a first call costs once (Redis loading and compiling each script: some 230 KB, which
    // would otherwise be counted as 23 B per lock), then its keys are waited out.
    const warm = id('bench-warm:0');
    const warmKeys = keys.lockKeys(warm);
    const warmed = await postPastOverload(pool, '/v1/locks/bench-warm:0/acquire', { ttlMs: 1_000 });
    if (warmed.status !== 200) throw new Error(`memory: warm-up acquire answered ${warmed.status}`);
    await postPastOverload(pool, '/v1/locks/bench-warm:0/release', { ownerToken: warmed.json.ownerToken as string });
    const warmDeadline = performance.now() + 30_000;
    while ((await redis.exists(warmKeys.lock, warmKeys.quota.count, warmKeys.quota.ends)) > 0 && performance.now() < warmDeadline) {
      await sleep(100);
    }
    await sleep(300);
    const baselineBytes = usedMemory(await redis.info('memory'));
    const baselineStats = await memoryStats(redis);
    const tokens: string[] = [];
    await forEachLimited(task.locks, 50, async (i) => {
      const res = await postPastOverload(pool, `/v1/locks/bench-mem:${i}/acquire`, { ttlMs: 120_000 });
      if (res.status !== 200) throw new Error(`memory: acquire answered ${res.status}`);
      tokens[i] = res.json.ownerToken as string;
    });
    await sleep(300);
    const heldBytes = usedMemory(await redis.info('memory'));
    const heldStats = await memoryStats(redis);
    const memoryUsageOfOneLock = Number(await redis.call('MEMORY', 'USAGE', keys.lock(id('bench-mem:0'))));
    const recordBytesOfOneLock = await redis.strlen(keys.lock(id('bench-mem:0')));
    const encodingOfOneLock = String(await redis.call('OBJECT', 'ENCODING', keys.lock(id('bench-mem:0'))));
    await forEachLimited(task.locks, 50, async (i) => {
      const res = await postPastOverload(pool, `/v1/locks/bench-mem:${i}/release`, { ownerToken: tokens[i] });
      if (res.status !== 200) throw new Error(`memory: release answered ${res.status}`);
    });
    const releasedAt = performance.now();
    const releasedBytes = usedMemory(await redis.info('memory'));
    const keysAfterRelease = await countKeys(redis, pattern);
    // Past the grace, Redis's own expiry removes the idle keys (actively, in the background).
    await sleep(task.fenceGraceMs);
    let keysAfterGrace = await countKeys(redis, pattern);
    const deadline = performance.now() + 30_000;
    while (keysAfterGrace > 0 && performance.now() < deadline) {
      await sleep(100);
      keysAfterGrace = await countKeys(redis, pattern);
    }
    const msUntilGone = performance.now() - releasedAt;
    await sleep(300);
    const afterGraceBytes = usedMemory(await redis.info('memory'));
    const afterStats = await memoryStats(redis);
    // Where the bytes went, per lock: the MEMORY STATS fields that moved by more than a byte per lock.
    const statsDeltaPerLock: Record<string, [number, number]> = {};
    for (const [field, base] of Object.entries(baselineStats)) {
      if (!/^(overhead|clients|dataset|keys\.bytes|db|functions|lua|aof|replication|total\.allocated|startup)/.test(field)) continue;
      const held = ((heldStats[field] ?? base) - base) / task.locks;
      const after = ((afterStats[field] ?? base) - base) / task.locks;
      if (Math.abs(held) >= 1 || Math.abs(after) >= 1) statsDeltaPerLock[field] = [held, after];
    }
    return {
      locks: task.locks,
      baselineBytes,
      heldBytes,
      releasedBytes,
      keysAfterRelease,
      afterGraceBytes,
      keysAfterGrace,
      msUntilGone,
      memoryUsageOfOneLock,
      recordBytesOfOneLock,
      encodingOfOneLock,
      statsDeltaPerLock,
    };
  } finally {
    await pool.close();
    redis.disconnect();
  }
}

async function runChain(task: ChainTask): Promise<ChainResult> {
  const redis = new Redis(task.redisUrl, { maxRetriesPerRequest: 1 });
  const pool = new Pool(task.keyholderUrl, { connections: task.waiters + 2, keepAliveTimeout: 120_000 });
  const clock = new HandOffClock();
  const breakdown: Record<string, number> = {};
  let handOffs = 0;
  let failures = 0;
  const refusals: Record<string, number> = {};
  let overloadedRetries = 0;
  let seconds = 0;
  try {
    for (let cycle = 0; cycle < task.cycles; cycle++) {
      const key = `bench-chain:${task.tag}:${task.waiters}:${cycle}`;
      const holder = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 60_000 });
      if (holder.status !== 200) throw new Error(`chain: holder's acquire answered ${answerName(holder)}`);
      let counting = false;
      const waiters = Array.from({ length: task.waiters }, async () => {
        let acquired = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: 60_000 });
        // A thousand acquires sent at once to one instance are a burst: past its load budget (requests in
        // flight before they reach the queue, event-loop delay) it refuses some with 503 overloaded before
        // any store work. A client retries after Retry-After, as the TS and Python clients do; so does this
        // one, until it is queued (the clock below starts only then).
        while (acquired.status === 503 && acquired.json.code === 'overloaded' && !counting) {
          overloadedRetries++;
          await sleep(Number(acquired.json.retryAfterMs ?? 1000));
          acquired = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: 60_000 });
        }
        if (acquired.status !== 200) {
          failures++;
          // The detail says which budget refused it (503 overloaded) or which cap (429).
          const code = `${acquired.status} ${String(acquired.json.code)}: ${String(acquired.json.detail)}`;
          refusals[code] = (refusals[code] ?? 0) + 1;
          return;
        }
        clock.granted(performance.now(), counting);
        handOffs++;
        const release = clock.releaseSent(performance.now());
        const released = await post(pool, `/v1/locks/${key}/release`, { ownerToken: acquired.json.ownerToken });
        release.answered(performance.now());
        if (released.status !== 200) failures++;
      });
      // Every waiter queued before the clock starts: only hand-offs are counted, not queueing.
      const queuedBy = performance.now() + 60_000;
      for (;;) {
        const state = await get(pool, `/v1/locks/${key}`);
        if (state.json.waiters === task.waiters) break;
        if (performance.now() > queuedBy) {
          // The waiters still in flight finish before the pool closes.
          await Promise.allSettled(waiters);
          throw new Error(
            `chain: only ${String(state.json.waiters)} of ${task.waiters} waiters queued; refused: ${JSON.stringify(refusals)}`,
          );
        }
        await sleep(20);
      }
      const before = commandStats(await redis.info('commandstats'));
      const startedAt = performance.now();
      counting = true;
      const release = clock.releaseSent(performance.now());
      const released = await post(pool, `/v1/locks/${key}/release`, { ownerToken: holder.json.ownerToken });
      release.answered(performance.now());
      if (released.status !== 200) failures++;
      await Promise.all(waiters);
      seconds += (performance.now() - startedAt) / 1000;
      addDeltas(breakdown, commandDeltas(before, commandStats(await redis.info('commandstats'))));
    }
  } finally {
    await pool.close();
    redis.disconnect();
  }
  const total = Object.values(breakdown).reduce((a, b) => a + b, 0);
  const scriptCalls = (breakdown.evalsha ?? 0) + (breakdown.eval ?? 0) + (breakdown.fcall ?? 0);
  return {
    waiters: task.waiters,
    overloadedRetries,
    handOffs,
    failures,
    seconds,
    commandsPerHandOff: total / Math.max(1, handOffs),
    scriptCallsPerHandOff: scriptCalls / Math.max(1, handOffs),
    commandBreakdown: Object.fromEntries(Object.entries(breakdown).map(([k, v]) => [k, v / Math.max(1, handOffs)])),
    handOffFromReleaseAnswered: clock.fromAnswered.summary(),
    handOffFromReleaseSent: clock.fromSent.summary(),
  };
}

async function runExpiry(task: ExpiryTask): Promise<ExpiryResult> {
  const pool = new Pool(task.keyholderUrl, { connections: 4 });
  const samples: number[] = [];
  let failures = 0;
  try {
    for (let i = 0; i < task.repeats; i++) {
      const key = `bench-expiry:${task.tag}:${i}`;
      // A holder that crashes: it never renews nor releases.
      const holder = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: task.ttlMs });
      if (holder.status !== 200) throw new Error(`expiry: holder's acquire answered ${answerName(holder)}`);
      const expiresAtMs = Date.parse(holder.json.expiresAt as string);
      const waiter = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: task.ttlMs + 5_000 });
      // expiresAt is on the Redis clock: the same host clock as this one.
      const grantedAtMs = performance.timeOrigin + performance.now();
      if (waiter.status !== 200) {
        failures++;
        continue;
      }
      samples.push(grantedAtMs - expiresAtMs);
      await post(pool, `/v1/locks/${key}/release`, { ownerToken: waiter.json.ownerToken });
    }
  } finally {
    await pool.close();
  }
  return { samples, failures };
}

/**
 * Watch fan-out: N blocking queries on one key (each its own keep-alive connection, spread over
 * WATCH_CLIENTS processes of their own: watch-client.ts), then one change (alternately a grant and a
 * release); the time from sending the change to each watcher's answer arriving, and the Redis
 * commands the change cost (INFO commandstats), whatever N is.
 */
async function runWatch(task: WatchTask): Promise<WatchResult> {
  const redis = new Redis(task.redisUrl, { maxRetriesPerRequest: 1 });
  const pool = new Pool(task.keyholderUrl, { connections: 2, keepAliveTimeout: 120_000 });
  const clients = Array.from({ length: Math.min(WATCH_CLIENTS, task.watchers) }, () => new WatchClient());
  const wake = new Latency();
  const perChangeP99: number[] = [];
  const breakdown: Record<string, number> = {};
  const key = `bench-watch:${task.tag}`;
  const port = Number(new URL(task.keyholderUrl).port);
  let failures = 0;
  let ownerToken: string | undefined;
  try {
    await Promise.all(
      clients.map((c, i) =>
        c.ask({ kind: 'open', port, watchers: Math.floor(task.watchers / clients.length) + (i < task.watchers % clients.length ? 1 : 0) }),
      ),
    );
    const headers =
      `host: 127.0.0.1:${port}\r\n` +
      Object.entries(AUTH_HEADERS)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
    // Each watcher first learns the index with a plain inspect on its own connection, as a client of
    // blocking queries starts; the first answer on a new connection costs the kernel about twice what
    // later ones do, and it is not a change's.
    await Promise.all(
      clients.map((c) => c.ask({ kind: 'ask', request: `GET /v1/locks/${encodeURIComponent(key)} HTTP/1.1\r\n${headers}\r\n` })),
    );
    await Promise.all(clients.map((c) => c.ask({ kind: 'collect', oldIndex: -1 })));
    let index = Number((await get(pool, `/v1/locks/${key}`)).json.index);
    // A key with a thousand watchers is watched all the time: its subscription is in place before they
    // ask (a short blocking query makes it; it outlives its last watcher by a few seconds).
    await get(pool, `/v1/locks/${key}?index=${index}&waitMs=1`);
    // One change more than measured, the first: like the other scenarios' warm-up, it runs the
    // fan-out path once at full size before anything is timed (compiled code, grown buffers).
    for (let change = -1; change < task.changes; change++) {
      const measured = change >= 0;
      const request = `GET /v1/locks/${encodeURIComponent(key)}?index=${index}&waitMs=60000 HTTP/1.1\r\n${headers}\r\n`;
      await Promise.all(clients.map((c) => c.ask({ kind: 'ask', request })));
      // Every watcher's request in place before the change (the server holds them open; nothing tells
      // the client when they all are, so it waits generously: 5 ms per watcher).
      await sleep(300 + task.watchers * 5);
      const collected = clients.map((c) => c.ask({ kind: 'collect', oldIndex: index }));
      const before = commandStats(await redis.info('commandstats'));
      const sentAt = performance.timeOrigin + performance.now();
      if (ownerToken === undefined) {
        const granted = await post(pool, `/v1/locks/${key}/acquire`, { ttlMs: 60_000 });
        ownerToken = granted.json.ownerToken as string;
      } else {
        await post(pool, `/v1/locks/${key}/release`, { ownerToken });
        ownerToken = undefined;
      }
      const answers = await Promise.all(collected);
      const thisChange = new Latency();
      for (const answer of answers) {
        if (answer.kind !== 'answers') continue;
        if (answer.index !== index) index = answer.index;
        if (!measured) continue;
        failures += answer.failures;
        for (const at of answer.at) {
          wake.record(at - sentAt);
          thisChange.record(at - sentAt);
        }
      }
      if (measured) perChangeP99.push(thisChange.summary().p99);
      if (measured) addDeltas(breakdown, commandDeltas(before, commandStats(await redis.info('commandstats'))));
    }
  } finally {
    for (const c of clients) c.close();
    await pool.close();
    redis.disconnect();
  }
  const total = Object.values(breakdown).reduce((a, b) => a + b, 0);
  return {
    watchers: task.watchers,
    changes: task.changes,
    clients: clients.length,
    failures,
    wake: wake.summary(),
    perChangeP99,
    commandsPerChange: total / Math.max(1, task.changes),
    commandBreakdown: Object.fromEntries(Object.entries(breakdown).map(([k, v]) => [k, v / Math.max(1, task.changes)])),
  };
}

/**
 * Processes the watchers are spread over: with them all in this one process, reading a thousand
 * answers (about 50 us each) would queue them behind each other here, and the figure would be the
 * client's. Two, as the machine has two cores and the server needs one of them.
 */
const WATCH_CLIENTS = 2;

/** One forked watch-client.ts, asked one thing at a time. */
class WatchClient {
  private readonly child = fork(fileURLToPath(new URL('./watch-client.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });

  ask(message: WatchClientMessage): Promise<WatchClientReport> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`watch client exited (${code}) during ${message.kind}`));
      this.child.once('exit', onExit);
      this.child.once('message', (report: WatchClientReport) => {
        this.child.off('exit', onExit);
        resolve(report);
      });
      this.child.send(message);
    });
  }

  close(): void {
    if (this.child.connected) this.child.send({ kind: 'close' } satisfies WatchClientMessage);
  }
}

function runTask(task: Task): Promise<TaskResult> {
  switch (task.kind) {
    case 'loop':
      return runLoop(task);
    case 'memory':
      return runMemory(task);
    case 'chain':
      return runChain(task);
    case 'expiry':
      return runExpiry(task);
    case 'watch':
      return runWatch(task);
  }
}

process.on('message', (task: Task) => {
  const reply = (message: WorkerMessage) => process.send?.(message);
  runTask(task).then(
    (result) => reply({ ok: true, result }),
    (err: unknown) => reply({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
