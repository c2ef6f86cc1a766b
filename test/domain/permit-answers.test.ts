import { describe, expect, it, vi } from 'vitest';
import { HolderChangedError } from '../../src/domain/errors.js';
import { LockService } from '../../src/domain/lock-service.js';
import type { PermitObserver } from '../../src/domain/permits.js';
import { createPermitCores } from '../../src/domain/primitives.js';
import { RwLockService } from '../../src/domain/rwlocks.js';
import { SemaphoreService } from '../../src/domain/semaphores.js';
import { embeddedStoreForFile, LIMITS, uniqueNamespace } from '../helpers/embedded-domain.js';

/**
 * The semaphore and read/write lock answers the HTTP tests check end to end, here in-process over the
 * embedded store: the queue view with each caller's weight, the administrator's force release of one
 * lease by its fencing token, and the time an acquire spent waiting as the observer hears it.
 */
const store = embeddedStoreForFile();

function rig(observer: PermitObserver = {}) {
  const locks = new LockService(store, LIMITS);
  const cores = createPermitCores(store, LIMITS, locks.waitGate, observer);
  return { cores, semaphores: new SemaphoreService(cores.semaphores) };
}

describe('permit answers', () => {
  it('queue: the callers waiting for the key, head first, each with the weight it asks for', async () => {
    const { cores } = rig();
    const ns = uniqueNamespace();
    expect(await cores.rwlocks.queue(ns, 'q')).toEqual([]);
    const reader = await cores.rwlocks.acquire(
      { namespace: ns, key: 'q', ttlMs: 60_000, holder: 'r', weight: 1, capacity: 4, waitMs: 0 },
      RwLockService.refusals,
    );
    const leave = new AbortController();
    const wait = (holder: string, weight: number) =>
      cores.rwlocks
        .acquire(
          { namespace: ns, key: 'q', ttlMs: 60_000, holder, weight, capacity: 4, waitMs: 30_000, signal: leave.signal },
          RwLockService.refusals,
        )
        .catch((e: unknown) => e);
    const writer = wait('writer', 4);
    await vi.waitFor(async () => expect(await cores.rwlocks.queue(ns, 'q')).toHaveLength(1), { timeout: 5_000 });
    const late = wait('late reader', 1);
    await vi.waitFor(async () => expect(await cores.rwlocks.queue(ns, 'q')).toHaveLength(2), { timeout: 5_000 });
    expect((await cores.rwlocks.queue(ns, 'q')).map(({ position, holder, weight }) => ({ position, holder, weight }))).toEqual([
      { position: 1, holder: 'writer', weight: 4 },
      { position: 2, holder: 'late reader', weight: 1 },
    ]);
    leave.abort();
    await Promise.all([writer, late]);
    await cores.rwlocks.release(ns, 'q', reader.ownerToken);
  });

  it('force release of one lease: evicts it while it holds, answers none when the key is free, holder_changed when others hold', async () => {
    const { cores, semaphores } = rig();
    const ns = uniqueNamespace();
    const a = await semaphores.acquire(ns, 'f', { limit: 2, ttlMs: 60_000, holder: 'a' });
    await semaphores.release(ns, 'f', a.ownerToken);
    expect(await cores.semaphores.forceRelease(ns, 'f', a.fencingToken)).toEqual([]);
    const b = await semaphores.acquire(ns, 'f', { limit: 2, ttlMs: 60_000, holder: 'b' });
    const refused = await cores.semaphores.forceRelease(ns, 'f', a.fencingToken).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HolderChangedError);
    expect(refused).toMatchObject({ fencingToken: a.fencingToken, current: { holder: 'b', fencingToken: b.fencingToken } });
    expect((await semaphores.inspect(ns, 'f'))?.holders.map((h) => h.fencingToken)).toEqual([b.fencingToken]);
    const c = await semaphores.acquire(ns, 'f', { limit: 2, ttlMs: 60_000, holder: 'c' });
    expect(await cores.semaphores.forceRelease(ns, 'f', b.fencingToken)).toEqual([{ holder: 'b', fencingToken: b.fencingToken }]);
    expect((await semaphores.inspect(ns, 'f'))?.holders.map((h) => h.fencingToken)).toEqual([c.fencingToken]);
    await semaphores.release(ns, 'f', c.ownerToken);
  });

  it('the observer hears how long an acquire waited in the queue; 0 for one that did not wait', async () => {
    const heard: Array<{ op: string; result: string; seconds: number; waited: number }> = [];
    const { semaphores } = rig({ operation: (_kind, op, result, seconds, waited) => heard.push({ op, result, seconds, waited }) });
    const ns = uniqueNamespace();
    const held = await semaphores.acquire(ns, 'w', { limit: 1, ttlMs: 60_000 });
    const waiting = semaphores.acquire(ns, 'w', { limit: 1, ttlMs: 60_000, waitMs: 30_000 });
    await vi.waitFor(async () => expect((await semaphores.inspect(ns, 'w'))?.waiters).toBe(1), { timeout: 5_000 });
    await semaphores.release(ns, 'w', held.ownerToken);
    const granted = await waiting;
    const acquires = heard.filter((h) => h.op === 'acquire');
    expect(acquires).toHaveLength(2);
    expect(acquires[0]).toMatchObject({ result: 'ok', waited: 0 });
    expect(acquires[1]?.result).toBe('ok');
    expect(acquires[1]?.waited).toBeGreaterThan(0);
    expect(acquires[1]?.waited).toBeLessThanOrEqual(acquires[1]?.seconds ?? 0);
    await semaphores.release(ns, 'w', granted.ownerToken);
  });
});
