import { describe, expect, it } from 'vitest';
import { HolderChangedError, InvalidRequestError, LockHeldError } from '../../src/domain/errors.js';
import { LeaseService, MAX_RELEASE_REASON } from '../../src/domain/lease-service.js';

import { LockService } from '../../src/domain/lock-service.js';
import { createPermitCores } from '../../src/domain/primitives.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import { embeddedStoreForFile, LIMITS, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * Release requests in-process over the embedded store (the HTTP route's end-to-end checks are in
 * test/http): an operator asks the holder of the lease with a given fencing token to let go; the lease
 * is kept, its holder hears of it at its next renewal, and the request never reaches a newer holder.
 */
const store = embeddedStoreForFile();

describe('release requests', () => {
  it('a lock: the request is stored with the lease, which is kept; its renewal tells the holder', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const held = await locks.acquire(ns, 'k', 60_000, { holder: 'worker' });
    const before = Date.now();
    const asked = await locks.requestRelease(ns, 'k', held.fencingToken, { by: 'ops', reason: 'deploy' });
    expect(asked).toMatchObject({ by: 'ops', reason: 'deploy' });
    expect(asked?.atMs).toBeGreaterThanOrEqual(before - 1_000);
    expect((await locks.inspect(ns, 'k'))?.fencingToken).toBe(held.fencingToken);
    const renewed = await locks.renew(ns, 'k', held.ownerToken, 60_000);
    expect(renewed.releaseRequested).toStrictEqual(asked);
    await locks.release(ns, 'k', held.ownerToken);
  });

  it('the reason is at most MAX_RELEASE_REASON characters; none at all is fine', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const held = await locks.acquire(ns, 'r', 60_000);
    const tooLong = await locks
      .requestRelease(ns, 'r', held.fencingToken, { by: 'ops', reason: 'x'.repeat(MAX_RELEASE_REASON + 1) })
      .catch((e: unknown) => e);
    expect(tooLong).toBeInstanceOf(InvalidRequestError);
    // Refused before anything was stored.
    expect((await locks.renew(ns, 'r', held.ownerToken, 60_000)).releaseRequested).toBeUndefined();
    const longest = await locks.requestRelease(ns, 'r', held.fencingToken, { by: 'ops', reason: 'x'.repeat(MAX_RELEASE_REASON) });
    expect(longest?.reason).toHaveLength(MAX_RELEASE_REASON);
    expect(await locks.requestRelease(ns, 'r', held.fencingToken, { by: 'ops', reason: null })).toMatchObject({ by: 'ops', reason: null });
    await locks.release(ns, 'r', held.ownerToken);
  });

  it('names its lease: null once nobody holds the key, holder_changed when another lease holds it', async () => {
    const locks = new LockService(store, LIMITS);
    const ns = uniqueNamespace();
    const first = await locks.acquire(ns, 'h', 60_000, { holder: 'first' });
    await locks.release(ns, 'h', first.ownerToken);
    expect(await locks.requestRelease(ns, 'h', first.fencingToken, { by: 'ops', reason: null })).toBeNull();
    const second = await locks.acquire(ns, 'h', 60_000, { holder: 'second' });
    const refused = await locks.requestRelease(ns, 'h', first.fencingToken, { by: 'ops', reason: null }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HolderChangedError);
    expect(refused).toMatchObject({ fencingToken: first.fencingToken, current: { holder: 'second', fencingToken: second.fencingToken } });
    // The newer holder was not asked.
    expect((await locks.renew(ns, 'h', second.ownerToken, 60_000)).releaseRequested).toBeUndefined();
    await locks.release(ns, 'h', second.ownerToken);
  });

  it('a semaphore: only the named permit is asked; its holder hears it at its renewal', async () => {
    const locks = new LockService(store, LIMITS);
    const cores = createPermitCores(store, LIMITS, locks.waitGate);
    const semaphores = new SemaphoreService(cores.semaphores);
    const ns = uniqueNamespace();
    const a = await semaphores.acquire(ns, 's', { limit: 2, ttlMs: 60_000, holder: 'a' });
    const b = await semaphores.acquire(ns, 's', { limit: 2, ttlMs: 60_000, holder: 'b' });
    const asked = await cores.semaphores.requestRelease(ns, 's', b.fencingToken, { by: 'ops', reason: 'drain' });
    expect(asked).toMatchObject({ by: 'ops', reason: 'drain' });
    expect((await semaphores.renew(ns, 's', b.ownerToken, 60_000)).releaseRequested).toStrictEqual(asked);
    expect((await semaphores.renew(ns, 's', a.ownerToken, 60_000)).releaseRequested).toBeUndefined();
    await semaphores.release(ns, 's', a.ownerToken);
    await semaphores.release(ns, 's', b.ownerToken);
  });
});

describe('the lease engine on its own', () => {
  it('built without an observer, it answers as the services built on it do', async () => {
    const lease = new LeaseService(store.leases, LIMITS);
    const ns = uniqueNamespace();
    const refusals = {
      full: (key: string, retryAfterMs: number) => new LockHeldError(key, retryAfterMs),
      mismatch: (key: string) => new LockHeldError(key, 1),
    };
    const grant = await lease.acquire(
      { kind: 'lock', namespace: ns, key: 'e', capacity: 1, weight: 1, ttlMs: 60_000, holder: null, waitMs: 0 },
      refusals,
    );
    expect((await lease.renew('lock', ns, 'e', grant.ownerToken, 60_000)).fencingToken).toBe(grant.fencingToken);
    await lease.release('lock', ns, 'e', grant.ownerToken);
    expect(await lease.inspect('lock', ns, 'e')).toBeNull();
  });
});

describe("the lock service's checks, as the HTTP layer calls them before a request", () => {
  it('ttl, wait and lock-delay bounds; the closing signal aborts at shutdown', () => {
    const locks = new LockService(store, { ...LIMITS, minTtlMs: 100, maxTtlMs: 1_000, maxWaitMs: 500, maxLockDelayMs: 50 });
    expect(() => locks.checkTtl(99)).toThrow(InvalidRequestError);
    expect(() => locks.checkTtl(100)).not.toThrow();
    expect(() => locks.checkWaitMs(501)).toThrow(InvalidRequestError);
    expect(() => locks.checkWaitMs(500)).not.toThrow();
    expect(() => locks.checkLockDelay(51)).toThrow(InvalidRequestError);
    expect(locks.checkLockDelay(50)).toBe(50);
    expect(locks.closingSignal.aborted).toBe(false);
    locks.shutdown();
    expect(locks.closingSignal.aborted).toBe(true);
  });
});
