import { withReleaseRequest } from './permit-values.js';
import { performance } from 'node:perf_hooks';
import type { ErrorCode } from './error-codes.js';
import { DomainError, InvalidRequestError, isDomainError, keptLease, NotOwnerError, WaitAbortedError } from './errors.js';
import { type FreshnessGuard, giveBackForCallerGone } from './freshness.js';
import type { LeaseLimits } from './limits.js';
import type { ReleaseRequest, RenewOutcome } from './lock-values.js';
import { measure } from './measure.js';
import { lockId, parseLockId } from './namespaces.js';
import type { NamespaceQuota } from './quota.js';
import type { WaitGate } from './wait-gate.js';
import type { ChangeWatch, Watchable } from './watch.js';

/** A late grant asked with an Idempotency-Key is kept (FreshnessGuard.refuseIfLate). */
export const KEEP_FOR_KEY = { keep: 'idempotency-key' } as const;
/** A renewal's lease answered late: refused, but kept (it was the caller's before the renewal). */
export const KEEP_RENEWAL = { keep: 'renewal' } as const;

/** How an operation ended: answered, refused with a domain error's code, or failed otherwise (a bug). */
export type OperationResult = 'ok' | ErrorCode | 'error';

/** What every primitive's service reports about its leases (metrics listen here); both optional. */
export interface LeaseObserver {
  /** A renew or release arrived after its lease was gone: the caller's critical section ran unprotected. */
  lostLease?(op: 'renew' | 'release'): void;
  /** A caller that asked to wait was answered after `seconds` in the queue (granted or not). */
  waited?(seconds: number, granted: boolean): void;
}

/** What one primitive's service hands the shared rules: its bounds, quota, guard and wait gate. */
export interface LeaseRulesParts {
  readonly limits: LeaseLimits;
  readonly gate: WaitGate;
  readonly quota: NamespaceQuota;
  readonly freshness: FreshnessGuard;
  readonly observer: LeaseObserver;
  /** Gives one of this primitive's leases back (the lock's release, or the permit's). */
  giveBack(id: string, ownerToken: string): Promise<boolean>;
}

/** One grant that may wait in the key's queue, as its primitive asks the store for it. */
export interface WaitingGrant<G extends { readonly decidedAt: number; readonly queued?: true }> {
  readonly namespace: string;
  /** The store's id of the lock (see namespaces.ts). */
  readonly id: string;
  readonly ttlMs: number;
  /** Aborted when the caller goes away. */
  readonly callerSignal: AbortSignal | undefined;
  /** Asks the store, waiting until `signal` aborts; throws the primitive's refusal when nothing was granted. */
  acquire(signal: AbortSignal): Promise<G>;
  /** The owner token the granted lease is held under (a replay's is the earlier lease's). */
  ownerOf(grant: G): string;
  /** Set to the seconds spent waiting when the wait ends, so the caller can time its own work apart. */
  readonly waited?: { seconds: number };
  /**
   * Asked with an Idempotency-Key: a grant that cannot be delivered (the caller left, or it came late) is
   * kept for a retry with the key, which may have been answered with it already, not given back.
   */
  readonly idempotent?: boolean;
}

/** A grant as every primitive reports it. */
export interface LeaseGrant {
  readonly key: string;
  readonly ownerToken: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
  /** performance.now() when the store command that established the lease was sent (see FreshnessGuard). */
  readonly decidedAt: number;
  /**
   * Asked with an Idempotency-Key: a retry with the key may have been answered with this lease, so an
   * answer that cannot be delivered (late) keeps the lease rather than give it back (FreshnessGuard).
   */
  readonly idempotent?: boolean;
  /** The earlier lease, answered again for its Idempotency-Key: no new grant (history records none). */
  readonly replayed?: true;
}

/** A renewal as every primitive reports it. */
export interface LeaseRenewal {
  readonly key: string;
  readonly fencingToken: number;
  readonly ttlMs: number;
  readonly expiresAtMs: number;
  /** performance.now() when the renewing store command was sent (see FreshnessGuard). */
  readonly decidedAt: number;
  /** Someone asked the holder to let go (ReleaseRequest); absent when nobody did. */
  readonly releaseRequested?: ReleaseRequest;
}

/** A blocking query's terms (see LeaseRules.watch). */
export interface WatchQuery<V> {
  /** The index the caller last saw; undefined: answer at once. */
  readonly index: number | undefined;
  /** How long to wait for a change; 0: answer at once. */
  readonly waitMs: number;
  /** Aborted when the caller leaves. */
  readonly signal?: AbortSignal;
  readonly onChange?: (view: V) => void;
}

/** Which held keys a listing asks for: one namespace (and key prefix) or all of them. */
export interface HeldQuery {
  /** Only this namespace; undefined lists every namespace. */
  readonly namespace?: string;
  /** Only keys starting with this (needs `namespace`); "" for all. */
  readonly prefix: string;
}

/**
 * The lease rules every primitive shares (locks, semaphores, read/write locks): TTL and wait bounds,
 * the instance's wait caps, handing back a lease whose caller left, the late-grant guard, and renew
 * and release with their quota slot. Each service owns one, over its own store methods.
 */
export class LeaseRules {
  constructor(private readonly parts: LeaseRulesParts) {}

  checkTtl(ttlMs: number): void {
    const { minTtlMs, maxTtlMs } = this.parts.limits;
    if (!Number.isInteger(ttlMs) || ttlMs < minTtlMs || ttlMs > maxTtlMs) {
      throw new InvalidRequestError('ttlMs', `must be an integer from ${minTtlMs} to ${maxTtlMs}`);
    }
  }

  checkWaitMs(waitMs: number): void {
    const { maxWaitMs } = this.parts.limits;
    if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > maxWaitMs) {
      throw new InvalidRequestError('waitMs', `must be an integer from 0 to ${maxWaitMs}`, { maxWaitMs });
    }
  }

  /**
   * A blocking query (Consul's), alike for every primitive: `inspectNow` answers when there is nothing to
   * wait on (no `index`, or waitMs 0), otherwise the wait on `changes` ends when the index differs, at
   * once or on the next change, or after `waitMs` with the unchanged view. The gate's signal ends it at
   * shutdown, `signal` when the caller leaves. `onChange`: see ChangeWatch.wait.
   *
   * A blocking query is an open wait like a queued acquire: it is admitted by the wait gate (per-key,
   * per-namespace and per-instance caps; 429 too_many_waiters past them) for as long as it lasts.
   */
  async watch<V extends Watchable>(
    changes: ChangeWatch<V>,
    id: string,
    query: WatchQuery<V> & { readonly namespace: string },
    inspectNow: () => Promise<V>,
  ): Promise<V> {
    const { index, waitMs } = query;
    if (index === undefined || waitMs === 0) return inspectNow();
    this.checkWaitMs(waitMs);
    const leave = this.parts.gate.enter(query.namespace, id);
    const waitSignal = this.parts.gate.waitSignal(query.signal);
    try {
      return await changes.wait(id, index, waitMs, waitSignal.signal, query.onChange);
    } finally {
      waitSignal.done();
      leave();
    }
  }

  /**
   * A grant that waits: counted by the wait gate (its caps, and shutdown ends it), given back when the
   * caller left while it was on its way, and checked for freshness like any grant.
   */
  async grantWaiting<G extends { readonly decidedAt: number; readonly queued?: true }>(wait: WaitingGrant<G>): Promise<G> {
    const { gate, freshness, observer } = this.parts;
    const { id, ttlMs, callerSignal } = wait;
    const leave = gate.enter(wait.namespace, id);
    const waitSignal = gate.waitSignal(callerSignal);
    const started = performance.now();
    let granted = false;
    // A grant at once (the key was free) spent nothing in the queue: its time is the acquire's latency.
    let queued = true;
    try {
      const grant = await wait.acquire(waitSignal.signal);
      granted = true;
      queued = grant.queued === true;
      const ownerToken = wait.ownerOf(grant);
      // The caller left (or lost the right to wait) while the grant was on its way: nobody will use this
      // lease, give it back, and answer with why the wait ended.
      if (callerSignal?.aborted) {
        const reason = callerSignal.reason instanceof DomainError ? callerSignal.reason : new WaitAbortedError();
        // Kept for the key's retry (which may already hold it as a replay); its slot keeps counting. Not a
        // lease handed over from the queue: it keeps no key, so no retry can get it, and kept it was held by
        // nobody until its TTL (a caller gone, or its key's rights taken by a reload, as it came).
        if (wait.idempotent === true && !queued) throw keptLease(reason);
        // Not given back: the lease lives on to its end, so its quota slot must too (leaseMayBeLive).
        await giveBackForCallerGone(this.parts.giveBack(id, ownerToken), 'the caller left and its lease could not be given back');
        throw reason;
      }
      await freshness.refuseIfLate(
        { id, ownerToken, ttlMs, decidedAt: grant.decidedAt },
        wait.idempotent === true ? KEEP_FOR_KEY : undefined,
      );
      return grant;
    } finally {
      waitSignal.done();
      leave();
      const seconds = queued ? (performance.now() - started) / 1000 : 0;
      if (wait.waited) wait.waited.seconds = seconds;
      observer.waited?.(seconds, granted);
    }
  }

  /**
   * Renews through `renewInStore`; a lease that is gone is not_owner. A late answer is refused (503),
   * the lease kept: giving it back would make a busy instance cost its holder the lease.
   */
  async renew(
    namespace: string,
    key: string,
    ownerToken: string,
    ttlMs: number,
    renewInStore: (id: string) => Promise<RenewOutcome>,
  ): Promise<LeaseRenewal> {
    this.checkTtl(ttlMs);
    const id = lockId(namespace, key);
    const decidedAt = performance.now();
    const outcome = await renewInStore(id);
    if (!outcome.renewed) {
      this.parts.observer.lostLease?.('renew');
      throw new NotOwnerError(key);
    }
    try {
      // A late answer is refused but the lease is kept (see refuseIfLate): it was the caller's already.
      await this.parts.freshness.refuseIfLate({ id, ownerToken, ttlMs, decidedAt }, KEEP_RENEWAL);
    } finally {
      // Renewed either way: its quota unit lasts as long.
      await this.parts.quota.extend(namespace, ownerToken, id, outcome.expiresAtMs);
    }
    const { fencingToken, expiresAtMs, releaseRequested } = outcome;
    return withReleaseRequest({ key, fencingToken, ttlMs, expiresAtMs, decidedAt }, releaseRequested);
  }

  /**
   * Releases through the primitive's give-back and frees the lease's quota slot; the caller hands the
   * answer to refuseIfNotReleased (two steps, not one async method: no async frame of its own per release).
   */
  releaseInStore(namespace: string, key: string, ownerToken: string): Promise<boolean> {
    return this.parts.quota.releaseWith(namespace, lockId(namespace, key), ownerToken);
  }

  /** A release of a lease that is gone is not_owner, and a lost lease. */
  refuseIfNotReleased(released: boolean, key: string): void {
    if (!released) {
      this.parts.observer.lostLease?.('release');
      throw new NotOwnerError(key);
    }
  }

  /** The store's id prefix a listing of held keys scans. */
  listPrefix(query: HeldQuery): string {
    if (query.namespace === undefined && query.prefix !== '') {
      throw new InvalidRequestError('prefix', 'needs namespace: a key prefix is matched inside one namespace');
    }
    return query.namespace === undefined ? '' : lockId(query.namespace, query.prefix);
  }
}

/**
 * The listed entries under their namespace and key. Ids no namespace produced (state written before
 * namespaces existed) are not anyone's to see.
 */
export function inNamespaces<E extends { readonly id: string }, V>(
  entries: readonly E[],
  view: (parsed: { namespace: string; key: string }, entry: E) => V,
): V[] {
  const views: V[] = [];
  for (const entry of entries) {
    const parsed = parseLockId(entry.id);
    if (parsed !== null) views.push(view(parsed, entry));
  }
  return views;
}

/** How an operation that threw `err` ended: a domain error's code, or 'error' (a bug). */
export function resultOf(err: unknown): OperationResult {
  return isDomainError(err) ? err.code : 'error';
}

/** Runs one operation and reports how it ended and how long it took (see measure). */
export function observeOperation<T>(run: () => Promise<T>, report: (result: OperationResult, durationSeconds: number) => void): Promise<T> {
  return measure<T, OperationResult>(run, 'ok', resultOf, report);
}
