import type { HeldQuery, LeaseGrant, LeaseObserver, LeaseRenewal, OperationResult } from './lease-rules.js';
import { inNamespaces } from './lease-rules.js';
import { type LeaseOperation, type LeaseRefusals, LeaseService } from './lease-service.js';
import type { LeaseStoreHost } from './lease-store.js';
import { LeaseVocabulary } from './lease-vocabulary.js';
import type { LeaseLimits } from './limits.js';
import type { PermitKind, PermitState } from './permit-values.js';
import type { WaitGate } from './wait-gate.js';

export type PermitOperation = LeaseOperation;

/** What the permit services report as they work (metrics listen here); every method is optional. */
export interface PermitObserver extends LeaseObserver {
  /** `waitedSeconds`: the part of an acquire's duration spent waiting in the key's queue (0 otherwise). */
  operation?(kind: PermitKind, op: PermitOperation, result: OperationResult, durationSeconds: number, waitedSeconds: number): void;
}

/** One acquire as the permit core needs it (the semaphore and rwlock services fill it in). */
export interface PermitRequest {
  readonly namespace: string;
  readonly key: string;
  readonly ttlMs: number;
  readonly holder: string | null;
  readonly weight: number;
  readonly capacity: number;
  readonly waitMs: number;
  readonly signal?: AbortSignal;
}

/** How a primitive words a refusal: the room is taken, or the caller's capacity is not the live one. */
export type PermitRefusals = LeaseRefusals;

export type PermitGrant = LeaseGrant;

export type PermitRenewal = LeaseRenewal;

export interface HeldPermitsView {
  readonly namespace: string;
  readonly key: string;
  readonly state: PermitState;
}

/**
 * One multi-holder primitive's keys (semaphore, read/write lock) over the lease engine (LeaseService:
 * TTL and wait bounds, owner tokens, the namespace quota, the instance's wait caps, the late-grant
 * guard). The semaphore and read/write lock services add their vocabulary on top (permit-service.ts).
 */
export class PermitCore extends LeaseVocabulary<PermitKind> {
  constructor(kind: PermitKind, store: LeaseStoreHost, limits: LeaseLimits, gate: WaitGate, observer: PermitObserver = {}) {
    const leaseObserver = {
      lostLease: (op: 'renew' | 'release') => observer.lostLease?.(op),
      waited: (seconds: number, granted: boolean) => observer.waited?.(seconds, granted),
      operation: (_kind: unknown, op: PermitOperation, result: OperationResult, seconds: number, waited: number) =>
        observer.operation?.(kind, op, result, seconds, waited),
    };
    super(kind, new LeaseService(store.leases, limits, leaseObserver, gate));
  }

  /** `refusals`: how the primitive words a refusal (its service's, see PermitVocabulary). */
  acquire(request: PermitRequest, refusals: PermitRefusals): Promise<PermitGrant> {
    return this.lease.acquire({ kind: this.kind, ...request }, refusals);
  }

  /** An administrator's override: ends every live lease on the key, or only the one with `fencingToken`. */
  forceRelease(namespace: string, key: string, fencingToken?: number): Promise<Array<{ holder: string | null; fencingToken: number }>> {
    return this.lease.forceRelease(this.kind, namespace, key, fencingToken);
  }

  /** One page of keys with live leases, in one namespace or all of them (as LockService.listHeld). */
  async listHeld(
    query: HeldQuery & { limit: number; cursor?: string },
  ): Promise<{ entries: HeldPermitsView[]; nextCursor: string | null }> {
    const page = await this.lease.listHeld(this.kind, query);
    const entries = inNamespaces(page.entries, (parsed, { state }): HeldPermitsView => ({ ...parsed, state }));
    return { entries, nextCursor: page.nextCursor };
  }
}
