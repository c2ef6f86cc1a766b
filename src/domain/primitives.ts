import type { LeaseLimits } from './limits.js';
import type { LeaseStoreHost } from './lease-store.js';
import { PERMIT_KINDS, type PermitKind } from './permit-values.js';
import { PermitCore, type PermitObserver } from './permits.js';
import type { WaitGate } from './wait-gate.js';

/**
 * One permit core per kind in PERMIT_KINDS, under its kind's plural (`semaphores`, `rwlocks`): a new
 * kind gets its core here without an edit. What a kind means (weight, capacity, refusals, view) is its
 * service's (semaphores.ts, rwlocks.ts).
 */
export type PermitCores = { readonly [K in PermitKind as `${K}s`]: PermitCore };

/** Builds every core over one store, sharing the lock service's bounds and wait gate (caps and shutdown). */
export function createPermitCores(store: LeaseStoreHost, limits: LeaseLimits, gate: WaitGate, observer: PermitObserver = {}): PermitCores {
  return Object.fromEntries(PERMIT_KINDS.map((kind) => [`${kind}s`, new PermitCore(kind, store, limits, gate, observer)])) as PermitCores;
}
