import type { ITxnRequest } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { MAX_CAS_ROUNDS } from '../../src/store/etcd/etcd-records.js';
import {
  answeredWithin,
  engineWith,
  fixtureForFile,
  one,
  poolRecord,
  putPool,
  queueRaw,
  touch,
  type LeasesFixture,
} from '../helpers/etcd-leases-fixtures.js';
import { FakeClock } from '../helpers/fake-clock.js';

/**
 * The etcd lease engine under contention: every change is a compare-and-set on the key's record, and
 * another instance may write that record between the engine's read and its write. A change that lost
 * is decided again on a fresh read (never applied as if it had won), and after MAX_CAS_ROUNDS lost
 * rounds the caller is told the store could not decide (503). The other instance's writes are made by
 * the test, just before the engine's change reaches etcd.
 */
let f: LeasesFixture;
const clock = new FakeClock(Math.floor(Date.now()));
fixtureForFile('lct/', clock.now, (made) => (f = made));

const firstKey = (request: ITxnRequest): Buffer => request.compare?.[0]?.key as Buffer;
/** A hand-over's change compares the record and each waiter it takes. */
const isHandOver = (request: ITxnRequest) => (request.compare?.length ?? 0) > 1 && (request.success?.length ?? 0) > 1;
/** A queueing: one put on the instance's session lease. */
const isEnqueue = (request: ITxnRequest) => {
  const put = request.success?.length === 1 ? request.success[0]?.request_put : undefined;
  return put?.lease !== undefined && !!put.key?.toString().includes('queue/');
};

/** An engine each of whose changes (those `which` picks) another instance beats; stops a runaway loop. */
function alwaysBeaten(which: (request: ITxnRequest) => boolean = () => true) {
  let beaten = 0;
  const made = engineWith(f.store, async (request) => {
    if (!which(request)) return;
    if (++beaten > MAX_CAS_ROUNDS + 4) throw new Error('still trying after MAX_CAS_ROUNDS lost rounds');
    await touch(f, firstKey(request));
  });
  return { engine: made.engine, beaten: () => beaten };
}

/** An engine whose first change (of those `which` picks) meets `first` just before it reaches etcd. */
function beatenOnce(first: (request: ITxnRequest) => Promise<void>, which: (request: ITxnRequest) => boolean = () => true) {
  let done = false;
  return engineWith(f.store, async (request) => {
    if (done || !which(request)) return;
    done = true;
    await first(request);
  }).engine;
}

describe('etcd lease engine: a change that always loses gives up after MAX_CAS_ROUNDS rounds', () => {
  const held = async (id: string) => {
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
  };

  it('acquire', async () => {
    const id = 'ns/c-acquire';
    await held(id);
    expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.acquire(one('lock', id, 'B'))).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('a lock set', async () => {
    const ids = ['ns/c-set-a', 'ns/c-set-b'];
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.acquire({ ...one('lock', ids[0] as string, 'B'), ids })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('renew', async () => {
    const id = 'ns/c-renew';
    await held(id);
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.renew('lock', [id], 'A', 30_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('a release request', async () => {
    const id = 'ns/c-request';
    await held(id);
    const token = (await f.store.engine.lockState(id))?.fencingToken as number;
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.requestRelease('lock', id, token, { by: 'ops', reason: null })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('release', async () => {
    const id = 'ns/c-release';
    await held(id);
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.release('lock', [id], 'A')).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('a forced release', async () => {
    const id = 'ns/c-force';
    await held(id);
    const { engine, beaten } = alwaysBeaten();
    await expect(engine.forceRelease('lock', id)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
  });

  it('a hand-over (the release that starts it still succeeds)', async () => {
    const id = 'ns/c-hand-over';
    await held(id);
    await queueRaw(f, 'lock', id, [{ o: 'Q', ttl: 30_000, d: clock.nowMs + 60_000, h: 'queued', s: clock.nowMs }]);
    const { engine, beaten } = alwaysBeaten(isHandOver);
    expect(await engine.release('lock', [id], 'A')).toBe(true);
    expect(beaten()).toBe(MAX_CAS_ROUNDS);
    expect(await f.store.engine.lockState(id)).toBeNull();
  });
});

describe('etcd lease engine: a change that lost once is decided again', () => {
  it('a renewal writes the new end it answers', async () => {
    const id = 'ns/o-renew';
    expect(await f.store.engine.acquire(one('lock', id, 'A', { ttlMs: 10_000 }))).toMatchObject({ acquired: true });
    clock.advance(1_000);
    const engine = beatenOnce((request) => touch(f, firstKey(request)));
    const reply = await engine.renew('lock', [id], 'A', 30_000);
    expect(reply).toMatchObject({ renewed: true });
    expect((await f.store.engine.lockState(id))?.expiresAtMs).toBe((reply as { expiresAtMs: number }).expiresAtMs);
  });

  it('a release request for a lease released meanwhile is answered "no such lease"', async () => {
    const id = 'ns/o-request';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const token = (await f.store.engine.lockState(id))?.fencingToken as number;
    const engine = beatenOnce(async () => {
      expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    });
    expect(await engine.requestRelease('lock', id, token, { by: 'ops', reason: null })).toBeNull();
    expect(await f.store.engine.lockState(id)).toBeNull();
  });

  it('a release is answered true only once the lease is gone', async () => {
    const id = 'ns/o-release';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const engine = beatenOnce((request) => touch(f, firstKey(request)));
    expect(await engine.release('lock', [id], 'A')).toBe(true);
    expect(await f.store.engine.lockState(id)).toBeNull();
  });

  it('a caller about to queue for a lock released meanwhile gets it at once (not queued)', async () => {
    const id = 'ns/o-enqueue';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const engine = beatenOnce(async () => {
      expect(await f.store.engine.release('lock', [id], 'A')).toBe(true);
    }, isEnqueue);
    const out = await engine.acquire(one('lock', id, 'W', { waitMs: 3_000 }));
    expect(out).toMatchObject({ acquired: true });
    expect(out).not.toHaveProperty('queued');
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'h-W' });
  });

  it('a caller whose queueing fails is answered with the failure, not left waiting', async () => {
    const id = 'ns/o-enqueue-fails';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    const engine = beatenOnce(async () => {
      throw new StoreUnavailableError('etcd went away');
    }, isEnqueue);
    await expect(engine.acquire(one('lock', id, 'W', { waitMs: 3_000 }))).rejects.toThrow('etcd went away');
  });

  it('a caller handed the lock before its watch was in place gets it from the visit made once it waits', async () => {
    const id = 'ns/o-handed-early';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    let handed = false;
    // An engine with no heartbeat: only the visit made once the caller waits can find the hand-over.
    const { engine } = engineWith(
      f.store,
      async () => undefined,
      async (request, response) => {
        if (handed || !isEnqueue(request) || !response.succeeded) return;
        handed = true;
        // Right after W queued, another instance hands it the lock (naming nobody: no watch tells of it).
        const t = ((await poolRecord(f, 'lock', id))?.value.l[0]?.t as number) + 1;
        await putPool(f, 'lock', id, { c: 1, x: t, l: [{ o: 'W', w: 1, e: clock.nowMs + 30_000, h: 'h-W', t }], k: clock.nowMs + 90_000 });
        const q = f.keys.leaseQueue('lock', id);
        await f.raw.kv.deleteRange({ key: q.key, range_end: q.rangeEnd });
      },
    );
    const waiting = engine.acquire(one('lock', id, 'W', { waitMs: 10_000 }));
    // Answered by that visit, not when its wait runs out (the cancel then finds the lease too).
    expect(await answeredWithin(waiting, 5_000)).toMatchObject({ acquired: true, queued: true });
    expect(handed).toBe(true);
    await waiting;
    await engine.closeAll(new Error('done'));
  });

  it('a hand-over that lost to a bare rewrite of the record is made on the next round', async () => {
    const id = 'ns/o-hand-over';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    await queueRaw(f, 'lock', id, [{ o: 'Q', ttl: 30_000, d: clock.nowMs + 60_000, h: 'queued', s: clock.nowMs }]);
    const engine = beatenOnce((request) => touch(f, firstKey(request)), isHandOver);
    expect(await engine.release('lock', [id], 'A')).toBe(true);
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'queued' });
  });

  it("a hand-over that lost to another instance's grant leaves that grant alone", async () => {
    const id = 'ns/o-hand-over-grant';
    expect(await f.store.engine.acquire(one('lock', id, 'A'))).toMatchObject({ acquired: true });
    await queueRaw(f, 'lock', id, [{ o: 'Q', ttl: 30_000, d: clock.nowMs + 60_000, h: 'queued', s: clock.nowMs }]);
    const engine = beatenOnce(async () => {
      const t = ((await poolRecord(f, 'lock', id))?.value.f ?? 0) + 1;
      await putPool(f, 'lock', id, { c: 1, x: t, l: [{ o: 'X', w: 1, e: clock.nowMs + 30_000, h: 'other', t }], k: clock.nowMs + 90_000 });
    }, isHandOver);
    expect(await engine.release('lock', [id], 'A')).toBe(true);
    expect(await f.store.engine.lockState(id)).toMatchObject({ holder: 'other' });
  });
});

describe("etcd lease engine: one instance's acquires of one key", () => {
  it('take turns: a burst of them loses no compare-and-set round to each other', async () => {
    const id = 'ns/turns';
    let changes = 0;
    const { engine } = engineWith(f.store, async () => {
      changes++;
    });
    const outs = await Promise.all(Array.from({ length: 20 }, (_, i) => engine.acquire(one('semaphore', id, `o${i}`, { capacity: 100 }))));
    expect(outs.every((o) => o.acquired)).toBe(true);
    expect(changes).toBe(20);
  });

  it('take turns also with callers that come while others have theirs', async () => {
    const id = 'ns/turns-later';
    let changes = 0;
    const { engine } = engineWith(f.store, async () => {
      changes++;
    });
    const acquire = (i: number) => engine.acquire(one('semaphore', id, `p${i}`, { capacity: 100 }));
    const first = [acquire(0), acquire(1), acquire(2)];
    await first[0];
    const later = [acquire(3), acquire(4), acquire(5)];
    const outs = await Promise.all([...first, ...later]);
    expect(outs.every((o) => o.acquired)).toBe(true);
    expect(changes).toBe(6);
  });
});
