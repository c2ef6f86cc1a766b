import { performance } from 'node:perf_hooks';
import { describe, expect, it, vi } from 'vitest';
import { LockHeldError, NotOwnerError, QuotaExceededError, ShuttingDownError } from '../../src/domain/errors.js';
import { LeaseService, type LeaseServiceObserver, type LockSetOperation } from '../../src/domain/lease-service.js';
import type { LeaseAcquire, LeaseStore } from '../../src/domain/lease-store.js';
import { lockId } from '../../src/domain/namespaces.js';
import { QUOTA_SLOT_MARGIN_MS } from '../../src/domain/quota.js';
import { embeddedStoreForFile, LIMITS, LOCK_REFUSALS, lockAsk, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * What the lease engine reports as it works (metrics are built from it: a lock set's calls, their
 * durations in seconds, and the part spent waiting for busy keys, which the acquire-latency histogram
 * leaves out), that it works the same with no observer at all, and the terms it sends the store: a set's
 * keys in sorted order, a set's quota slots lasting the wait and the lease and a margin, a replay look
 * that never waits in the key's queue, and a force release of every lease that answers what it evicted.
 * Last, a waiting lock set: it sleeps on a key no longer than that key's lock-delay runs (nothing is
 * written when it ends), and once the instance shuts down it takes nothing more.
 */
const store = embeddedStoreForFile();

const TTL = 60_000;

const setAsk = (namespace: string, keys: string[], waitMs = 0, signal?: AbortSignal) => ({
  namespace,
  keys,
  ttlMs: TTL,
  holder: null,
  waitMs,
  lockDelayMs: 0,
  signal,
});

interface Reports {
  sets: Array<{ op: LockSetOperation; result: string; seconds: number; waitedSeconds: number }>;
  operations: Array<{ op: string; result: string; seconds: number; waitedSeconds: number }>;
  waits: Array<{ seconds: number; granted: boolean }>;
}

function observed(): { observer: LeaseServiceObserver; reports: Reports } {
  const reports: Reports = { sets: [], operations: [], waits: [] };
  const observer: LeaseServiceObserver = {
    setOperation: (op, result, seconds, waitedSeconds) => reports.sets.push({ op, result, seconds, waitedSeconds }),
    operation: (_kind, op, result, seconds, waitedSeconds) => reports.operations.push({ op, result, seconds, waitedSeconds }),
    waited: (seconds, granted) => reports.waits.push({ seconds, granted }),
  };
  return { observer, reports };
}

/** Runs `call` and how long it took, in seconds: every duration it reports lies within. */
async function timed<T>(call: () => Promise<T>): Promise<{ outcome: PromiseSettledResult<T>; seconds: number }> {
  const started = performance.now();
  const [outcome] = await Promise.allSettled([call()]);
  return { outcome: outcome as PromiseSettledResult<T>, seconds: (performance.now() - started) / 1000 };
}

describe("a lock set's calls as the observer sees them", () => {
  it('an acquire at once, granted or refused: one report with its duration in seconds, and no wait', async () => {
    const { observer, reports } = observed();
    const service = new LeaseService(store.leases, LIMITS, observer);
    const ns = uniqueNamespace();
    const granted = await timed(() => service.acquireSet(setAsk(ns, ['a', 'b'])));
    expect(granted.outcome.status).toBe('fulfilled');
    const refused = await timed(() => service.acquireSet(setAsk(ns, ['b', 'c'])));
    expect(refused.outcome.status).toBe('rejected');
    expect(reports.sets).toStrictEqual([
      { op: 'acquire', result: 'ok', seconds: expect.any(Number), waitedSeconds: 0 },
      { op: 'acquire', result: 'lock_held', seconds: expect.any(Number), waitedSeconds: 0 },
    ]);
    for (const [i, call] of [granted, refused].entries()) {
      expect(reports.sets[i]?.seconds).toBeGreaterThanOrEqual(0);
      expect(reports.sets[i]?.seconds).toBeLessThanOrEqual(call.seconds);
    }
    // A set that could not wait spent nothing waiting: no wait is reported.
    expect(reports.waits).toStrictEqual([]);
  });

  it('an acquire that waited for a busy key: its wait reported once, and the same seconds as the part of its duration spent waiting', async () => {
    const { observer, reports } = observed();
    const service = new LeaseService(store.leases, LIMITS, observer);
    const ns = uniqueNamespace();
    const held = await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS);
    reports.operations.length = 0;
    const started = performance.now();
    const waiting = service.acquireSet(setAsk(ns, ['a', 'b'], 10_000));
    // Released once the set sleeps on the busy key's changes.
    await vi.waitFor(() => expect(service.changesOf('lock').size).toBe(1), { interval: 1 });
    await service.release('lock', ns, 'b', held.ownerToken);
    await waiting;
    const elapsedSeconds = (performance.now() - started) / 1000;
    expect(reports.waits).toHaveLength(1);
    const [wait] = reports.waits;
    expect(wait?.granted).toBe(true);
    expect(wait?.seconds).toBeGreaterThan(0);
    expect(wait?.seconds).toBeLessThanOrEqual(elapsedSeconds);
    expect(reports.sets).toStrictEqual([{ op: 'acquire', result: 'ok', seconds: expect.any(Number), waitedSeconds: wait?.seconds }]);
    expect(reports.sets[0]?.seconds).toBeGreaterThanOrEqual(wait?.seconds ?? Infinity);
    expect(reports.sets[0]?.seconds).toBeLessThanOrEqual(elapsedSeconds);
  });

  it('an acquire that may wait but whose caller has already left: its wait reported as not granted', async () => {
    const { observer, reports } = observed();
    const service = new LeaseService(store.leases, LIMITS, observer);
    const ns = uniqueNamespace();
    const gone = new AbortController();
    gone.abort();
    await expect(service.acquireSet(setAsk(ns, ['a', 'b'], 10_000, gone.signal))).rejects.toBeDefined();
    expect(reports.waits).toStrictEqual([{ seconds: 0, granted: false }]);
    expect(await service.inspect('lock', ns, 'a')).toBeNull();
  });

  it('a renewal and a release: one report each, nothing waited', async () => {
    const { observer, reports } = observed();
    const service = new LeaseService(store.leases, LIMITS, observer);
    const ns = uniqueNamespace();
    const set = await service.acquireSet(setAsk(ns, ['a', 'b']));
    await service.renewSet(ns, ['a', 'b'], set.ownerToken, TTL);
    await service.releaseSet(ns, ['a', 'b'], set.ownerToken);
    await expect(service.releaseSet(ns, ['a', 'b'], set.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
    expect(reports.sets.map(({ op, result, waitedSeconds }) => ({ op, result, waitedSeconds }))).toStrictEqual([
      { op: 'acquire', result: 'ok', waitedSeconds: 0 },
      { op: 'renew', result: 'ok', waitedSeconds: 0 },
      { op: 'release', result: 'ok', waitedSeconds: 0 },
      { op: 'release', result: 'not_owner', waitedSeconds: 0 },
    ]);
  });

  it("a single key's renewal and inspect: nothing waited", async () => {
    const { observer, reports } = observed();
    const service = new LeaseService(store.leases, LIMITS, observer);
    const ns = uniqueNamespace();
    const held = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    await service.renew('lock', ns, 'k', held.ownerToken, TTL);
    await service.inspect('lock', ns, 'k');
    expect(reports.operations.map(({ op, result, waitedSeconds }) => ({ op, result, waitedSeconds }))).toStrictEqual([
      { op: 'acquire', result: 'ok', waitedSeconds: 0 },
      { op: 'renew', result: 'ok', waitedSeconds: 0 },
      { op: 'inspect', result: 'ok', waitedSeconds: 0 },
    ]);
  });
});

describe('a lease engine without an observer', () => {
  it("answers a lock set's refusals, waits and lost leases as one with an observer does", async () => {
    const service = new LeaseService(store.leases, LIMITS);
    const ns = uniqueNamespace();
    const held = await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS);
    await expect(service.acquireSet(setAsk(ns, ['a', 'b']))).rejects.toBeInstanceOf(LockHeldError);
    const waiting = service.acquireSet(setAsk(ns, ['a', 'b'], 10_000));
    await vi.waitFor(() => expect(service.changesOf('lock').size).toBe(1), { interval: 1 });
    await service.release('lock', ns, 'b', held.ownerToken);
    const set = await waiting;
    await service.releaseSet(ns, ['a', 'b'], set.ownerToken);
    await expect(service.renewSet(ns, ['a', 'b'], set.ownerToken, TTL)).rejects.toBeInstanceOf(NotOwnerError);
    await expect(service.releaseSet(ns, ['a', 'b'], set.ownerToken)).rejects.toBeInstanceOf(NotOwnerError);
  });
});

describe('what the lease engine asks of its store', () => {
  /** The embedded store's port with its acquires and quota-slot reservations recorded. */
  function recorded(): { leases: LeaseStore; acquires: LeaseAcquire[]; reserved: Array<{ ttlMs: number }> } {
    const inner = store.leases;
    const acquires: LeaseAcquire[] = [];
    const reserved: Array<{ ttlMs: number }> = [];
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    Object.assign(leases, {
      acquire: (request: LeaseAcquire) => {
        acquires.push(request);
        return inner.acquire(request);
      },
      reserveQuotaSlot: (...args: Parameters<LeaseStore['reserveQuotaSlot']>) => {
        reserved.push({ ttlMs: args[2] });
        return inner.reserveQuotaSlot(...args);
      },
    });
    return { leases, acquires, reserved };
  }

  it("a lock set's keys in sorted order, so that a set is the same set in whatever order it is asked; its tokens in the asked order", async () => {
    const { leases, acquires } = recorded();
    const service = new LeaseService(leases, LIMITS);
    const ns = uniqueNamespace();
    const set = await service.acquireSet(setAsk(ns, ['c', 'a', 'b']));
    expect(acquires[0]?.ids).toStrictEqual([lockId(ns, 'a'), lockId(ns, 'b'), lockId(ns, 'c')]);
    expect(set.locks.map((l) => l.key)).toStrictEqual(['c', 'a', 'b']);
    for (const { key, fencingToken } of set.locks) expect((await service.inspect('lock', ns, key))?.fencingToken).toBe(fencingToken);
  });

  it("a lock set's quota slots last its wait, its lease and the margin: the namespace is never under-counted meanwhile", async () => {
    const { leases, reserved } = recorded();
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 5 });
    const ns = uniqueNamespace();
    await service.acquireSet({ ...setAsk(ns, ['a', 'b'], 2_000), ttlMs: 5_000 });
    expect(reserved).toStrictEqual([{ ttlMs: 7_000 + QUOTA_SLOT_MARGIN_MS }, { ttlMs: 7_000 + QUOTA_SLOT_MARGIN_MS }]);
  });

  it('the replay look after the quota refused a waiting acquire answers at once: it never waits in the key’s queue', async () => {
    const { leases, acquires } = recorded();
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 2 });
    const ns = uniqueNamespace();
    await service.acquire(lockAsk(ns, 'a'), LOCK_REFUSALS);
    const b = await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS);
    acquires.length = 0;
    const ask = { ...lockAsk(ns, 'b'), waitMs: 10_000, idempotency: { callerId: 'c', key: 'i-1' } };
    // Settled into a value at once, so that its refusal is never an unhandled rejection meanwhile.
    const answer = service.acquire(ask, LOCK_REFUSALS).then(
      () => 'granted',
      (error: unknown) => error,
    );
    try {
      await vi.waitFor(() => expect(acquires).toHaveLength(1), { interval: 1 });
      expect(acquires[0]?.waitMs).toBeUndefined();
      expect(acquires[0]?.signal).toBeUndefined();
      expect(await answer).toBeInstanceOf(QuotaExceededError);
    } finally {
      await service.release('lock', ns, 'b', b.ownerToken);
      await answer;
    }
  });

  it('a force release of every lease that evicted nothing answers so, even when a lease was granted right after', async () => {
    const inner = store.leases;
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    const ns = uniqueNamespace();
    Object.assign(leases, {
      forceRelease: async (...args: Parameters<LeaseStore['forceRelease']>) => {
        const evicted = await inner.forceRelease(...args);
        // Another caller is granted the free key between the eviction and anything read after it.
        await inner.acquire({
          kind: 'lock',
          ids: [lockId(ns, 'k')],
          capacity: 1,
          weight: 1,
          ownerToken: 'o'.repeat(22),
          ttlMs: TTL,
          holder: 'next',
        });
        return evicted;
      },
    });
    const service = new LeaseService(leases, LIMITS);
    expect(await service.forceRelease('lock', ns, 'k')).toStrictEqual([]);
    expect((await service.inspect('lock', ns, 'k'))?.holder).toBe('next');
  });
});

describe('a lock set that waits', () => {
  it('on a key whose lock-delay ends first asks again then, and waits on the key still busy', async () => {
    const inner = store.leases;
    const read: string[] = [];
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    Object.assign(leases, {
      inspectIndexed: (...args: Parameters<LeaseStore['inspectIndexed']>) => {
        read.push(args[1]);
        return inner.inspectIndexed(...args);
      },
    });
    const service = new LeaseService(leases, LIMITS);
    const ns = uniqueNamespace();
    // 'a' expires at once and stays unavailable for its lock-delay (nothing is written when that ends);
    // 'b' is held for a minute and released by its holder once the set waits on it.
    // (Taken from the store itself: a 1 ms lease would not pass the service's late-answer check.)
    await inner.acquire({
      kind: 'lock',
      ids: [lockId(ns, 'a')],
      capacity: 1,
      weight: 1,
      ownerToken: 'a'.repeat(22),
      ttlMs: 1,
      holder: null,
      lockDelayMs: 50,
    });
    await vi.waitFor(async () => expect(await service.inspect('lock', ns, 'a')).toBeNull(), { interval: 1 });
    const b = await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS);
    const waiting = service.acquireSet(setAsk(ns, ['a', 'b'], 5_000));
    // First the set sleeps on 'a' (the first busy key), only as long as its lock-delay runs; then on 'b'.
    await vi.waitFor(() => expect(read).toContain(lockId(ns, 'b')), { timeout: 2_000, interval: 1 });
    expect(read[0]).toBe(lockId(ns, 'a'));
    await service.release('lock', ns, 'b', b.ownerToken);
    const set = await waiting;
    expect(set.locks.map((l) => l.key)).toStrictEqual(['a', 'b']);
  });

  it('refused as the instance shuts down takes nothing afterwards, even when its key frees meanwhile', async () => {
    const inner = store.leases;
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    const ns = uniqueNamespace();
    const race: { service?: LeaseService; b?: { ownerToken: string } } = {};
    Object.assign(leases, {
      acquire: async (request: LeaseAcquire) => {
        const outcome = await inner.acquire(request);
        if (!outcome.acquired && request.ids.length > 1 && race.b !== undefined) {
          // Shutdown begins, and 'b' is released, while the set's refusal is on its way.
          race.service?.shutdown();
          await inner.release('lock', [lockId(ns, 'b')], race.b.ownerToken);
        }
        return outcome;
      },
    });
    const service = new LeaseService(leases, LIMITS);
    race.service = service;
    race.b = await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS);
    await expect(service.acquireSet(setAsk(ns, ['a', 'b'], 5_000))).rejects.toBeInstanceOf(ShuttingDownError);
    expect(await service.inspect('lock', ns, 'a')).toBeNull();
    expect(await service.inspect('lock', ns, 'b')).toBeNull();
  });
});
