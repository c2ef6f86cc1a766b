/**
 * The history a fault run records: every lock operation and every write to the fenced resource, each
 * with start and end on one monotonic clock (milliseconds since the run began, from
 * process.hrtime.bigint), its outcome, and the fencing token it carried or received.
 */

export type LockOpKind = 'acquire' | 'renew' | 'release';

/**
 * ok: 200. conflict: 409 (lock_held or not_owner). unavailable: 503. failed: no HTTP answer at all
 * (connection refused or reset, client timeout). other: any other status.
 */
export type LockOpOutcome = 'ok' | 'conflict' | 'unavailable' | 'failed' | 'other';

export interface LockOp {
  readonly type: 'lock';
  readonly id: number;
  readonly kind: LockOpKind;
  readonly client: number;
  readonly key: string;
  /** Which keyholder instance answered (index into the cluster). */
  readonly instance: number;
  readonly startMs: number;
  readonly endMs: number;
  readonly outcome: LockOpOutcome;
  readonly status: number | null;
  /** The problem answer's `code` on a 4xx/5xx (e.g. store_unavailable or overloaded for a 503). */
  readonly code?: string;
  /** The acquire this operation belongs to (its own id for an acquire). */
  readonly grantId: number;
  readonly ttlMs: number;
  /** Fencing token from a 200 acquire or renew. */
  readonly fencingToken?: number;
  /** Lease end from a 200 acquire or renew, Unix ms on the store clock. */
  readonly expiresAtMs?: number;
  /** Wall clock (Date.now()) when the answer arrived; same host as the store, so comparable with expiresAtMs. */
  readonly receivedWallMs?: number;
  /**
   * Set when this op is one key's share of a lock-set call (/v1/lock-sets/...): the id of that call and
   * every key it asked for. A set call is recorded as one op per key (each its own grant for the per-key
   * checks), all with the same outcome, times and setId.
   */
  readonly set?: { readonly id: number; readonly keys: readonly string[] };
  /** Set on an acquire of a semaphore permit or a read/write lease (absent: a lock). */
  readonly permit?: PermitShape;
}

/** What a permit acquire asked for: a semaphore permit under `limit`, or a read or write lease. */
export type PermitShape =
  { readonly kind: 'semaphore'; readonly limit: number } | { readonly kind: 'rwlock'; readonly mode: 'read' | 'write' };

export interface WriteOp {
  readonly type: 'write';
  readonly id: number;
  readonly client: number;
  readonly key: string;
  /** The acquire whose token this write carries. */
  readonly grantId: number;
  readonly fencingToken: number;
  /** Writes are in-process and synchronous: one instant. */
  readonly atMs: number;
  readonly accepted: boolean;
}

export type HistoryOp = LockOp | WriteOp;

/**
 * A fault the run injected, and where. `replies` says whether the affected instance could still get
 * a certain answer from the store during it: when it could not, any 200 it gave for a request made
 * and answered wholly inside the window was not a certain outcome.
 */
export interface FaultWindow {
  readonly kind: string;
  /** Affected keyholder instance, or null when the fault hits all of them (the store itself). */
  readonly instance: number | null;
  readonly startMs: number;
  readonly endMs: number;
  readonly replies: 'none' | 'some';
}

export interface History {
  readonly ops: readonly HistoryOp[];
  readonly faults: readonly FaultWindow[];
}

/** One monotonic clock for the whole run. */
export class RunClock {
  private readonly originNs = process.hrtime.bigint();

  nowMs(): number {
    return Number(process.hrtime.bigint() - this.originNs) / 1e6;
  }
}
