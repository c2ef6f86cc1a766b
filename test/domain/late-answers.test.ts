import { performance } from 'node:perf_hooks';
import { describe, expect, it, type MockInstance, vi } from 'vitest';
import { QuotaExceededError, StoreUnavailableError } from '../../src/domain/errors.js';
import { LeaseService } from '../../src/domain/lease-service.js';
import type { LeaseAcquire, LeaseStore } from '../../src/domain/lease-store.js';
import { ownLag } from '../../src/domain/own-lag.js';
import { embeddedStoreForFile, LIMITS, LOCK_REFUSALS, lockAsk, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * Answers that come back too late to hand out (the store decided more than half the TTL ago), and what
 * becomes of their leases and quota slots: a fresh grant is given back with its slots, so the namespace
 * is not charged for a lease nobody holds; a renewal, or a grant asked with an Idempotency-Key, is
 * kept (its holder, or a retry, may hold it), and so are its slots; a lease whose give-back failed lives
 * on to its end, and its slots keep counting. Lateness is made by the store's answer naming a moment a
 * minute back as when it decided, or by the clock jumping while the store answers: no test waits.
 */
const store = embeddedStoreForFile();

const TTL = 60_000;
const LATE_BY = 60_000;

/** The embedded store's port, its grants of the keys in `late` answered as decided a minute ago, and its releases failing when asked. */
function lateStore(late: ReadonlySet<string>): { leases: LeaseStore; failRelease: { on: boolean } } {
  const inner = store.leases;
  const failRelease = { on: false };
  const leases: LeaseStore = Object.create(inner) as LeaseStore;
  Object.assign(leases, {
    acquire: async (request: LeaseAcquire) => {
      const outcome = await inner.acquire(request);
      const isLate = request.ids.some((id) => late.has(id.slice(id.indexOf('/') + 1)));
      return outcome.acquired && isLate ? { ...outcome, decidedAt: outcome.decidedAt - LATE_BY } : outcome;
    },
    release: (...args: Parameters<LeaseStore['release']>) =>
      failRelease.on ? Promise.reject(new StoreUnavailableError('the release failed')) : inner.release(...args),
  });
  return { leases, failRelease };
}

/** Whether the namespace has room for one more lease under its cap. */
async function roomForOneMore(service: LeaseService, ns: string): Promise<boolean> {
  try {
    const grant = await service.acquire(lockAsk(ns, 'one-more'), LOCK_REFUSALS);
    await service.release('lock', ns, 'one-more', grant.ownerToken);
    return true;
  } catch (error) {
    if (error instanceof QuotaExceededError) return false;
    throw error;
  }
}

describe('a grant answered too late', () => {
  it('an acquire with an Idempotency-Key keeps its lease for the retry, at once or after a wait', async () => {
    const { leases } = lateStore(new Set(['now', 'waiting']));
    const service = new LeaseService(leases, LIMITS);
    const ns = uniqueNamespace();
    const now = { ...lockAsk(ns, 'now'), idempotency: { callerId: 'c', key: 'i-1' } };
    await expect(service.acquire(now, LOCK_REFUSALS)).rejects.toMatchObject({ leaseKept: true });
    expect(await service.inspect('lock', ns, 'now')).not.toBeNull();
    const waiting = { ...lockAsk(ns, 'waiting'), waitMs: 5_000, idempotency: { callerId: 'c', key: 'i-2' } };
    await expect(service.acquire(waiting, LOCK_REFUSALS)).rejects.toMatchObject({ leaseKept: true });
    expect(await service.inspect('lock', ns, 'waiting')).not.toBeNull();
    // Without a key, nobody could get it back: given back.
    const { leases: plain } = lateStore(new Set(['plain']));
    await expect(new LeaseService(plain, LIMITS).acquire(lockAsk(ns, 'plain'), LOCK_REFUSALS)).rejects.toMatchObject({ leaseKept: false });
    expect(await service.inspect('lock', ns, 'plain')).toBeNull();
  });

  it('a waiting acquire granted at once (the key was free) but answered late spent nothing in the queue', async () => {
    const { leases } = lateStore(new Set(['k']));
    const waits: Array<{ seconds: number; granted: boolean }> = [];
    const service = new LeaseService(leases, LIMITS, { waited: (seconds, granted) => waits.push({ seconds, granted }) });
    const ns = uniqueNamespace();
    await expect(service.acquire({ ...lockAsk(ns, 'k'), waitMs: 5_000 }, LOCK_REFUSALS)).rejects.toMatchObject({ leaseKept: false });
    expect(await service.inspect('lock', ns, 'k')).toBeNull();
    // The store granted it without a wait: no time in the queue to report.
    expect(waits).toStrictEqual([{ seconds: 0, granted: true }]);
  });

  it('a grant in time says whether it was asked with an Idempotency-Key (the last check before the answer keeps it then)', async () => {
    const service = new LeaseService(store.leases, LIMITS);
    const ns = uniqueNamespace();
    const keyed = await service.acquire({ ...lockAsk(ns, 'a'), idempotency: { callerId: 'c', key: 'i-3' } }, LOCK_REFUSALS);
    expect(keyed.idempotent).toBe(true);
    expect((await service.acquire(lockAsk(ns, 'b'), LOCK_REFUSALS)).idempotent).toBe(false);
  });

  it('a lock set whose late grant could not be given back keeps its quota slots: it lives on to its end', async () => {
    const { leases, failRelease } = lateStore(new Set(['a', 'b']));
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 3 });
    const ns = uniqueNamespace();
    failRelease.on = true;
    const ask = { namespace: ns, keys: ['a', 'b'], ttlMs: TTL, holder: null, waitMs: 0, lockDelayMs: 0 };
    await expect(service.acquireSet(ask)).rejects.toMatchObject({ outcomeUnknown: true });
    failRelease.on = false;
    expect(await service.inspect('lock', ns, 'a')).not.toBeNull();
    // Two of the three units are the set's still: one more lease fits, not two.
    const c = await service.acquire(lockAsk(ns, 'c'), LOCK_REFUSALS);
    expect(await roomForOneMore(service, ns)).toBe(false);
    await service.release('lock', ns, 'c', c.ownerToken);
  });
});

describe('the last check before the answer is written (confirmFresh)', () => {
  it('a late grant is given back with its quota slot', async () => {
    const service = new LeaseService(store.leases, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const grant = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    await expect(service.confirmFresh('lock', ns, { ...grant, decidedAt: grant.decidedAt - LATE_BY })).rejects.toBeDefined();
    expect(await service.inspect('lock', ns, 'k')).toBeNull();
    expect(await roomForOneMore(service, ns)).toBe(true);
  });

  it('a late renewal, or a late grant asked with an Idempotency-Key, keeps its lease and its quota slot', async () => {
    const service = new LeaseService(store.leases, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    for (const kept of [{ renewal: true as const }, { idempotent: true }]) {
      const ns = uniqueNamespace();
      const grant = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
      const late = { key: 'k', ownerToken: grant.ownerToken, ttlMs: TTL, decidedAt: grant.decidedAt - LATE_BY, ...kept };
      await expect(service.confirmFresh('lock', ns, late)).rejects.toMatchObject({ leaseKept: true });
      expect(await service.inspect('lock', ns, 'k')).not.toBeNull();
      expect(await roomForOneMore(service, ns)).toBe(false);
    }
  });

  it('a late grant whose give-back failed keeps its quota slot: the lease lives on to its end', async () => {
    const { leases, failRelease } = lateStore(new Set());
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 1 });
    const ns = uniqueNamespace();
    const grant = await service.acquire(lockAsk(ns, 'k'), LOCK_REFUSALS);
    failRelease.on = true;
    await expect(service.confirmFresh('lock', ns, { ...grant, decidedAt: grant.decidedAt - LATE_BY })).rejects.toMatchObject({
      outcomeUnknown: true,
    });
    failRelease.on = false;
    expect(await roomForOneMore(service, ns)).toBe(false);
  });

  it("a lock set's late grant gives back every key of the set, with their quota slots", async () => {
    const service = new LeaseService(store.leases, { ...LIMITS, maxHeldLocksPerNamespace: 2 });
    const ns = uniqueNamespace();
    const set = await service.acquireSet({ namespace: ns, keys: ['a', 'b'], ttlMs: TTL, holder: null, waitMs: 0, lockDelayMs: 0 });
    const late = { key: 'a', keys: ['a', 'b'], ownerToken: set.ownerToken, ttlMs: TTL, decidedAt: set.decidedAt - LATE_BY };
    await expect(service.confirmFresh('lock', ns, late)).rejects.toMatchObject({ leaseKept: false });
    expect(await service.inspect('lock', ns, 'a')).toBeNull();
    expect(await service.inspect('lock', ns, 'b')).toBeNull();
    // Both units are free again: two leases fit under the cap of two.
    const c = await service.acquire(lockAsk(ns, 'c'), LOCK_REFUSALS);
    expect(await roomForOneMore(service, ns)).toBe(true);
    await service.release('lock', ns, 'c', c.ownerToken);
  });

  it("a lock set's late renewal keeps every key", async () => {
    const service = new LeaseService(store.leases, LIMITS);
    const ns = uniqueNamespace();
    const set = await service.acquireSet({ namespace: ns, keys: ['a', 'b'], ttlMs: TTL, holder: null, waitMs: 0, lockDelayMs: 0 });
    const late = {
      key: 'a',
      keys: ['a', 'b'],
      ownerToken: set.ownerToken,
      ttlMs: TTL,
      decidedAt: set.decidedAt - LATE_BY,
      renewal: true as const,
    };
    await expect(service.confirmFresh('lock', ns, late)).rejects.toMatchObject({ leaseKept: true });
    expect(await service.inspect('lock', ns, 'a')).not.toBeNull();
    expect(await service.inspect('lock', ns, 'b')).not.toBeNull();
  });
});

describe("a lock set's renewal answered too late", () => {
  it('is refused, and the set keeps every key (it was the caller’s before the renewal)', async () => {
    const inner = store.leases;
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    const realNow = performance.now.bind(performance);
    let jumped: MockInstance<() => number> | undefined;
    // The store's answer comes back a minute after the renewal was sent (a stalled connection): the
    // clock jumps while the store answers. Nothing of this process held it up.
    Object.assign(leases, {
      renew: async (...args: Parameters<LeaseStore['renew']>) => {
        const outcome = await inner.renew(...args);
        jumped = vi.spyOn(performance, 'now').mockImplementation(() => realNow() + LATE_BY);
        return outcome;
      },
    });
    const lag = vi.spyOn(ownLag, 'heldUpBetween').mockReturnValue(0);
    try {
      const service = new LeaseService(leases, LIMITS);
      const ns = uniqueNamespace();
      const set = await service.acquireSet({ namespace: ns, keys: ['a', 'b'], ttlMs: TTL, holder: null, waitMs: 0, lockDelayMs: 0 });
      await expect(service.renewSet(ns, ['a', 'b'], set.ownerToken, TTL)).rejects.toBeInstanceOf(StoreUnavailableError);
      jumped?.mockRestore();
      expect(await service.inspect('lock', ns, 'a')).not.toBeNull();
      expect(await service.inspect('lock', ns, 'b')).not.toBeNull();
    } finally {
      jumped?.mockRestore();
      lag.mockRestore();
    }
  });
});
