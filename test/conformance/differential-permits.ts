import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { describe } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { PermitKind } from '../../src/domain/permit-values.js';
import type { PermitStore } from '../helpers/store-words.js';
import { MAX_READERS } from '../../src/domain/rwlocks.js';
import {
  agreeOnSequences,
  Coverage,
  inst,
  LEASE_MS,
  LONG_WAIT_MS,
  PAST_SHORT_LEASE_MS,
  Sequence,
  SHORT_LEASE_MS,
  SHORT_WAIT_MS,
  track,
  useStores,
  who,
  type Backend,
  type Pending,
  type TokenRanks,
  type Who,
} from './differential-harness.js';

/**
 * The differential test (differential-locks.ts) for semaphores and read/write locks: random sequences of
 * permit operations run against the embedded store and against Redis or etcd (two store instances, as two
 * keyholder processes), every answer compared: outcomes and refusal reasons, live capacities, the
 * order of fencing tokens per key, holders and their weights, waiter counts, evicted leases, listings.
 * Raw token values and times differ by design and are not compared.
 *
 *   DIFF_RUNS=2000 DIFF_SEED=42 npx vitest run test/conformance/differential-permits.test.ts
 *
 * runs more sequences (15 with a fixed seed by default) or another seed; DIFF_SEED + DIFF_PATH replay a
 * failure. The stores, a sequence's bookkeeping and the property are in differential-harness.ts.
 */
const HOLDERS = ['a', null, 'b|c'] as const;
/** Semaphore limits callers ask for: mostly the same, sometimes another (a limit mismatch). */
const LIMITS = [2, 2, 2, 1] as const;

/** Which key an operation is on: two semaphores and a read/write lock. */
const TARGETS: ReadonlyArray<{ kind: PermitKind; name: string }> = [
  { kind: 'semaphore', name: 's0' },
  { kind: 'semaphore', name: 's1' },
  { kind: 'rwlock', name: 'r0' },
];

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
const shape = fc.nat(3);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      t,
      shape,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('none' as const),
      inst,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      t,
      shape,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('long' as const),
      inst,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      t,
      shape,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('short' as const),
      inst,
    }),
  },
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

interface PermitPending extends Pending {
  readonly kind: PermitKind;
}

/**
 * The property over one compared backend (Redis, or etcd); `runs` sequences unless DIFF_RUNS says
 * otherwise. differential-permits.test.ts and differential-permits-etcd.test.ts call it.
 */
export function describePermitDifferential(backend: Backend, runs: number): void {
  const coverage = new Coverage();
  const stores = useStores(`pdiff-${backend}:`, backend);
  const otherPermits = (i: number) => stores.other(i).permits;

  async function runSequence(ops: readonly Op[]): Promise<void> {
    const run = randomUUID().slice(0, 8);
    const target = (i: number) => {
      const tg = TARGETS[i] as { kind: PermitKind; name: string };
      return { kind: tg.kind, key: `p${run}/${tg.name}` };
    };
    const seq = new Sequence<PermitPending>({
      backend,
      normalize,
      coverage,
      varyingFields: ['fencingToken', 'ownerToken', 'holder'],
      labelLength: 120,
    });
    const both = (step: string, key: string, call: (store: PermitStore) => Promise<unknown>, instIndex: number) =>
      seq.both<PermitStore>(step, key, [stores.memory.permits, otherPermits(instIndex)], call);
    const sameWaiters = (kind: PermitKind, key: string) =>
      seq.sameWaiters(
        key,
        async (s) => (await (s === 'memory' ? stores.memory.permits : otherPermits(0)).inspectPermits(kind, key))?.waiters,
      );

    await seq.play(
      ops,
      async (op, step) => {
        switch (op.op) {
          case 'acquire': {
            const { kind, key } = target(op.t);
            const ownerToken = newOwnerToken();
            const input = { kind, id: key, ownerToken, ttlMs: LEASE_MS, holder: HOLDERS[op.holder] ?? null, ...call({ kind }, op.shape) };
            if (op.wait !== 'long') {
              const waitMs = op.wait === 'short' ? SHORT_WAIT_MS : 0;
              seq.noteGrant(key, ownerToken, await both(step, key, (s) => s.acquirePermit({ ...input, waitMs }), op.inst));
              break;
            }
            const memoryLeave = new AbortController();
            const otherLeave = new AbortController();
            const m = track(stores.memory.permits.acquirePermit({ ...input, waitMs: LONG_WAIT_MS, signal: memoryLeave.signal }));
            const r = track(otherPermits(op.inst).acquirePermit({ ...input, waitMs: LONG_WAIT_MS, signal: otherLeave.signal }));
            seq.pending.push({ key, kind, ownerToken, memory: m, other: r, memoryLeave, otherLeave });
            await seq.settleWaiters(step);
            if (!m.settled) await sameWaiters(kind, key);
            break;
          }
          case 'acquireAndExpire': {
            const { kind, key } = target(op.t);
            const ownerToken = newOwnerToken();
            const input = { kind, id: key, ownerToken, ttlMs: SHORT_LEASE_MS, holder: null, ...call({ kind }, op.shape) };
            seq.noteGrant(key, ownerToken, await both(step, key, (s) => s.acquirePermit(input), op.inst));
            await sleep(PAST_SHORT_LEASE_MS);
            break;
          }
          case 'renew': {
            const { kind, key } = target(op.t);
            const token = seq.tokenFor(key, op.who);
            await both(step, key, (s) => s.renewPermit(kind, key, token, LEASE_MS), op.inst);
            break;
          }
          case 'release': {
            const { kind, key } = target(op.t);
            const token = seq.tokenFor(key, op.who);
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
            await both(
              step,
              key,
              async (s) => (await s.forceReleasePermits(kind, key)).sort((a, b) => a.fencingToken - b.fencingToken),
              op.inst,
            );
            break;
          }
          case 'list': {
            for (const kind of ['semaphore', 'rwlock'] as const) {
              const listAll = async (s: PermitStore) => {
                const found = new Map<string, unknown>();
                let cursor: string | undefined;
                for (let page = 0; page < 1000; page++) {
                  const result = await s.listPermits(kind, { prefix: `p${run}/`, limit: 1, cursor });
                  for (const entry of result.entries) found.set(entry.id, entry.state.holders.length);
                  if (result.nextCursor === null) break;
                  cursor = result.nextCursor;
                }
                return [...found].sort();
              };
              const [a, b] = await Promise.all([listAll(stores.memory.permits), listAll(otherPermits(op.inst))]);
              if (JSON.stringify(a) !== JSON.stringify(b)) seq.fail(step, a, b);
              coverage.count(`list ${kind}: ${a.length} keys`);
            }
            break;
          }
          case 'leave': {
            const p = await seq.leaveOne(step, op.pick);
            if (!p) break;
            await seq.settleWaiters(step);
            await sameWaiters(p.kind, p.key);
            break;
          }
        }
      },
      // Whoever still waits leaves, one at a time: a waiter leaving from the head may let the next in.
      async () => {
        while (await seq.leaveOne('end', 0)) await seq.settleWaiters('end');
      },
    );
  }

  describe(`differential: embedded store vs ${backend}, semaphores and read/write locks`, () => {
    agreeOnSequences(`differential (permits, ${backend})`, { runs, seed: 20_261_201 }, opArb, runSequence, coverage);
  });
}
