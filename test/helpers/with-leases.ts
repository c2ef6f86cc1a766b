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

/**
 * `store` whose renewals can be held between their store step and the rest of the renewal (its quota
 * slot's extend, its answer): `race(renew, meanwhile)` runs `renew`, and `meanwhile` once the renewal's
 * store step has answered and before the renewal goes on, so two calls on one lease meet in exactly that
 * order. Resolves to the renewal's answer, or its error.
 */
export function renewalsHeldAfterTheStore<S extends Store>(store: S) {
  let held: { reached: () => void; until: Promise<void> } | undefined;
  const host = withLeases(store, (own) => ({
    renew: async (...args: Parameters<LeaseStore['renew']>) => {
      const outcome = await own.renew(...args);
      const hold = held;
      held = undefined;
      if (hold !== undefined) {
        hold.reached();
        await hold.until;
      }
      return outcome;
    },
  }));
  const race = async (renew: () => Promise<unknown>, meanwhile: () => Promise<unknown>): Promise<unknown> => {
    let reached!: () => void;
    let goOn!: () => void;
    const atTheStore = new Promise<void>((resolve) => (reached = resolve));
    held = { reached, until: new Promise<void>((resolve) => (goOn = resolve)) };
    const renewing = renew().then(
      (answer) => answer,
      (error: unknown) => error,
    );
    await atTheStore;
    try {
      await meanwhile();
    } finally {
      goOn();
    }
    return renewing;
  };
  return { host, race };
}
