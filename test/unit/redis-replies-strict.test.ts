import { describe, expect, it } from 'vitest';
import {
  parseForceRelease,
  parseInspect,
  parseLease,
  parseLockRelease,
  parseLockSetRenew,
  parsePermitHeartbeat,
  parsePermitInspect,
  parseQueue,
  parseRequestRelease,
  UnexpectedReplyError,
} from '../../src/store/redis/replies.js';

/**
 * The readers of script replies take only the shapes the scripts send: a field of another type, one
 * field too many or another tag is a reply these readers do not know, and taking it anyway could report
 * a lock as released, handed over or asked to be released when it was not. Each such reply throws.
 */

/** Asserts every reply throws UnexpectedReplyError (not a TypeError from reading a field of a non-array). */
function refuses(read: (reply: unknown) => unknown, replies: unknown[]): void {
  for (const reply of replies) expect(() => read(reply), JSON.stringify(reply)).toThrow(UnexpectedReplyError);
}

/** A stored release request as request-release.lua writes it: "atMs|[by, reason]". */
const ASKED = '850|["ops",null]';

describe('Redis script replies: stored release requests', () => {
  const inspectWith = (stored: unknown) => parseInspect([1, 7, 900, 80, 'w1', 2, stored]);

  it('reads a stored request as its time, its asker and its reason', () => {
    expect(inspectWith('850|["ops","drain"]')).toMatchObject({ releaseRequested: { atMs: 850, by: 'ops', reason: 'drain' } });
    expect(inspectWith(ASKED)).toMatchObject({ releaseRequested: { atMs: 850, by: 'ops', reason: null } });
  });

  it('a stored value whose time is not a whole number, or whose asker or reason has another type, is no request', () => {
    refuses(inspectWith, [
      'x|["ops",null]',
      '8.5|["ops",null]',
      `${'9'.repeat(20)}|["ops",null]`,
      '["ops",null]',
      '850|[1,null]',
      '850|[null,null]',
      '850|["ops",5]',
      '850|["ops",false]',
      '850|["ops"',
      // Only digits are a time: no empty one (read as 0), no hex, exponent, sign or spaces.
      '|["ops",null]',
      '0x10|["ops",null]',
      '1e3|["ops",null]',
      ' 850 |["ops",null]',
      '-5|["ops",null]',
    ]);
  });
});

describe('Redis script replies: the exact shapes', () => {
  const request = { by: 'ops', reason: 'drain' };
  const requestRelease = (reply: unknown) => parseRequestRelease('request-release', reply, request);

  it('request-release: {1, atMs} is the request as stored now, {0} none; nothing else', () => {
    expect(requestRelease([1, 850])).toEqual({ atMs: 850, by: 'ops', reason: 'drain' });
    expect(parseRequestRelease('permit-request-release', [1, 850], { by: 'ops', reason: null })).toEqual({
      atMs: 850,
      by: 'ops',
      reason: null,
    });
    expect(requestRelease([0])).toBeNull();
    refuses(requestRelease, [null, 7, 'x', [], [1], [1, 850, 1], [2, 850], [0, 850], [2], [1, 'x'], [1, 1.5]]);
  });

  it('a lease reply with one field more than the request is refused', () => {
    refuses((reply) => parseLease('renew', reply), [[1, 7, 900, ASKED, 'x']]);
    refuses(parseInspect, [[1, 7, 900, 80, 'w1', 2, ASKED, 'x']]);
  });

  it('lock release: 1 or 0, or {1, waiterId, token, end} when it was handed to a waiter of this instance', () => {
    expect(parseLockRelease(1)).toEqual({ released: true });
    expect(parseLockRelease(0)).toEqual({ released: false });
    expect(parseLockRelease([1, 'w1', 7, 900])).toEqual({
      released: true,
      handedTo: { waiterId: 'w1', fencingToken: 7, expiresAtMs: 900 },
    });
    refuses(parseLockRelease, [
      null,
      2,
      '1',
      [],
      [1],
      // Another length, another tag, no waiter id (or an empty one): no hand-over to answer from.
      [1, 'w1', 7, 900, 5],
      [1, 'w1', 7],
      [0, 'w1', 7, 900],
      [2, 'w1', 7, 900],
      [1, 5, 7, 900],
      [1, '', 7, 900],
      [1, 'w1', 'x', 900],
      [1, 'w1', 7, 'x'],
    ]);
  });

  it('lock-set renew: the release request on one of the keys comes after the tokens, and only there', () => {
    const setRenew = (reply: unknown) => parseLockSetRenew(reply, 2);
    expect(setRenew([1, 900, 11, 12, ASKED])).toEqual({
      renewed: true,
      expiresAtMs: 900,
      fencingTokens: [11, 12],
      releaseRequested: { atMs: 850, by: 'ops', reason: null },
    });
    refuses(setRenew, [
      [0, 900, 11, 12, ASKED],
      [2, 900, 11, 12, ASKED],
      [1, 900, 11, 12, ASKED, 'x'],
      [1, 900, 11, 12, 13, ASKED],
      [1, 900, 11, 12, 'not a request'],
    ]);
  });

  it('force release: six fields under tag 1, no more and no other tag', () => {
    refuses(parseForceRelease, [
      [1, 7, 'w1', 'owner', 900, 1, 'x'],
      [2, 7, 'w1', 'owner', 900, 1],
      [0, 7, 'w1', 'owner', 900, 1],
    ]);
  });

  it('permit heartbeat: "!" marks a waiter of this instance whose place is gone, and it is no grant', () => {
    expect(parsePermitHeartbeat([300, 'w1', '!w2', 'w3', '!w4'])).toEqual({
      remainingLeaseMs: 300,
      grantedWaiterIds: ['w1', 'w3'],
      lostWaiterIds: ['w2', 'w4'],
    });
    expect(parsePermitHeartbeat([300, '!w2'])).toEqual({ remainingLeaseMs: 300, grantedWaiterIds: [], lostWaiterIds: ['w2'] });
    // A "!" inside or at the end of an id is part of the id.
    expect(parsePermitHeartbeat([300, 'w!', 'a!b'])).toEqual({ remainingLeaseMs: 300, grantedWaiterIds: ['w!', 'a!b'] });
  });

  it('permit inspect: a lease whose holder is not a string is refused', () => {
    refuses(parsePermitInspect, [
      [1, 3, 0, 1000, 42, 1, 1, 7, 900, 5, ''],
      [1, 3, 0, 1000, 42, 1, 1, 7, 900, null, ASKED],
    ]);
  });

  it('queue: {holder, arrivedUs, weight} per waiter, head first; arrival in whole ms', () => {
    expect(parseQueue([])).toEqual([]);
    expect(parseQueue(['w1', '1500999', 0, '', 2_000_000, 3])).toEqual([
      { holder: 'w1', waitingSinceMs: 1500, weight: 0 },
      { holder: null, waitingSinceMs: 2000, weight: 3 },
    ]);
    refuses(parseQueue, [
      null,
      7,
      // An empty string is no list of waiters, though it has no characters left over either.
      '',
      'abc',
      [5, 1000, 0],
      [null, 1000, 0],
      ['w1', 'x', 0],
      ['w1', 1000, 'x'],
      ['w1', 1000, 0, 'w2'],
    ]);
  });
});
