import type { LeaseStore } from '../../src/domain/lease-store.js';
import type { Store } from '../../src/domain/lease-store.js';

/**
 * `store` with some of its lease port's calls replaced (a slow or failing store step): the domain
 * services speak only the port (`leases`), so a stand-in replaces its calls there. The rest of the
 * port, and the store's other words, are the store's own.
 */
export function withLeases<S extends Store>(store: S, parts: (own: LeaseStore) => Partial<LeaseStore>): S {
  const own = store.leases;
  const leases: LeaseStore = { ...own, ...parts(own) };
  // Defined, not assigned: the stores' own `leases` is a getter on their prototype.
  return Object.defineProperty(Object.create(store) as S, 'leases', { value: leases });
}
