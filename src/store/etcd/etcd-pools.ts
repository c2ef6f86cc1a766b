/**
 * The etcd store's lease records and what is read from them, without any etcd call: one key's pool
 * (its capacity, its leases, its watch-index base and last fencing token), as etcd-leases.ts writes it
 * for every kind of key, and the record a lock had before locks were pools (read as a pool of one).
 */
import type { IKeyValue } from 'etcd3';
import type { LeaseKind } from '../../domain/lease-store.js';
import type { LockState } from '../../domain/lock-values.js';
import { MAX_HOLDERS_SHOWN, withReleaseRequest, type PermitState } from '../../domain/permit-values.js';
import type { Observed, StoredReleaseRequest, WaiterRecordBase } from './etcd-records.js';
import { parseJson, requestOf } from './etcd-records.js';

export interface LeaseRecord {
  /** Owner token. */
  readonly o: string;
  /** Weight. */
  readonly w: number;
  /** End (Unix ms, this store's clock). */
  readonly e: number;
  readonly h: string | null;
  /** Fencing token. */
  readonly t: number;
  /** The idempotency key the lease was granted with (immediate lock grants only; goes with the lease). */
  readonly i?: string;
  /** Lock-delay (ms): if this lease EXPIRES, the key stays unavailable this long after `e`. */
  readonly d?: number;
  /** A release request on this lease (atMs, by, reason); goes with the lease. */
  readonly r?: StoredReleaseRequest;
}

export interface PoolRecord {
  /** Capacity the live leases were granted under. */
  readonly c: number;
  /** Watch-index base of the last change (see etcd-leases.ts). */
  readonly x: number;
  /** Keep until (ms): the latest lease end plus the fencing grace. */
  readonly k: number;
  /** Leases in grant order, live or ended but not yet dropped. */
  readonly l: readonly LeaseRecord[];
  /** The last fencing token granted on the key (a lock's watch index counts from it). */
  readonly f?: number;
  /** The waiters this change handed a lease to, so their instances recognise the hand-over. */
  readonly g?: readonly string[];
}

/** A queued caller. A lock's has no weight or capacity (1 and 1), as lock waiters were always written. */
export interface LeaseWaiterRecord extends WaiterRecordBase {
  readonly w?: number;
  /** The capacity the waiter asked with (the pool's, once it has live leases). */
  readonly c?: number;
  /** The lock-delay the waiter asked for, carried into the lease it is handed. */
  readonly ld?: number;
}

/**
 * A lock's record as the store wrote it before locks were pools (one lease, or a released lock's last
 * token): read as a pool so that leases granted before an upgrade are kept, and replaced by a pool
 * record at the next change of the key (the change compares the same key's revision).
 */
interface LegacyLockRecord {
  readonly o: string;
  readonly e: number;
  readonly h: string | null;
  /** The fencing token once renewed or ended; until then the record's mod revision. */
  readonly t?: number;
  readonly k?: number;
  readonly i?: string;
  readonly d?: number;
  readonly r?: StoredReleaseRequest;
}

/** A key's record, of either layout, as a pool; null for none (or an unreadable one: a free key). */
export function poolOf(kv: IKeyValue | undefined): Observed<PoolRecord> | null {
  if (!kv) return null;
  const value = parseJson<PoolRecord | LegacyLockRecord>(kv.value);
  if (!value) return null;
  if ('l' in value) return { kv, value };
  if (typeof value.o !== 'string' || typeof value.e !== 'number') return null;
  const t = value.t ?? Number(kv.mod_revision);
  const lease: LeaseRecord = {
    o: value.o,
    w: 1,
    e: value.e,
    h: value.h,
    t,
    ...(value.i !== undefined ? { i: value.i } : {}),
    ...(value.d !== undefined ? { d: value.d } : {}),
    ...(value.r !== undefined ? { r: value.r } : {}),
  };
  // A released lock (owner "") kept only its token.
  return { kv, value: { c: 1, x: 0, k: value.k ?? value.e, f: t, l: value.o === '' ? [] : [lease] } };
}

export function liveLeases(pool: Observed<PoolRecord> | null, nowMs: number): LeaseRecord[] {
  return pool ? pool.value.l.filter((l) => l.e > nowMs) : [];
}

export function used(leases: readonly LeaseRecord[]): number {
  let sum = 0;
  for (const lease of leases) sum += lease.w;
  return sum;
}

/** The last fencing token granted on the key (0: none known). */
export function lastToken(pool: PoolRecord | null): number {
  if (!pool) return 0;
  let last = pool.f ?? 0;
  for (const lease of pool.l) last = Math.max(last, lease.t);
  return last;
}

/** When the lock-delay after an EXPIRED (not released) lease ends, or 0 when none runs now. */
export function delayEnd(pool: PoolRecord | null, nowMs: number): number {
  if (!pool) return 0;
  let until = 0;
  for (const lease of pool.l) if (lease.e <= nowMs && lease.d) until = Math.max(until, lease.e + lease.d);
  return until > nowMs ? until : 0;
}

/** Time left on the earliest-ending live lease (when room may free up), else on a lock-delay; at least 1. */
export function untilFirst(pool: PoolRecord | null, live: readonly LeaseRecord[], nowMs: number): number {
  const end = live.length === 0 ? delayEnd(pool, nowMs) : Math.min(...live.map((l) => l.e));
  // Stryker disable next-line ConditionalExpression: with no end (0), 0 - nowMs is below 1 and Math.max answers 1 all the same
  return end === 0 ? 1 : Math.max(1, Math.ceil(end - nowMs));
}

/** Time left on the latest-ending live lease (when the pool is empty), at least 1. */
export function untilLast(live: readonly LeaseRecord[], nowMs: number): number {
  // Stryker disable next-line ConditionalExpression: with no lease, Math.max() is -Infinity and the outer Math.max answers 1 all the same
  return live.length === 0 ? 1 : Math.max(1, Math.ceil(Math.max(...live.map((l) => l.e)) - nowMs));
}

/** Until when a key is busy for a lock set (a live lease, a lock-delay, callers queued), or 0 when free. */
export function busyUntil(pool: PoolRecord | null, live: readonly LeaseRecord[], queued: number, nowMs: number): number {
  if (live.length > 0) return Math.max(...live.map((l) => l.e));
  const delayed = delayEnd(pool, nowMs);
  if (delayed > 0) return delayed;
  // Callers queued for a free key are about to get it: a set does not jump their queue.
  return queued > 0 ? nowMs + 1 : 0;
}

/** The watch index of a semaphore or read/write lock: the change base plus the leases that have ended since. */
export function indexOf(pool: PoolRecord, nowMs: number): number {
  let ended = 0;
  for (const lease of pool.l) if (lease.e <= nowMs) ended++;
  return pool.x + ended;
}

/**
 * The record a change writes: `next` with the last token carried over from the leases it drops, kept
 * until its last lease's end plus the grace (a lock-delay is never longer than the grace: config.ts).
 * `kind` decides the rest: a lock's one lease decides alone (a release ends its keep-until now plus
 * the grace), a multi-holder key keeps the longest end so far. No change drops an expired lease
 * whose lock-delay still runs: every grant path waits for it to end.
 */
export function carried(
  kind: LeaseKind,
  prior: PoolRecord | null,
  next: Pick<PoolRecord, 'c' | 'x' | 'l' | 'g'>,
  nowMs: number,
  graceMs: number,
): PoolRecord {
  const f = Math.max(lastToken(prior), lastToken({ ...next, k: 0 }));
  const floor = kind === 'lock' || !prior ? Math.floor(nowMs) + graceMs : prior.k;
  const k = Math.max(floor, ...next.l.map((l) => l.e + graceMs));
  return { ...next, k, ...(f > 0 ? { f } : {}) };
}

/** Ends first: the earlier end, then the lower owner token (the order the other stores show). */
function endsBefore(a: LeaseRecord, b: LeaseRecord): boolean {
  return a.e < b.e || (a.e === b.e && a.o < b.o);
}

export function stateOf(pool: PoolRecord, waiters: number, nowMs: number): PermitState | null {
  const live = pool.l.filter((l) => l.e > nowMs);
  if (live.length === 0) return null;
  const shown = [...live].sort((a, b) => (endsBefore(a, b) ? -1 : endsBefore(b, a) ? 1 : 0)).slice(0, MAX_HOLDERS_SHOWN);
  return {
    capacity: pool.c,
    holderCount: live.length,
    holders: shown
      .sort((a, b) => a.t - b.t)
      .map((l) =>
        withReleaseRequest(
          { holder: l.h, weight: l.w, fencingToken: l.t, expiresAtMs: l.e, ttlRemainingMs: Math.max(0, Math.ceil(l.e - nowMs)) },
          l.r && requestOf(l.r),
        ),
      ),
    waiters,
  };
}

/** A lock's one live lease, or null. */
export function lockStateOf(pool: PoolRecord | null, waiters: number, nowMs: number): LockState | null {
  const lease = pool?.l.find((l) => l.e > nowMs);
  if (!lease) return null;
  const state = {
    holder: lease.h,
    waiters,
    fencingToken: lease.t,
    expiresAtMs: lease.e,
    ttlRemainingMs: Math.max(0, Math.floor(lease.e - nowMs)),
  };
  return withReleaseRequest(state, lease.r && requestOf(lease.r));
}
