import type { LockLimits } from './limits.js';
import type { LockStore } from './lock-store.js';
import { PermitCore, type PermitObserver } from './permits.js';
import { RwLockService } from './rwlocks.js';
import { SemaphoreService } from './semaphores.js';
import type { WaitGate } from './wait-gate.js';

/** The semaphore and read/write lock cores over one store. */
export interface PermitCores {
  readonly semaphores: PermitCore;
  readonly rwlocks: PermitCore;
}

/** Builds both over one store, sharing the lock service's bounds and wait gate (caps and shutdown). */
export function createPermitCores(store: LockStore, limits: LockLimits, gate: WaitGate, observer: PermitObserver = {}): PermitCores {
  return {
    semaphores: new PermitCore('semaphore', store, limits, gate, SemaphoreService.refusals, observer),
    rwlocks: new PermitCore('rwlock', store, limits, gate, RwLockService.refusals, observer),
  };
}
