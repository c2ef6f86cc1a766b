/**
 * A lock's words, as the lease port (lease-store.ts) reads and answers them: the lock's request, its
 * state, its listing, a lock set's answers and the quota slots. Each call of the port is ONE atomic step
 * in the store: there is no window between checking the owner and changing the lock. The store owns
 * time: expiry is measured on the store's clock, never computed from a caller's clock.
 */
import type { ReleaseRequest } from './permit-values.js';

export { MAX_QUEUE_SHOWN, type QueuedCaller, type ReleaseRequest, type ReleaseRequestInput, withReleaseRequest } from './permit-values.js';

export interface Grant {
  readonly fencingToken: number;
  /** When the lease ends, in Unix milliseconds on the store's clock. */
  readonly expiresAtMs: number;
}

/** `releaseRequested`: someone asked the holder to let go (ReleaseRequest); absent when nobody did. */
export type RenewOutcome = ({ readonly renewed: true; readonly releaseRequested?: ReleaseRequest } & Grant) | { readonly renewed: false };

export interface LockState {
  readonly holder: string | null;
  /**
   * Callers queued for this lock and still waiting: not those whose wait ran out, who left, or whose
   * keyholder instance stopped refreshing them (it died). Every store counts the same way.
   */
  readonly waiters: number;
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly ttlRemainingMs: number;
  /** Someone asked this lease's holder to let go (see ReleaseRequest); absent when nobody did. */
  readonly releaseRequested?: ReleaseRequest;
}

export interface AcquireInput {
  /** The store's id of the lock, `<namespace>/<key>` (the lock service composes it; the store treats it as opaque). */
  readonly id: string;
  readonly ownerToken: string;
  readonly ttlMs: number;
  /** A public label for the lease; null or "" for none (both read back as null). */
  readonly holder: string | null;
  /**
   * How long to wait in the key's FIFO queue when the lock is held (0 = do not wait). A caller that
   * does not wait is refused while others are queued: it never jumps the queue.
   */
  readonly waitMs?: number;
  /**
   * Aborts a wait (client gone, server shutting down): the waiter leaves the queue and the promise
   * rejects with the signal's reason. Already aborted when the call starts: nothing is taken, not even
   * a free lock, and the promise rejects the same way.
   */
  readonly signal?: AbortSignal;
  /**
   * `<scope>:<fingerprint>` (domain/idempotency.ts); stored with the lease it grants and gone with it.
   * While that lease is live, an acquire with the same value is answered with that lease (`replayed`)
   * instead of being refused, and one with the same scope but another fingerprint (the key reused for
   * another request) is rejected with IdempotencyKeyReusedError. Only immediate grants store it (a lease
   * handed to a waiter does not).
   */
  readonly idempotencyKey?: string;
  /**
   * Lock-delay: when this lease EXPIRES (not released, not force-released), the key stays unavailable
   * for this long after the lease end (Chubby, Consul). 0 or absent: none. The lock service bounds it
   * (never above the fencing grace, so the lock's state outlives the delay).
   */
  readonly lockDelayMs?: number;
  /**
   * Only for a store with `quotaInside`: the most leases (held or waited for) the lock's namespace may
   * have at once; 0 or absent = no cap.
   */
  readonly maxHeldInNamespace?: number;
  /**
   * Only for a store with `quotaInside`: the namespace has a cap, but the lease service counts this lease
   * through the quota-slot calls (a cap below `quotaInsideFrom`). The store takes no unit in its own step
   * and records that the lease (or its wait) holds none, so that its release, renewal, force release or
   * cancelled wait gives back and moves none either: a unit given back by a lease that took none would be
   * another lease's, and the namespace would admit more than its cap.
   */
  readonly quotaOutside?: boolean;
}

/** A held lock as an administrator's listing shows it. Never carries the owner token. */
export interface LockListRow extends LockState {
  /** The store's id of the lock (the lock service composes it; the store treats it as opaque). */
  readonly id: string;
}

export interface ListQuery {
  /** Only ids starting with this; "" for all. */
  readonly prefix: string;
  /** Page size the store aims for (see LeaseStore.list for how exact it is). */
  readonly limit: number;
  /** Where the previous page stopped; undefined for the first page. Opaque to callers. */
  readonly cursor?: string;
}

export interface ListPage {
  readonly leases: readonly LockListRow[];
  /** Pass back to get the next page; null when the listing is complete. */
  readonly nextCursor: string | null;
}

export type QuotaSlotOutcome = { readonly reserved: true } | { readonly reserved: false; readonly retryAfterMs: number };

/**
 * Per-namespace cap on leases held at once. A quota slot is one lease's claim on its namespace's quota
 * (not a Redis Cluster hash slot), named by the lease's owner token and ending when the lease would
 * end. Quota slots are kept apart from the lock records (see the lock service for why), and each
 * quota slot operation is atomic on its own.
 */
export interface QuotaSlotStore {
  /**
   * Takes a quota slot for `quotaSlotId` until `ttlMs` from now (store clock) if fewer than `maxQuotaSlots` live slots
   * exist in `namespace`; otherwise says when the earliest one ends. Expired slots never count.
   */
  reserveQuotaSlot(namespace: string, quotaSlotId: string, ttlMs: number, maxQuotaSlots: number): Promise<QuotaSlotOutcome>;
  /**
   * Counts a quota slot until `expiresAtMs`, after its lease was granted or renewed: moves its end there if
   * that is later (never earlier), and counts a missing slot again, over the cap if need be. The lease it
   * counts is held, so it must count: its slot goes missing when a release fails but the slot's give-back
   * sent with it does not (NamespaceQuota.releaseWith), and the lease lives on. Were the lease released at
   * the same moment by another call, the slot counts until `expiresAtMs`, never over the cap. A retired
   * slot (retireQuotaSlot) is neither moved nor counted again: its lease is gone.
   * `maxQuotaSlots`: the cap the quota slot was reserved under (a store that splits the cap into shards
   * finds the slot's shard with it).
   */
  extendQuotaSlot(namespace: string, quotaSlotId: string, expiresAtMs: number, maxQuotaSlots: number): Promise<void>;
  /**
   * Gives a quota slot back; does nothing for an unknown or retired slot (a retired slot stays retired).
   * `maxQuotaSlots`: as for extendQuotaSlot.
   */
  freeQuotaSlot(namespace: string, quotaSlotId: string, maxQuotaSlots: number): Promise<void>;
  /**
   * Gives back the quota slot of a lease that is gone for good (force-released), and retires it until
   * `untilMs`, the lease's end when it went (store clock): an extend of it meanwhile comes from a renewal
   * decided before the lease went, and must neither move it nor count it again, or the namespace would
   * count a unit for a lease that no longer exists until that renewal's end. Any renewal decided before
   * the lease went ended it no later than `untilMs`, so no extend can count it after that either. A
   * reservation under the same id takes it anew. `maxQuotaSlots`: as for extendQuotaSlot.
   */
  retireQuotaSlot(namespace: string, quotaSlotId: string, untilMs: number, maxQuotaSlots: number): Promise<void>;
}

/**
 * A key's state as a watcher sees it: the live lease (or null) and the last fencing token the store
 * still remembers for the key (0 when it remembers none). domain/watch.ts turns this into the index.
 */
export interface IndexedLockState {
  readonly state: LockState | null;
  readonly lastFencingToken: number;
  /** While an expired lease's lock-delay runs: when it ends (Unix ms, store clock). */
  readonly lockDelayUntilMs?: number;
}

/**
 * Change notices for watched keys. `onChange` is called (at least once, maybe more) after each change
 * of `key` that any instance made: grant, release, force release, hand-over. A lease that EXPIRES is
 * not announced (nothing writes at that moment): the watcher times it itself. Resolves once notices
 * flow (so a state read after it cannot miss a later change); the returned function stops them.
 */
export interface ChangeFeed {
  watchChanges(key: string, onChange: () => void): Promise<() => void>;
}

export type LockSetRenewOutcome =
  | {
      readonly renewed: true;
      readonly fencingTokens: readonly number[];
      readonly expiresAtMs: number;
      /** A release request on any of the set's keys (the first one found). */
      readonly releaseRequested?: ReleaseRequest;
      /**
       * Only from a store with `quotaInside`, for one key: the lease's quota is counted through the
       * quota-slot calls although the store counts the namespace's cap inside its lock steps (a lock
       * set's key renewed alone): the caller carries its slot to the new end.
       */
      readonly quotaOutside?: true;
    }
  | { readonly renewed: false };
