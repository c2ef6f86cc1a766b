import { LimitMismatchError, SemaphoreFullError } from './errors.js';
import type { PermitCore } from './permits.js';
import { type PermitAcquire, PermitService } from './permit-service.js';
import { type PermitHolder, type PermitState, withReleaseRequest } from './permit-values.js';

/**
 * 10,000: a semaphore's permits are each a live lease the store keeps and inspect lists, so the limit
 * is bounded to keep one semaphore's state and one inspect answer small. Beyond it, a counter is the
 * wrong tool.
 */
export const MAX_SEMAPHORE_LIMIT = 10_000;

export interface SemaphoreAcquire extends PermitAcquire {
  readonly limit: number;
}

/** A semaphore's live permits as anyone may see them (never owner tokens). */
export interface SemaphoreView {
  readonly limit: number;
  /** Every live permit, shown in `holders` or not. */
  readonly permitsHeld: number;
  /** The first MAX_HOLDERS_SHOWN to end (see PermitState.holders). */
  readonly holders: ReadonlyArray<Omit<PermitHolder, 'weight'>>;
  readonly waiters: number;
}

/**
 * Semaphores: at most `limit` permits held at once, each its own lease with its own expiry and fencing
 * token (increasing per semaphore), FIFO waiting with hand-off. A semaphore's limit is the one its
 * first live permit was granted with; a caller asking with another limit is refused (limit_mismatch)
 * until every live permit has ended.
 */
export class SemaphoreService extends PermitService<SemaphoreAcquire, SemaphoreView> {
  constructor(core: PermitCore) {
    super(core, { share: ({ limit }) => ({ weight: 1, capacity: limit }), view: semaphoreView, refusals: SemaphoreService.refusals });
  }

  /** The refusals in a semaphore's words. */
  static readonly refusals = {
    full: (key: string, retryAfterMs: number) => new SemaphoreFullError(key, retryAfterMs),
    mismatch: (key: string, requested: number, live: number, retryAfterMs: number) =>
      new LimitMismatchError(key, requested, live, retryAfterMs),
  };
}

export function semaphoreView(state: PermitState): SemaphoreView {
  return {
    limit: state.capacity,
    permitsHeld: state.holderCount,
    holders: state.holders.map(({ holder, fencingToken, expiresAtMs, ttlRemainingMs, releaseRequested }) =>
      withReleaseRequest({ holder, fencingToken, expiresAtMs, ttlRemainingMs }, releaseRequested),
    ),
    waiters: state.waiters,
  };
}
