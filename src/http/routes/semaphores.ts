import { SemaphoreService, semaphoreView, type SemaphoreView } from '../../domain/semaphores.js';
import { SemaphoreAcquireRequest, SemaphoreGrant, SemaphoreStatus } from '../schemas/permits.js';
import { inspectDescription, permitPrimitive, type PermitRouteSpec } from './permits.js';
import { leaseView } from './responses.js';

const SEMAPHORE: PermitRouteSpec<{ limit: number; ttlMs: number; holder?: string; waitMs?: number }, SemaphoreView> = {
  kind: 'semaphore',
  names: {
    path: 'semaphores',
    id: 'Semaphore',
    noun: 'semaphore',
    tag: 'semaphores',
    tagDescription: 'At most N holders at once: each permit its own lease with its own fencing token',
  },
  example: { limit: 1, ttlMs: 30_000 },
  acquire: {
    summary: 'Take a semaphore permit',
    description:
      'Grants one permit if fewer than limit are held and nobody is queued. Each permit is a lease of its own, with its own ' +
      'ownerToken, fencingToken (increasing per semaphore) and expiry: a holder that crashes frees its permit when its TTL ' +
      'runs out. When all are held: 409 semaphore_full with Retry-After, or with waitMs a place in a FIFO queue, granted ' +
      "as soon as a permit frees. Every caller must send the semaphore's limit; another one is 409 limit_mismatch.",
    body: SemaphoreAcquireRequest,
    grant: SemaphoreGrant,
    ok: 'Granted: the caller holds one permit until expiresAt unless it renews',
    refused:
      'semaphore_full: every permit is held (or others are queued); retryAfterMs and Retry-After say when the first one ends. ' +
      'limit_mismatch: the live permits were granted with another limit; Retry-After says when the last of them ends.',
  },
  inspect: {
    summary: "See who holds a semaphore's permits (or wait for it to change)",
    description: inspectDescription('The limit, the permits held and by whom (holder label, fencing token, expiry)', 'semaphore'),
    status: SemaphoreStatus,
    ok: "The semaphore's current state",
  },
  service: (core) => new SemaphoreService(core),
  granted: ({ limit }) => ({ limit }),
  view: semaphoreView,
  status: (key, index, view) =>
    view === null
      ? { key, index, limit: null, permitsHeld: 0, holders: [], truncated: false, waiters: 0 }
      : {
          key,
          index,
          limit: view.limit,
          permitsHeld: view.permitsHeld,
          holders: view.holders.map(leaseView),
          truncated: view.holders.length < view.permitsHeld,
          waiters: view.waiters,
        },
};

/** Semaphores (scope `locks`, in the key's namespace): acquire, renew, release, inspect. */
export const SEMAPHORES = permitPrimitive(SEMAPHORE);
