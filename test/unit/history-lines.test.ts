import { describe, expect, it } from 'vitest';
import { carryLeaseFacts, carryLeaseFactsInLines, encodeRecord, readRecords, type HistoryRecord } from '../../src/domain/history.js';

/**
 * A key's stored lines as every store trims and reads them: the events kept per key and the retention
 * at their exact edges, and a lease's lock-delay, holder and grant time handed on from a line that goes to
 * the lease's first line kept (else a lease renewed past the events kept would expire with no lock-delay
 * after it, the key shown free while it was shut, and end with no holder and no time held).
 */
const at = 1_796_225_617_711;
const lease = 'AbCdEfGhIjKlMnOp';
const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 7, holder: 'h7', expiresAt: at + 30_000, lockDelayMs: 500 };
const renewal: HistoryRecord = { kind: 'renewed', at: at + 10, lease, fencingToken: 7, expiresAt: at + 30_010 };
const ask: HistoryRecord = { kind: 'release_requested', at: at + 20, fencingToken: 7, by: 'ops', reason: null };
const keepFrom = (n: number) => (i: number) => i >= n;
/** What the grant hands on when it goes. */
const facts = { lockDelayMs: 500, holder: 'h7', grantedAt: at };

describe('reading a key: the events kept per key and the retention at their edges', () => {
  const event = (t: number): HistoryRecord => ({ kind: 'renewed', at: t, lease });

  it('an event exactly at the retention bound counts towards the events kept, as any other in it', () => {
    // Two events within the retention, one kept per key: the later one only.
    expect(readRecords([event(at), event(at + 1)].map(encodeRecord), at, 1)).toStrictEqual([event(at + 1)]);
    expect(readRecords([event(at), event(at + 1)].map(encodeRecord), at, 2)).toStrictEqual([event(at), event(at + 1)]);
    // Both exactly at the bound: still one.
    expect(readRecords([event(at), event(at)].map(encodeRecord), at, 1)).toHaveLength(1);
  });

  it('a folded pair at the retention bound is two events within it, each counted on its own', () => {
    const folded = (g: number, r: number) => encodeRecord({ kind: 'granted', at: g, lease, releasedAt: r });
    // The grant exactly at the bound, its release after it.
    // The grant left out (one event kept): its release takes its time on.
    expect(readRecords([folded(at, at + 1)], at, 1)).toStrictEqual([{ kind: 'released', at: at + 1, lease, grantedAt: at }]);
    // The release exactly at the bound, stamped before its grant (the instance's clock behind the store's).
    expect(readRecords([folded(at + 1, at)], at, 1)).toStrictEqual([{ kind: 'released', at, lease, grantedAt: at + 1 }]);
  });

  it('events past the retention are left out whether stored alone or folded into a pair', () => {
    const lines = [encodeRecord(event(at - 10)), encodeRecord({ kind: 'granted', at: at - 5, lease, releasedAt: at + 5 })];
    expect(readRecords(lines, at, 50)).toStrictEqual([{ kind: 'released', at: at + 5, lease, grantedAt: at - 5 }]);
  });

  it('a release stamped before the retention bound is left out even when its grant, after the bound, is kept', () => {
    // The instance's clock behind the store's: the release dated a millisecond before its grant.
    const line = encodeRecord({ kind: 'granted', at, lease, releasedAt: at - 1 });
    expect(readRecords([line], at, 50)).toStrictEqual([{ kind: 'granted', at, lease }]);
  });
});

describe("a lease's facts handed on from a record that goes (carryLeaseFacts)", () => {
  it("goes to the lease's next record when that one leaves the lease going: a renewal, or a release request", () => {
    // A renewal naming the lease by its id alone.
    const byId: HistoryRecord = { kind: 'renewed', at: at + 10, lease, expiresAt: at + 30_010 };
    const records: (HistoryRecord | null)[] = [grant, byId];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(true);
    expect(records[1]).toStrictEqual({ ...byId, ...facts });
    // A release request names the lease by its fencing token alone.
    const asked: (HistoryRecord | null)[] = [grant, ask];
    expect(carryLeaseFacts(asked, keepFrom(1))).toBe(true);
    expect(asked[1]).toStrictEqual({ ...ask, ...facts });
    // The records it changes are replaced, never changed in place.
    expect(byId).not.toHaveProperty('lockDelayMs');
    expect(ask).not.toHaveProperty('lockDelayMs');
  });

  it('reports that nothing changed when nothing takes a fact on', () => {
    // A release takes the holder and the grant time on, not the lock-delay (no lock-delay follows a release).
    const release: HistoryRecord = { kind: 'released', at: at + 10, lease };
    const released: (HistoryRecord | null)[] = [grant, release];
    expect(carryLeaseFacts(released, keepFrom(1))).toBe(true);
    expect(released[1]).toStrictEqual({ ...release, holder: 'h7', grantedAt: at });
    const again: (HistoryRecord | null)[] = [grant, released[1] as HistoryRecord];
    expect(carryLeaseFacts(again, keepFrom(1))).toBe(false);
    // The grant is kept: nothing goes, nothing is handed on.
    expect(carryLeaseFacts([grant, renewal], () => true)).toBe(false);
  });

  it("a record that already holds its lease's facts is left as it is", () => {
    // A renewal that took them on when an earlier line of the lease went.
    const taken: HistoryRecord = { ...renewal, ...facts };
    const records: (HistoryRecord | null)[] = [grant, taken];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(false);
    expect(records[1]).toBe(taken);
    // One that holds some takes the others on, its own kept.
    const some: (HistoryRecord | null)[] = [grant, { ...renewal, lockDelayMs: 900 }];
    expect(carryLeaseFacts(some, keepFrom(1))).toBe(true);
    expect(some[1]).toStrictEqual({ ...renewal, lockDelayMs: 900, holder: 'h7', grantedAt: at });
  });

  it('a renewal that goes hands on what it took on, so the facts reach the first record kept', () => {
    const second: HistoryRecord = { ...renewal, at: at + 20 };
    const records: (HistoryRecord | null)[] = [grant, renewal, second];
    expect(carryLeaseFacts(records, keepFrom(2))).toBe(true);
    expect(records[2]).toStrictEqual({ ...second, ...facts });
  });

  it('a grant with its release folded in ended its lease: it hands nothing on', () => {
    const records: (HistoryRecord | null)[] = [{ ...grant, releasedAt: at + 5 }, renewal];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(false);
    expect(records[1]).toBe(renewal);
  });

  it('records of other leases are told apart by lease id and fencing token, whichever they name', () => {
    // Neither names a lease id: another fencing token is another lease.
    const noIds: (HistoryRecord | null)[] = [
      { kind: 'granted', at, fencingToken: 7, lockDelayMs: 500 },
      { kind: 'renewed', at: at + 10, fencingToken: 8, expiresAt: at + 30_010 },
    ];
    expect(carryLeaseFacts(noIds, keepFrom(1))).toBe(false);
    // Neither names a fencing token: another lease id is another lease.
    const noTokens: (HistoryRecord | null)[] = [
      { kind: 'granted', at, lease, lockDelayMs: 500 },
      { kind: 'renewed', at: at + 10, lease: 'another', expiresAt: at + 30_010 },
    ];
    expect(carryLeaseFacts(noTokens, keepFrom(1))).toBe(false);
  });

  it("passes over unreadable lines and other leases' records; stops at another lease's grant", () => {
    // A lock set's release naming the key (its lease never held it) and an unreadable line, between the grant
    // and its renewal: the renewal still takes the lock-delay on.
    const setRelease: HistoryRecord = { kind: 'released', at: at + 5, lease: 'set-lease', set: true };
    const records: (HistoryRecord | null)[] = [null, grant, null, setRelease, renewal];
    expect(carryLeaseFacts(records, keepFrom(2))).toBe(true);
    expect(records[4]).toStrictEqual({ ...renewal, ...facts });
    // Another lease's grant: this lease had ended (a lock-delay is a lock's), so a later record naming its
    // fencing token takes nothing on.
    const other: HistoryRecord = { kind: 'granted', at: at + 40_000, lease: 'other', fencingToken: 8, expiresAt: at + 70_000 };
    const late: HistoryRecord = { ...ask, at: at + 40_001 };
    const ended: (HistoryRecord | null)[] = [grant, other, late];
    expect(carryLeaseFacts(ended, keepFrom(1))).toBe(false);
    expect(ended[2]).toBe(late);
  });
});

describe("a lease's facts handed on in stored lines (carryLeaseFactsInLines)", () => {
  // Written before the compact form: read as it is, and left in its form unless it takes a lock-delay on.
  const jsonRenewal = `{"k":"n","t":${at + 30},"l":"${lease}","f":7,"e":${at + 30_030}}`;

  it('lines marked to go hand their lock-delay on; a line kept that takes nothing is left byte for byte', () => {
    // None of the lines that go holds a lock-delay: every line as it was.
    const plain = [encodeRecord(renewal), 'unreadable', encodeRecord(ask)];
    const before = [...plain];
    carryLeaseFactsInLines(plain, [true, true, true]);
    carryLeaseFactsInLines(plain, [true, false, true]);
    expect(plain).toStrictEqual(before);
    const lines = [encodeRecord(renewal), encodeRecord(grant), 'unreadable', encodeRecord(renewal), jsonRenewal];
    carryLeaseFactsInLines(lines, [true, false, true, true, true]);
    expect(lines).toStrictEqual([
      encodeRecord(renewal),
      encodeRecord(grant),
      'unreadable',
      encodeRecord({ ...renewal, ...facts }),
      jsonRenewal,
    ]);
  });

  it('the lines before an index go: the first line kept of the lease takes the lock-delay on', () => {
    const lines = [encodeRecord(grant), encodeRecord(renewal), 'unreadable', jsonRenewal];
    carryLeaseFactsInLines(lines, 1);
    expect(lines).toStrictEqual([encodeRecord(grant), encodeRecord({ ...renewal, ...facts }), 'unreadable', jsonRenewal]);
    // The index itself is kept: the grant at it keeps its lock-delay, nothing is handed on.
    const kept = [encodeRecord(renewal), encodeRecord(grant), encodeRecord(renewal)];
    carryLeaseFactsInLines(kept, 1);
    expect(kept).toStrictEqual([encodeRecord(renewal), encodeRecord(grant), encodeRecord(renewal)]);
  });

  it('a line that goes written in the JSON form hands its lock-delay on as well', () => {
    const jsonGrant = `{"k":"g","t":${at},"l":"${lease}","f":7,"e":${at + 30_000},"d":500}`;
    const lines = [jsonGrant, encodeRecord(renewal)];
    carryLeaseFactsInLines(lines, 1);
    // No holder in it: its lock-delay and its time.
    expect(lines[1]).toBe(encodeRecord({ ...renewal, lockDelayMs: 500, grantedAt: at }));
  });

  it('an index past the last line: every line goes, and nothing is changed', () => {
    const lines = [encodeRecord(renewal), encodeRecord(ask)];
    carryLeaseFactsInLines(lines, lines.length + 2);
    expect(lines).toStrictEqual([encodeRecord(renewal), encodeRecord(ask)]);
  });
});
