import { describe, expect, it } from 'vitest';
import {
  answeredWithin,
  fixtureForFile,
  one,
  poolRecord,
  putPool,
  queueLength,
  queueRaw,
  queueRawAtOnce,
  type LeasesFixture,
  type RawWaiter,
} from '../helpers/etcd-leases-fixtures.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * The etcd lease engine's queue: callers queued for a key (by this instance or another) get it before
 * anyone who comes later, in order, as far as their weights fit; callers whose wait has ended are dropped
 * on the way, and a queue longer than one read's heads is served to its end. The store's clock is a fake
 * one the test moves (lease and wait ends are on it); timers stay real.
 */
let f: LeasesFixture;
const clock = new FakeClock(Math.floor(Date.now()));
fixtureForFile('lho/', clock.now, (made) => (f = made));

/** A caller of another instance queued for a key, its wait ending `waitMs` from now. */
const waiter = (o: string, waitMs: number, more: Partial<RawWaiter> = {}): RawWaiter => ({
  o,
  ttl: 30_000,
  d: clock.nowMs + waitMs,
  h: `q-${o}`,
  s: clock.nowMs,
  ...more,
});

describe('etcd lease engine: callers queued come first', () => {
  it('a free lock with a caller queued is handed to that caller, and a newcomer that does not wait is refused', async () => {
    const id = 'ns/free-queued';
    await queueRaw(f, 'lock', id, [waiter('first', 60_000)]);
    const out = await f.store.engine.acquire(one('lock', id, 'newcomer'));
    expect(out).toMatchObject({ acquired: false, reason: 'full', busyId: id });
    // Handed over before the newcomer was answered.
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'q-first', waiters: 0 });
    expect(await queueLength(f, 'lock', id)).toBe(0);
  });

  it('a newcomer whose weight does not fit leaves a queued caller where it is', async () => {
    const id = 'ns/no-room';
    expect(await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 2 }))).toMatchObject({ acquired: true });
    await queueRaw(f, 'semaphore', id, [waiter('small', 60_000, { w: 1, c: 2 })]);
    const out = await f.store.engine.acquire(one('semaphore', id, 'big', { capacity: 2, weight: 2 }));
    expect(out).toMatchObject({ acquired: false, reason: 'full', busyId: id });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({ holderCount: 1, waiters: 1 });
  });

  it('a pool whose leases all ended takes the capacity of the caller it is handed to', async () => {
    const id = 'ns/ended-pool';
    expect(await f.store.engine.acquire(one('semaphore', id, 'old', { capacity: 2, ttlMs: 1_000 }))).toMatchObject({ acquired: true });
    clock.advance(2_000);
    await queueRaw(f, 'semaphore', id, [waiter('three', 60_000, { w: 3, c: 3 })]);
    const out = await f.store.engine.acquire(one('semaphore', id, 'late', { capacity: 3, weight: 1 }));
    expect(out).toMatchObject({ acquired: false, reason: 'full' });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({
      capacity: 3,
      holderCount: 1,
      holders: [expect.objectContaining({ holder: 'q-three', weight: 3 })],
    });
  });

  it("a pool with live leases keeps its capacity when it hands over, whatever the waiter's record says", async () => {
    const id = 'ns/live-pool';
    expect(await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 3 }))).toMatchObject({ acquired: true });
    await queueRaw(f, 'semaphore', id, [waiter('two', 60_000, { w: 2, c: 2 })]);
    const out = await f.store.engine.acquire(one('semaphore', id, 'late', { capacity: 3, weight: 1 }));
    expect(out).toMatchObject({ acquired: false, reason: 'full' });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({ capacity: 3, holderCount: 2, waiters: 0 });
  });

  it('a release hands the lock past unreadable waiters and those whose wait ended (to the millisecond)', async () => {
    const id = 'ns/ended-heads';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    await queueRaw(f, 'lock', id, ['not json', waiter('gone', 100), waiter('second', 60_000)]);
    // Now is exactly the end of the second waiter's wait: it has ended.
    clock.advance(100);
    expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'q-second', waiters: 0 });
    expect(await queueLength(f, 'lock', id)).toBe(0);
  });

  it('dropping only callers that stopped waiting leaves the pool record as the release wrote it', async () => {
    const id = 'ns/drop-only';
    expect(await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 2 }))).toMatchObject({ acquired: true });
    await queueRaw(f, 'semaphore', id, [waiter('gone', 50, { w: 1, c: 2 })]);
    clock.advance(100);
    expect(await f.store.engine.release('semaphore', [id], 'A')).toBe(true);
    expect(await queueLength(f, 'semaphore', id)).toBe(0);
    const record = await poolRecord(f, 'semaphore', id);
    // The waiter's record was deleted after the release's write: the pool's record is older than that.
    const current = Number((await f.raw.kv.range({ key: Buffer.from('lho/nothing') })).header.revision);
    expect(record?.modRevision).toBeLessThan(current);
  });

  it('a free lock whose only queued caller has stopped waiting is granted to a newcomer', async () => {
    const id = 'ns/only-ended';
    await queueRaw(f, 'lock', id, [waiter('gone', 50)]);
    clock.advance(100);
    expect(await f.store.engine.acquire(one('lock', id, 'newcomer'))).toMatchObject({ acquired: true });
    expect(await queueLength(f, 'lock', id)).toBe(0);
  });

  it('a queue longer than one read is served to its end, past the waiters that stopped waiting', async () => {
    const id = 'ns/long-queue';
    await queueRaw(f, 'semaphore', id, [waiter('gone-1', 50, { w: 1, c: 100 }), waiter('gone-2', 50, { w: 1, c: 100 })]);
    await queueRawAtOnce(
      f,
      'semaphore',
      id,
      2,
      Array.from({ length: 65 }, (_, i) => waiter(`live-${i}`, 60_000, { w: 1, c: 100 })),
    );
    clock.advance(100);
    const out = await f.store.engine.acquire(one('semaphore', id, 'late', { capacity: 100 }));
    expect(out).toMatchObject({ acquired: true });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({ holderCount: 66, waiters: 0 });
  });

  it('a queue whose first read is all stopped waiters is read on, and the live caller behind them served', async () => {
    const id = 'ns/ended-read';
    await queueRawAtOnce(
      f,
      'semaphore',
      id,
      0,
      Array.from({ length: 64 }, (_, i) => waiter(`gone-${i}`, 50, { w: 1, c: 10 })),
    );
    await queueRawAtOnce(f, 'semaphore', id, 64, [waiter('live', 60_000, { w: 1, c: 10 })]);
    clock.advance(100);
    const out = await f.store.engine.acquire(one('semaphore', id, 'late', { capacity: 10 }));
    expect(out).toMatchObject({ acquired: true });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({ holderCount: 2, waiters: 0 });
    expect(await queueLength(f, 'semaphore', id)).toBe(0);
  });
});

describe('etcd lease engine: a caller waiting on this instance', () => {
  it('is answered with the lease once the holder releases (queued), above the holder token', async () => {
    const id = 'ns/handed';
    const first = await f.store.engine.acquire(one('lock', id, 'A'));
    expect(first).toMatchObject({ acquired: true });
    const waiting = f.store.engine.acquire(one('lock', id, 'W', { waitMs: 10_000 }));
    await eventually(async () => expect(await queueLength(f, 'lock', id)).toBe(1), 5_000);
    expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    const out = await waiting;
    expect(out).toMatchObject({ acquired: true, queued: true });
    const token = out.acquired ? (out.fencingTokens[0] as number) : 0;
    expect(token).toBeGreaterThan(first.acquired ? (first.fencingTokens[0] as number) : Infinity);
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'h-W', fencingToken: token });
  });

  it('whose wait runs out is told the key is full, when to try again, and which key', async () => {
    const id = 'ns/times-out';
    expect(await f.store.engine.acquire(one('lock', id, 'A', { ttlMs: 60_000 }))).toMatchObject({ acquired: true });
    const out = await f.store.engine.acquire(one('lock', id, 'W', { waitMs: 300 }));
    expect(out).toStrictEqual({ acquired: false, reason: 'full', retryAfterMs: 60_000, busyId: id });
    expect(await queueLength(f, 'lock', id)).toBe(0);
  });

  it('is found holding a lease handed over without a word (a visit sees it), and gets it', async () => {
    const id = 'ns/visited';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const waiting = f.store.engine.acquire(one('lock', id, 'W', { waitMs: 10_000 }));
    await eventually(async () => expect(await queueLength(f, 'lock', id)).toBe(1), 5_000);
    // Another instance handed W the lock and named nobody (so no watch delivers it).
    const before = await poolRecord(f, 'lock', id);
    const token = (before?.value.l[0]?.t as number) + 1;
    await putPool(f, 'lock', id, {
      c: 1,
      x: token,
      l: [{ o: 'W', w: 1, e: clock.nowMs + 30_000, h: 'h-W', t: token }],
      k: clock.nowMs + 90_000,
    });
    const q = f.keys.leaseQueue('lock', id);
    await f.raw.kv.deleteRange({ key: q.key, range_end: q.rangeEnd });
    f.store.engine.visitAll();
    // Answered by the visit, not when its wait runs out (the cancel then finds the lease too).
    expect(await answeredWithin(waiting, 5_000)).toMatchObject({ acquired: true, fencingTokens: [token], queued: true });
    await waiting;
  });
});
