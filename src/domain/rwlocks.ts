import { RwLockHeldError } from './errors.js';
import type { PermitCore } from './permits.js';
import { type PermitAcquire, PermitService } from './permit-service.js';
import { type PermitHolder, type PermitState, withReleaseRequest } from './permit-values.js';

export type RwMode = 'read' | 'write';

/**
 * 10,000 readers at once at most. A read/write lock is a weighted semaphore of this capacity: a reader
 * takes 1, a writer all of it. The bound keeps one lock's state and one inspect answer small, as
 * MAX_SEMAPHORE_LIMIT does for semaphores; a reader beyond it waits (or is refused) like any other.
 */
export const MAX_READERS = 10_000;

const WEIGHT: Readonly<Record<RwMode, number>> = { read: 1, write: MAX_READERS };

export interface RwLockAcquire extends PermitAcquire {
  readonly mode: RwMode;
}

export interface RwLockView {
  /** Who holds it now: readers, one writer (never both). */
  readonly mode: RwMode;
  /** The first MAX_HOLDERS_SHOWN to end (see PermitState.holders). */
  readonly holders: ReadonlyArray<Omit<PermitHolder, 'weight'> & { readonly mode: RwMode }>;
  /** Every live lease, shown in `holders` or not. */
  readonly holderCount: number;
  readonly waiters: number;
}

/**
 * Read/write locks: many readers or one writer. Waiting is one FIFO queue for both modes, so once a
 * writer waits, readers that come after it queue behind it (writers are not starved), and a released
 * writer lets in every reader at the head of the queue at once. Every grant gets the next fencing
 * token of the lock, so a write's token is above every earlier grant's, read or write.
 */
export class RwLockService extends PermitService<RwLockAcquire, RwLockView> {
  constructor(core: PermitCore) {
    super(core, {
      share: ({ mode }) => ({ weight: WEIGHT[mode], capacity: MAX_READERS }),
      view: rwLockView,
      refusals: RwLockService.refusals,
    });
  }

  /** The refusals in a read/write lock's words. */
  static readonly refusals = {
    full: (key: string, retryAfterMs: number, weight: number) => new RwLockHeldError(key, modeOf(weight), retryAfterMs),
    // The capacity is fixed, so the store never reports a mismatch for a read/write lock.
    mismatch: (key: string, _requested: number, _live: number, retryAfterMs: number) => new RwLockHeldError(key, 'read', retryAfterMs),
  };
}

export function rwLockView(state: PermitState): RwLockView {
  const holders = state.holders.map(({ weight, holder, fencingToken, expiresAtMs, ttlRemainingMs, releaseRequested }) =>
    withReleaseRequest({ mode: modeOf(weight), holder, fencingToken, expiresAtMs, ttlRemainingMs }, releaseRequested),
  );
  // A writer is alone (it takes the whole capacity), so it is always the one lease shown.
  return {
    mode: holders.some((h) => h.mode === 'write') ? 'write' : 'read',
    holders,
    holderCount: state.holderCount,
    waiters: state.waiters,
  };
}

function modeOf(weight: number): RwMode {
  return weight >= MAX_READERS ? 'write' : 'read';
}
