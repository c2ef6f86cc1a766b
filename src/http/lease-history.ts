import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type HistoryPrimitive, type HistoryRecord, type HistoryRecorder } from '../domain/history.js';
import type { LeaseGrant } from '../domain/lease-rules.js';
import { PERMIT_KINDS } from '../domain/permit-values.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Lease history, when on (HISTORY): the routes record what they answered here. */
    leaseHistory: LeaseHistory | null;
  }
}

/** The path segment of a primitive's routes (its kind's plural: `locks`, `semaphores`, `rwlocks`), as history names it. */
export const HISTORY_PRIMITIVES: Readonly<Record<string, HistoryPrimitive>> = Object.fromEntries(
  (['lock', ...PERMIT_KINDS] as const).map((primitive): [string, HistoryPrimitive] => [`${primitive}s`, primitive]),
);

const NO_EXTRA = {};

/** A grant as the routes have it: the fields of the domain's grant that history records. */
type GrantFacts = Pick<LeaseGrant, 'key' | 'ownerToken' | 'fencingToken' | 'ttlMs' | 'expiresAtMs' | 'holder'>;

/**
 * What the routes record, once each answer is decided: the one place that turns an answer into history
 * records (the routes call it; the lease rules know nothing of it). A call costs an array push, or for a
 * release whose grant is still buffered a field set (HistoryRecorder): no digest and no store round trip
 * on the request's path.
 */
export class LeaseHistory {
  /**
   * `clock`: the clock the instance dates its own events on (a release, a force release): the store's
   * when it is this process's (Store.clock), so that they sort with the grants and renewals the store
   * dated.
   */
  constructor(
    readonly recorder: HistoryRecorder,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Now, in whole ms (floored, as the stores date their leases) on the clock of the store's dates. */
  now(): number {
    return Math.floor(this.clock());
  }

  /** `startedMs`: performance.now() before the acquire, for a caller that asked to wait (else undefined). */
  granted(
    primitive: HistoryPrimitive,
    namespace: string,
    grant: GrantFacts,
    extra: { startedMs?: number; lockDelayMs?: number; mode?: 'read' | 'write'; set?: true } = NO_EXTRA,
  ): void {
    // A retry answered with the earlier lease for its Idempotency-Key is recorded too (the same lease id, read
    // as one grant: see timeline): the earlier answer may have been refused too late, its lease kept for the
    // key and its grant never recorded.
    // Fields set one by one (no spread of a temporary object per optional field): this runs on every grant.
    const record: { -readonly [K in keyof HistoryRecord]: HistoryRecord[K] } = {
      kind: 'granted',
      // The store's clock: the lease began ttlMs before it ends.
      at: grant.expiresAtMs - grant.ttlMs,
      fencingToken: grant.fencingToken,
      holder: grant.holder,
      expiresAt: grant.expiresAtMs,
    };
    if (extra.startedMs !== undefined) record.waitedMs = Math.round(performance.now() - extra.startedMs);
    if (extra.lockDelayMs) record.lockDelayMs = extra.lockDelayMs;
    if (extra.mode) record.mode = extra.mode;
    if (extra.set) record.set = true;
    // Its lease id (a digest of the owner token) is worked out when the batch is written.
    this.recorder.addLeaseEvent({ namespace, primitive, key: grant.key, record }, grant.ownerToken);
  }

  /**
   * A renewal carries its lease id as well as its fencing token: once the lease's grant is trimmed (a
   * lease renewed past the events kept per key), it is what pairs the lease's release with it.
   */
  renewed(
    primitive: HistoryPrimitive,
    namespace: string,
    renewal: { key: string; fencingToken: number; ttlMs: number; expiresAtMs: number },
    ownerToken: string,
  ): void {
    const record = {
      kind: 'renewed' as const,
      at: renewal.expiresAtMs - renewal.ttlMs,
      fencingToken: renewal.fencingToken,
      expiresAt: renewal.expiresAtMs,
    };
    this.recorder.addLeaseEvent({ namespace, primitive, key: renewal.key, record }, ownerToken);
  }

  /**
   * A release names no fencing token: its lease id pairs it with its grant when read. `at`: when the
   * release was sent (`now()` before the store call), so a waiter the release handed the key to, granted
   * during that call, is never seen granted before the release that freed it. `set`: a lock set's release,
   * recorded on every key it named, held or not (see timeline).
   */
  released(primitive: HistoryPrimitive, namespace: string, key: string, ownerToken: string, at: number, set?: true): void {
    // Folded into its grant when that is still buffered (the short pair): see HistoryRecorder.addRelease.
    this.recorder.addRelease({ namespace, primitive, key }, ownerToken, at, set);
  }

  forceReleased(
    primitive: HistoryPrimitive,
    namespace: string,
    key: string,
    evicted: readonly { holder: string | null; fencingToken: number }[],
    by: string,
  ): void {
    const at = this.now();
    for (const e of evicted) {
      this.recorder.record(
        { namespace, primitive, key },
        { kind: 'force_released', at, fencingToken: e.fencingToken, holder: e.holder, by },
      );
    }
  }

  /** The holder of the lease with `fencingToken` was asked to let go (at: the store's clock, as the request says). */
  releaseRequested(
    primitive: HistoryPrimitive,
    namespace: string,
    key: string,
    fencingToken: number,
    request: { readonly atMs: number; readonly by: string; readonly reason: string | null },
  ): void {
    this.recorder.record(
      { namespace, primitive, key },
      { kind: 'release_requested', at: request.atMs, fencingToken, by: request.by, reason: request.reason },
    );
  }
}

/** The history of the app serving `request`, or null when history is off. */
export const historyOf = (request: FastifyRequest): LeaseHistory | null => request.server.leaseHistory;

/** Makes `history` reachable from every route (registered on the root instance, before the routes). */
export function registerLeaseHistory(app: FastifyInstance, history: LeaseHistory | null): void {
  app.decorate('leaseHistory', history);
}
