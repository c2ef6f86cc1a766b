import type { IKeyValue } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { callEtcd, parseJson, queuedCallers, queueReadLimit, requestOf, storedRequest } from '../../src/store/etcd/etcd-records.js';

/** A key-value as etcd returns it; only the value is read by the functions here. */
function kv(value: Buffer | string, createRevision = 1): IKeyValue {
  const buf = typeof value === 'string' ? Buffer.from(value) : value;
  return {
    key: Buffer.from(`queue/ns/k#w${createRevision}`),
    value: buf,
    create_revision: String(createRevision),
    mod_revision: String(createRevision),
    version: '1',
    lease: '0',
  };
}

const waiter = (d: number, extra: Record<string, unknown> = {}) =>
  kv(JSON.stringify({ o: 'x'.repeat(22), ttl: 1_000, d, h: null, ...extra }));

describe('etcd record values', () => {
  it('reads a JSON value, and an absent, empty or unreadable one as no record', () => {
    expect(parseJson<{ a: number }>(Buffer.from('{"a":1}'))).toEqual({ a: 1 });
    expect(parseJson(undefined)).toBeNull();
    expect(parseJson(Buffer.alloc(0))).toBeNull();
    // A half-written or foreign value must read as a free key, not crash every call on it.
    expect(parseJson(Buffer.from('{"a":'))).toBeNull();
    expect(parseJson(Buffer.from('not json'))).toBeNull();
  });

  it('keeps a release request in its short stored form and reads it back', () => {
    const request = { atMs: 1_700_000_000_123, by: 'key-1', reason: 'deploy' };
    expect(storedRequest(request)).toEqual({ a: 1_700_000_000_123, b: 'key-1', n: 'deploy' });
    expect(requestOf(storedRequest(request))).toEqual(request);
    expect(requestOf(storedRequest({ ...request, reason: null }))).toEqual({ ...request, reason: null });
  });
});

describe('etcd queue listing', () => {
  const now = 10_000;

  it('lists live waiters in the order read, numbered from 1, with holder and join time, never the owner token', () => {
    const listed = queuedCallers([waiter(now + 5, { h: 'first', s: 100 }), waiter(now + 1, { h: 'second', s: 200 })], now, 10);
    expect(listed).toEqual([
      { position: 1, holder: 'first', waitingSinceMs: 100 },
      { position: 2, holder: 'second', waitingSinceMs: 200 },
    ]);
    expect(JSON.stringify(listed)).not.toContain('xxxx');
  });

  it('skips waiters whose wait has ended, at its deadline too (no hand-over would pick them), and unreadable records', () => {
    const listed = queuedCallers(
      [waiter(now - 1, { h: 'gone' }), waiter(now, { h: 'ends-now' }), kv(''), kv('{broken'), waiter(now + 1, { h: 'live' })],
      now,
      10,
    );
    expect(listed).toEqual([{ position: 1, holder: 'live', waitingSinceMs: 0 }]);
  });

  it('lists at most `limit` callers, counting only live ones', () => {
    const kvs = [waiter(now - 1), ...Array.from({ length: 5 }, (_v, i) => waiter(now + 100, { h: `w${i}` }))];
    expect(queuedCallers(kvs, now, 3).map((c) => c.holder)).toEqual(['w0', 'w1', 'w2']);
    expect(queuedCallers(kvs, now, 0)).toEqual([]);
  });

  it("shows a permit waiter's weight, and none for a lock waiter's record", () => {
    const [permit] = queuedCallers([waiter(now + 1, { w: 3, s: 5 })], now, 1);
    expect(permit).toEqual({ position: 1, holder: null, waitingSinceMs: 5, weight: 3 });
    const [lock] = queuedCallers([waiter(now + 1, { s: 5 })], now, 1);
    expect(lock).not.toHaveProperty('weight');
  });

  it('reads enough records that waits run out at the head of the queue do not hide the live callers behind them', () => {
    const limit = 3;
    expect(queueReadLimit(limit)).toBeGreaterThan(limit);
    // Expired waiters stay until they are swept: up to that many ahead of the live ones still leave a full page.
    const expired = queueReadLimit(limit) - limit;
    const queue = [
      ...Array.from({ length: expired }, () => waiter(now - 1)),
      ...Array.from({ length: 10 }, (_v, i) => waiter(now + 1, { h: `live${i}` })),
    ];
    const read = queue.slice(0, queueReadLimit(limit));
    expect(queuedCallers(read, now, limit).map((c) => c.holder)).toEqual(['live0', 'live1', 'live2']);
  });
});

describe('etcd calls', () => {
  it('answers a closed store with a 503 without calling etcd', async () => {
    let called = false;
    const run = () => {
      called = true;
      return Promise.resolve(1);
    };
    await expect(callEtcd(true, 'etcd', run)).rejects.toThrow(StoreUnavailableError);
    expect(called).toBe(false);
    await expect(callEtcd(false, 'etcd', run)).resolves.toBe(1);
    expect(called).toBe(true);
  });

  it('turns any etcd failure into a 503 whose outcome is unknown, keeping the cause', async () => {
    const cause = new Error('deadline exceeded');
    const err = await callEtcd(false, 'etcd history', () => Promise.reject(cause)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    const unavailable = err as StoreUnavailableError;
    expect(unavailable.message).toBe('etcd history call failed: deadline exceeded');
    expect(unavailable.retryAfterMs).toBe(1000);
    // The call may have been applied before its reply was lost: the caller must not read it as a "no".
    expect(unavailable.outcomeUnknown).toBe(true);
    expect(unavailable.cause).toBe(cause);
  });

  it("passes the store's own 503 through as it is: a certain answer stays certain", async () => {
    const own = new StoreUnavailableError('contended', 250);
    const err = await callEtcd(false, 'etcd', () => Promise.reject(own)).catch((e: unknown) => e);
    expect(err).toBe(own);
    expect((err as StoreUnavailableError).outcomeUnknown).toBe(false);
  });
});
