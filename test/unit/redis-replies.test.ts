import { describe, expect, it } from 'vitest';
import { KeySpace, splitId } from '../../src/store/redis/keys.js';
import {
  MisalignedReplyError,
  parseAcquire,
  parseCancel,
  parseFlag,
  parseForceRelease,
  parseHandOver,
  parseHeartbeat,
  parseInspect,
  parseLease,
  parseLockSetAcquire,
  parseLockSetRenew,
  parsePermitAcquire,
  parsePermitForceRelease,
  parsePermitHeartbeat,
  parsePermitInspect,
  parseRateAllowance,
  parseRelease,
  parseScan,
  parseQuotaExtend,
  parseQuotaReserve,
  UnexpectedReplyError,
  unwrapEcho,
} from '../../src/store/redis/replies.js';

/**
 * Script replies are read strictly: each shape a script returns is read as it is meant, and anything
 * else (a reply of another script, a mangled one) throws instead of being taken for a grant.
 */
describe('Redis script replies', () => {
  it('a reply is only taken with the nonce of its own call', () => {
    expect(unwrapEcho('acquire', ['n1', [1, 2, 3]], 'n1')).toEqual([1, 2, 3]);
    for (const reply of [['n2', [1]], ['n1'], ['n1', 1, 2], [1, 'n1'], 'n1', null]) {
      expect(() => unwrapEcho('acquire', reply, 'n1')).toThrow(MisalignedReplyError);
    }
  });

  it('acquire: granted, replayed, held, queue full, queued; at least 1 ms to wait', () => {
    expect(parseAcquire([1, 7, 900])).toEqual({ kind: 'granted', fencingToken: 7, expiresAtMs: 900 });
    expect(parseAcquire([4, 7, 900, 'owner', 'w1'])).toEqual({
      kind: 'replayed',
      fencingToken: 7,
      expiresAtMs: 900,
      ownerToken: 'owner',
      holder: 'w1',
    });
    expect(parseAcquire([4, 7, 900, 'owner', ''])).toMatchObject({ holder: null });
    expect(parseAcquire([0, 250])).toEqual({ kind: 'held', retryAfterMs: 250 });
    expect(parseAcquire([2, 0])).toEqual({ kind: 'queue_full', retryAfterMs: 1 });
    expect(parseAcquire([3, 40])).toEqual({ kind: 'queued', retryAfterMs: 40 });
    expect(parseAcquire([5, 70])).toEqual({ kind: 'quota_full', retryAfterMs: 70 });
    for (const reply of [
      [1, 7],
      [1, 7, 900, 1],
      [1, '7', 900],
      [1, 7, 1.5],
      [1, 7, Number.MAX_SAFE_INTEGER + 2],
      [4, 7, 900, 'owner'],
      [4, 7, 900, 1, 'w1'],
      [4, 7, 900, 'owner', 1],
      [6, 1],
      [1.5, 1],
      [1, 1, 1, 1, 1],
      [0],
      [0, 1, 2],
      [3, 'x'],
      'granted',
      null,
    ]) {
      expect(() => parseAcquire(reply), JSON.stringify(reply)).toThrow(UnexpectedReplyError);
    }
  });

  it('cancel, release, slot replies', () => {
    expect(parseCancel([1, 7, 900])).toEqual({ held: true, fencingToken: 7, expiresAtMs: 900 });
    expect(parseCancel([0, 30])).toEqual({ held: false, retryAfterMs: 30 });
    for (const reply of [[1, 7], [0], [0, 1, 2], [2, 30], [1, 'x', 900], 0]) expect(() => parseCancel(reply)).toThrow(UnexpectedReplyError);
    expect(parseRelease(1)).toBe(true);
    expect(parseRelease(0)).toBe(false);
    for (const reply of [2, '1', [1], null]) expect(() => parseRelease(reply)).toThrow(UnexpectedReplyError);
    expect(parseQuotaReserve([1])).toEqual({ reserved: true });
    expect(parseQuotaReserve([0, 500])).toEqual({ reserved: false, retryAfterMs: 500 });
    expect(parseQuotaReserve([0, 0])).toEqual({ reserved: false, retryAfterMs: 1 });
    for (const reply of [[1, 2], [0], [2], [0, 'x'], [0, 500, 1], [1, 500], 1, null])
      expect(() => parseQuotaReserve(reply)).toThrow(UnexpectedReplyError);
    expect(parseQuotaExtend(1)).toBe(true);
    expect(parseQuotaExtend(0)).toBe(false);
    // Retired: nothing counted.
    expect(parseQuotaExtend(2)).toBe(false);
    for (const reply of [3, -1, [1]]) expect(() => parseQuotaExtend(reply)).toThrow(UnexpectedReplyError);
    // lock-set-release and lock-delay: a 0/1 flag, nothing else.
    expect(parseFlag('lockSetRelease', 1)).toBe(true);
    expect(parseFlag('lockSetRelease', 0)).toBe(false);
    for (const reply of [2, -1, '1', true, [1], null]) expect(() => parseFlag('lockSetRelease', reply)).toThrow(UnexpectedReplyError);
  });

  it('inspect, heartbeat, force release, scan', () => {
    expect(parseInspect([1, 7, 900, 80, 'w1', 2])).toEqual({
      held: true,
      fencingToken: 7,
      expiresAtMs: 900,
      ttlRemainingMs: 80,
      holder: 'w1',
      waiters: 2,
    });
    expect(parseInspect([1, 7, 900, 80, '', 0])).toMatchObject({ holder: null });
    expect(parseInspect([1, 7, 900, 80, 'w1', 2, '850|["ops",null]'])).toEqual({
      held: true,
      fencingToken: 7,
      expiresAtMs: 900,
      ttlRemainingMs: 80,
      holder: 'w1',
      waiters: 2,
      releaseRequested: { atMs: 850, by: 'ops', reason: null },
    });
    expect(parseInspect([0, 7, 30])).toEqual({ held: false, lastFencingToken: 7, lockDelayLeftMs: 30 });
    for (const reply of [
      [1, 7, 900, 80, 1, 2],
      [1, 7, 900, 80, 'w'],
      [2, 7, 900, 80, 'w', 2],
      [0],
      [0, 1],
      [0, 7, 'x'],
      [1, 7, 900, 80, 'w', 'x'],
      'x',
    ]) {
      expect(() => parseInspect(reply)).toThrow(UnexpectedReplyError);
    }
    expect(parseHeartbeat([300, 'w9'])).toEqual({ remainingLeaseMs: 300, grantedWaiterId: 'w9' });
    expect(parseHeartbeat([0, ''])).toEqual({ remainingLeaseMs: 0, grantedWaiterId: null });
    for (const reply of [[300], [300, 1], [300, 'w', 1], ['x', 'w'], 'x'])
      expect(() => parseHeartbeat(reply)).toThrow(UnexpectedReplyError);
    expect(parseForceRelease([1, 7, 'w1', 'owner', 900, 1])).toEqual({
      released: true,
      fencingToken: 7,
      holder: 'w1',
      ownerToken: 'owner',
      expiresAtMs: 900,
    });
    expect(parseForceRelease([1, 7, '', 'owner', 900, 0])).toMatchObject({ holder: null, quotaOutside: true });
    expect(parseForceRelease([0])).toEqual({ released: false });
    for (const reply of [
      [1, 7, 'w1'],
      [1, 7, 1, 'owner', 900, 1],
      [1, 7, 'w1', 1, 900, 1],
      [1, 7, 'w1', 'owner', 1],
      [1, 7, 'w1', 'owner'],
      [1, 7, 'w1', 'owner', 'x', 1],
      [1, 7, 'w1', 'owner', 900, 2],
      [2, 7, 'w', 'o'],
      [0, 0],
      [1],
      'x',
      null,
    ]) {
      expect(() => parseForceRelease(reply)).toThrow(UnexpectedReplyError);
    }
    expect(parseRateAllowance([2, 900, 5])).toEqual({ granted: 2, windowLeftMs: 900, handedOut: 5 });
    for (const reply of [[2, 900], [-1, 900, 5], [2, 0, 5], [3, 900, 2], [2, 900, 'x'], 'x'])
      expect(() => parseRateAllowance(reply)).toThrow(UnexpectedReplyError);
    expect(parseScan(['0', ['a', 'b']])).toEqual({ cursor: '0', keys: ['a', 'b'] });
    for (const reply of [['0'], [0, []], ['0', 'a'], ['0', ['a', 1]], ['0', [], 1], null])
      expect(() => parseScan(reply)).toThrow(UnexpectedReplyError);
  });

  it('every reader refuses a reply of another shape (another tag, length or field type, or no array at all) rather than misread it', () => {
    const refuses = (read: (reply: unknown) => unknown, replies: unknown[]) => {
      for (const reply of [null, 7, ...replies]) expect(() => read(reply), JSON.stringify(reply)).toThrow(UnexpectedReplyError);
    };
    // A replayed grant needs its tag: five fields under another tag are not one.
    refuses(parseAcquire, [
      [1, 7, 900, 'owner', 'w1'],
      [0, 7, 900, 'owner', 'w1'],
      [4, 7, 900, 'owner', 'w1', 1],
    ]);

    const lease = (reply: unknown) => parseLease('renew', reply);
    expect(lease([1, 7, 900])).toEqual({ held: true, fencingToken: 7, expiresAtMs: 900 });
    expect(lease([0])).toEqual({ held: false });
    // Tag 2 (a lease whose quota is counted through the quota-slot calls) from renew.lua only.
    expect(lease([2, 7, 900])).toEqual({ held: true, fencingToken: 7, expiresAtMs: 900, quotaOutside: true });
    expect(() => parseLease('permit-renew', [2, 7, 900])).toThrow(UnexpectedReplyError);
    refuses(lease, [[1, 7], [3, 7, 900], [1, 7, 900, 1], [2, 7, 900, 1], [0, 5], [1], [1, 'x', 900], [1, 7, 'x'], [2, 'x', 900]]);
    refuses(parseCancel, [
      [1, 7, 900, 1],
      [2, 7, 900],
      [0, 30, 1],
      [1, 30],
    ]);
    refuses(parseInspect, [
      [1, 7, 900, 80, 'w', 2, 9],
      [1, 7, 900, 80, 'w', 2, 'no request'],
      [0, 7, 30, 1],
      [1, 7, 30],
    ]);

    const setAcquire = (reply: unknown) => parseLockSetAcquire(reply, 2);
    expect(setAcquire([1, 900, 11, 12])).toEqual({ granted: true, expiresAtMs: 900, fencingTokens: [11, 12] });
    expect(setAcquire([0, 250, 1])).toEqual({ granted: false, retryAfterMs: 250, busyIndex: 1 });
    expect(setAcquire([0, 250, 0])).toMatchObject({ busyIndex: 0 });
    refuses(setAcquire, [
      [1, 900, 11],
      [2, 900, 11, 12],
      [0, 250, 1, 5],
      [3, 250, 1],
      [0, 250, 2],
      [0, 250, -1],
      [1, 900, 11, 'x'],
      [0, 'x', 1],
    ]);
    const setRenew = (reply: unknown) => parseLockSetRenew(reply, 2);
    expect(setRenew([1, 900, 11, 12])).toEqual({ renewed: true, expiresAtMs: 900, fencingTokens: [11, 12] });
    expect(setRenew([0])).toEqual({ renewed: false });
    refuses(setRenew, [[1, 900, 11], [2, 900, 11, 12], [0, 5], [1], [2]]);

    expect(parseRateAllowance([0, 900, 5])).toEqual({ granted: 0, windowLeftMs: 900, handedOut: 5 });
    expect(parseRateAllowance([2, 1, 2])).toEqual({ granted: 2, windowLeftMs: 1, handedOut: 2 });
    refuses(parseRateAllowance, [[2, 900, 5, 1]]);

    expect(parsePermitAcquire([1, 7, 900])).toEqual({ kind: 'granted', fencingToken: 7, expiresAtMs: 900 });
    expect(parsePermitAcquire([5, 3, 250])).toEqual({ kind: 'mismatch', capacity: 3, retryAfterMs: 250 });
    expect(parsePermitAcquire([5, 3, 0])).toEqual({ kind: 'mismatch', capacity: 3, retryAfterMs: 1 });
    expect(parsePermitAcquire([0, 250])).toEqual({ kind: 'held', retryAfterMs: 250 });
    expect(parsePermitAcquire([2, 0])).toEqual({ kind: 'queue_full', retryAfterMs: 1 });
    expect(parsePermitAcquire([3, 40])).toEqual({ kind: 'queued', retryAfterMs: 40 });
    refuses(parsePermitAcquire, [
      [1, 7],
      [5, 3],
      [4, 3, 250],
      [0, 1, 2],
      [6, 1],
      [1, 7, 900, 1],
      [5, 3, 250, 1],
      [2, 3, 250],
      [5, 'x', 250],
      [3, 'x'],
    ]);

    expect(parsePermitHeartbeat([300])).toEqual({ remainingLeaseMs: 300, grantedWaiterIds: [] });
    expect(parsePermitHeartbeat([0, 'w1', 'w2'])).toEqual({ remainingLeaseMs: 0, grantedWaiterIds: ['w1', 'w2'] });
    refuses(parsePermitHeartbeat, [[], [300, 1], [300, 'w', 1], ['x'], 'x']);

    expect(parsePermitInspect([0, 42])).toEqual({ index: 42, held: null });
    expect(parsePermitInspect([1, 3, 2, 1000, 42, 5])).toEqual({
      index: 42,
      held: { capacity: 3, waiters: 2, nowMs: 1000, count: 5, leases: [] },
    });
    expect(parsePermitInspect([1, 3, 0, 1000, 42, 2, 1, 7, 900, 'w', '', 2, 8, 950, '', '990|["ops","drain"]'])).toEqual({
      index: 42,
      held: {
        capacity: 3,
        waiters: 0,
        nowMs: 1000,
        count: 2,
        leases: [
          { weight: 1, fencingToken: 7, expiresAtMs: 900, holder: 'w' },
          { weight: 2, fencingToken: 8, expiresAtMs: 950, holder: null, releaseRequested: { atMs: 990, by: 'ops', reason: 'drain' } },
        ],
      },
    });
    refuses(parsePermitInspect, [
      // The shape before release requests were shown (four fields per lease), and a request that is not one.
      [1, 3, 0, 1000, 42, 2, 1, 7, 900, 'w', 2, 8, 950, ''],
      [1, 3, 0, 1000, 42, 1, 1, 7, 900, 'w', 'not a request'],
      [1, 3, 0, 1000, 42, 1, 1, 7, 900, 'w', 5],
      [0, 42, 1],
      [1, 42],
      [1, 3, 2, 1000, 42],
      [2, 3, 2, 1000, 42, 1],
      [1, 3, 2, 1000, 42, 1, 1, 7, 900],
      [1, 3, 2, 1000, 42, 1, 1, 7, 900, 5],
      [0, 'x'],
    ]);

    expect(parsePermitForceRelease([])).toEqual([]);
    expect(parsePermitForceRelease(['o1', 7, 'w1', 900, 'o2', 8, '', 950])).toEqual([
      { ownerToken: 'o1', fencingToken: 7, holder: 'w1', expiresAtMs: 900 },
      { ownerToken: 'o2', fencingToken: 8, holder: null, expiresAtMs: 950 },
    ]);
    refuses(parsePermitForceRelease, [
      ['o1', 7],
      ['o1', 7, 'w'],
      [1, 7, 'w', 900],
      ['o', 7, 1, 900],
      ['o', 'x', 'w', 900],
      ['o', 7, 'w', 'x'],
    ]);
  });

  it('hand-over announcements: the waiter id and the lease of a well-formed message, else null', () => {
    expect(parseHandOver('w1|7|900|ns/k')).toEqual({ waiterId: 'w1', fencingToken: 7, expiresAtMs: 900 });
    expect(parseHandOver('w1|17|900|ns/k')).toEqual({ waiterId: 'w1', fencingToken: 17, expiresAtMs: 900 });
    for (const message of [
      'a|w1|7|900|k',
      'w1|7|900|k\nx',
      'w1|7|900',
      '|7|900|k',
      'w1|x|900|k',
      'w1|7|900|',
      `w1|${'9'.repeat(20)}|900|k`,
      `w1|7|${'9'.repeat(20)}|k`,
    ]) {
      expect(parseHandOver(message), message).toBeNull();
    }
  });
});

describe('Redis key names: edge cases', () => {
  const space = new KeySpace('kh:');

  it('splits an id at its first separator; an id without a group (or starting with one) is its own group', () => {
    expect(splitId('a/b/c')).toEqual({ group: 'a', name: 'b/c' });
    expect(splitId('plain')).toEqual({ group: 'plain', name: '' });
    expect(splitId('/x')).toEqual({ group: '/x', name: '' });
    expect(space.tagged('a/', 'q')).toMatch(/^kh:\{a#\d+\}q\/$/);
  });

  it('reads back no lock id from names that no lock hash has', () => {
    for (const name of [
      'kh:{}',
      'kh:{a',
      'zz:{a}/x',
      'xkh:{a}/x',
      'kh:{a/b}/x',
      'kh:{a{b}/x',
      'kh:{a}/',
      'kh:{a}/x{y}',
      'kh:{a}/x}',
      'kh:{a}x',
      'kh:a}/x',
    ]) {
      expect(space.lockIdOf(name), name).toBeNull();
    }
    expect(space.lockIdOf(space.lock('a/b/c'))).toBe('a/b/c');
    // The layout before the quota shards (`{group}` with no shard) is no lock name: see the upgrade procedure.
    expect(space.lockIdOf('kh:{a}/b/c')).toBeNull();
  });

  it('escapes every glob character of a prefix', () => {
    expect(new KeySpace('k?[]\\:').lockPattern('n*s/k?[x]\\')).toBe('k\\?\\[\\]\\\\:{n\\*s#*}/k\\?\\[x\\]\\\\*');
    expect(space.lockPattern('/k')).toBe('kh:{/k*');
  });

  it("a caller's rate-limit window has a key of its own, under the prefix and outside every lock's tag", () => {
    expect(space.rateWindow('key:k1')).toBe('kh:ratelimit:key:k1');
    expect(space.lockIdOf(space.rateWindow('key:k1'))).toBeNull();
  });
});
