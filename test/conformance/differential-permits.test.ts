import { randomUUID } from 'node:crypto';
import { setImmediate as flush, setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { PermitKind, PermitStore } from '../../src/domain/permit-store.js';
import { MAX_READERS } from '../../src/domain/rwlocks.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';

/**
 * The differential test (differential.test.ts) for semaphores and read/write locks: random sequences of
 * permit operations run against the embedded store and against Redis (two store instances, as two
 * keyholder processes), every answer compared: outcomes and refusal reasons, live capacities, the
 * order of fencing tokens per key, holders and their weights, waiter counts, evicted leases, listings.
 * Raw token values and times differ by design and are not compared.
 *
 *   DIFF_RUNS=2000 DIFF_SEED=42 npx vitest run test/conformance/differential-permits.test.ts
 */
const RUNS = Number(process.env.DIFF_RUNS ?? 15);
const SEED = Number(process.env.DIFF_SEED ?? 20_261_201);
const PATH = process.env.DIFF_PATH;

const LEASE_MS = 30_000;
const SHORT_WAIT_MS = 15;
const SHORT_LEASE_MS = 10;
const PAST_SHORT_LEASE_MS = 25;
const LONG_WAIT_MS = 20_000;
const MAX_WAITERS = 3;
const DELIVERY_TIMEOUT_MS = 5_000;
const HOLDERS = ['a', null, 'b|c'] as const;
/** Semaphore limits callers ask for: mostly the same, sometimes another (a limit mismatch). */
const LIMITS = [2, 2, 2, 1] as const;

/** Which key an operation is on: two semaphores and a read/write lock. */
const TARGETS: ReadonlyArray<{ kind: PermitKind; name: string }> = [
  { kind: 'semaphore', name: 's0' },
  { kind: 'semaphore', name: 's1' },
  { kind: 'rwlock', name: 'r0' },
];

type Who = 'latest' | 'older' | 'stranger';
type Op =
  | { op: 'acquire'; t: number; shape: number; holder: number; wait: 'none' | 'short' | 'long'; inst: number }
  | { op: 'acquireAndExpire'; t: number; shape: number; inst: number }
  | { op: 'renew'; t: number; who: Who; inst: number }
  | { op: 'release'; t: number; who: Who; inst: number }
  | { op: 'inspect'; t: number; inst: number }
  | { op: 'forceRelease'; t: number; inst: number }
  | { op: 'list'; inst: number }
  | { op: 'leave'; pick: number };

const t = fc.nat(TARGETS.length - 1);
const inst = fc.nat(1);
const who = fc.constantFrom<Who>('latest', 'latest', 'older', 'stranger');
const shape = fc.nat(3);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('acquire' as const), t, shape, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('none' as const), inst }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('acquire' as const), t, shape, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('long' as const), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquire' as const), t, shape, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('short' as const), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquireAndExpire' as const), t, shape, inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('renew' as const), t, who, inst }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('release' as const), t, who, inst }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('inspect' as const), t, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('forceRelease' as const), t, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const), inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('leave' as const), pick: fc.nat(7) }) },
);

/** Weight and capacity of an acquire on a target: a semaphore permit under some limit, or a read or write lease. */
function call(target: { kind: PermitKind }, s: number): { weight: number; capacity: number } {
  if (target.kind === 'semaphore') return { weight: 1, capacity: LIMITS[s] ?? 2 };
  return { weight: s % 2 === 0 ? 1 : MAX_READERS, capacity: MAX_READERS };
}

interface Tracked {
  settled: boolean;
  outcome?: { ok: true; value: unknown } | { ok: false; error: unknown };
  readonly promise: Promise<void>;
}
function track(promise: Promise<unknown>): Tracked {
  const tr: Tracked = {
    settled: false,
    promise: promise.then(
      (value) => {
        tr.settled = true;
        tr.outcome = { ok: true, value };
      },
      (error: unknown) => {
        tr.settled = true;
        tr.outcome = { ok: false, error };
      },
    ),
  };
  return tr;
}

async function within(tr: Tracked, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`redis did not answer ${what} within ${ms} ms (the embedded store had)`)), ms);
  });
  try {
    await Promise.race([tr.promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Fencing tokens as ranks per store and key, checking that every new one is above all before it. */
class TokenRanks {
  private readonly ranks = new Map<string, Map<number, number>>();
  private readonly highest = new Map<string, number>();

  rank(store: string, key: string, token: number): number {
    const id = `${store}/${key}`;
    let ranks = this.ranks.get(id);
    if (!ranks) this.ranks.set(id, (ranks = new Map()));
    const known = ranks.get(token);
    if (known !== undefined) return known;
    const highest = this.highest.get(id) ?? 0;
    if (!(token > highest)) throw new Error(`${store}: fencing token ${token} for ${key} is not above ${highest}`);
    this.highest.set(id, token);
    ranks.set(token, ranks.size);
    return ranks.size - 1;
  }
}

/** Drops times and replaces tokens by ranks, recursively: what must be equal across stores. */
function normalize(store: string, ranks: TokenRanks, key: string, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => normalize(store, ranks, key, v));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [field, v] of Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (field === 'expiresAtMs' || field === 'decidedAt' || field === 'ttlRemainingMs') continue;
    if (field === 'retryAfterMs') out[field] = typeof v === 'number' && v >= 1 && v <= LEASE_MS;
    else if (field === 'fencingToken') out[field] = ranks.rank(store, key, v as number);
    else out[field] = normalize(store, ranks, key, v);
  }
  return out;
}

function answerOf(store: string, ranks: TokenRanks, key: string, tr: Tracked): unknown {
  if (!tr.outcome) return 'pending';
  if (!tr.outcome.ok) {
    const err = tr.outcome.error as { code?: string; message?: string };
    return { error: err.code ?? err.message };
  }
  return normalize(store, ranks, key, tr.outcome.value);
}

interface Pending {
  readonly key: string;
  readonly kind: PermitKind;
  readonly ownerToken: string;
  readonly memory: Tracked;
  readonly redis: Tracked;
  readonly memoryLeave: AbortController;
  readonly redisLeave: AbortController;
}

const seen = new Map<string, number>();
const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);

let server: RedisServer;
let redisStores: RedisStore[];
let memory: MemoryStore;
const redisPermits = (i: number) => (redisStores[i] as RedisStore).permits;

beforeAll(async () => {
  server = await RedisServer.start();
  const open = () => openRedisStore(server, { keyPrefix: 'pdiff:', fenceGraceMs: 60_000, maxWaitersPerKey: MAX_WAITERS, commandTimeoutMs: 5_000 });
  redisStores = [await open(), await open()];
  memory = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, maxWaitersPerKey: MAX_WAITERS });
});
afterAll(async () => {
  await memory?.close();
  for (const store of redisStores ?? []) await store.close();
  await server?.stop();
});

async function runSequence(ops: readonly Op[]): Promise<void> {
  const run = randomUUID().slice(0, 8);
  const target = (i: number) => {
    const tg = TARGETS[i] as { kind: PermitKind; name: string };
    return { kind: tg.kind, key: `p${run}/${tg.name}` };
  };
  const ranks = new TokenRanks();
  const granted = new Map<string, string[]>();
  let pending: Pending[] = [];
  const log: string[] = [];

  const fail = (step: string, m: unknown, r: unknown): never => {
    throw new Error(`stores disagree at ${step}\n  memory: ${JSON.stringify(m)}\n  redis:  ${JSON.stringify(r)}\n  steps so far:\n    ${log.join('\n    ')}`);
  };
  const compare = (step: string, key: string, m: Tracked, r: Tracked) => {
    const a = answerOf('memory', ranks, key, m);
    const b = answerOf('redis', ranks, key, r);
    if (JSON.stringify(a) !== JSON.stringify(b)) fail(step, a, b);
    const what = step.includes('(waiter') ? 'waiter' : (step.split('"')[3] ?? step);
    count(`${what}: ${String(JSON.stringify(a)).replace(/"(fencingToken|ownerToken|holder)":("[^"]*"|\d+|null)/g, '"$1":…').slice(0, 120)}`);
    return a;
  };
  const noteGrant = (key: string, ownerToken: string, answer: unknown) => {
    if ((answer as { acquired?: boolean }).acquired === true) granted.set(key, [...(granted.get(key) ?? []), ownerToken]);
  };
  const tokenFor = (key: string, w: Who) => {
    const tokens = granted.get(key) ?? [];
    if (w === 'latest' && tokens.length > 0) return tokens[tokens.length - 1] as string;
    if (w === 'older' && tokens.length > 1) return tokens[tokens.length - 2] as string;
    return newOwnerToken();
  };

  const settleWaiters = async (step: string) => {
    await flush();
    for (const p of pending.filter((w) => w.memory.settled)) {
      await within(p.redis, DELIVERY_TIMEOUT_MS, `the waiter of ${p.key}`);
      noteGrant(p.key, p.ownerToken, compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.redis));
    }
    pending = pending.filter((w) => !w.memory.settled);
    for (const p of pending) if (p.redis.settled) fail(`${step} (waiter on ${p.key})`, 'pending', answerOf('redis', ranks, p.key, p.redis));
  };

  const sameWaiters = async (kind: PermitKind, key: string) => {
    const expected = (await memory.permits.inspectPermits(kind, key))?.waiters;
    let actual: number | undefined;
    await vi
      .waitFor(
        async () => {
          actual = (await redisPermits(0).inspectPermits(kind, key))?.waiters;
          if (actual !== expected) throw new Error('not yet');
        },
        { timeout: DELIVERY_TIMEOUT_MS, interval: 5 },
      )
      .catch(() => fail(`waiters on ${key}`, expected, actual));
  };

  const leave = async (step: string, p: Pending) => {
    const reason = new Error('caller left');
    p.memoryLeave.abort(reason);
    p.redisLeave.abort(reason);
    await within(p.memory, DELIVERY_TIMEOUT_MS, 'a caller that left');
    await within(p.redis, DELIVERY_TIMEOUT_MS, 'a caller that left');
    compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.redis);
  };

  const both = async (step: string, key: string, run: (store: PermitStore) => Promise<unknown>, instIndex: number) => {
    const m = track(run(memory.permits));
    const r = track(run(redisPermits(instIndex)));
    await Promise.all([m.promise, r.promise]);
    return compare(step, key, m, r);
  };

  try {
    for (const [i, op] of ops.entries()) {
      const step = `#${i} ${JSON.stringify(op)}`;
      log.push(step);
      switch (op.op) {
        case 'acquire': {
          const { kind, key } = target(op.t);
          const ownerToken = newOwnerToken();
          const input = { kind, key, ownerToken, ttlMs: LEASE_MS, holder: HOLDERS[op.holder] ?? null, ...call({ kind }, op.shape) };
          if (op.wait !== 'long') {
            const waitMs = op.wait === 'short' ? SHORT_WAIT_MS : 0;
            noteGrant(key, ownerToken, await both(step, key, (s) => s.acquirePermit({ ...input, waitMs }), op.inst));
            break;
          }
          const memoryLeave = new AbortController();
          const redisLeave = new AbortController();
          const m = track(memory.permits.acquirePermit({ ...input, waitMs: LONG_WAIT_MS, signal: memoryLeave.signal }));
          const r = track(redisPermits(op.inst).acquirePermit({ ...input, waitMs: LONG_WAIT_MS, signal: redisLeave.signal }));
          pending.push({ key, kind, ownerToken, memory: m, redis: r, memoryLeave, redisLeave });
          await settleWaiters(step);
          if (!m.settled) await sameWaiters(kind, key);
          break;
        }
        case 'acquireAndExpire': {
          const { kind, key } = target(op.t);
          const ownerToken = newOwnerToken();
          const input = { kind, key, ownerToken, ttlMs: SHORT_LEASE_MS, holder: null, ...call({ kind }, op.shape) };
          noteGrant(key, ownerToken, await both(step, key, (s) => s.acquirePermit(input), op.inst));
          await sleep(PAST_SHORT_LEASE_MS);
          break;
        }
        case 'renew': {
          const { kind, key } = target(op.t);
          const token = tokenFor(key, op.who);
          await both(step, key, (s) => s.renewPermit(kind, key, token, LEASE_MS), op.inst);
          break;
        }
        case 'release': {
          const { kind, key } = target(op.t);
          const token = tokenFor(key, op.who);
          await both(step, key, (s) => s.releasePermit(kind, key, token), op.inst);
          break;
        }
        case 'inspect': {
          const { kind, key } = target(op.t);
          await both(step, key, (s) => s.inspectPermits(kind, key), op.inst);
          break;
        }
        case 'forceRelease': {
          const { kind, key } = target(op.t);
          await both(step, key, async (s) => (await s.forceReleasePermits(kind, key)).sort((a, b) => a.fencingToken - b.fencingToken), op.inst);
          break;
        }
        case 'list': {
          for (const kind of ['semaphore', 'rwlock'] as const) {
            const listAll = async (s: PermitStore) => {
              const found = new Map<string, unknown>();
              let cursor: string | undefined;
              for (let page = 0; page < 1000; page++) {
                const result = await s.listPermits(kind, { prefix: `p${run}/`, limit: 1, cursor });
                for (const entry of result.entries) found.set(entry.key, entry.state.holders.length);
                if (result.nextCursor === null) break;
                cursor = result.nextCursor;
              }
              return [...found].sort();
            };
            const [a, b] = await Promise.all([listAll(memory.permits), listAll(redisPermits(op.inst))]);
            if (JSON.stringify(a) !== JSON.stringify(b)) fail(step, a, b);
            count(`list ${kind}: ${a.length} keys`);
          }
          break;
        }
        case 'leave': {
          const p = pending[op.pick % Math.max(1, pending.length)];
          if (!p) break;
          await leave(step, p);
          pending = pending.filter((w) => w !== p);
          await settleWaiters(step);
          await sameWaiters(p.kind, p.key);
          break;
        }
      }
      await settleWaiters(step);
    }
    // Whoever still waits leaves, one at a time: a waiter leaving from the head may let the next in.
    while (pending.length > 0) {
      const p = pending[0] as Pending;
      await leave('end', p);
      pending = pending.filter((w) => w !== p);
      await settleWaiters('end');
    }
  } finally {
    for (const p of pending) {
      p.memoryLeave.abort(new Error('sequence over'));
      p.redisLeave.abort(new Error('sequence over'));
    }
  }
}

describe('differential: embedded store vs Redis, semaphores and read/write locks', () => {
  it(`agree on ${RUNS} random operation sequences (seed ${SEED})`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40, size: 'max' }), (ops) => runSequence(ops)),
      { numRuns: RUNS, seed: SEED, path: PATH, endOnFailure: false },
    );
    console.log(`differential (permits): ${RUNS} sequences, seed ${SEED}, ${((performance.now() - started) / 1000).toFixed(1)} s`);
    console.log([...seen].sort().map(([what, n]) => `  ${String(n).padStart(6)}  ${what}`).join('\n'));
    expect(true).toBe(true);
  }, 600_000);
});
