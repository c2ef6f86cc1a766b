import { describe, expect, it } from 'vitest';
import { timeline, type HistoryRecord } from '../../src/domain/history.js';

/**
 * A key's timeline where the records are not the plain grant-then-end of one lease: a lock set's
 * release recorded on keys its lease never held or no longer held, a grant recorded twice, records of
 * one lease that name it by one id and then the other, and times from two clocks (the store's for grants
 * and renewals, the instance's for releases and release requests) that do not sort as the events happened.
 */
const grant = (t: number, token: number, extra: Partial<HistoryRecord> = {}): HistoryRecord => ({
  kind: 'granted',
  at: t,
  lease: `L${token}`,
  fencingToken: token,
  holder: `h${token}`,
  expiresAt: t + 1_000,
  ...extra,
});
const setRelease = (t: number, token: number): HistoryRecord => ({ kind: 'released', at: t, lease: `L${token}`, set: true });
const types = (entries: readonly { type: string; at: number }[]) => entries.map((e) => `${e.type}@${e.at}`);

describe("a lock set's release on a key", () => {
  it('where no record of its lease is kept, the set never held the key: nothing happened there', () => {
    expect(timeline([setRelease(1_200, 1)], 10_000)).toStrictEqual([]);
    // Beside another lease's records: only those.
    expect(types(timeline([grant(1_000, 2), setRelease(1_200, 1)], 10_000))).toStrictEqual(['granted@1000', 'expired@2000']);
  });

  it('where its lease was already force-released, it freed nothing: no second end', () => {
    const records: HistoryRecord[] = [
      grant(1_000, 1, { set: true }),
      { kind: 'force_released', at: 1_100, fencingToken: 1, by: 'ops' },
      setRelease(1_200, 1),
    ];
    expect(types(timeline(records, 10_000))).toStrictEqual(['granted@1000', 'force_released@1100']);
  });

  it('of a lease whose grant names no expiry, is kept whenever it came', () => {
    const out = timeline([grant(1_000, 1, { set: true, expiresAt: undefined }), setRelease(5_000, 1)], 10_000);
    expect(out.map((e) => [e.type, e.at, e.heldMs])).toStrictEqual([
      ['granted', 1_000, undefined],
      ['released', 5_000, 4_000],
    ]);
  });
});

describe('records of a lease after its end, and a grant recorded twice', () => {
  it('a release request dated after the lease ended (another instance, its clock ahead) is still shown', () => {
    const records: HistoryRecord[] = [
      grant(1_000, 1),
      { kind: 'released', at: 1_200, lease: 'L1' },
      { kind: 'release_requested', at: 1_205, fencingToken: 1, by: 'ops', reason: 'stuck' },
    ];
    const out = timeline(records, 10_000);
    expect(types(out)).toStrictEqual(['granted@1000', 'released@1200', 'release_requested@1205']);
    expect(out[2]).toMatchObject({ fencingToken: 1, holder: 'h1', by: 'ops', reason: 'stuck' });
  });

  it("a lease's grant recorded again (a retry answered with it) is one grant, the first", () => {
    const first = grant(1_000, 1, { waitedMs: 5 });
    const again = grant(1_000, 1, { waitedMs: 5 });
    const out = timeline([first, again, { kind: 'released', at: 1_300, lease: 'L1' }], 10_000);
    expect(types(out)).toStrictEqual(['granted@1000', 'released@1300']);
  });

  it('a release dated before its own grant (the instance clock behind the store clock) ends that lease, at its grant', () => {
    const out = timeline([grant(1_000, 1), { kind: 'released', at: 997, lease: 'L1' }], 10_000);
    // Sorted by its own date, the release came first and read as the end of a lease never granted (no
    // token, no holder), and the grant as a lease that then expired.
    expect(out).toStrictEqual([
      { type: 'granted', at: 1_000, fencingToken: 1, holder: 'h1', expiresAt: 2_000 },
      { type: 'released', at: 1_000, fencingToken: 1, holder: 'h1', heldMs: 0 },
    ]);
    // A release request likewise, by the lease's fencing token; records dated after the grant keep their dates.
    const asked = timeline(
      [
        grant(1_000, 1),
        { kind: 'release_requested', at: 990, fencingToken: 1, by: 'ops', reason: null },
        { kind: 'released', at: 1_400, lease: 'L1' },
      ],
      10_000,
    );
    expect(types(asked)).toStrictEqual(['granted@1000', 'release_requested@1000', 'released@1400']);
    expect(asked[1]).toMatchObject({ fencingToken: 1, holder: 'h1' });
  });

  it('a grant given back as too late after an operator force-released it is no second end of that lease', () => {
    const records: HistoryRecord[] = [
      grant(1_000, 1),
      { kind: 'force_released', at: 1_100, fencingToken: 1, by: 'ops' },
      // The give-back found nothing to release, which counts as given back: recorded released.
      { kind: 'released', at: 1_150, lease: 'L1' },
    ];
    expect(types(timeline(records, 10_000))).toStrictEqual(['granted@1000', 'force_released@1100']);
    // Released, then a second release recorded: one end, the first.
    expect(
      types(
        timeline([grant(1_000, 1), { kind: 'released', at: 1_200, lease: 'L1' }, { kind: 'released', at: 1_250, lease: 'L1' }], 10_000),
      ),
    ).toStrictEqual(['granted@1000', 'released@1200']);
  });
});

describe('a lease known by one id, then by both', () => {
  it('a lease renewed by an earlier version (its fencing token only), then by this one: its release by id ends it', () => {
    const records: HistoryRecord[] = [
      { kind: 'renewed', at: 500, fencingToken: 4, holder: 'h4', expiresAt: 1_500 },
      { kind: 'renewed', at: 600, lease: 'L4', fencingToken: 4, expiresAt: 1_600 },
      { kind: 'released', at: 700, lease: 'L4' },
    ];
    expect(timeline(records, 10_000)).toStrictEqual([
      { type: 'renewed', at: 500, fencingToken: 4, holder: 'h4', expiresAt: 1_500 },
      { type: 'renewed', at: 600, fencingToken: 4, holder: 'h4', expiresAt: 1_600 },
      { type: 'released', at: 700, fencingToken: 4, holder: 'h4' },
    ]);
  });

  it('the lock-delay is taken from whichever kept record of the lease holds it, not only the first by time', () => {
    // The grant trimmed: its lock-delay went on to the release request, the lease's first record kept; the
    // renewal before it in the list is dated earlier (the store's clock behind the instance's).
    const records: HistoryRecord[] = [
      { kind: 'renewed', at: 999, lease: 'L4', fencingToken: 4, expiresAt: 2_000 },
      { kind: 'release_requested', at: 1_000, fencingToken: 4, by: 'ops', reason: null, lockDelayMs: 300 },
    ];
    expect(types(timeline(records, 10_000))).toStrictEqual(['renewed@999', 'release_requested@1000', 'expired@2000', 'lock_delay@2000']);
    expect(timeline(records, 10_000).at(-1)).toMatchObject({ type: 'lock_delay', until: 2_300 });
  });
});
