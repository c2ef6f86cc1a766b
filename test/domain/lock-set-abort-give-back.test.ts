import { describe, expect, it } from 'vitest';
import { QuotaExceededError, StoreUnavailableError } from '../../src/domain/errors.js';
import { LeaseService } from '../../src/domain/lease-service.js';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { embeddedStoreForFile, LIMITS, LOCK_REFUSALS, uniqueNamespace } from '../helpers/embedded-domain.js';

const store = embeddedStoreForFile();

describe('a lock set granted as its caller left, whose give-back fails', () => {
  it('keeps its quota slots while its lease lives on', async () => {
    const controller = new AbortController();
    const inner = store.leases;
    const leases: LeaseStore = Object.create(inner) as LeaseStore;
    Object.assign(leases, {
      acquire: async (request: Parameters<LeaseStore['acquire']>[0]) => {
        const outcome = await inner.acquire(request);
        if (request.ids.length > 1) controller.abort(); // the caller leaves while the set is being granted
        return outcome;
      },
      release: (...args: Parameters<LeaseStore['release']>) =>
        args[1].length > 1 ? Promise.reject(new StoreUnavailableError('down')) : inner.release(...args),
    });
    const service = new LeaseService(leases, { ...LIMITS, maxHeldLocksPerNamespace: 2 });
    const ns = uniqueNamespace();
    await expect(
      service.acquireSet({
        namespace: ns,
        keys: ['a', 'b'],
        ttlMs: 60_000,
        holder: null,
        waitMs: 1000,
        lockDelayMs: 0,
        signal: controller.signal,
      }),
    ).rejects.toBeDefined();
    // The set's lease is still held in the store (its give-back failed): its two keys still count against the
    // namespace's cap of 2, so there is no room for another lock (before, both slots were freed: two more
    // locks were granted beside the set's, four held under a cap of 2).
    const ask = { kind: 'lock' as const, namespace: ns, key: 'c', capacity: 1, weight: 1, ttlMs: 60_000, holder: null, waitMs: 0 };
    await expect(service.acquire(ask, LOCK_REFUSALS)).rejects.toBeInstanceOf(QuotaExceededError);
  });
});
