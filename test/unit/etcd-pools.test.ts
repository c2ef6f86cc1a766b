import type { IKeyValue } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { MAX_HOLDERS_SHOWN } from '../../src/domain/permit-values.js';
import {
  busyUntil,
  carried,
  delayEnd,
  indexOf,
  lastToken,
  liveLeases,
  lockStateOf,
  poolOf,
  stateOf,
  untilFirst,
  untilLast,
  used,
  type LeaseRecord,
  type PoolRecord,
} from '../../src/store/etcd/etcd-pools.js';

const NOW = 1_000_000;

function kv(value: unknown, modRevision = 42): IKeyValue {
  return {
    key: Buffer.from('kh/lock/ns/a'),
    value: Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
    create_revision: '1',
    mod_revision: String(modRevision),
    version: '1',
    lease: '0',
  };
}

const lease = (over: Partial<LeaseRecord> = {}): LeaseRecord => ({ o: 'owner-a', w: 1, e: NOW + 1_000, h: null, t: 1, ...over });

const pool = (over: Partial<PoolRecord> = {}): PoolRecord => ({ c: 5, x: 0, k: NOW + 60_000, l: [], ...over });

describe('etcd pool records: reading either layout', () => {
  it('reads no record, an empty one or an unreadable one as a free key', () => {
    expect(poolOf(undefined)).toBeNull();
    expect(poolOf(kv(''))).toBeNull();
    expect(poolOf(kv('{"o":'))).toBeNull();
  });

  it('reads a pool record as it is', () => {
    const record = pool({ l: [lease()], f: 3 });
    const read = poolOf(kv(record));
    expect(read?.value).toEqual(record);
    expect(read?.kv.mod_revision).toBe('42');
  });

  it('reads an old lock record that is not a lease as a free key', () => {
    expect(poolOf(kv({ e: NOW + 10, h: null }))).toBeNull();
    expect(poolOf(kv({ o: 7, e: NOW + 10, h: null }))).toBeNull();
    expect(poolOf(kv({ o: 'owner', h: null }))).toBeNull();
    expect(poolOf(kv({ o: 'owner', e: 'soon', h: null }))).toBeNull();
  });

  it("reads an old lock's lease as a pool of one, its token the record's revision until it had its own", () => {
    const e = NOW + 5_000;
    expect(poolOf(kv({ o: 'owner', e, h: 'h1', k: e + 60_000 }, 77))?.value).toStrictEqual({
      c: 1,
      x: 0,
      k: e + 60_000,
      f: 77,
      l: [{ o: 'owner', w: 1, e, h: 'h1', t: 77 }],
    });
    const r = { a: 1, b: 'key-1', n: null };
    expect(poolOf(kv({ o: 'owner', e, h: null, t: 9, i: 'idem', d: 500, r }, 77))?.value).toStrictEqual({
      c: 1,
      x: 0,
      k: e,
      f: 9,
      l: [{ o: 'owner', w: 1, e, h: null, t: 9, i: 'idem', d: 500, r }],
    });
  });

  it("keeps only the last token of an old released lock (owner '')", () => {
    expect(poolOf(kv({ o: '', e: NOW - 10, h: null, t: 12, k: NOW + 60_000 }))?.value).toStrictEqual({
      c: 1,
      x: 0,
      k: NOW + 60_000,
      f: 12,
      l: [],
    });
  });
});

describe('etcd pool records: what is read from them', () => {
  it('counts only leases that end after now as live, and their weights as used', () => {
    const ended = lease({ o: 'a', e: NOW, w: 2 });
    const live = lease({ o: 'b', e: NOW + 1, w: 3 });
    const record = { kv: kv(''), value: pool({ l: [ended, live] }) };
    expect(liveLeases(record, NOW)).toEqual([live]);
    expect(liveLeases(null, NOW)).toEqual([]);
    expect(used([ended, live])).toBe(5);
    expect(used([])).toBe(0);
  });

  it('knows the last token from the record and its leases, ended ones too', () => {
    expect(lastToken(null)).toBe(0);
    expect(lastToken(pool())).toBe(0);
    expect(lastToken(pool({ f: 9, l: [lease({ t: 4 })] }))).toBe(9);
    expect(lastToken(pool({ f: 9, l: [lease({ t: 4 }), lease({ t: 11, e: NOW - 5 }), lease({ t: 6 })] }))).toBe(11);
    expect(lastToken(pool({ l: [lease({ t: 4 })] }))).toBe(4);
  });

  it('runs a lock-delay only after an expired lease with one, and only until it ends', () => {
    expect(delayEnd(null, NOW)).toBe(0);
    // A live lease's delay does not run yet.
    expect(delayEnd(pool({ l: [lease({ e: NOW + 1, d: 500 })] }), NOW)).toBe(0);
    expect(delayEnd(pool({ l: [lease({ e: NOW, d: 500 })] }), NOW)).toBe(NOW + 500);
    expect(delayEnd(pool({ l: [lease({ e: NOW - 100, d: 500 }), lease({ e: NOW - 300, d: 1_000 }), lease({ e: NOW - 50 })] }), NOW)).toBe(
      NOW + 700,
    );
    // Ended at now: no delay left.
    expect(delayEnd(pool({ l: [lease({ e: NOW - 500, d: 500 })] }), NOW)).toBe(0);
    expect(delayEnd(pool({ l: [lease({ e: NOW - 500, d: 501 })] }), NOW)).toBe(NOW + 1);
  });

  it('waits until the earliest live end, else until a lock-delay ends, and at least 1 ms', () => {
    const live = [lease({ e: NOW + 300.2 }), lease({ e: NOW + 100.2 }), lease({ e: NOW + 200 })];
    expect(untilFirst(pool({ l: live }), live, NOW)).toBe(101);
    expect(untilFirst(pool({ l: [lease({ e: NOW - 10, d: 250 })] }), [], NOW)).toBe(240);
    expect(untilFirst(pool(), [], NOW)).toBe(1);
    expect(untilFirst(null, [], NOW)).toBe(1);
    expect(untilFirst(null, [lease({ e: NOW + 0.2 })], NOW)).toBe(1);
    expect(untilFirst(null, [lease({ e: NOW - 50 })], NOW)).toBe(1);
  });

  it('waits until the latest live end for an empty pool, and at least 1 ms', () => {
    expect(untilLast([lease({ e: NOW + 100.2 }), lease({ e: NOW + 300.2 }), lease({ e: NOW + 200 })], NOW)).toBe(301);
    expect(untilLast([], NOW)).toBe(1);
    expect(untilLast([lease({ e: NOW - 50 })], NOW)).toBe(1);
    expect(untilLast([lease({ e: NOW + 0.5 })], NOW)).toBe(1);
  });

  it('holds a key against a lock set while a lease lives, a lock-delay runs or callers are queued', () => {
    const live = [lease({ e: NOW + 100 }), lease({ e: NOW + 400 }), lease({ e: NOW + 200 })];
    expect(busyUntil(pool({ l: live }), live, 0, NOW)).toBe(NOW + 400);
    const delayed = pool({ l: [lease({ e: NOW - 10, d: 500 })] });
    expect(busyUntil(delayed, [], 3, NOW)).toBe(NOW + 490);
    // A free key with callers queued is theirs first.
    expect(busyUntil(pool(), [], 1, NOW)).toBe(NOW + 1);
    expect(busyUntil(pool(), [], 0, NOW)).toBe(0);
    expect(busyUntil(null, [], 0, NOW)).toBe(0);
  });

  it('raises the watch index by every lease that ended since the last change', () => {
    expect(indexOf(pool({ x: 100 }), NOW)).toBe(100);
    const l = [lease({ e: NOW - 1 }), lease({ e: NOW }), lease({ e: NOW + 1 })];
    expect(indexOf(pool({ x: 100, l }), NOW)).toBe(102);
  });
});

describe('etcd pool records: what a change writes', () => {
  const grace = 60_000;

  it("keeps a lock's record for the grace after its lease ends, or after now once it is released", () => {
    const prior = pool({ c: 1, k: NOW + 500_000, l: [lease({ t: 5 })] });
    const released = carried('lock', prior, { c: 1, x: 7, l: [] }, NOW + 0.7, grace);
    expect(released).toStrictEqual({ c: 1, x: 7, l: [], k: NOW + grace, f: 5 });
    const held = carried('lock', prior, { c: 1, x: 7, l: [lease({ t: 6, e: NOW + 90_000 })] }, NOW, grace);
    expect(held.k).toBe(NOW + 90_000 + grace);
    expect(held.f).toBe(6);
  });

  it("keeps a multi-holder key's record until the longest end so far plus the grace", () => {
    const prior = pool({ k: NOW + 500_000, l: [lease({ t: 5 })] });
    expect(carried('semaphore', prior, { c: 5, x: 1, l: [] }, NOW, grace).k).toBe(NOW + 500_000);
    expect(carried('semaphore', prior, { c: 5, x: 1, l: [lease({ e: NOW + 600_000 })] }, NOW, grace).k).toBe(NOW + 600_000 + grace);
    // A first record of the key: from now.
    expect(carried('rwlock', null, { c: 5, x: 1, l: [] }, NOW, grace).k).toBe(NOW + grace);
  });

  it('carries the last token over from the leases a change drops, and writes none while no token was granted', () => {
    const prior = pool({ f: 3, l: [lease({ t: 8 }), lease({ t: 9 })] });
    expect(carried('semaphore', prior, { c: 5, x: 1, l: [lease({ t: 9 })] }, NOW, grace).f).toBe(9);
    expect(carried('semaphore', prior, { c: 5, x: 1, l: [] }, NOW, grace).f).toBe(9);
    expect(carried('semaphore', pool({ f: 3 }), { c: 5, x: 1, l: [lease({ t: 12 })] }, NOW, grace).f).toBe(12);
    expect(carried('semaphore', null, { c: 5, x: 1, l: [] }, NOW, grace)).not.toHaveProperty('f');
    const next = { c: 5, x: 1, l: [lease()], g: ['w1'] };
    expect(carried('semaphore', null, next, NOW, grace)).toMatchObject({ g: ['w1'], c: 5, x: 1 });
  });
});

describe('etcd pool records: state shown', () => {
  it('shows no state for a pool without live leases', () => {
    expect(stateOf(pool({ l: [lease({ e: NOW })] }), 2, NOW)).toBeNull();
    expect(lockStateOf(pool({ l: [lease({ e: NOW })] }), 2, NOW)).toBeNull();
    expect(lockStateOf(null, 0, NOW)).toBeNull();
  });

  it('shows live holders in grant order with their weight, token, end and time left', () => {
    const record = pool({
      c: 4,
      l: [
        lease({ o: 'b', t: 7, e: NOW + 100.4, w: 2, h: 'second' }),
        lease({ o: 'x', t: 2, e: NOW - 1 }),
        lease({ o: 'a', t: 5, e: NOW + 200, h: 'first' }),
      ],
    });
    expect(stateOf(record, 3, NOW)).toStrictEqual({
      capacity: 4,
      holderCount: 2,
      holders: [
        { holder: 'first', weight: 1, fencingToken: 5, expiresAtMs: NOW + 200, ttlRemainingMs: 200 },
        { holder: 'second', weight: 2, fencingToken: 7, expiresAtMs: NOW + 100.4, ttlRemainingMs: 101 },
      ],
      waiters: 3,
    });
  });

  it('shows a release request on the lease it was asked of', () => {
    const r = { a: NOW - 5, b: 'key-9', n: 'maintenance' };
    const state = stateOf(pool({ l: [lease({ t: 1, r }), lease({ o: 'b', t: 2 })] }), 0, NOW);
    expect(state?.holders[0]?.releaseRequested).toEqual({ atMs: NOW - 5, by: 'key-9', reason: 'maintenance' });
    expect(state?.holders[1]).not.toHaveProperty('releaseRequested');
  });

  it('shows the leases ending first when there are more than it lists, ties by the lower owner token', () => {
    const many = Array.from({ length: MAX_HOLDERS_SHOWN + 2 }, (_v, i) =>
      lease({ o: `o${String(1000 - i)}`, t: i + 1, e: i === 0 ? NOW + 10 : NOW + 1_000 + i }),
    );
    const state = stateOf(pool({ c: 1_000, l: many }), 0, NOW);
    expect(state?.holderCount).toBe(MAX_HOLDERS_SHOWN + 2);
    expect(state?.holders).toHaveLength(MAX_HOLDERS_SHOWN);
    const tokens = state?.holders.map((h) => h.fencingToken) ?? [];
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    // The two ending last are left out; the earliest end is always shown.
    expect(tokens).toContain(1);
    expect(tokens).not.toContain(MAX_HOLDERS_SHOWN + 1);
    expect(tokens).not.toContain(MAX_HOLDERS_SHOWN + 2);

    const tied = [
      ...Array.from({ length: MAX_HOLDERS_SHOWN - 1 }, (_v, i) => lease({ o: `m${String(i).padStart(3, '0')}`, t: i + 10, e: NOW + 10 })),
      lease({ o: 'zz', t: 1, e: NOW + 500 }),
      lease({ o: 'yb', t: 2, e: NOW + 500 }),
      lease({ o: 'ya', t: 3, e: NOW + 500 }),
    ];
    const shown = stateOf(pool({ c: 1_000, l: tied }), 0, NOW)?.holders.map((h) => h.fencingToken) ?? [];
    expect(shown[0]).toBe(3);
    expect(shown).not.toContain(1);
    expect(shown).not.toContain(2);
  });

  it('shows, of more leases than it lists that all end together, the lower owner tokens whatever the grant order', () => {
    const owners = Array.from({ length: MAX_HOLDERS_SHOWN + 1 }, (_v, i) => `o${String(i).padStart(3, '0')}`);
    for (const order of [owners, [...owners].reverse()]) {
      const leases = order.map((o, i) => lease({ o, t: i + 1, h: o, e: NOW + 50 }));
      const shown = stateOf(pool({ c: 1_000, l: leases }), 0, NOW)?.holders.map((h) => h.holder) ?? [];
      expect(shown).toHaveLength(MAX_HOLDERS_SHOWN);
      expect(shown).toContain('o000');
      expect(shown).not.toContain(owners.at(-1));
    }
  });

  it("shows a lock's one live lease, its time left rounded down", () => {
    const r = { a: NOW - 5, b: 'key-9', n: null };
    const record = pool({ c: 1, l: [lease({ e: NOW - 1, t: 3 }), lease({ e: NOW + 99.9, t: 4, h: 'me', r })] });
    expect(lockStateOf(record, 2, NOW)).toStrictEqual({
      holder: 'me',
      waiters: 2,
      fencingToken: 4,
      expiresAtMs: NOW + 99.9,
      ttlRemainingMs: 99,
      releaseRequested: { atMs: NOW - 5, by: 'key-9', reason: null },
    });
    expect(lockStateOf(pool({ c: 1, l: [lease({ t: 4 })] }), 0, NOW)).not.toHaveProperty('releaseRequested');
  });
});
