import { setImmediate as flush } from 'node:timers/promises';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { type LockStore, withWords, type Worded } from '../helpers/store-words.js';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually, openRedisStore } from '../helpers/redis-store.js';

/**
 * What the differential tests (differential-locks.ts for locks, differential-permits.ts for
 * semaphores and read/write locks) share: the stores side by side, a promise looked at without awaiting
 * it, fencing tokens as ranks, and one sequence's bookkeeping (grants, waiters, comparing answers).
 * Each test keeps its own operations, generator and normalisation of answers.
 *
 * Both read the same knobs: DIFF_RUNS (how many sequences), DIFF_SEED (another seed) and DIFF_PATH
 * (with DIFF_SEED, replays the shrunk sequence a failure printed).
 */

export const LEASE_MS = 30_000;
export const SHORT_WAIT_MS = 15;
/** A lease meant to run out: the sequence sleeps past its end before going on, so it has ended in both stores. */
export const SHORT_LEASE_MS = 10;
export const PAST_SHORT_LEASE_MS = 25;
export const LONG_WAIT_MS = 20_000;
export const MAX_WAITERS = 3;
/** How long the compared store may take to deliver what the embedded store has already answered (a hand-over, a cancel). */
const DELIVERY_TIMEOUT_MS = 5_000;

export type Who = 'latest' | 'older' | 'stranger';
/** Which owner token a renew or release uses: the latest grant's, the one before, or one never granted. */
export const who = fc.constantFrom<Who>('latest', 'latest', 'older', 'stranger');
/** Which of the two instances of the compared store an operation goes through. */
export const inst = fc.nat(1);

/** A promise whose outcome can be looked at without awaiting it. */
export interface Tracked {
  settled: boolean;
  outcome?: { ok: true; value: unknown } | { ok: false; error: unknown };
  readonly promise: Promise<void>;
}
export function track(promise: Promise<unknown>): Tracked {
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
    timer = setTimeout(() => reject(new Error(`the compared store did not answer ${what} within ${ms} ms (the embedded store had)`)), ms);
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
export class TokenRanks {
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

/** A store's answer as it is compared: the test's normalisation of a value; an error by its code. */
export type NormalizeValue = (store: string, ranks: TokenRanks, key: string, value: unknown, setKeys: readonly string[]) => unknown;

/** The store compared with the embedded one: Redis, or a 3-member etcd cluster. */
export type Backend = 'redis' | 'etcd';

/** A compared store, in the words over its port (with the permits' and lock sets' words). */
export type ComparedStore = LockStore;

/**
 * The embedded store and two instances of the compared store on one backend (as two keyholder
 * processes), for one file.
 */
export interface Stores {
  readonly memory: Worded<MemoryStore>;
  /** Which backend the embedded store is compared with (it names that side of a difference). */
  readonly backend: Backend;
  other(index: number): ComparedStore;
}

export function useStores(keyPrefix: string, backend: Backend = 'redis'): Stores {
  let stop: (() => Promise<void>) | undefined;
  let others: ComparedStore[] = [];
  let memory: Worded<MemoryStore> | undefined;
  beforeAll(async () => {
    if (backend === 'redis') {
      const server = await RedisServer.start();
      stop = () => server.stop();
      const open = () =>
        openRedisStore(server, { keyPrefix, fenceGraceMs: 60_000, maxWaitersPerKey: MAX_WAITERS, commandTimeoutMs: 5_000 });
      others = [withWords(await open()), withWords(await open())];
    } else {
      const cluster = await EtcdCluster.start(3);
      stop = () => cluster.stop();
      const open = async () => {
        const store = new EtcdStore({
          endpoints: cluster.endpoints,
          keyPrefix,
          commandTimeoutMs: 5_000,
          fenceGraceMs: 60_000,
          maxWaitersPerKey: MAX_WAITERS,
        });
        await eventually(() => store.ping(), 10_000);
        return withWords(store);
      };
      others = [await open(), await open()];
    }
    memory = withWords(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, maxWaitersPerKey: MAX_WAITERS }));
  }, 60_000);
  afterAll(async () => {
    await memory?.close();
    for (const store of others) await store.close();
    await stop?.();
  });
  return {
    get memory() {
      if (!memory) throw new Error('the stores are not open yet');
      return memory;
    },
    backend,
    other: (index) => others[index] as ComparedStore,
  };
}

/** A waiting acquire sent to both stores, not answered yet. */
export interface Pending {
  readonly key: string;
  readonly ownerToken: string;
  readonly memory: Tracked;
  /** The compared store's answer. */
  readonly other: Tracked;
  readonly memoryLeave: AbortController;
  readonly otherLeave: AbortController;
}

/** How often the interesting cases came up, printed with the runtime so a weakened generator shows. */
export class Coverage {
  private readonly seen = new Map<string, number>();

  count(what: string): void {
    this.seen.set(what, (this.seen.get(what) ?? 0) + 1);
  }

  toString(): string {
    return [...this.seen]
      .sort()
      .map(([what, n]) => `  ${String(n).padStart(6)}  ${what}`)
      .join('\n');
  }
}

export interface SequenceOptions {
  readonly normalize: NormalizeValue;
  readonly coverage: Coverage;
  /** Fields whose values are replaced by … in the coverage labels (they differ from run to run). */
  readonly varyingFields: readonly string[];
  /** Coverage labels are cut to this length. */
  readonly labelLength?: number;
}

/**
 * One sequence's bookkeeping: the steps so far (printed on a difference), the owner tokens granted per
 * key, the waiters not answered yet, and the comparison of every answer. Throws on the first difference.
 */
export class Sequence<P extends Pending = Pending> {
  readonly ranks = new TokenRanks();
  readonly log: string[] = [];
  pending: P[] = [];
  /** Owner tokens granted per key, in order (both stores grant the same callers). */
  private readonly granted = new Map<string, string[]>();
  private readonly varying: RegExp;

  constructor(private readonly options: SequenceOptions & { readonly backend: Backend }) {
    this.varying = new RegExp(`"(${options.varyingFields.join('|')})":("[^"]*"|\\d+|null)`, 'g');
  }

  answer(store: string, key: string, t: Tracked, setKeys: readonly string[] = []): unknown {
    if (!t.outcome) return 'pending';
    if (!t.outcome.ok) {
      const err = t.outcome.error as { code?: string; message?: string };
      return { error: err.code ?? err.message };
    }
    return this.options.normalize(store, this.ranks, key, t.outcome.value, setKeys);
  }

  fail(step: string, m: unknown, r: unknown): never {
    throw new Error(
      `stores disagree at ${step}\n  memory: ${JSON.stringify(m)}\n  ${this.options.backend}:  ${JSON.stringify(r)}\n  steps so far:\n    ${this.log.join('\n    ')}`,
    );
  }

  /** Both answers, normalised, must be equal; returns the embedded store's. */
  compare(step: string, key: string, m: Tracked, r: Tracked, setKeys: readonly string[] = []): unknown {
    const a = this.answer('memory', key, m, setKeys);
    const b = this.answer(this.options.backend, key, r, setKeys);
    if (JSON.stringify(a) !== JSON.stringify(b)) this.fail(step, a, b);
    const what = step.includes('(waiter') ? 'waiter' : (step.split('"')[3] ?? step);
    this.options.coverage.count(`${what}: ${String(JSON.stringify(a)).replace(this.varying, '"$1":…').slice(0, this.options.labelLength)}`);
    return a;
  }

  /** Runs `call` on both stores at once and compares the answers. */
  async both<S>(
    step: string,
    key: string,
    stores: readonly [S, S],
    call: (store: S) => Promise<unknown>,
    setKeys: readonly string[] = [],
  ): Promise<unknown> {
    const m = track(call(stores[0]));
    const r = track(call(stores[1]));
    await Promise.all([m.promise, r.promise]);
    return this.compare(step, key, m, r, setKeys);
  }

  noteGrant(key: string, ownerToken: string, answer: unknown): void {
    if ((answer as { acquired?: boolean }).acquired === true) this.granted.set(key, [...(this.granted.get(key) ?? []), ownerToken]);
  }

  tokenFor(key: string, w: Who): string {
    return pick(this.granted.get(key) ?? [], w);
  }

  /** Waiters the embedded store has answered in this step: the compared store must answer them alike, promptly. */
  async settleWaiters(step: string): Promise<void> {
    await flush();
    for (const p of this.pending.filter((w) => w.memory.settled)) {
      await within(p.other, DELIVERY_TIMEOUT_MS, `the waiter of ${p.key}`);
      this.noteGrant(p.key, p.ownerToken, this.compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.other));
    }
    this.pending = this.pending.filter((w) => !w.memory.settled);
    // The other way round: the compared store answered a waiter the embedded store still keeps waiting.
    for (const p of this.pending)
      if (p.other.settled) this.fail(`${step} (waiter on ${p.key})`, 'pending', this.answer(this.options.backend, p.key, p.other));
  }

  /** Both stores count the same live waiters on `key`; the compared store may still be cancelling one that left. */
  async sameWaiters(key: string, waiters: (store: 'memory' | 'other') => Promise<number | undefined>): Promise<void> {
    const expected = await waiters('memory');
    let actual: number | undefined;
    await vi
      .waitFor(
        async () => {
          actual = await waiters('other');
          if (actual !== expected) throw new Error('not yet');
        },
        { timeout: DELIVERY_TIMEOUT_MS, interval: 5 },
      )
      .catch(() => this.fail(`waiters on ${key}`, expected, actual));
  }

  /** The caller of a waiting acquire leaves: both stores must answer it alike (and promptly). */
  async leave(step: string, p: P): Promise<void> {
    const reason = new Error('caller left');
    p.memoryLeave.abort(reason);
    p.otherLeave.abort(reason);
    await within(p.memory, DELIVERY_TIMEOUT_MS, 'a caller that left');
    await within(p.other, DELIVERY_TIMEOUT_MS, 'a caller that left');
    this.compare(`${step} (waiter on ${p.key})`, p.key, p.memory, p.other);
  }

  /** The caller of the waiting acquire `pick` names (modulo how many wait) leaves; returns it, if anyone waited. */
  async leaveOne(step: string, pick: number): Promise<P | undefined> {
    const p = this.pending[pick % Math.max(1, this.pending.length)];
    if (!p) return undefined;
    await this.leave(step, p);
    this.pending = this.pending.filter((w) => w !== p);
    return p;
  }

  /**
   * Applies each operation in turn (logged, then the waiters it answered compared), then `end`.
   * Whatever still waits when the sequence ends or fails is let go in both stores.
   */
  async play<Op>(ops: readonly Op[], apply: (op: Op, step: string) => Promise<void>, end: () => Promise<void>): Promise<void> {
    try {
      for (const [i, op] of ops.entries()) {
        const step = `#${i} ${JSON.stringify(op)}`;
        this.log.push(step);
        await apply(op, step);
        await this.settleWaiters(step);
      }
      await end();
    } finally {
      for (const p of this.pending) {
        p.memoryLeave.abort(new Error('sequence over'));
        p.otherLeave.abort(new Error('sequence over'));
      }
    }
  }
}

/** The owner token `w` names among `tokens` (granted in order), or a fresh one. */
export function pick(tokens: readonly string[], w: Who): string {
  if (w === 'latest' && tokens.length > 0) return tokens[tokens.length - 1] as string;
  if (w === 'older' && tokens.length > 1) return tokens[tokens.length - 2] as string;
  return newOwnerToken();
}

/**
 * The property: `runs` random sequences of up to 40 operations from `opArb` (DIFF_RUNS, DIFF_SEED and
 * DIFF_PATH override the fixed count and seed), each run by `runSequence` against both stores.
 */
export function agreeOnSequences<Op>(
  label: string,
  defaults: { runs: number; seed: number },
  opArb: fc.Arbitrary<Op>,
  runSequence: (ops: readonly Op[]) => Promise<void>,
  coverage: Coverage,
): void {
  const runs = Number(process.env.DIFF_RUNS ?? defaults.runs);
  const seed = Number(process.env.DIFF_SEED ?? defaults.seed);
  const path = process.env.DIFF_PATH;
  it(`agree on ${runs} random operation sequences (seed ${seed})`, async () => {
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40, size: 'max' }), (ops) => runSequence(ops)),
      { numRuns: runs, seed, path, endOnFailure: false },
    );
    console.log(`${label}: ${runs} sequences, seed ${seed}, ${((performance.now() - started) / 1000).toFixed(1)} s`);
    console.log(coverage.toString());
    expect(true).toBe(true);
  }, 600_000);
}
