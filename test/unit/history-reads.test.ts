import { describe, expect, it } from 'vitest';
import {
  decodeRecord,
  encodeRecord,
  HistoryRecorder,
  leaseIdOf,
  readRecords,
  type HistoryAppend,
  type HistoryKey,
  type HistoryRecord,
  type HistoryStore,
} from '../../src/domain/history.js';

/**
 * What an operator reading a key's history relies on, at the edges: the retention is exact to the
 * millisecond, a line that cannot be read is skipped (never a failed read), only a grant carries a folded
 * release, a record is kept in the compact form whenever its numbers fit it; and the recorder folds a
 * release into its grant only when that grant is the key's last buffered event of the same lease.
 */
const at = 1_796_225_617_711;
const lease = 'AbCdEfGhIjKlMnOp';
const KEY: HistoryKey = { namespace: 'billing', primitive: 'lock', key: 'invoices:42' };

describe('reading stored history records', () => {
  const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 9, holder: null, expiresAt: at + 30_000 };

  it('keeps an event exactly at the retention bound and drops the one a millisecond before', () => {
    const lines = [encodeRecord({ kind: 'renewed', at: at - 1, lease }), encodeRecord({ kind: 'renewed', at, lease })];
    expect(readRecords(lines, at, 50)).toStrictEqual([{ kind: 'renewed', at, lease }]);
    // A folded pair: the grant and the release each meet the bound on their own.
    const folded = encodeRecord({ ...grant, releasedAt: at + 5 });
    expect(readRecords([folded], at, 50)).toStrictEqual([grant, { kind: 'released', at: at + 5, lease }]);
    // The release kept, its grant gone: it takes on the grant's holder and time (carryLeaseFacts).
    expect(readRecords([folded], at + 5, 50)).toStrictEqual([{ kind: 'released', at: at + 5, lease, holder: null, grantedAt: at }]);
    expect(readRecords([folded], at + 6, 50)).toStrictEqual([]);
  });

  it("a grant a read leaves out (past the retention, or past the events kept) hands its lock-delay, holder and time on to its lease's next record", () => {
    const delayed: HistoryRecord = { ...grant, lockDelayMs: 2_000 };
    const renewal: HistoryRecord = { kind: 'renewed', at: at + 10, lease, fencingToken: 9, expiresAt: at + 30_010 };
    const facts = { lockDelayMs: 2_000, holder: null, grantedAt: at };
    // Past the retention.
    expect(readRecords([encodeRecord(delayed), encodeRecord(renewal)], at + 1, 50)).toStrictEqual([{ ...renewal, ...facts }]);
    // Past the events kept: the short pairs of the leases after it are four events in two lines.
    const pair = (n: number): HistoryRecord => ({
      kind: 'granted',
      at: at + 40_000 + n,
      lease: `other-${n}`,
      fencingToken: 10 + n,
      releasedAt: at + 40_000 + n + 1,
    });
    const lines = [delayed, renewal, pair(1), pair(2)].map(encodeRecord);
    const read = readRecords(lines, 0, 5);
    expect(read.some((r) => r.kind === 'granted' && r.lease === lease)).toBe(false);
    expect(read[0]).toStrictEqual({ ...renewal, ...facts });
    // A lock-delay is a lock's: another lease's grant after it means its lease had ended; a line of its
    // lease after that takes nothing on.
    expect(readRecords([delayed, pair(1), renewal].map(encodeRecord), at + 1, 50).at(-1)).toStrictEqual(renewal);
    // A lease that ended (its release) takes its holder and grant time on, not its lock-delay (none follows
    // a release); another lease takes nothing on; a grant without a lock-delay hands on the rest.
    const released: HistoryRecord = { kind: 'released', at: at + 10, lease };
    expect(readRecords([encodeRecord(delayed), encodeRecord(released)], at + 1, 50)).toStrictEqual([
      { ...released, holder: null, grantedAt: at },
    ]);
    const another: HistoryRecord = { kind: 'renewed', at: at + 10, lease: 'another', fencingToken: 8, expiresAt: at + 30_010 };
    expect(readRecords([encodeRecord(delayed), encodeRecord(another)], at + 1, 50)).toStrictEqual([another]);
    expect(readRecords([encodeRecord(grant), encodeRecord(renewal)], at + 1, 50)).toStrictEqual([
      { ...renewal, holder: null, grantedAt: at },
    ]);
  });

  it('a folded release of a grant without a lease id names no lease', () => {
    const anonymous: HistoryRecord = { kind: 'granted', at, fencingToken: 9, holder: null, expiresAt: at + 30_000 };
    expect(readRecords([encodeRecord({ ...anonymous, releasedAt: at + 5 })], 0, 50)).toStrictEqual([
      anonymous,
      { kind: 'released', at: at + 5 },
    ]);
  });

  it('skips lines it cannot read among the others', () => {
    const release: HistoryRecord = { kind: 'released', at: at + 1, lease };
    expect(readRecords(['', '{', encodeRecord(release), 'x1'], 0, 50)).toStrictEqual([release]);
  });

  it('only a grant carries a folded release; a broken release field is left out', () => {
    // Compact form: a release (or any other kind) with a release field, a grant with an unreadable one.
    expect(decodeRecord(`r${at.toString(36)}|l${lease}|r5`)).toStrictEqual({ kind: 'released', at, lease });
    expect(decodeRecord(`n${at.toString(36)}|r5`)).toStrictEqual({ kind: 'renewed', at });
    expect(decodeRecord(`g${at.toString(36)}|r!!`)).toStrictEqual({ kind: 'granted', at });
    expect(decodeRecord(`g${at.toString(36)}|r5`)).toStrictEqual({ kind: 'granted', at, releasedAt: at + 5 });
    // JSON form: the same.
    expect(decodeRecord(`{"k":"r","t":${at},"r":${at + 5}}`)).toStrictEqual({ kind: 'released', at });
    expect(decodeRecord(`{"k":"g","t":${at},"r":${at + 5}}`)).toStrictEqual({ kind: 'granted', at, releasedAt: at + 5 });
  });

  it('a folded release is kept compact when its distance from the grant fits, in JSON when it does not', () => {
    // Both times safe integers, each near the top of the range: their distance is small.
    const high = 2 ** 52;
    const near: HistoryRecord = { kind: 'granted', at: high, releasedAt: high + 5 };
    expect(encodeRecord(near).startsWith('{')).toBe(false);
    expect(decodeRecord(encodeRecord(near))).toStrictEqual(near);
    // Both safe, but so far apart that the distance is not: the JSON form keeps the release.
    const far: HistoryRecord = { kind: 'granted', at: Number.MAX_SAFE_INTEGER, releasedAt: -Number.MAX_SAFE_INTEGER };
    expect(encodeRecord(far).startsWith('{')).toBe(true);
    expect(readRecords([encodeRecord(far)], -Infinity, 50)).toStrictEqual([
      { kind: 'granted', at: Number.MAX_SAFE_INTEGER },
      { kind: 'released', at: -Number.MAX_SAFE_INTEGER },
    ]);
  });
});

describe('history recorder: grants and releases by owner token', () => {
  class Store implements HistoryStore {
    batches: HistoryAppend[][] = [];
    append(batch: readonly HistoryAppend[]): Promise<void> {
      this.batches.push(batch.map((e) => ({ ...e, record: { ...e.record } })));
      return Promise.resolve();
    }
    read(): Promise<HistoryRecord[]> {
      return Promise.resolve([]);
    }
    close(): Promise<void> {
      return Promise.resolve();
    }
  }
  const open = () => {
    const store = new Store();
    return { store, recorder: new HistoryRecorder(store, { flushMs: 60_000, maxBuffered: 100 }) };
  };
  const granted = (t: number): HistoryRecord => ({ kind: 'granted', at: t, fencingToken: t, holder: null, expiresAt: t + 1_000 });

  it("a grant is written with its owner token's lease id, never the token", async () => {
    const { store, recorder } = open();
    recorder.addLeaseEvent({ ...KEY, record: granted(1) }, 'token-a');
    recorder.add({ ...KEY, record: { kind: 'renewed', at: 2 } });
    recorder.addLeaseEvent({ ...KEY, key: 'other', record: granted(3) }, 'token-b');
    await recorder.flush();
    expect(store.batches).toStrictEqual([
      [
        { ...KEY, record: { ...granted(1), lease: leaseIdOf('token-a') } },
        { ...KEY, record: { kind: 'renewed', at: 2 } },
        { ...KEY, key: 'other', record: { ...granted(3), lease: leaseIdOf('token-b') } },
      ],
    ]);
    expect(JSON.stringify(store.batches)).not.toContain('token-');
  });

  it("a release folds into its grant when that is the key's last buffered event", async () => {
    const { store, recorder } = open();
    recorder.addLeaseEvent({ ...KEY, record: granted(1) }, 'a');
    recorder.addRelease(KEY, 'a', 4);
    await recorder.flush();
    expect(store.batches).toStrictEqual([[{ ...KEY, record: { ...granted(1), lease: leaseIdOf('a'), releasedAt: 4 } }]]);
  });

  it('a release stays an event of its own: another lease, another event after the grant, or a grant already released', async () => {
    const { store, recorder } = open();
    const released = (t: number, token: string, key: HistoryKey = KEY) => ({
      ...key,
      record: { kind: 'released', at: t, lease: leaseIdOf(token) },
    });
    // Another lease's release (a stale one) does not fold into this grant.
    recorder.addLeaseEvent({ ...KEY, record: granted(1) }, 'a');
    recorder.addRelease(KEY, 'b', 2);
    // An event of the key after the grant: the release comes after it, in order.
    recorder.addLeaseEvent({ ...KEY, key: 'k2', record: granted(3) }, 'c');
    recorder.add({ ...KEY, key: 'k2', record: { kind: 'renewed', at: 4 } });
    recorder.addRelease({ ...KEY, key: 'k2' }, 'c', 5);
    // Released twice: the second does not move the first.
    recorder.addLeaseEvent({ ...KEY, key: 'k3', record: granted(6) }, 'd');
    recorder.addRelease({ ...KEY, key: 'k3' }, 'd', 7);
    recorder.addRelease({ ...KEY, key: 'k3' }, 'd', 8);
    await recorder.flush();
    expect(store.batches).toStrictEqual([
      [
        { ...KEY, record: { ...granted(1), lease: leaseIdOf('a') } },
        released(2, 'b'),
        { ...KEY, key: 'k2', record: { ...granted(3), lease: leaseIdOf('c') } },
        { ...KEY, key: 'k2', record: { kind: 'renewed', at: 4 } },
        released(5, 'c', { ...KEY, key: 'k2' }),
        { ...KEY, key: 'k3', record: { ...granted(6), lease: leaseIdOf('d'), releasedAt: 7 } },
        released(8, 'd', { ...KEY, key: 'k3' }),
      ],
    ]);
  });

  it('a release folds only into a grant of the same namespace and primitive, and only a grant', async () => {
    const { store, recorder } = open();
    recorder.addLeaseEvent({ ...KEY, record: granted(1) }, 'a');
    recorder.addRelease({ ...KEY, namespace: 'other' }, 'a', 2);
    recorder.addLeaseEvent({ ...KEY, key: 'k2', record: granted(3) }, 'b');
    recorder.addRelease({ ...KEY, key: 'k2', primitive: 'semaphore' }, 'b', 4);
    // A release after a release of the same token: never folded into a release.
    recorder.addRelease({ ...KEY, key: 'k3' }, 'c', 5);
    recorder.addRelease({ ...KEY, key: 'k3' }, 'c', 6);
    await recorder.flush();
    const rel = (t: number, token: string, key: HistoryKey) => ({ ...key, record: { kind: 'released', at: t, lease: leaseIdOf(token) } });
    expect(store.batches).toStrictEqual([
      [
        { ...KEY, record: { ...granted(1), lease: leaseIdOf('a') } },
        rel(2, 'a', { ...KEY, namespace: 'other' }),
        { ...KEY, key: 'k2', record: { ...granted(3), lease: leaseIdOf('b') } },
        rel(4, 'b', { ...KEY, key: 'k2', primitive: 'semaphore' }),
        rel(5, 'c', { ...KEY, key: 'k3' }),
        rel(6, 'c', { ...KEY, key: 'k3' }),
      ],
    ]);
  });

  it('after a flush a release no longer folds into the grant already written; after close nothing is recorded', async () => {
    const { store, recorder } = open();
    recorder.addLeaseEvent({ ...KEY, record: granted(1) }, 'a');
    await recorder.flush();
    recorder.addRelease(KEY, 'a', 2);
    await recorder.close();
    recorder.addLeaseEvent({ ...KEY, record: granted(3) }, 'b');
    recorder.addRelease(KEY, 'a', 4);
    await recorder.flush();
    expect(store.batches).toStrictEqual([
      [{ ...KEY, record: { ...granted(1), lease: leaseIdOf('a') } }],
      [{ ...KEY, record: { kind: 'released', at: 2, lease: leaseIdOf('a') } }],
    ]);
  });
});
