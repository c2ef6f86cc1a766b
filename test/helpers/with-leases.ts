import type { LeaseStore, Store } from '../../src/domain/lease-store.js';

/**
 * `store` with some of its lease port's calls replaced (a slow or failing store step): the domain
 * services speak only the port (`leases`), so a stand-in replaces its calls there. The rest of the
 * port, and the store's ping and close, are the store's own. Words over it (store-words.ts): wrap the
 * result, not the store.
 */
export function withLeases<S extends Store>(store: S, parts: (own: LeaseStore) => Partial<LeaseStore>): S {
  const own = store.leases;
  const leases: LeaseStore = { ...own, ...parts(own) };
  // On a new object over the store, shadowing its own `leases` (a readonly field) without changing it.
  return Object.defineProperty(Object.create(store) as S, 'leases', { value: leases });
}
