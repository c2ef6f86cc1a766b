import { describe, expect, it } from 'vitest';
import { encodeRecord, readRecords, timeline, type HistoryRecord, type TimelineEntry } from '../../src/domain/history.js';

/**
 * A key's timeline where the records' times tie or cross: a lease granted and released within one
 * millisecond, a release dated before its grant (the instance's clock behind the store's), a grant
 * recorded again later (an Idempotency-Key's retry), a release request recorded before the grant it
 * names, and a lease's records kept after its grant was trimmed, dated out of their stored order.
 */
const T = 1_796_225_617_000;
const grant = (t: number, token: number, extra: Partial<HistoryRecord> = {}): HistoryRecord => ({
  kind: 'granted',
  at: t,
  lease: `L${token}`,
  fencingToken: token,
  holder: `h${token}`,
  expiresAt: t + 30_000,
  ...extra,
});
const release = (t: number, token: number): HistoryRecord => ({ kind: 'released', at: t, lease: `L${token}` });
const shown = (entries: readonly TimelineEntry[]) => entries.map((e) => `${e.type}@${e.at - T}:${e.fencingToken}`);

describe('the order of events within one millisecond', () => {
  it('a lease granted and released in one ms, then the next lease granted in that ms: in the order they were recorded', () => {
    const records = [grant(T, 1), release(T, 1), grant(T, 2, { waitedMs: 30 })];
    const out = timeline(records, T + 1_000);
    expect(shown(out)).toStrictEqual(['granted@0:1', 'released@0:1', 'handed_over@0:2']);
    expect(out[1]).toMatchObject({ heldMs: 0, holder: 'h1' });
  });

  it("a release dated before its grant is taken as made at the grant's time, after whatever else is dated then", () => {
    // The instance's clock 2 ms behind the store's: the release is stamped before the grant it ends,
    // and the waiter it handed the key to is granted in the grant's millisecond.
    const records = [grant(T, 1), release(T - 2, 1), grant(T, 2, { waitedMs: 30 })];
    const out = timeline(records, T + 1_000);
    expect(shown(out)).toStrictEqual(['granted@0:1', 'handed_over@0:2', 'released@0:1']);
    expect(out[2]).toMatchObject({ heldMs: 0, holder: 'h1' });
    // Alone, too: the release never reads as the end of a lease not yet granted.
    expect(shown(timeline([grant(T, 1), release(T - 2, 1)], T + 1_000))).toStrictEqual(['granted@0:1', 'released@0:1']);
  });
});

describe('a grant recorded again later (an Idempotency-Key retry answered with its lease)', () => {
  it("does not move the lease's release: it is dated from the lease's first grant", () => {
    const records = [grant(T, 1), release(T + 50, 1), grant(T + 100, 1)];
    const out = timeline(records, T + 1_000);
    expect(shown(out)).toStrictEqual(['granted@0:1', 'released@50:1']);
    expect(out[1]).toMatchObject({ heldMs: 50 });
  });

  it('by its fencing token as well as by its lease id', () => {
    const byToken = (t: number): HistoryRecord => ({ kind: 'granted', at: t, fencingToken: 1, holder: 'h1', expiresAt: t + 30_000 });
    const records: HistoryRecord[] = [byToken(T), { kind: 'force_released', at: T + 50, fencingToken: 1, by: 'ops' }, byToken(T + 100)];
    const out = timeline(records, T + 1_000);
    expect(shown(out)).toStrictEqual(['granted@0:1', 'force_released@50:1']);
    expect(out[1]).toMatchObject({ heldMs: 50, by: 'ops' });
  });
});

describe('a release request recorded before the grant it names, in the same millisecond', () => {
  it('the grant is still shown, with its holder, and the lease ends as if recorded in order', () => {
    const ask: HistoryRecord = { kind: 'release_requested', at: T, fencingToken: 1, by: 'ops', reason: null };
    const out = timeline([ask, grant(T, 1)], T + 1_000);
    expect(out.map((e) => e.type).sort()).toStrictEqual(['granted', 'release_requested']);
    expect(out.find((e) => e.type === 'granted')).toMatchObject({ at: T, fencingToken: 1, holder: 'h1', expiresAt: T + 30_000 });
    // Past its end: it expired, held 30 s, as when the two were recorded grant first.
    const later = timeline([ask, grant(T, 1)], T + 60_000);
    expect(later).toStrictEqual(timeline([grant(T, 1), ask], T + 60_000));
    expect(shown(later)).toStrictEqual(['granted@0:1', 'release_requested@0:1', 'expired@30000:1']);
    expect(later[2]).toMatchObject({ heldMs: 30_000, holder: 'h1' });
  });
});

describe("a lease's records kept after its grant was trimmed", () => {
  it('a release request dated before the renewal that took the grant facts on still ends with them', () => {
    // Stored: the grant, its renewal, then a release request dated (the store's clock, as the request says)
    // 10 ms before the renewal. One event kept past the grant: the renewal takes its holder and time on.
    const ask: HistoryRecord = { kind: 'release_requested', at: T + 990, fencingToken: 1, by: 'ops', reason: 'stuck' };
    const lines = [grant(T, 1), { kind: 'renewed', at: T + 1_000, lease: 'L1', fencingToken: 1, expiresAt: T + 31_000 } as const, ask].map(
      encodeRecord,
    );
    const records = readRecords(lines, T - 60_000, 2);
    expect(records).toHaveLength(2);
    const out = timeline(records, T + 40_000);
    expect(shown(out)).toStrictEqual(['release_requested@990:1', 'renewed@1000:1', 'expired@31000:1']);
    // Who held the key and for how long: from the grant, though the lease is known first by its release request.
    expect(out[2]).toMatchObject({ holder: 'h1', heldMs: 31_000 });
  });

  it("a release dated before the lease's last renewal (the instance's clock behind): a later release request still names its holder", () => {
    // Stored in the order they happened: the renewal, the release request (the store's clock), then the
    // release, stamped 5 ms behind by the instance's clock. Two events kept past the grant.
    const lines = [
      grant(T, 1),
      { kind: 'renewed', at: T + 1_000, lease: 'L1', fencingToken: 1, expiresAt: T + 31_000 } as const,
      { kind: 'release_requested', at: T + 1_002, fencingToken: 1, by: 'ops', reason: null } as const,
      release(T + 998, 1),
    ].map(encodeRecord);
    const out = timeline(readRecords(lines, T - 60_000, 3), T + 40_000);
    // The release request names the lease by its fencing token alone: the lease its renewal named by both ids.
    expect(out.find((e) => e.type === 'release_requested')).toMatchObject({ fencingToken: 1, holder: 'h1', by: 'ops' });
    // One lease, and it ended: no expiry of its own.
    expect(out.map((e) => e.type)).not.toContain('expired');
  });

  it("a lock set's release kept alone, its grant past the retention: the end of the lease it held here", () => {
    const lines = [grant(T, 1, { set: true }), { kind: 'released', at: T + 20, lease: 'L1', set: true } as const, grant(T + 30, 2)].map(
      encodeRecord,
    );
    const records = readRecords(lines, T + 10, 50);
    expect(records[0]).toMatchObject({ kind: 'released', holder: 'h1', grantedAt: T });
    let out: TimelineEntry[] = [];
    expect(() => (out = timeline(records, T + 1_000))).not.toThrow();
    expect(shown(out)).toStrictEqual(['released@20:null', 'granted@30:2']);
    expect(out[0]).toMatchObject({ holder: 'h1', heldMs: 20 });
    // Without the grant's facts (a key the set named but never held), nothing happened there.
    const bare: HistoryRecord[] = [{ kind: 'released', at: T + 20, lease: 'L1', set: true }, grant(T + 30, 2)];
    expect(shown(timeline(bare, T + 1_000))).toStrictEqual(['granted@30:2']);
  });
});
