import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isDomainError, StoreUnavailableError } from '../domain/errors.js';
import { isFresh } from '../domain/freshness.js';
import type { FreshLease } from '../domain/lock-service.js';
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
 * with that primitive's check (LockService.confirmFresh, PermitCore.confirmFresh).
 */
export function registerFreshAnswers(app: FastifyInstance, confirm: (namespace: string, lease: FreshLease) => Promise<void>): void {
  app.decorateRequest('leaseToConfirm', null);
  // Callback style: every answer of these routes passes here, and a fresh one (nearly all) is sent on
  // at once, without a promise.
  app.addHook('onSend', (request, reply, payload, done) => {
    const pending = request.leaseToConfirm;
    if (pending === null || reply.statusCode !== 200) return done(null, payload);
    request.leaseToConfirm = null;
    if (isFresh(pending.lease)) return done(null, payload);
    confirm(pending.namespace, pending.lease).then(
      () => done(null, payload),
      (err: unknown) => {
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
