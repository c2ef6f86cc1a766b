import { describe, expect, it } from 'vitest';
import { checkHistory, DEFAULT_CHECK_OPTIONS, VIOLATION_KINDS, type ViolationKind } from './checker.js';
import type { FaultWindow, HistoryOp, LockOp, WriteOp } from './history.js';

/**
 * The checker's own tests: hand-made histories, each with one kind of violation, must be caught; a good
 * history must pass. Times are ms on the run clock; TTL is 1000 ms; the drift margin is the default.
 */
const TTL = 1000;
let nextId = 1;

function acquire(client: number, key: string, startMs: number, endMs: number, fencingToken: number, extra: Partial<LockOp> = {}): LockOp {
  const id = nextId++;
  return {
    type: 'lock',
    id,
    kind: 'acquire',
    client,
    key,
    instance: 0,
    startMs,
    endMs,
    outcome: 'ok',
    status: 200,
    grantId: id,
    ttlMs: TTL,
    fencingToken,
    ...extra,
  };
}

function follow(kind: 'renew' | 'release', grant: LockOp, startMs: number, endMs: number, outcome: LockOp['outcome'] = 'ok'): LockOp {
  return {
    type: 'lock',
    id: nextId++,
    kind,
    client: grant.client,
    key: grant.key,
    instance: grant.instance,
    startMs,
    endMs,
    outcome,
    status: outcome === 'ok' ? 200 : 409,
    grantId: grant.id,
    ttlMs: TTL,
  };
}

function write(grant: LockOp, atMs: number, accepted: boolean): WriteOp {
  return {
    type: 'write',
    id: nextId++,
    client: grant.client,
    key: grant.key,
    grantId: grant.id,
    fencingToken: grant.fencingToken as number,
    atMs,
    accepted,
  };
}

function onlyViolation(ops: HistoryOp[], kind: ViolationKind, faults: FaultWindow[] = []) {
  const report = checkHistory({ ops, faults });
  const others = VIOLATION_KINDS.filter((k) => k !== kind && report.counts[k] > 0);
  return { report, count: report.counts[kind], others };
}

/** A clean history: three holders one after another, each writing, one renewing. */
function goodHistory(): HistoryOp[] {
  const a = acquire(1, 'k', 0, 5, 100);
  const b = acquire(2, 'k', 400, 405, 200);
  const c = acquire(3, 'k', 900, 903, 300);
  return [
    a,
    write(a, 5, true),
    follow('renew', a, 100, 102),
    follow('release', a, 300, 302),
    b,
    write(b, 405, true),
    follow('release', b, 800, 801),
    // c's acquire overlaps b's release in time: fine, b stopped counting on the lock when it sent release.
    c,
    write(c, 903, true),
    // a stale write from a, long after, is rejected by the resource: not a violation.
    write(a, 950, false),
  ];
}

describe('history checker', () => {
  it('passes a good history', () => {
    const report = checkHistory({ ops: goodHistory(), faults: [] });
    expect(report.totalViolations).toBe(0);
    expect(report.grants).toHaveLength(3);
    expect(report.staleWritesRejected).toBe(1);
    expect(report.perKey.k?.writesAccepted).toBe(3);
  });

  it('does not count a grant after the previous lease surely ran out (no release) as an overlap', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const b = acquire(2, 'k', 1000, 1004, 200); // a started at 0 with TTL 1000: surely over by 1000 - drift
    expect(checkHistory({ ops: [a, b], faults: [] }).totalViolations).toBe(0);
  });

  it('catches overlapping surely-held windows (and the grant made during a lease)', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const b = acquire(2, 'k', 200, 204, 200); // a holds until ~975 and never released
    const { count, report } = onlyViolation([a, b], 'overlaps');
    expect(count).toBe(1);
    expect(report.violations.overlaps[0]).toMatchObject({ key: 'k', first: a.id, second: b.id });
    expect(report.counts.grantsDuringLease).toBe(1);
  });

  it('extends a window by a successful renew, and catches an overlap inside the extension', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const renew = follow('renew', a, 800, 802);
    const b = acquire(2, 'k', 1200, 1203, 200); // a's lease now runs at least to 1800
    const { count, others } = onlyViolation([a, renew, b], 'overlaps');
    expect(count).toBe(1);
    expect(others).toEqual(['grantsDuringLease']);
  });

  it('does not extend a window by a renew that failed', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const renew = follow('renew', a, 800, 802, 'conflict');
    const b = acquire(2, 'k', 1200, 1203, 200);
    expect(checkHistory({ ops: [a, renew, b], faults: [] }).totalViolations).toBe(0);
  });

  it('catches a grant made while a lower-token lease was surely held even when its own answer came late', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    // b's acquire ran wholly inside a's window, but its answer arrived after its own lease could have ended.
    const b = { ...acquire(2, 'k', 300, 900, 200), ttlMs: 100 };
    const { count } = onlyViolation([a, b], 'grantsDuringLease');
    expect(count).toBe(1);
  });

  it('catches a token reset (a later grant with a lower token)', () => {
    const a = acquire(1, 'k', 0, 5, 1_000_000);
    const relA = follow('release', a, 100, 101);
    const b = acquire(2, 'k', 200, 203, 7); // as if the counter had restarted from zero
    const { count, others } = onlyViolation([a, relA, b], 'tokenRegressions');
    expect(count).toBe(1);
    expect(others).toEqual([]);
  });

  it('does not call concurrent acquires (no real-time order) a regression', () => {
    const a = acquire(1, 'k', 0, 50, 200);
    const relA = follow('release', a, 60, 61);
    const b = acquire(2, 'k', 10, 70, 100); // b started before a ended: either order is allowed
    expect(checkHistory({ ops: [a, relA, b], faults: [] }).counts.tokenRegressions).toBe(0);
  });

  it('catches duplicate tokens', () => {
    const a = acquire(1, 'k', 0, 5, 500);
    const relA = follow('release', a, 100, 101);
    const b = acquire(2, 'k', 200, 203, 500);
    const { count, report } = onlyViolation([a, relA, b], 'duplicateTokens');
    expect(count).toBe(1);
    expect(report.violations.duplicateTokens[0]?.grants).toEqual([a.id, b.id]);
  });

  it('catches a stale write the resource accepted', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const b = acquire(2, 'k', 1100, 1104, 200);
    // a wakes from a pause after b was granted, and the resource lets its write through.
    const { count, report } = onlyViolation([a, write(a, 5, true), b, write(b, 1104, true), write(a, 1500, true)], 'staleWritesAccepted');
    expect(count).toBe(1);
    expect(report.violations.staleWritesAccepted[0]).toMatchObject({ fencingToken: 100, newerToken: 200 });
    expect(report.perKey.k?.writesAfterLeaseEnded).toBe(1);
  });

  it('does not count the same write as stale when it was rejected', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const b = acquire(2, 'k', 1100, 1104, 200);
    const report = checkHistory({ ops: [a, b, write(b, 1104, true), write(a, 1500, false)], faults: [] });
    expect(report.totalViolations).toBe(0);
    expect(report.staleWritesRejected).toBe(1);
  });

  it('catches a grant whose lease had already ended when the answer arrived', () => {
    const a = acquire(1, 'k', 0, 2500, 100, { expiresAtMs: 1_000_000, receivedWallMs: 1_001_500 });
    const { count, others } = onlyViolation([a], 'expiredOnArrival');
    expect(count).toBe(1);
    expect(others).toEqual([]);
  });

  it("excuses a grant read late only by the recorder's own stalls between the lease's end and the reading", () => {
    // Read 518 ms after its lease ended, with 500 ms of measured lag allowed (the cap, half a 1 s lease).
    const late = acquire(1, 'k', 0, 2500, 100, { expiresAtMs: 1_000_000, receivedWallMs: 1_000_518 });
    const options = { ...DEFAULT_CHECK_OPTIONS, observerLagMs: 500 };
    expect(checkHistory({ ops: [late], faults: [] }, options).violations.expiredOnArrival).toHaveLength(1);
    // The recorder stood still from 100 ms before the end to 400 ms after: 400 ms of it fall in between.
    const during = [{ fromWallMs: 999_900, toWallMs: 1_000_400 }];
    expect(checkHistory({ ops: [late], faults: [] }, { ...options, observerStalls: during }).totalViolations).toBe(0);
    // A stall before the lease's end, or after the reading, excuses nothing.
    const elsewhere = [
      { fromWallMs: 998_000, toWallMs: 999_990 },
      { fromWallMs: 1_000_600, toWallMs: 1_003_000 },
    ];
    expect(checkHistory({ ops: [late], faults: [] }, { ...options, observerStalls: elsewhere }).violations.expiredOnArrival).toHaveLength(
      1,
    );
  });

  it('catches a success reported while the instance could get no answer from the store', () => {
    const a = { ...acquire(1, 'k', 1200, 1210, 100), instance: 2 };
    const elsewhere = { ...acquire(2, 'j', 1200, 1210, 100), instance: 1 };
    const fault: FaultWindow = { kind: 'blackhole', instance: 2, startMs: 1000, endMs: 3000, replies: 'none' };
    const { count, report } = onlyViolation([a, elsewhere], 'uncertainSuccesses', [fault]);
    expect(count).toBe(1);
    expect(report.violations.uncertainSuccesses[0]).toMatchObject({ op: a.id, instance: 2, fault: 'blackhole' });
  });

  it('keeps keys apart', () => {
    const a = acquire(1, 'k', 0, 5, 100);
    const b = acquire(2, 'other', 200, 204, 50);
    expect(checkHistory({ ops: [a, b], faults: [] }).totalViolations).toBe(0);
  });

  describe('lock set all-or-nothing', () => {
    const set = { id: 9_000, keys: ['a', 'b'] };
    it('passes a whole set, and a set refused whole', () => {
      const granted = [acquire(1, 'a', 0, 5, 100, { set }), acquire(1, 'b', 0, 5, 110, { set })];
      const refusedSet = { id: 9_001, keys: ['a', 'b'] };
      const refused = ['a', 'b'].map((key) =>
        acquire(2, key, 10, 12, 0, { set: refusedSet, outcome: 'conflict', status: 409, fencingToken: undefined }),
      );
      expect(checkHistory({ ops: [...granted, ...refused], faults: [] }).totalViolations).toBe(0);
    });

    it("catches a granted set missing a key's token, and a set whose keys' answers disagree", () => {
      const partial = [acquire(1, 'a', 0, 5, 100, { set }), acquire(1, 'b', 0, 5, 0, { set, fencingToken: undefined })];
      expect(onlyViolation(partial, 'lockSetPartial')).toMatchObject({ count: 1, others: [] });
      const split = { id: 9_002, keys: ['a', 'b'] };
      const disagree = [
        acquire(1, 'a', 0, 5, 100, { set: split }),
        acquire(1, 'b', 0, 5, 0, { set: split, outcome: 'conflict', status: 409, fencingToken: undefined }),
      ];
      expect(onlyViolation(disagree, 'lockSetPartial').count).toBe(1);
    });

    it('catches a key of a held set granted to someone else (an overlap on that key)', () => {
      const held = [acquire(1, 'a', 0, 5, 100, { set }), acquire(1, 'b', 0, 5, 110, { set })];
      const intruder = acquire(2, 'b', 100, 104, 200);
      expect(onlyViolation([...held, intruder], 'overlaps').count).toBe(1);
    });
  });

  describe('semaphores and read/write locks', () => {
    const sem = (limit: number) => ({ permit: { kind: 'semaphore' as const, limit } });
    const rw = (mode: 'read' | 'write') => ({ permit: { kind: 'rwlock' as const, mode } });

    it('passes limit permits held at once, and readers together', () => {
      const ops = [
        acquire(1, 's', 0, 5, 100, sem(2)),
        acquire(2, 's', 10, 15, 200, sem(2)),
        acquire(3, 'r', 0, 5, 100, rw('read')),
        acquire(4, 'r', 10, 15, 200, rw('read')),
      ];
      expect(checkHistory({ ops, faults: [] }).totalViolations).toBe(0);
    });

    it('catches more surely-held permits than the limit', () => {
      const a = acquire(1, 's', 0, 5, 100, sem(2));
      const b = acquire(2, 's', 10, 15, 200, sem(2));
      const c = acquire(3, 's', 20, 25, 300, sem(2));
      const { count, report, others } = onlyViolation([a, b, c], 'semaphoreOverLimit');
      expect(count).toBe(1);
      expect(others).toEqual([]);
      expect(report.violations.semaphoreOverLimit[0]).toMatchObject({ key: 's', limit: 2, holders: [a.id, b.id, c.id] });
    });

    it('a permit released before the next grant frees its room', () => {
      const a = acquire(1, 's', 0, 5, 100, sem(1));
      const b = acquire(2, 's', 200, 205, 200, sem(1));
      expect(checkHistory({ ops: [a, follow('release', a, 100, 101), b], faults: [] }).totalViolations).toBe(0);
    });

    it('catches a writer held together with a reader or another writer', () => {
      const r = acquire(1, 'r', 0, 5, 100, rw('read'));
      const w = acquire(2, 'r', 10, 15, 200, rw('write'));
      const w2 = acquire(3, 'r2', 0, 5, 100, rw('write'));
      const w3 = acquire(4, 'r2', 10, 15, 200, rw('write'));
      const { count, report, others } = onlyViolation([r, w, w2, w3], 'rwlockWriterShared');
      expect(count).toBe(2);
      expect(others).toEqual([]);
      expect(report.violations.rwlockWriterShared[0]).toMatchObject({ key: 'r', writer: w.id, other: r.id });
    });

    it('catches a write granted with a token below an earlier read', () => {
      const r = acquire(1, 'r', 0, 5, 300, rw('read'));
      const w = acquire(2, 'r', 100, 105, 200, rw('write'));
      const { count } = onlyViolation([r, follow('release', r, 50, 51), w], 'tokenRegressions');
      expect(count).toBe(1);
    });
  });
});
