import { describe, expect, it } from 'vitest';
import { carryLeaseFacts, carryLeaseFactsInLines, decodeRecord, encodeRecord, type HistoryRecord } from '../../src/domain/history.js';

/**
 * The facts a lease's record hands on when it goes (its grant time, holder label and lock-delay: see
 * carryLeaseFacts), as stored and as trimmed: the grant time a record took on survives its stored form
 * (the compact one and the older JSON one), a record that only ever took some of the facts on (a renewal
 * written before holders and grant times were handed on: its lock-delay alone) hands those on, and the
 * look for a line worth decoding (carryLeaseFactsInLines) finds every kind of line that holds one.
 */
const at = 1_796_225_617_711;
const lease = 'AbCdEfGhIjKlMnOp';
const keepFrom = (n: number) => (i: number) => i >= n;
const renewal = (t: number, extra: Partial<HistoryRecord> = {}): HistoryRecord => ({
  kind: 'renewed',
  at: t,
  lease,
  fencingToken: 7,
  expiresAt: t + 30_000,
  ...extra,
});

describe('a grant time taken on, through the stored forms', () => {
  const release: HistoryRecord = { kind: 'released', at: at + 40_000, lease, holder: 'h7', grantedAt: at };

  it('is read back from the compact form', () => {
    const line = encodeRecord(release);
    expect(line.startsWith('{')).toBe(false);
    expect(decodeRecord(line)).toStrictEqual(release);
    // A renewal that took every fact on.
    const renewed = renewal(at + 10, { holder: 'h7', lockDelayMs: 500, grantedAt: at });
    expect(decodeRecord(encodeRecord(renewed))).toStrictEqual(renewed);
  });

  it('is read back from the JSON form (a record with a number that is not a safe integer, and older lines)', () => {
    const unsafe: HistoryRecord = { ...release, at: at + 0.5 };
    const line = encodeRecord(unsafe);
    expect(line.startsWith('{')).toBe(true);
    expect(decodeRecord(line)).toStrictEqual(unsafe);
    expect(decodeRecord(`{"k":"r","t":${at + 40_000},"l":"${lease}","h":"h7","a":${at}}`)).toStrictEqual(release);
  });

  it('a grant time that cannot be read is left out, not read as a field with no value', () => {
    const plain: HistoryRecord = { kind: 'released', at: at + 40_000, lease };
    expect(decodeRecord(`${encodeRecord(plain)}|aZZ`)).toStrictEqual(plain);
    expect(decodeRecord(`${encodeRecord(plain)}|a`)).toStrictEqual(plain);
    expect(decodeRecord(`{"k":"r","t":${at + 40_000},"l":"${lease}","a":"x"}`)).toStrictEqual(plain);
  });
});

describe('a record that holds only some of its lease facts hands those on (carryLeaseFacts)', () => {
  it('a lock-delay alone (a renewal written before holders and grant times were handed on)', () => {
    const old = renewal(at + 10, { lockDelayMs: 500 });
    const next = renewal(at + 20);
    const records: (HistoryRecord | null)[] = [old, next];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(true);
    // The lock-delay only: no holder, no grant time (not even as a field with no value).
    expect(records[1]).toStrictEqual({ ...next, lockDelayMs: 500 });
  });

  it('a holder label alone', () => {
    const old = renewal(at + 10, { holder: 'h7' });
    const next = renewal(at + 20);
    const records: (HistoryRecord | null)[] = [old, next];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(true);
    expect(records[1]).toStrictEqual({ ...next, holder: 'h7' });
  });

  it('a grant time alone', () => {
    const old = renewal(at + 10, { grantedAt: at });
    const next = renewal(at + 20);
    const records: (HistoryRecord | null)[] = [old, next];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(true);
    expect(records[1]).toStrictEqual({ ...next, grantedAt: at });
  });

  it('a grant that goes hands its holder on to a record that already knows its grant time', () => {
    const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 7, holder: 'h7', expiresAt: at + 30_000 };
    const next = renewal(at + 20, { grantedAt: at });
    const records: (HistoryRecord | null)[] = [grant, next];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(true);
    expect(records[1]).toStrictEqual({ ...next, holder: 'h7' });
  });

  it("a lease's grant recorded again (an Idempotency-Key's retry) takes nothing on from the first", () => {
    const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 7, holder: 'h7', expiresAt: at + 30_000, lockDelayMs: 500 };
    const again: HistoryRecord = { kind: 'granted', at: at + 5, lease, fencingToken: 7, expiresAt: at + 30_000 };
    const records: (HistoryRecord | null)[] = [grant, again];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(false);
    expect(records[1]).toBe(again);
  });

  it('a holder or grant time the next record names itself is its own: never replaced', () => {
    const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 7, holder: 'h7', expiresAt: at + 30_000 };
    const evicted: HistoryRecord = { kind: 'force_released', at: at + 20, fencingToken: 7, holder: null, by: 'ops', grantedAt: at - 1 };
    const records: (HistoryRecord | null)[] = [grant, evicted];
    expect(carryLeaseFacts(records, keepFrom(1))).toBe(false);
    expect(records[1]).toBe(evicted);
  });
});

describe('trimming stored lines finds every line that holds a fact to hand on (carryLeaseFactsInLines)', () => {
  const next = renewal(at + 20);
  /** The lines after the first goes: what the line kept reads as. */
  const trimmed = (first: string): HistoryRecord | null => {
    const lines = [first, encodeRecord(next)];
    carryLeaseFactsInLines(lines, 1);
    expect(lines[0]).toBe(first);
    return decodeRecord(lines[1] as string);
  };

  it('a grant with no lock-delay: its holder and time', () => {
    const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 7, holder: 'h7', expiresAt: at + 30_000 };
    expect(trimmed(encodeRecord(grant))).toStrictEqual({ ...next, holder: 'h7', grantedAt: at });
    // The same in the JSON form of older lines.
    const json = `{"k":"g","t":${at},"l":"${lease}","f":7,"h":"h7","e":${at + 30_000}}`;
    expect(trimmed(json)).toStrictEqual({ ...next, holder: 'h7', grantedAt: at });
  });

  it('a renewal that holds a lock-delay alone', () => {
    const old = renewal(at + 10, { lockDelayMs: 500 });
    expect(trimmed(encodeRecord(old))).toStrictEqual({ ...next, lockDelayMs: 500 });
    const json = `{"k":"n","t":${at + 10},"l":"${lease}","f":7,"e":${at + 30_010},"d":500}`;
    expect(trimmed(json)).toStrictEqual({ ...next, lockDelayMs: 500 });
  });

  it('a renewal that took a holder and a grant time on (its grant asked for no lock-delay)', () => {
    const took = renewal(at + 10, { holder: 'h7', grantedAt: at });
    expect(trimmed(encodeRecord(took))).toStrictEqual({ ...next, holder: 'h7', grantedAt: at });
    const json = `{"k":"n","t":${at + 10},"l":"${lease}","f":7,"h":"h7","e":${at + 30_010},"a":${at}}`;
    expect(trimmed(json)).toStrictEqual({ ...next, holder: 'h7', grantedAt: at });
  });
});
