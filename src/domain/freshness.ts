import { performance } from 'node:perf_hooks';
import { keptLease, OverloadedError, StoreUnavailableError } from './errors.js';
import { ownLag } from './own-lag.js';

/**
 * A reply that took longer than this fraction of the lease to come back (a paused process, a stalled
 * network) may describe a lease that is already gone or nearly so; it is not handed out as a success.
 */
export const LATE_REPLY_FRACTION = 0.5;

/** How the guard gives a late lease back: its owner's release of the lock `id` (the lease port's, for the lease's kind). */
export interface LeaseGiveBack {
  release(id: string, ownerToken: string): Promise<boolean>;
}

/** A lease as the freshness guard sees it: which lock, whose, how long, and when the store decided it. */
export interface DecidedLease {
  /** The store's id of the lock (namespace and key; see namespaces.ts). */
  readonly id: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  /** performance.now() when the store command that established (or renewed) the lease was sent. */
  readonly decidedAt: number;
}

/**
 * Whether a lease decided at `decidedAt` may still be reported as held: a check without any I/O, so
 * the common case (a prompt answer) costs no promise on the way out.
 */
export function isFresh(lease: { readonly ttlMs: number; readonly decidedAt: number }): boolean {
  return performance.now() - lease.decidedAt < lease.ttlMs * LATE_REPLY_FRACTION;
}

/** Why a late lease is kept rather than given back (FreshnessGuard.refuseIfLate). */
export type KeptBecause = 'renewal' | 'idempotency-key';

const KEPT: Record<KeptBecause, string> = {
  renewal: 'the lease was kept: it holds until the end the store gave it, and a renewal sent again in time keeps it',
  'idempotency-key':
    'the lease was kept for its Idempotency-Key: an acquire sent again with the same key gets it back; otherwise it ends at its TTL',
};

/**
 * Whether a give-back went through: false when it failed, and the lease may then live on to its end (its
 * quota slot must too: quota.ts, leaseMayBeLive). A give-back that found no lease went through.
 */
export function gaveBack(giveBack: Promise<unknown>): Promise<boolean> {
  return giveBack.then(
    () => true,
    () => false,
  );
}

/**
 * Gives back the lease of a caller that left as it was granted (nobody would use or release it). A
 * give-back that fails leaves the lease to live on to its end, so its quota slot must too: thrown as a
 * StoreUnavailableError whose outcome is unknown (`message`: what could not be given back), which
 * leaseMayBeLive keeps counting. Resolves when it was given back; the caller then answers the abort.
 */
export async function giveBackForCallerGone(giveBack: Promise<unknown>, message: string): Promise<void> {
  if (!(await gaveBack(giveBack))) throw new StoreUnavailableError(message, 1000, { outcomeUnknown: true });
}

/**
 * The late-grant guard. If the store's answer arrived late, the lease it describes may have run out
 * while the reply was in flight; reporting it as held would let two callers believe they hold the
 * lock. The guard gives the lease back and answers 503 instead: `overloaded` when this process's own
 * lateness made the answer late, `store_unavailable` when the store did (refuseIfLate).
 *
 * The lock service checks right after the store answers; the HTTP layer checks again just before the
 * answer is written, because a process stopped in between (SIGSTOP, a long GC pause) would otherwise
 * hand out a lease that ran out meanwhile. That narrows the window to the write itself; it cannot
 * close it (see docs/safety.md, Limits).
 */
export class FreshnessGuard {
  constructor(private readonly store: LeaseGiveBack) {
    ownLag.watch();
  }

  /**
   * Who is to blame for a late answer decides what the caller is told: when the time this process's
   * own event loop was held up (its own load, or a host starving it) is what made the answer late, it
   * is 503 `overloaded`, since the store answered in time; otherwise the store was slow:
   * `store_unavailable`. Either way the lease is given back, unless it is kept (`keep`, KeptBecause): a
   * renewal's lease was the caller's before the renewal and stays live until the end the store gave it,
   * so giving it back would make a late answer cost the holder its lease (protection must never do
   * that); the caller is told the renewal is uncertain and renews again. An acquire sent with an
   * Idempotency-Key may have been answered with this very lease already, to a retry (a replay, on any
   * instance): given back, its holder would hold a 200 for a lock another caller is then granted. The
   * error then says the lease was kept (DomainError.leaseKept), so its quota slot keeps counting.
   */
  async refuseIfLate(lease: DecidedLease, { keep }: { readonly keep?: KeptBecause } = {}): Promise<void> {
    if (isFresh(lease)) return;
    const now = performance.now();
    const elapsedMs = now - lease.decidedAt;
    const ownMs = ownLag.heldUpBetween(lease.decidedAt, now);
    const giveBack = keep === undefined;
    if (giveBack && !(await gaveBack(this.store.release(lease.id, lease.ownerToken)))) {
      // The lease lives on to its end: its quota slot must too (quota.ts, leaseMayBeLive).
      throw new StoreUnavailableError(
        `the store answered after ${Math.round(elapsedMs)} ms, too late to trust a ${lease.ttlMs} ms lease, and the lease could not be given back: it ends by itself`,
        1000,
        { outcomeUnknown: true },
      );
    }
    const fate = giveBack ? 'the lease was given back' : KEPT[keep];
    // Ours when the hold-ups were the larger part of the wait and, without them, the answer was in time.
    // (A hold-up while the reply was still on its way also counts here: requiring the larger part keeps
    // a store that was slow, on a host that was also busy, reported as the store's.)
    const refusal =
      ownMs * 2 >= elapsedMs && elapsedMs - ownMs < lease.ttlMs * LATE_REPLY_FRACTION
        ? new OverloadedError(
            'event_loop_delay',
            1000,
            `this instance took ${Math.round(elapsedMs)} ms to deliver a ${lease.ttlMs} ms lease (its event loop was held up ${Math.round(ownMs)} ms of it); ${fate}`,
          )
        : new StoreUnavailableError(
            `the store answered after ${Math.round(elapsedMs)} ms, too late to trust a ${lease.ttlMs} ms lease; ${fate}`,
          );
    throw giveBack ? refusal : keptLease(refusal);
  }
}
