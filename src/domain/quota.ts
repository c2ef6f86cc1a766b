import { isDomainError, QuotaExceededError, StoreUnavailableError } from './errors.js';
import { gaveBack, type LeaseGiveBack } from './freshness.js';
import type { Grant, QuotaSlotStore } from './lock-values.js';

/**
 * 1 s: a quota slot is reserved before the grant, so it is made to last this much longer than the
 * lease could (wait included). It is not moved to the lease's exact end after the grant: that would
 * cost a store round trip on every acquire to give the slot back at most this much (plus the unused
 * wait) earlier. Erring long means a namespace is at worst refused a lock a moment early, never
 * allowed one over its cap; a release frees the slot at once, a renew extends it.
 */
export const QUOTA_SLOT_MARGIN_MS = 1000;

/**
 * A lease's quota slot: named by its owner token AND its lock, so a token that releases, renews or is
 * evicted from a key names no slot but that lease's. Named by the token alone, a release of a key the
 * token did not hold (a 409) freed the slot of the lease it held elsewhere, which stayed held uncounted:
 * a namespace could hold any number of leases over its cap. A lock set's keys each have their own, so a
 * plain renew or release of one of them names the set's slot of that key. An owner token holds no '/'.
 */
export function leaseSlotId(ownerToken: string, id: string): string {
  return `${ownerToken}/${id}`;
}

/**
 * Whether a failed acquire may still have granted its lease: its call was sent and the answer is missing
 * (StoreUnavailableError.outcomeUnknown), or the lease was kept on purpose (DomainError.leaseKept). Its
 * slot then stays, counting until its own end (wait + lease + margin): freed, a lease granted in the store
 * would live on uncounted, over the namespace's cap. Any other failure granted nothing, and frees the slot
 * at once.
 */
export function leaseMayBeLive(error: unknown): boolean {
  return isDomainError(error) && (error.leaseKept || (error instanceof StoreUnavailableError && error.outcomeUnknown));
}

/** The lease a caller asks for, as the quota needs to know it. */
export interface LeaseClaim {
  readonly namespace: string;
  /** The store's id of the lock. */
  readonly id: string;
  /** With `id`, the quota slot's name (leaseSlotId): one slot per lease. */
  readonly ownerToken: string;
  readonly ttlMs: number;
}

/**
 * The cap on locks one namespace holds at once, kept as quota slots in the store (see QuotaSlotStore). A
 * slot is taken before (or together with) the grant and given back if the lock is not granted. A
 * caller that waits holds its slot while it waits: the quota check cannot run inside the hand-over,
 * whose keys live in the lock's own Cluster slot. Every give-back is best effort: a slot left behind
 * only counts until it ends by itself.
 */
export class NamespaceQuota {
  constructor(
    private readonly store: QuotaSlotStore & LeaseGiveBack,
    /** Most locks one namespace may hold at once; 0 means no cap (and no slot bookkeeping). */
    private readonly maxHeldLocks: number,
  ) {}

  /** No cap kept here (none, or kept inside the store's lock steps): no slot bookkeeping at all. */
  get uncapped(): boolean {
    return this.maxHeldLocks <= 0;
  }

  /**
   * For an acquire that does not wait. The slot and the lease are asked for at once: the Redis
   * store sends calls made together in one write, so both reach Redis in one round trip instead of two. A lease granted without a slot
   * is given straight back before anyone hears of it, so no caller is ever told it holds a lock over
   * the namespace's cap (another caller may, for that instant, be told the lock is held).
   */
  grantNow<G extends Grant>(claim: LeaseClaim, acquire: () => Promise<G>): Promise<G> {
    // No cap here (none, or kept inside the store's lock steps): the acquire itself, without a promise around it.
    if (this.maxHeldLocks <= 0) return acquire();
    return this.grantWithQuotaSlot(claim, acquire);
  }

  private async grantWithQuotaSlot<G extends Grant>(claim: LeaseClaim, acquire: () => Promise<G>): Promise<G> {
    const [slot, lease] = await Promise.allSettled([
      this.store.reserveQuotaSlot(
        claim.namespace,
        leaseSlotId(claim.ownerToken, claim.id),
        claim.ttlMs + QUOTA_SLOT_MARGIN_MS,
        this.maxHeldLocks,
      ),
      acquire(),
    ]);
    if (slot.status === 'fulfilled' && slot.value.reserved) {
      if (lease.status === 'fulfilled') return lease.value;
      if (!leaseMayBeLive(lease.reason)) await this.free(claim.namespace, claim.ownerToken, claim.id);
      throw lease.reason;
    }
    // Not given back, the lease lives on to its end: counted over the cap rather than not at all.
    if (lease.status === 'fulfilled' && !(await gaveBack(this.store.release(claim.id, claim.ownerToken)))) {
      await this.extend(claim.namespace, claim.ownerToken, claim.id, lease.value.expiresAtMs);
    }
    if (slot.status === 'rejected') throw slot.reason;
    throw new QuotaExceededError(claim.namespace, this.maxHeldLocks, slot.value.reserved ? 1 : slot.value.retryAfterMs);
  }

  /** For an acquire that may wait `waitMs`: the slot first, held through the wait, given back if not granted. */
  async grantWaiting<G extends Grant>(claim: LeaseClaim, waitMs: number, acquire: () => Promise<G>): Promise<G> {
    if (this.maxHeldLocks <= 0) return acquire();
    const askedAt = performance.now();
    const slot = await this.store.reserveQuotaSlot(
      claim.namespace,
      leaseSlotId(claim.ownerToken, claim.id),
      waitMs + claim.ttlMs + QUOTA_SLOT_MARGIN_MS,
      this.maxHeldLocks,
    );
    if (!slot.reserved) throw new QuotaExceededError(claim.namespace, this.maxHeldLocks, slot.retryAfterMs);
    try {
      const grant = await acquire();
      // The slot outlives the lease unless the grant came more than wait + margin after the slot was
      // taken, which this process's own clock bounds from above (a grant confirmed late, an overloaded
      // instance): then the slot is carried to the lease's end, one call on that rare path only.
      if (performance.now() - askedAt > waitMs + QUOTA_SLOT_MARGIN_MS) {
        await this.extend(claim.namespace, claim.ownerToken, claim.id, grant.expiresAtMs);
      }
      return grant;
    } catch (error) {
      if (!leaseMayBeLive(error)) await this.free(claim.namespace, claim.ownerToken, claim.id);
      throw error;
    }
  }

  /** A renewed lease's slot lasts as long as the lease now does, and counts again if it went missing. */
  async extend(namespace: string, ownerToken: string, id: string, expiresAtMs: number): Promise<void> {
    if (this.maxHeldLocks > 0)
      await this.store.extendQuotaSlot(namespace, leaseSlotId(ownerToken, id), expiresAtMs, this.maxHeldLocks).catch(() => undefined);
  }

  /**
   * A release and its slot's return in the same round trip: the unit is named by the owner token and the
   * lock (leaseSlotId), so a token that holds no lease there has no unit there either (or one whose lease
   * has ended), and freeing it costs nothing. Without a cap here (none, or kept inside the store's lock steps), the release alone. The
   * release is the store's give-back of the lease's kind (the lock's, or the permit's).
   */
  releaseWith(namespace: string, id: string, ownerToken: string): Promise<boolean> {
    if (this.maxHeldLocks <= 0) return this.store.release(id, ownerToken);
    return Promise.all([this.store.release(id, ownerToken), this.free(namespace, ownerToken, id)]).then(([released]) => released);
  }

  /** A released lease's slot is free again. */
  async free(namespace: string, ownerToken: string, id: string): Promise<void> {
    if (this.maxHeldLocks > 0)
      await this.store.freeQuotaSlot(namespace, leaseSlotId(ownerToken, id), this.maxHeldLocks).catch(() => undefined);
  }

  /**
   * An evicted lease's slot is free again, for good: a renewal of that lease decided before the eviction
   * may still extend it, and must not count it again (QuotaSlotStore.retireQuotaSlot). `untilMs`: the
   * lease's end when it was evicted (store clock).
   */
  async retire(namespace: string, ownerToken: string, id: string, untilMs: number): Promise<void> {
    if (this.maxHeldLocks > 0)
      await this.store.retireQuotaSlot(namespace, leaseSlotId(ownerToken, id), untilMs, this.maxHeldLocks).catch(() => undefined);
  }
}
