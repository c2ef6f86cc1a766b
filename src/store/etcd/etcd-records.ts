import type { IKeyValue } from 'etcd3';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { QueuedCaller, ReleaseRequest } from '../../domain/permit-values.js';

/** A record's JSON value; null for an absent, empty or unreadable one (treated as no record). */
export function parseJson<T>(value: Buffer | undefined): T | null {
  // Stryker disable next-line ConditionalExpression: JSON.parse throws on an absent or empty value, and the catch below answers null alike
  if (!value || value.length === 0) return null;
  try {
    return JSON.parse(value.toString('utf8')) as T;
  } catch {
    return null;
  }
}

/** What a queued caller's record holds for a lock and for a permit alike. */
export interface WaiterRecordBase {
  /** The owner token the lease will be granted under. */
  readonly o: string;
  readonly ttl: number;
  /** End of the wait (ms): a waiter past it is skipped. */
  readonly d: number;
  readonly h: string | null;
  /** When the caller joined the queue (ms, this instance's view of the store clock); absent in records written before it was kept. */
  readonly s?: number;
}

/** A waiter record as the queue listing reads it, of either kind. */
interface QueuedRecord extends WaiterRecordBase {
  /** Permits only: the weight asked for. */
  readonly w?: number;
}

/** A record read with its etcd key-value (its revisions guard the next change). */
export interface Observed<T> {
  readonly kv: IKeyValue;
  readonly value: T;
}

/** Compare-and-set rounds before a call gives up with a 503: contention this high means something is wrong. */
export const MAX_CAS_ROUNDS = 64;

/**
 * Waiter records read in queue order (create revision) as inspect lists them: live ones only, at most
 * `limit`, never their owner tokens. The read asks for a few more than `limit` (see queueReadLimit),
 * since waits that ran out stay until they are swept.
 */
export function queuedCallers(kvs: readonly IKeyValue[], nowMs: number, limit: number): QueuedCaller[] {
  const queued: QueuedCaller[] = [];
  for (const kv of kvs) {
    const value = parseJson<QueuedRecord>(kv.value);
    if (!value || value.d <= nowMs) continue;
    if (queued.length >= limit) break;
    const caller = { position: queued.length + 1, holder: value.h, waitingSinceMs: value.s ?? 0 };
    queued.push(value.w === undefined ? caller : { ...caller, weight: value.w });
  }
  return queued;
}

/** How many waiter records to read for `limit` live ones: waiters whose wait ran out are skipped. */
export function queueReadLimit(limit: number): number {
  return limit + 64;
}

/**
 * Runs one etcd call. Every etcd failure (no leader, no quorum, deadline, connection) is a 503: none is
 * a certain answer. `what` names the caller in the message ("etcd", "etcd history").
 */
export async function callEtcd<T>(closed: boolean, what: string, run: () => Promise<T>): Promise<T> {
  if (closed) throw new StoreUnavailableError('the store is closed');
  try {
    return await run();
  } catch (err) {
    if (err instanceof StoreUnavailableError) throw err;
    throw new StoreUnavailableError(`${what} call failed: ${(err as Error).message}`, 1000, { cause: err, outcomeUnknown: true });
  }
}

/** A release request as lock and permit records keep it: when (ms), by whom, why (null: no reason). */
export interface StoredReleaseRequest {
  readonly a: number;
  readonly b: string;
  readonly n: string | null;
}

export const storedRequest = (r: ReleaseRequest): StoredReleaseRequest => ({ a: r.atMs, b: r.by, n: r.reason });

export const requestOf = (r: StoredReleaseRequest): ReleaseRequest => ({ atMs: r.a, by: r.b, reason: r.n });
