import { describe, expect, it } from 'vitest';
import { PERMIT_KINDS } from '../../src/domain/permit-values.js';
import type { StoreHarness } from './lock-store.contract.js';
import { useInstances } from './contract-kit.js';
import { granted, permitsOf, takePermit, uniqueKey, type PermitGranted } from './permit-harness.js';

/**
 * Every kind of PERMIT_KINDS, the ones there are and any added later: the same name under each kind is
 * a key of its own, full, inspected, listed and released apart from the others. A new capacity and
 * weight kind is covered here on every store without an edit.
 */
export function describePermitKindsContract(name: string, harness: StoreHarness): void {
  describe(`every permit kind: ${name}`, () => {
    const store = useInstances(harness);

    it('keeps the same name under each kind apart: its own grant, refusal, inspect, listing and release', async () => {
      const prefix = uniqueKey('kinds');
      const key = `${prefix}:k`;
      const take = (kind: (typeof PERMIT_KINDS)[number]) => takePermit(store(), kind, key, { weight: 1, capacity: 1, ttlMs: 30_000 });
      const grants = new Map<string, PermitGranted>();
      for (const kind of PERMIT_KINDS) grants.set(kind, granted(await take(kind)));
      for (const kind of PERMIT_KINDS) {
        const own = grants.get(kind)?.fencingToken;
        expect(await take(kind), kind).toMatchObject({ acquired: false, reason: 'full' });
        expect(
          (await permitsOf(store()).inspectPermits(kind, key))?.holders.map((h) => h.fencingToken),
          kind,
        ).toEqual([own]);
        const listed = await permitsOf(store()).listPermits(kind, { prefix, limit: 50 });
        expect(
          listed.entries.map((e) => [e.id, e.state.holders.map((h) => h.fencingToken)]),
          kind,
        ).toEqual([[key, [own]]]);
      }
      for (const kind of PERMIT_KINDS) {
        expect(await permitsOf(store()).releasePermit(kind, key, grants.get(kind)?.ownerToken ?? ''), kind).toBe(true);
        expect(await permitsOf(store()).inspectPermits(kind, key), kind).toBeNull();
      }
    });

    it('a key no lease holds takes the capacity its caller asks for, whatever its last lease was taken under', async () => {
      for (const kind of PERMIT_KINDS) {
        const key = `${uniqueKey('resized')}:k`;
        const first = granted(await takePermit(store(), kind, key, { weight: 1, capacity: 1, ttlMs: 30_000 }));
        expect(await permitsOf(store()).releasePermit(kind, key, first.ownerToken), kind).toBe(true);
        // Its fencing counter outlives the lease (the grace), its capacity does not: a weight above the old
        // capacity fits the new one, and a second caller asking the same capacity shares the key.
        const wide = await takePermit(store(), kind, key, { weight: 2, capacity: 3, ttlMs: 30_000 });
        expect(wide, kind).toMatchObject({ acquired: true });
        const next = await takePermit(store(), kind, key, { weight: 1, capacity: 3, ttlMs: 30_000 });
        expect(next, kind).toMatchObject({ acquired: true });
        expect((await permitsOf(store()).inspectPermits(kind, key))?.holders, kind).toHaveLength(2);
      }
    });
  });
}
