import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isDomainError, StoreUnavailableError } from '../domain/errors.js';
import { isFresh } from '../domain/freshness.js';
import type { HistoryPrimitive } from '../domain/history.js';
import type { FreshLease } from '../domain/lock-service.js';
import { leaseMayBeLive } from '../domain/quota.js';
import { historyOf } from './lease-history.js';
import { writeDomainError } from './problem.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** A grant or renewal this request answers with, checked once more just before it is sent. */
    leaseToConfirm: { readonly namespace: string; readonly lease: FreshLease } | null;
  }
}

/**
 * The last moment before a grant or renewal is written: if the process was stopped since the store
 * answered and the lease may be gone, the answer becomes a 503 and the lease is given back (see
 * FreshnessGuard). Registered inside each primitive's routes plugin (so it runs for those routes only),
 * with that primitive's check (LockService.confirmFresh, PermitCore.confirmFresh). A grant given back
 * here is recorded as released in the lease history (the route recorded its grant already).
 */
export function registerFreshAnswers(
  app: FastifyInstance,
  primitive: HistoryPrimitive,
  confirm: (namespace: string, lease: FreshLease) => Promise<void>,
): void {
  app.decorateRequest('leaseToConfirm', null);
  // Callback style: every answer of these routes passes here, and a fresh one (nearly all) is sent on
  // at once, without a promise.
  app.addHook('onSend', (request, reply, payload, done) => {
    const pending = request.leaseToConfirm;
    if (pending === null || reply.statusCode !== 200) return done(null, payload);
    request.leaseToConfirm = null;
    if (isFresh(pending.lease)) return done(null, payload);
    // A give-back is recorded as the lease's release (recordGiveBack), dated on history's clock.
    const sentAt = historyOf(request)?.now() ?? 0;
    confirm(pending.namespace, pending.lease).then(
      () => done(null, payload),
      (err: unknown) => {
        // Given back (not kept, nor of unknown fate): the lease ended here, by its owner's release, not at its
        // TTL (no lock-delay), and the key was free for the next caller at once.
        if (isDomainError(err) && !leaseMayBeLive(err)) recordGiveBack(request, primitive, pending.namespace, pending.lease, sentAt);
        const error = isDomainError(err) ? err : new StoreUnavailableError('the answer was too late to trust', 1000, { cause: err });
        try {
          done(null, writeDomainError(request, reply, error));
        } catch (writeError) {
          done(writeError as Error);
        }
      },
    );
  });
}

/** Marks `lease` to be checked for freshness once more as the 200 answer to `request` is sent. */
export function confirmBeforeSending(request: FastifyRequest, namespace: string, lease: FreshLease): void {
  request.leaseToConfirm = { namespace, lease };
}

/** A lease given back at the write, as its release (each key of a lock set's, as the set's release). */
function recordGiveBack(request: FastifyRequest, primitive: HistoryPrimitive, namespace: string, lease: FreshLease, at: number): void {
  const history = historyOf(request);
  if (history === null) return;
  if (lease.keys === undefined) history.released(primitive, namespace, lease.key, lease.ownerToken, at);
  else for (const key of lease.keys) history.released(primitive, namespace, key, lease.ownerToken, at, true);
}
