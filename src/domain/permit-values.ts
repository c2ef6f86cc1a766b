/**
 * The words of the primitives that let several leases hold one key at once, as the lease port
 * (lease-store.ts) reads and answers them: semaphores (at most `limit` permits) and read/write locks
 * (many readers or one writer). Both are one shape, a weighted FIFO semaphore: a key has a capacity,
 * every lease takes a weight of it, and a caller is granted only if its weight still fits and nobody
 * is queued ahead of it. A semaphore permit weighs 1 against the
 * semaphore's limit; a read lease weighs 1 and a write lease the whole capacity (so it excludes
 * everyone). Waiters are granted strictly in arrival order, so a queued writer holds back the readers
 * behind it (writers are not starved).
 *
 * As for locks (lock-values.ts), each call of the port is ONE atomic step in the store, expiry is timed
 * on the store's clock, and each lease is its own: it ends by itself at its own expiry, so a crashed
 * holder never keeps its permit past its TTL.
 */

/**
 * An ask to a lease's holder to let go, without evicting it (an operator's `release-request`). It is
 * stored with the lease it names, so every instance sees it, and it ends with that lease: released,
 * expired, evicted or handed over, the next lease starts without one.
 */
export interface ReleaseRequest {
  /** When it was asked (Unix ms, the store's clock). */
  readonly atMs: number;
  /** Who asked: the API key id of the caller. */
  readonly by: string;
  /** Why, as the asker wrote it; null for none. */
  readonly reason: string | null;
}

/** What the asker gives; the store adds when, on its own clock. */
export type ReleaseRequestInput = Omit<ReleaseRequest, 'atMs'>;

/**
 * `answer` with `releaseRequested` added when there is one. When nobody asked, the field stays absent
 * (not undefined), so an answer without a request looks exactly as it did before requests existed.
 */
export function withReleaseRequest<T extends object, R = ReleaseRequest>(
  answer: T,
  releaseRequested: R | undefined,
): T & { readonly releaseRequested?: R } {
  return releaseRequested === undefined ? answer : { ...answer, releaseRequested };
}

/**
 * A caller queued for a key, as inspect lists it (like the Web Locks API's query()): never its owner
 * token. Only live waiters, in queue order, as LockState.waiters counts them.
 */
export interface QueuedCaller {
  /** 1 for the head of the queue. */
  readonly position: number;
  readonly holder: string | null;
  /** When it joined the queue (Unix ms, store clock). */
  readonly waitingSinceMs: number;
  /** Semaphores and read/write locks: how much of the capacity it asks for (absent for a lock). */
  readonly weight?: number;
}

/** The most queued callers one inspect lists: as for holders (MAX_HOLDERS_SHOWN), more than a person reads. */
export const MAX_QUEUE_SHOWN = 100;

/** As a lock listing's query (ListQuery): ids starting with `prefix`, about `limit` per page, from `cursor`. */
export interface PermitListQuery {
  readonly prefix: string;
  readonly limit: number;
  readonly cursor?: string;
}

/**
 * Every multi-holder primitive, by kind: the one list a new capacity and weight primitive joins. The
 * permit cores (primitives.ts), the stores' keys and lease history are built from it; the same name
 * under each kind is a different key. A kind is lower-case letters only: the stores put it in key names.
 */
export const PERMIT_KINDS = ['semaphore', 'rwlock'] as const;

/** Which primitive a key belongs to. */
export type PermitKind = (typeof PERMIT_KINDS)[number];

/** One live lease on a key, as anyone may see it: never the owner token. */
export interface PermitHolder {
  readonly holder: string | null;
  readonly weight: number;
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly ttlRemainingMs: number;
  /** Someone asked this lease's holder to let go (see ReleaseRequest); absent when nobody did. */
  readonly releaseRequested?: ReleaseRequest;
}

/**
 * 100: the most leases one inspect (or listing entry, or watch answer) shows. A semaphore may have
 * 10,000 live permits; reading and sending them all made one inspect cost ~22 ms of Redis time and a
 * watch answer hundreds of kilobytes, paid by every tenant sharing the Redis. A hundred is more than a
 * person reads, and keeps an answer under ~20 KB and its store work O(100).
 */
export const MAX_HOLDERS_SHOWN = 100;

export interface PermitState {
  readonly capacity: number;
  /**
   * Live leases, at most MAX_HOLDERS_SHOWN: the ones that end first (ties: the lower owner token, as a
   * Redis sorted set orders them), listed in grant order (ascending fencing token). The earliest end
   * is always among them, which is what a watch needs to know when the state changes by itself.
   */
  readonly holders: readonly PermitHolder[];
  /** All live leases, shown or not. */
  readonly holderCount: number;
  /** Live callers queued for the key, counted as for locks (LockState.waiters). */
  readonly waiters: number;
}

/**
 * A key's state with its watch index: a per-key number that rises on every change (grant, release,
 * expiry, eviction, hand-over; not on a renewal). Floored at the store clock in microseconds on each
 * change, as fencing tokens are, so a key forgotten after the grace period (index 0) starts again above
 * every index it showed before. Compare for inequality only, as for locks.
 */
export interface IndexedPermitState {
  readonly state: PermitState | null;
  readonly index: number;
}

export interface PermitListPage {
  readonly entries: ReadonlyArray<{ readonly id: string; readonly state: PermitState }>;
  readonly nextCursor: string | null;
}
