import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeRecord, type HistoryRecord, readRecords } from '../../src/domain/history.js';

/**
 * The stored form of a history event (the store-level round trips are in test/conformance/history.contract.ts):
 * what it weighs, and that the events written in the earlier JSON form are still read after an upgrade.
 */
describe('history record encoding', () => {
  const at = 1_796_225_617_711;
  const lease = 'AbCdEfGhIjKlMnOp';
  const grant: HistoryRecord = { kind: 'granted', at, lease, fencingToken: 1_796_225_617_711_925, holder: null, expiresAt: at + 30_000 };
  const release: HistoryRecord = { kind: 'released', at: at + 20, lease };

  it('a grant and its release weigh under 50 and 30 bytes', () => {
    expect(encodeRecord(grant).length).toBeLessThan(50);
    expect(encodeRecord(release).length).toBeLessThan(30);
    expect(decodeRecord(encodeRecord(grant))).toEqual(grant);
    expect(decodeRecord(encodeRecord(release))).toEqual(release);
  });

  it('a grant with its release folded in weighs under 55 bytes, and reads back as the two events', () => {
    const folded: HistoryRecord = { ...grant, releasedAt: release.at };
    expect(encodeRecord(folded).length).toBeLessThan(55);
    expect(decodeRecord(encodeRecord(folded))).toEqual(folded);
    // Released on the instance's clock, a little before the store's grant: kept as it was.
    const early: HistoryRecord = { ...grant, releasedAt: at - 3 };
    expect(decodeRecord(encodeRecord(early))).toEqual(early);
    expect(readRecords([encodeRecord(folded)], 0, 50)).toEqual([grant, release]);
    // The JSON form carries it too (a record with a number that is not a safe integer).
    const odd: HistoryRecord = { ...folded, waitedMs: 0.5 };
    expect(encodeRecord(odd).startsWith('{')).toBe(true);
    expect(readRecords([encodeRecord(odd)], 0, 50)).toEqual([{ ...grant, waitedMs: 0.5 }, release]);
  });

  it('reads the grant and release written as two records before, alongside folded ones', () => {
    // What an earlier version wrote for a pair, then what this one writes: the same events.
    const lines = [encodeRecord(grant), encodeRecord(release), encodeRecord({ ...grant, releasedAt: release.at })];
    expect(readRecords(lines, 0, 50)).toEqual([grant, release, grant, release]);
    // The first grant left out: its release takes its holder and time on.
    expect(readRecords(lines, 0, 3)).toEqual([{ ...release, holder: null, grantedAt: at }, grant, release]);
    // The retention applies to each event: a grant too old, its release not.
    expect(readRecords([encodeRecord({ ...grant, releasedAt: release.at })], at + 1, 50)).toEqual([
      { ...release, holder: null, grantedAt: at },
    ]);
  });

  it('reads the JSON form events were written in before', () => {
    expect(
      decodeRecord(`{"k":"g","t":${at},"l":"${lease}","f":1796225617711925,"h":null,"e":${at + 30_000},"w":12,"d":500,"m":"write","s":1}`),
    ).toEqual({ ...grant, waitedMs: 12, lockDelayMs: 500, mode: 'write', set: true });
    expect(decodeRecord(`{"k":"q","t":${at},"f":7,"b":"ops","y":null}`)).toEqual({
      kind: 'release_requested',
      at,
      fencingToken: 7,
      by: 'ops',
      reason: null,
    });
  });

  it('writes integers in base 36 as toString(36) does, at every digit count', () => {
    const values = [0, 1, 35, 36, 37, 1295, 1296, 1297, 36 ** 3 - 1, 36 ** 3, 36 ** 4 + 5, 36 ** 5 - 1, at, at * 1000 + 925];
    values.push(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER - 1295);
    for (let i = 0; i < 2000; i++) values.push(Math.floor(Math.random() * 36 ** (1 + (i % 10))));
    for (const n of values) {
      expect(encodeRecord({ kind: 'released', at: n }), String(n)).toBe(`r${n.toString(36)}`);
      expect(encodeRecord({ kind: 'released', at, fencingToken: n }), String(n)).toBe(`r${at.toString(36)}|f${n.toString(36)}`);
    }
  });

  it('skips what it cannot read, never throws', () => {
    for (const text of ['', '{', 'x123', 'g', 'g!!', `g${at.toString(36)}|h%E0%A4%A`, '{"k":"z","t":1}']) {
      expect(decodeRecord(text), text).toBeNull();
    }
    // A field it does not know (a later version's) is skipped; the rest is read.
    expect(decodeRecord(`r${(at + 20).toString(36)}|l${lease}|zfuture`)).toEqual(release);
  });
});
