import { MAX_READERS, RwLockService, rwLockView, type RwLockView, type RwMode } from '../../domain/rwlocks.js';
import { RwLockAcquireRequest, RwLockGrant, RwLockStatus } from '../schemas/permits.js';
import { inspectDescription, permitPrimitive, type PermitRouteSpec } from './permits.js';
import { leaseView } from './responses.js';

/** A queued caller's mode, from the weight it asks for (a writer asks for all of it). */
const queuedMode = (weight: number) => ({ mode: weight >= MAX_READERS ? ('write' as const) : ('read' as const) });

const RWLOCK: PermitRouteSpec<{ mode: RwMode; ttlMs: number; holder?: string; waitMs?: number }, RwLockView> = {
  kind: 'rwlock',
  names: {
    path: 'rwlocks',
    id: 'RwLock',
    noun: 'read/write lock',
    tag: 'rwlocks',
    tagDescription: 'Read/write locks: many readers or one writer, writers not starved',
  },
  example: { mode: 'write', ttlMs: 30_000 },
  acquire: {
    summary: 'Take a read/write lock for reading or writing',
    description:
      'Many readers or one writer. A read is granted while no writer holds the lock and nobody is queued; a write only ' +
      'when nobody holds it and nobody is queued. Readers and writers wait in one FIFO queue (waitMs), so once a writer ' +
      "waits, later readers queue behind it: writers are not starved. Every grant gets the lock's next fencing token.",
    body: RwLockAcquireRequest,
    grant: RwLockGrant,
    ok: 'Granted: the caller holds a read or write lease until expiresAt',
    refused:
      'rwlock_held: held in a mode that excludes this one (a writer; or readers, for a write), or a writer is queued ahead; ' +
      'retryAfterMs and Retry-After say when the first lease ends',
  },
  inspect: {
    summary: 'See who holds a read/write lock (or wait for it to change)',
    description: inspectDescription('The mode it is held in, its leases (mode, holder label, fencing token, expiry)', 'lock'),
    status: RwLockStatus,
    ok: "The read/write lock's current state",
  },
  service: (core) => new RwLockService(core),
  granted: ({ mode }) => ({ mode }),
  view: rwLockView,
  queued: queuedMode,
  status: (key, index, view) =>
    view === null
      ? { key, index, mode: null, holders: [], holderCount: 0, truncated: false, waiters: 0 }
      : {
          key,
          index,
          mode: view.mode,
          holders: view.holders.map((h) => ({ mode: h.mode, ...leaseView(h) })),
          holderCount: view.holderCount,
          truncated: view.holders.length < view.holderCount,
          waiters: view.waiters,
        },
};

/** Read/write locks (scope `locks`, in the key's namespace): acquire, renew, release, inspect. */
export const RWLOCKS = permitPrimitive(RWLOCK);
