import { randomUUID } from 'node:crypto';
import { setImmediate as flush, setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import type { LockStore } from '../../src/domain/lock-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { openRedisStore } from '../helpers/redis-store.js';

/**
 * Two stores, one behaviour: random sequences of lock operations run against the embedded store and
 * against Redis (two store instances on one Redis, as two keyholder processes), and every answer is
 * compared: outcome codes, the order of fencing tokens per key, holders, waiter counts, evicted owner
 * tokens, listings, quota slots. Raw token values and times differ by design and are not compared.
 *
 * Leases are long (30 s), so nothing expires inside a sequence unless an operation says so (a 10 ms
 * lease, then a pause past its end), and every answer is decided by the operations alone. Waits are either short (they run out, awaited in place) or long (they stay queued
 * until a release or force release hands the lock over, or the caller leaves).
 *
 *   DIFF_RUNS=5000 DIFF_SEED=42 npx vitest run test/conformance/differential.test.ts
 *
 * runs more sequences or another seed; a failure prints the seed, the path and the shrunk sequence to
 * replay (DIFF_SEED + DIFF_PATH).
 */
const RUNS = Number(process.env.DIFF_RUNS ?? 200);
const SEED = Number(process.env.DIFF_SEED ?? 20_260_101);
const PATH = process.env.DIFF_PATH;

const KEYS = 2;
const LEASE_MS = 30_000;
const SHORT_WAIT_MS = 15;
/** A lease meant to run out: the sequence sleeps past its end before going on, so it has ended in both stores. */
const SHORT_LEASE_MS = 10;
const PAST_SHORT_LEASE_MS = 25;
const LONG_WAIT_MS = 20_000;
const MAX_WAITERS = 3;
const MAX_SLOTS = 2;
/** How long Redis may take to deliver what the embedded store has already answered (a hand-over, a cancel). */
const DELIVERY_TIMEOUT_MS = 5_000;
const HOLDERS = ['a', 'b', null, ''] as const;

type Who = 'latest' | 'older' | 'stranger';
type Op =
  | { op: 'acquire'; key: number; holder: number; wait: 'none' | 'short' | 'long'; inst: number }
  | { op: 'acquireAndExpire'; key: number; holder: number; inst: number }
  | { op: 'acquireGone'; key: number; wait: boolean; inst: number }
  | { op: 'renew'; key: number; who: Who; inst: number }
  | { op: 'release'; key: number; who: Who; inst: number }
  | { op: 'inspect'; key: number; inst: number }
  | { op: 'forceRelease'; key: number; inst: number }
  | { op: 'list'; inst: number }
  | { op: 'leave'; pick: number }
  | { op: 'reserveSlot'; slot: number; inst: number }
  | { op: 'freeSlot'; slot: number; inst: number }
  | { op: 'inspectIndexed'; key: number; inst: number }
  | { op: 'setAcquire'; holder: number; inst: number }
  | { op: 'setRenew'; who: Who; inst: number }
  | { op: 'setRelease'; who: Who; inst: number };

const key = fc.nat(KEYS - 1);
const inst = fc.nat(1);
const who = fc.constantFrom<Who>('latest', 'latest', 'older', 'stranger');
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('acquire' as const), key, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('none' as const), inst }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('acquire' as const), key, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('long' as const), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquire' as const), key, holder: fc.nat(HOLDERS.length - 1), wait: fc.constant('short' as const), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquireAndExpire' as const), key, holder: fc.nat(HOLDERS.length - 1), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquireGone' as const), key, wait: fc.boolean(), inst }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('renew' as const), key, who, inst }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('release' as const), key, who, inst }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('inspect' as const), key, inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('forceRelease' as const), key, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const), inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('leave' as const), pick: fc.nat(7) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reserveSlot' as const), slot: fc.nat(3), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('freeSlot' as const), slot: fc.nat(3), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('inspectIndexed' as const), key, inst }) },
  // A lock set of both keys (all or none, one owner token for the two).
  { weight: 2, arbitrary: fc.record({ op: fc.constant('setAcquire' as const), holder: fc.nat(HOLDERS.length - 1), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setRenew' as const), who, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setRelease' as const), who, inst }) },
);

/** A promise whose outcome can be looked at without awaiting it. */
interface Tracked {
  settled: boolean;
  outcome?: { ok: true; value: unknown } | { ok: false; error: unknown };
  readonly promise: Promise<void>;
}
function track(promise: Promise<unknown>): Tracked {
  const t: Tracked = {
    settled: false,
    promise: promise.then(
      (value) => {
        t.settled = true;
        t.outcome = { ok: true, value };
      },
      (error: unknown) => {
        t.settled = true;
        t.outcome = { ok: false, error };
      },
    ),
  };
  return t;
}

/** Waits for `t` at most `ms`; a store that does not answer in time is a drift, not a hang. */
async function within(t: Tracked, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`redis did not answer ${what} within ${ms} ms (the embedded store had)`)), ms);
  });
  try {
    await Promise.race([t.promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Replaces each fencing token by its rank among the tokens this store has issued for the key, and
 * checks on the way that every token first seen is above all earlier ones (tokens only go up).
 */
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

/** An answer with tokens replaced by ranks and times dropped: what must be equal across stores. */
function normalize(store: string, ranks: TokenRanks, key: string, answer: Tracked['outcome'], setKeys: readonly string[] = []): unknown {
  if (!answer) return 'pending';
  if (!answer.ok) {
    const err = answer.error as { code?: string; message?: string };
    return { error: err.code ?? err.message };
  }
  const v = answer.value as Record<string, unknown> | boolean | null | undefined;
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(v)) {
    if (field === 'expiresAtMs' || field === 'decidedAt' || field === 'ttlRemainingMs') continue;
    // A time: only that it is a sane one is the same in both stores.
    if (field === 'retryAfterMs') out[field] = typeof value === 'number' && value >= 1 && value <= LEASE_MS;
    else if (field === 'fencingToken') out[field] = ranks.rank(store, key, value as number);
    // A lock set's tokens, one per key (in the set's order); a free key's last token (0: none remembered).
    else if (field === 'fencingTokens') out[field] = (value as number[]).map((t, i) => ranks.rank(store, setKeys[i] as string, t));
    else if (field === 'lastFencingToken') out[field] = value === 0 ? 0 : ranks.rank(store, key, value as number);
    else if (field === 'state') out[field] = normalize(store, ranks, key, { ok: true, value });
    else out[field] = value;
  }
  return out;
}

interface Pending {
  readonly key: string;
  readonly ownerToken: string;
  readonly memory: Tracked;
  readonly redis: Tracked;
  readonly memoryLeave: AbortController;
  readonly redisLeave: AbortController;
}

/** How often the interesting cases came up, printed with the runtime so a weakened generator shows. */
const seen = new Map<string, number>();
const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);

let server: RedisServer;
let redisStores: RedisStore[];
let memory: MemoryStore;

beforeAll(async () => {
  server = await RedisServer.start();
  const open = () => openRedisStore(server, { keyPrefix: 'diff:', fenceGraceMs: 60_000, maxWaitersPerKey: MAX_WAITERS, commandTimeoutMs: 5_000 });
  redisStores = [await open(), await open()];
  memory = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, maxWaitersPerKey: MAX_WAITERS });
});
afterAll(async () => {
  await memory?.close();
  for (const store of redisStores ?? []) await store.close();
  await server?.stop();
});

/** Runs one sequence against both stores, comparing every answer; throws on the first difference. */
async function runSequence(ops: readonly Op[]): Promise<void> {
  const run = randomUUID().slice(0, 8);
  const keyName = (k: number) => `d${run}/k${k}`;
  const ns = `d${run}`;
  const ranks = new TokenRanks();
  /** Owner tokens granted per key, in order (both stores grant the same callers). */
  const granted = new Map<string, string[]>();
  let pending: Pending[] = [];
  const log: string[] = [];

  const fail = (step: string, m: unknown, r: unknown): never => {
    throw new Error(`stores disagree at ${step}\n  memory: ${JSON.stringify(m)}\n  redis:  ${JSON.stringify(r)}\n  steps so far:\n    ${log.join('\n    ')}`);
  };
  const compare = (step: string, k: string, m: Tracked, r: Tracked, setKeys: readonly string[] = []) => {
    const a = normalize('memory', ranks, k, m.outcome, setKeys);
    const b = normalize('redis', ranks, k, r.outcome, setKeys);
    if (JSON.stringify(a) !== JSON.stringify(b)) fail(step, a, b);
    const what = step.includes('(waiter') ? 'waiter' : (step.split('"')[3] ?? step);
    count(`${what}: ${String(JSON.stringify(a)).replace(/"(fencingToken|evictedOwnerToken|holder)":("[^"]*"|\d+|null)/g, '"$1":…')}`);
    return a;
  };
  const noteGrant = (k: string, ownerToken: string, answer: unknown) => {
    if ((answer as { acquired?: boolean }).acquired === true) granted.set(k, [...(granted.get(k) ?? []), ownerToken]);
  };
  const tokenFor = (k: string, w: Who) => {
    const tokens = granted.get(k) ?? [];
    if (w === 'latest' && tokens.length > 0) return tokens[tokens.length - 1] as string;
    if (w === 'older' && tokens.length > 1) return tokens[tokens.length - 2] as string;
    return newOwnerToken();
  };

  /** Waiters the embedded store has answered in this step: Redis must answer them alike, promptly. */
  const settleWaiters = async (step: string) => {
    await flush();
    for (const p of pending.filter((w) => w.memory.settled)) {
      await within(p.redis, DELIVERY_TIMEOUT_MS, `the waiter of ${p.key}`);
      noteGrant(p.key, p.ownerToken, compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.redis));
    }
    pending = pending.filter((w) => !w.memory.settled);
    // The other way round: Redis answered a waiter the embedded store still keeps waiting.
    for (const p of pending) if (p.redis.settled) fail(`${step} (waiter on ${p.key})`, 'pending', normalize('redis', ranks, p.key, p.redis.outcome));
  };

  /** Both stores count the same live waiters on `k`; Redis may still be cancelling one that left. */
  const sameWaiters = async (k: string) => {
    const expected = (await memory.inspect(k))?.waiters;
    let actual: number | undefined;
    await vi
      .waitFor(
        async () => {
          actual = (await (redisStores[0] as RedisStore).inspect(k))?.waiters;
          if (actual !== expected) throw new Error('not yet');
        },
        { timeout: DELIVERY_TIMEOUT_MS, interval: 5 },
      )
      .catch(() => fail(`waiters on ${k}`, expected, actual));
  };

  /** The caller of a waiting acquire leaves: both stores must answer it alike (and promptly). */
  const leave = async (step: string, p: Pending) => {
    const reason = new Error('caller left');
    p.memoryLeave.abort(reason);
    p.redisLeave.abort(reason);
    await within(p.memory, DELIVERY_TIMEOUT_MS, 'a caller that left');
    await within(p.redis, DELIVERY_TIMEOUT_MS, 'a caller that left');
    compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.redis);
  };

  const both = async (step: string, k: string, call: (store: LockStore) => Promise<unknown>, instIndex: number, setKeys: readonly string[] = []) => {
    const m = track(call(memory));
    const r = track(call(redisStores[instIndex] as RedisStore));
    await Promise.all([m.promise, r.promise]);
    return compare(step, k, m, r, setKeys);
  };
  const setKeys = [keyName(0), keyName(1)];
  /** Lock-set owner tokens granted, in order. */
  const sets: string[] = [];
  const setToken = (w: Who) =>
    w === 'latest' && sets.length > 0 ? (sets[sets.length - 1] as string) : w === 'older' && sets.length > 1 ? (sets[sets.length - 2] as string) : newOwnerToken();

  try {
    for (const [i, op] of ops.entries()) {
      const step = `#${i} ${JSON.stringify(op)}`;
      log.push(step);
      switch (op.op) {
        case 'acquire': {
          const k = keyName(op.key);
          const ownerToken = newOwnerToken();
          const holder = HOLDERS[op.holder] ?? null;
          if (op.wait !== 'long') {
            const waitMs = op.wait === 'short' ? SHORT_WAIT_MS : 0;
            noteGrant(k, ownerToken, await both(step, k, (s) => s.acquire({ key: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs }), op.inst));
            break;
          }
          const memoryLeave = new AbortController();
          const redisLeave = new AbortController();
          const m = track(memory.acquire({ key: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs: LONG_WAIT_MS, signal: memoryLeave.signal }));
          const r = track(
            (redisStores[op.inst] as RedisStore).acquire({ key: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs: LONG_WAIT_MS, signal: redisLeave.signal }),
          );
          pending.push({ key: k, ownerToken, memory: m, redis: r, memoryLeave, redisLeave });
          // Granted or refused at once, or queued: either way both stores must have taken it in before the next step.
          await settleWaiters(step);
          if (!m.settled) await sameWaiters(k);
          break;
        }
        case 'acquireAndExpire': {
          const k = keyName(op.key);
          const ownerToken = newOwnerToken();
          const holder = HOLDERS[op.holder] ?? null;
          noteGrant(k, ownerToken, await both(step, k, (s) => s.acquire({ key: k, ownerToken, ttlMs: SHORT_LEASE_MS, holder }), op.inst));
          await sleep(PAST_SHORT_LEASE_MS);
          break;
        }
        case 'acquireGone': {
          // The caller left before the store got to its request (its signal is already aborted).
          const k = keyName(op.key);
          const ownerToken = newOwnerToken();
          const gone = AbortSignal.abort(new Error('caller left'));
          const waitMs = op.wait ? LONG_WAIT_MS : 0;
          noteGrant(k, ownerToken, await both(step, k, (s) => s.acquire({ key: k, ownerToken, ttlMs: LEASE_MS, holder: null, waitMs, signal: gone }), op.inst));
          break;
        }
        case 'renew': {
          const k = keyName(op.key);
          const token = tokenFor(k, op.who);
          await both(step, k, (s) => s.renew(k, token, LEASE_MS), op.inst);
          break;
        }
        case 'release': {
          const k = keyName(op.key);
          const token = tokenFor(k, op.who);
          await both(step, k, (s) => s.release(k, token), op.inst);
          break;
        }
        case 'inspect': {
          const k = keyName(op.key);
          await both(step, k, (s) => s.inspect(k), op.inst);
          break;
        }
        case 'forceRelease': {
          const k = keyName(op.key);
          await both(step, k, (s) => s.forceRelease(k), op.inst);
          break;
        }
        case 'list': {
          const listAll = async (s: LockStore) => {
            const seen = new Map<string, unknown>();
            let cursor: string | undefined;
            for (let page = 0; page < 1000; page++) {
              const result = await s.list({ prefix: `d${run}/`, limit: 2, cursor });
              for (const lock of result.locks) {
                const { key: id, holder, fencingToken, waiters } = lock;
                seen.set(id, { key: id, holder, fencingToken, waiters });
              }
              if (result.nextCursor === null) break;
              cursor = result.nextCursor;
            }
            return [...seen.keys()].sort().map((id) => seen.get(id));
          };
          const [m, r] = await Promise.all([listAll(memory), listAll(redisStores[op.inst] as RedisStore)]);
          const norm = (store: string, locks: unknown[]) =>
            locks.map((l) => {
              const lock = l as { key: string; fencingToken: number };
              return { ...lock, fencingToken: ranks.rank(store, lock.key, lock.fencingToken) };
            });
          const a = norm('memory', m);
          const b = norm('redis', r);
          if (JSON.stringify(a) !== JSON.stringify(b)) fail(step, a, b);
          count(`list: ${a.length} locks`);
          break;
        }
        case 'leave': {
          const p = pending[op.pick % Math.max(1, pending.length)];
          if (!p) break;
          await leave(step, p);
          pending = pending.filter((w) => w !== p);
          await sameWaiters(p.key);
          break;
        }
        case 'reserveSlot': {
          await both(step, ns, (s) => s.reserveSlot(ns, `s${op.slot}`, LEASE_MS, MAX_SLOTS), op.inst);
          break;
        }
        case 'freeSlot': {
          await both(step, ns, (s) => s.freeSlot(ns, `s${op.slot}`), op.inst);
          break;
        }
        case 'inspectIndexed': {
          const k = keyName(op.key);
          await both(step, k, (s) => s.inspectIndexed(k), op.inst);
          break;
        }
        case 'setAcquire': {
          const ownerToken = newOwnerToken();
          const holder = HOLDERS[op.holder] ?? null;
          const answer = (await both(step, setKeys[0] as string, (s) => (s.lockSets as NonNullable<LockStore['lockSets']>).acquireSet({ keys: setKeys, ownerToken, ttlMs: LEASE_MS, holder }), op.inst, setKeys)) as { acquired?: boolean };
          if (answer.acquired === true) {
            sets.push(ownerToken);
            // Each key of the set is held by the set's owner token: plain renew and release see it as such.
            for (const k of setKeys) noteGrant(k, ownerToken, answer);
          }
          break;
        }
        case 'setRenew': {
          const token = setToken(op.who);
          await both(step, setKeys[0] as string, (s) => (s.lockSets as NonNullable<LockStore['lockSets']>).renewSet(setKeys, token, LEASE_MS), op.inst, setKeys);
          break;
        }
        case 'setRelease': {
          const token = setToken(op.who);
          await both(step, setKeys[0] as string, (s) => (s.lockSets as NonNullable<LockStore['lockSets']>).releaseSet(setKeys, token), op.inst);
          break;
        }
      }
      await settleWaiters(step);
    }
    // Whoever still waits leaves; both stores must still have them waiting (not granted behind our back).
    for (const p of pending) await leave('end', p);
  } finally {
    for (const p of pending) {
      p.memoryLeave.abort(new Error('sequence over'));
      p.redisLeave.abort(new Error('sequence over'));
    }
  }
}

describe('differential: embedded store vs Redis', () => {
  it(`agree on ${RUNS} random operation sequences (seed ${SEED})`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40, size: 'max' }), (ops) => runSequence(ops)),
      { numRuns: RUNS, seed: SEED, path: PATH, endOnFailure: false },
    );
    console.log(`differential: ${RUNS} sequences, seed ${SEED}, ${((performance.now() - started) / 1000).toFixed(1)} s`);
    console.log([...seen].sort().map(([what, n]) => `  ${String(n).padStart(6)}  ${what}`).join('\n'));
    expect(true).toBe(true);
  }, 600_000);
});
