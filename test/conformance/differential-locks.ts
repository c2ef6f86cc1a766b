import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { describe } from 'vitest';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import type { LockStore } from '../helpers/store-words.js';
import {
  agreeOnSequences,
  Coverage,
  inst,
  LEASE_MS,
  LONG_WAIT_MS,
  PAST_SHORT_LEASE_MS,
  pick,
  Sequence,
  SHORT_LEASE_MS,
  SHORT_WAIT_MS,
  track,
  useStores,
  who,
  type Backend,
  type TokenRanks,
  type Who,
} from './differential-harness.js';

/**
 * Two stores, one behaviour: random sequences of lock operations run against the embedded store and
 * against Redis or etcd (two store instances on one backend, as two keyholder processes), and every answer is
 * compared: outcome codes, the order of fencing tokens per key, holders, waiter counts, evicted owner
 * tokens, listings, quota slots. Raw token values and times differ by design and are not compared.
 *
 * Leases are long (30 s), so nothing expires inside a sequence unless an operation says so (a 10 ms
 * lease, then a pause past its end), and every answer is decided by the operations alone. Waits are
 * either short (they run out, awaited in place) or long (they stay queued until a release or force
 * release hands the lock over, or the caller leaves).
 *
 *   DIFF_RUNS=5000 DIFF_SEED=42 npx vitest run test/conformance/differential.test.ts
 *
 * runs more sequences (200 with a fixed seed by default) or another seed; a failure prints the seed,
 * the path and the shrunk sequence to replay (DIFF_SEED + DIFF_PATH). The stores, the bookkeeping of a
 * sequence and the property itself are in differential-harness.ts, shared with the permit test.
 */
const KEYS = 2;
const MAX_SLOTS = 2;
const HOLDERS = ['a', 'b', null, ''] as const;

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
  | { op: 'reserveQuotaSlot'; slot: number; inst: number }
  | { op: 'freeQuotaSlot'; slot: number; inst: number }
  | { op: 'inspectIndexed'; key: number; inst: number }
  | { op: 'setAcquire'; holder: number; inst: number }
  | { op: 'setRenew'; who: Who; inst: number }
  | { op: 'setRelease'; who: Who; inst: number };

const key = fc.nat(KEYS - 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      key,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('none' as const),
      inst,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      key,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('long' as const),
      inst,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('acquire' as const),
      key,
      holder: fc.nat(HOLDERS.length - 1),
      wait: fc.constant('short' as const),
      inst,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquireAndExpire' as const), key, holder: fc.nat(HOLDERS.length - 1), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('acquireGone' as const), key, wait: fc.boolean(), inst }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('renew' as const), key, who, inst }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('release' as const), key, who, inst }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('inspect' as const), key, inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('forceRelease' as const), key, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const), inst }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('leave' as const), pick: fc.nat(7) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reserveQuotaSlot' as const), slot: fc.nat(3), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('freeQuotaSlot' as const), slot: fc.nat(3), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('inspectIndexed' as const), key, inst }) },
  // A lock set of both keys (all or none, one owner token for the two).
  { weight: 2, arbitrary: fc.record({ op: fc.constant('setAcquire' as const), holder: fc.nat(HOLDERS.length - 1), inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setRenew' as const), who, inst }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('setRelease' as const), who, inst }) },
);

/** An answer with tokens replaced by ranks and times dropped: what must be equal across stores. */
function normalize(store: string, ranks: TokenRanks, key: string, value: unknown, setKeys: readonly string[]): unknown {
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  // In field order: stores build their answers in different orders, which is no difference.
  for (const [field, v] of Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (field === 'expiresAtMs' || field === 'decidedAt' || field === 'ttlRemainingMs') continue;
    // A time: only that it is a sane one is the same in both stores.
    // (A quota refusal on Redis says when the earliest counted second ends: up to a second past a lease.)
    if (field === 'retryAfterMs') out[field] = typeof v === 'number' && v >= 1 && v <= LEASE_MS + 1_000;
    else if (field === 'fencingToken') out[field] = ranks.rank(store, key, v as number);
    // A lock set's tokens, one per key (in the set's order); a free key's last token (0: none remembered).
    else if (field === 'fencingTokens') out[field] = (v as number[]).map((t, i) => ranks.rank(store, setKeys[i] as string, t));
    else if (field === 'lastFencingToken') out[field] = v === 0 ? 0 : ranks.rank(store, key, v as number);
    else if (field === 'state') out[field] = normalize(store, ranks, key, v, []);
    else out[field] = v;
  }
  return out;
}

/**
 * The property over one compared backend (Redis, or etcd); `runs` sequences unless DIFF_RUNS says
 * otherwise. differential.test.ts and differential-etcd.test.ts call it.
 */
export function describeLockDifferential(backend: Backend, runs: number): void {
  const coverage = new Coverage();
  const stores = useStores(`diff-${backend}:`, backend);

  /** Runs one sequence against both stores, comparing every answer; throws on the first difference. */
  async function runSequence(ops: readonly Op[]): Promise<void> {
    const run = randomUUID().slice(0, 8);
    const keyName = (k: number) => `d${run}/k${k}`;
    const ns = `d${run}`;
    const seq = new Sequence({ backend, normalize, coverage, varyingFields: ['fencingToken', 'evictedOwnerToken', 'holder'] });
    const { ranks } = seq;
    const both = (
      step: string,
      k: string,
      call: (store: LockStore) => Promise<unknown>,
      instIndex: number,
      setKeys: readonly string[] = [],
    ) => seq.both<LockStore>(step, k, [stores.memory, stores.other(instIndex)], call, setKeys);
    const sameWaiters = (k: string) =>
      seq.sameWaiters(k, async (s) => (await (s === 'memory' ? stores.memory : stores.other(0)).inspect(k))?.waiters);
    const setKeys = [keyName(0), keyName(1)];
    /** Lock-set owner tokens granted, in order. */
    const sets: string[] = [];
    const setToken = (w: Who) => pick(sets, w);

    await seq.play(
      ops,
      async (op, step) => {
        switch (op.op) {
          case 'acquire': {
            const k = keyName(op.key);
            const ownerToken = newOwnerToken();
            const holder = HOLDERS[op.holder] ?? null;
            if (op.wait !== 'long') {
              const waitMs = op.wait === 'short' ? SHORT_WAIT_MS : 0;
              seq.noteGrant(
                k,
                ownerToken,
                await both(step, k, (s) => s.acquire({ id: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs }), op.inst),
              );
              break;
            }
            const memoryLeave = new AbortController();
            const otherLeave = new AbortController();
            const m = track(
              stores.memory.acquire({ id: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs: LONG_WAIT_MS, signal: memoryLeave.signal }),
            );
            const r = track(
              stores
                .other(op.inst)
                .acquire({ id: k, ownerToken, ttlMs: LEASE_MS, holder, waitMs: LONG_WAIT_MS, signal: otherLeave.signal }),
            );
            seq.pending.push({ key: k, ownerToken, memory: m, other: r, memoryLeave, otherLeave });
            // Granted or refused at once, or queued: either way both stores must have taken it in before the next step.
            await seq.settleWaiters(step);
            if (!m.settled) await sameWaiters(k);
            break;
          }
          case 'acquireAndExpire': {
            const k = keyName(op.key);
            const ownerToken = newOwnerToken();
            const holder = HOLDERS[op.holder] ?? null;
            seq.noteGrant(
              k,
              ownerToken,
              await both(step, k, (s) => s.acquire({ id: k, ownerToken, ttlMs: SHORT_LEASE_MS, holder }), op.inst),
            );
            await sleep(PAST_SHORT_LEASE_MS);
            break;
          }
          case 'acquireGone': {
            // The caller left before the store got to its request (its signal is already aborted).
            const k = keyName(op.key);
            const ownerToken = newOwnerToken();
            const gone = AbortSignal.abort(new Error('caller left'));
            const waitMs = op.wait ? LONG_WAIT_MS : 0;
            seq.noteGrant(
              k,
              ownerToken,
              await both(step, k, (s) => s.acquire({ id: k, ownerToken, ttlMs: LEASE_MS, holder: null, waitMs, signal: gone }), op.inst),
            );
            break;
          }
          case 'renew': {
            const k = keyName(op.key);
            const token = seq.tokenFor(k, op.who);
            await both(step, k, (s) => s.renew(k, token, LEASE_MS), op.inst);
            break;
          }
          case 'release': {
            const k = keyName(op.key);
            const token = seq.tokenFor(k, op.who);
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
                for (const lock of result.leases) {
                  const { id, holder, fencingToken, waiters } = lock;
                  seen.set(id, { key: id, holder, fencingToken, waiters });
                }
                if (result.nextCursor === null) break;
                cursor = result.nextCursor;
              }
              return [...seen.keys()].sort().map((id) => seen.get(id));
            };
            const [m, r] = await Promise.all([listAll(stores.memory), listAll(stores.other(op.inst))]);
            const norm = (store: string, locks: unknown[]) =>
              locks.map((l) => {
                const lock = l as { key: string; fencingToken: number };
                return { ...lock, fencingToken: ranks.rank(store, lock.key, lock.fencingToken) };
              });
            const a = norm('memory', m);
            const b = norm(backend, r);
            if (JSON.stringify(a) !== JSON.stringify(b)) seq.fail(step, a, b);
            coverage.count(`list: ${a.length} locks`);
            break;
          }
          case 'leave': {
            const p = await seq.leaveOne(step, op.pick);
            if (p) await sameWaiters(p.key);
            break;
          }
          case 'reserveQuotaSlot': {
            await both(step, ns, (s) => s.reserveQuotaSlot(ns, `s${op.slot}`, LEASE_MS, MAX_SLOTS), op.inst);
            break;
          }
          case 'freeQuotaSlot': {
            await both(step, ns, (s) => s.freeQuotaSlot(ns, `s${op.slot}`, MAX_SLOTS), op.inst);
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
            const answer = (await both(
              step,
              setKeys[0] as string,
              (s) => s.lockSets.acquireSet({ ids: setKeys, ownerToken, ttlMs: LEASE_MS, holder }),
              op.inst,
              setKeys,
            )) as { acquired?: boolean };
            if (answer.acquired === true) {
              sets.push(ownerToken);
              // Each key of the set is held by the set's owner token: plain renew and release see it as such.
              for (const k of setKeys) seq.noteGrant(k, ownerToken, answer);
            }
            break;
          }
          case 'setRenew': {
            const token = setToken(op.who);
            await both(step, setKeys[0] as string, (s) => s.lockSets.renewSet(setKeys, token, LEASE_MS), op.inst, setKeys);
            break;
          }
          case 'setRelease': {
            const token = setToken(op.who);
            await both(step, setKeys[0] as string, (s) => s.lockSets.releaseSet(setKeys, token), op.inst);
            break;
          }
        }
      },
      // Whoever still waits leaves; both stores must still have them waiting (not granted behind our back).
      async () => {
        for (const p of seq.pending) await seq.leave('end', p);
      },
    );
  }

  describe(`differential: embedded store vs ${backend}`, () => {
    agreeOnSequences(`differential (${backend})`, { runs, seed: 20_260_101 }, opArb, runSequence, coverage);
  });
}
