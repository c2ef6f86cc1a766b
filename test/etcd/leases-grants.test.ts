import { describe, expect, it } from 'vitest';
import type { LeaseAcquireOutcome } from '../../src/domain/lease-store.js';
import {
  engineWith,
  fixtureForFile,
  one,
  poolRecord,
  putPool,
  queueLength,
  queueRaw,
  type LeasesFixture,
} from '../helpers/etcd-leases-fixtures.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * The etcd lease engine's grants and the reads around them: a grant asked again by its owner, fencing
 * tokens across hand-overs, a lock set's lock-delay, renewals and evictions that touch only their own
 * lease, listing pages, etcd's watch on a record, and a waiter leaving just as it was handed a lease.
 * The store's clock is a fake one the test moves; timers stay real.
 */
let f: LeasesFixture;
const clock = new FakeClock(Math.floor(Date.now()));
fixtureForFile('lgr/', clock.now, (made) => (f = made));

const tokenOf = (out: LeaseAcquireOutcome): number => {
  if (!out.acquired) throw new Error(`not acquired: ${JSON.stringify(out)}`);
  return out.fencingTokens[0] as number;
};

describe('etcd lease engine: grants', () => {
  it('an acquire sent again by the owner of a live lock gets the same grant (its first answer was lost)', async () => {
    const id = 'ns/resent';
    const first = await f.store.engine.acquire(one('lock', id, 'A'));
    const again = await f.store.engine.acquire(one('lock', id, 'A'));
    expect(again).toMatchObject({ acquired: true, fencingTokens: [tokenOf(first)] });
    expect((again as { expiresAtMs: number }).expiresAtMs).toBe((first as { expiresAtMs: number }).expiresAtMs);
  });

  it('a semaphore acquire sent again by its owner takes no second lease', async () => {
    const id = 'ns/resent-sem';
    const first = await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 5 }));
    const again = await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 5 }));
    expect(again).toMatchObject({ acquired: true, fencingTokens: [tokenOf(first)] });
    expect(await f.store.engine.inspectPermits('semaphore', id)).toMatchObject({ holderCount: 1 });
  });

  it('a grant after a hand-over and a release gets a token above the handed one', async () => {
    const id = 'ns/tokens';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    await queueRaw(f, 'lock', id, [{ o: 'Q', ttl: 30_000, d: clock.nowMs + 60_000, h: 'queued', s: clock.nowMs }]);
    expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    const handed = await f.store.engine.lockState(id);
    expect(handed).toMatchObject({ holder: 'queued' });
    expect(await f.store.engine.release('lock', [id], 'Q')).toBe(true);
    const next = tokenOf(await f.store.engine.acquire(one('lock', id, 'B')));
    expect(next).toBeGreaterThan(handed?.fencingToken as number);
  });

  it("a lock set's lock-delay keeps each of its keys from everyone once its lease has expired", async () => {
    const ids = ['ns/set-a', 'ns/set-b'];
    const set = await f.store.engine.acquire({ ...one('lock', ids[0] as string, 'S', { ttlMs: 1_000, lockDelayMs: 5_000 }), ids });
    expect(set).toMatchObject({ acquired: true });
    clock.advance(1_500);
    expect(await f.store.engine.acquire(one('lock', 'ns/set-b', 'C'))).toMatchObject({ acquired: false, retryAfterMs: 4_500 });
    clock.advance(4_500);
    expect(await f.store.engine.acquire(one('lock', 'ns/set-b', 'C'))).toMatchObject({ acquired: true });
  });

  it('a renewal extends only the renewing lease of a semaphore', async () => {
    const id = 'ns/renew-own';
    expect(await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 3, ttlMs: 10_000 }))).toMatchObject({ acquired: true });
    const b = await f.store.engine.acquire(one('semaphore', id, 'B', { capacity: 3, ttlMs: 10_000 }));
    clock.advance(1_000);
    expect(await f.store.engine.renew('semaphore', [id], 'A', 60_000)).toMatchObject({ renewed: true });
    const state = await f.store.engine.inspectPermits('semaphore', id);
    const holderB = state?.holders.find((h) => h.fencingToken === tokenOf(b));
    expect(holderB?.expiresAtMs).toBe((b as { expiresAtMs: number }).expiresAtMs);
  });

  it('a forced release naming a token nobody holds changes nothing (no index bump)', async () => {
    const id = 'ns/force-none';
    expect(await f.store.engine.acquire(one('semaphore', id, 'A', { capacity: 2 }))).toMatchObject({ acquired: true });
    const before = await f.store.engine.inspectPermitsIndexed('semaphore', id);
    const record = await poolRecord(f, 'semaphore', id);
    expect(await f.store.engine.forceRelease('semaphore', id, 12_345)).toEqual([]);
    expect((await f.store.engine.inspectPermitsIndexed('semaphore', id)).index).toBe(before.index);
    expect((await poolRecord(f, 'semaphore', id))?.modRevision).toBe(record?.modRevision);
  });
});

describe('etcd lease engine: reads', () => {
  it('lists held locks a page at a time, each once, and says when there is no next page', async () => {
    for (const id of ['pg/a', 'pg/b', 'pg/c'])
      expect(await f.store.engine.acquire(one('lock', id, `o-${id}`))).toMatchObject({ acquired: true });
    const pages: string[][] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 6; i++) {
      const page = await f.store.engine.listLocks({ prefix: 'pg/', limit: 1, ...(cursor !== undefined ? { cursor } : {}) });
      pages.push(page.leases.map((l) => l.id));
      if (page.nextCursor === null) break;
      cursor = page.nextCursor;
    }
    expect(pages).toEqual([['pg/a'], ['pg/b'], ['pg/c']]);
  });

  it("etcd's watch on a record tells of a put and of a delete, and nothing once cancelled", async () => {
    const id = 'ns/watched';
    let seen = 0;
    let other = 0;
    const opened = f.store.engine.watchChanges('lock', id, () => seen++);
    const hung = new Promise<'hung'>((r) => setTimeout(() => r('hung'), 5_000).unref());
    const cancel = await Promise.race([opened, hung]);
    expect(cancel).not.toBe('hung');
    const cancelOther = await f.store.engine.watchChanges('lock', id, () => other++);
    const base = seen;
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    await eventually(async () => expect(seen).toBe(base + 1), 5_000);
    await f.raw.delete().key(f.keys.leaseRecord('lock', id));
    await eventually(async () => expect(seen).toBe(base + 2), 5_000);
    (cancel as () => void)();
    await eventually(async () => expect(other).toBe(2), 5_000);
    expect(await f.store.engine.acquire(one('lock', id, 'B'))).toMatchObject({ acquired: true });
    await eventually(async () => expect(other).toBe(3), 5_000);
    expect(seen).toBe(base + 2);
    cancelOther();
  });
});

describe('etcd lease engine: a waiter that leaves', () => {
  it('just as it was handed the lock gives it back (the next caller gets it)', async () => {
    // An engine of its own: no heartbeat visits its waiters, so the abort is what finds the hand-over.
    let handOverRead = false;
    let visited = false;
    const { engine } = engineWith(
      f.store,
      async () => undefined,
      async (request) => {
        const second = request.success?.[1]?.request_range;
        if (second?.sort_target === 'Create') handOverRead = true;
        else if (handOverRead && second?.count_only === true) visited = true;
      },
    );
    const id = 'ns/left-handed';
    expect(await engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const ac = new AbortController();
    const waiting = engine.acquire(one('lock', id, 'W', { waitMs: 20_000, signal: ac.signal })).then(
      (o) => o,
      (e: unknown) => e,
    );
    await eventually(async () => expect(await queueLength(f, 'lock', id)).toBe(1), 5_000);
    // The visit made once W waits (its hand-over's read, then its read of the record) is over.
    await eventually(async () => expect(visited).toBe(true), 5_000);
    const token = ((await poolRecord(f, 'lock', id))?.value.l[0]?.t as number) + 1;
    // Another instance handed W the lock and named nobody.
    await putPool(f, 'lock', id, {
      c: 1,
      x: token,
      l: [{ o: 'W', w: 1, e: clock.nowMs + 30_000, h: 'h-W', t: token }],
      k: clock.nowMs + 90_000,
    });
    const q = f.keys.leaseQueue('lock', id);
    await f.raw.kv.deleteRange({ key: q.key, range_end: q.rangeEnd });
    ac.abort(new Error('caller left'));
    expect(await waiting).toMatchObject({ message: 'caller left' });
    expect(await engine.lockState(id)).toBeNull();
    await engine.closeAll(new Error('done'));
  });

  it('named in a hand-over whose lease already ran out is answered unavailable, not granted', async () => {
    const { engine } = engineWith(f.store, async () => undefined);
    const id = 'ns/handed-expired';
    expect(await engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const waiting = engine.acquire(one('lock', id, 'W', { waitMs: 20_000 })).then(
      (o) => o,
      (e: unknown) => e,
    );
    await eventually(async () => expect(await queueLength(f, 'lock', id)).toBe(1), 5_000);
    const q = f.keys.leaseQueue('lock', id);
    const waiterKv = (await f.raw.kv.range({ key: q.key, range_end: q.rangeEnd })).kvs[0];
    const waiterId = f.keys.waiterIdOf(waiterKv?.key as Buffer);
    const token = ((await poolRecord(f, 'lock', id))?.value.l[0]?.t as number) + 1;
    let settled = false;
    void waiting.then(() => (settled = true));
    // The hand-over's put names W, but its lease has already ended; sent again until the watch (opened
    // after W queued) has seen one.
    await eventually(async () => {
      await putPool(f, 'lock', id, {
        c: 1,
        x: token,
        l: [{ o: 'W', w: 1, e: clock.nowMs - 1, h: 'h-W', t: token }],
        g: [waiterId],
        k: clock.nowMs + 90_000,
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(settled).toBe(true);
    }, 10_000);
    expect(await waiting).toMatchObject({ name: 'StoreUnavailableError' });
    await engine.closeAll(new Error('done'));
  });
});
