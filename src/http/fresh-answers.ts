import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isDomainError, StoreUnavailableError } from '../domain/errors.js';
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
  app.addHook('onSend', async (request, reply, payload) => {
    const pending = request.leaseToConfirm;
    if (pending === null || reply.statusCode !== 200) return payload;
    request.leaseToConfirm = null;
    try {
      await confirm(pending.namespace, pending.lease);
      return payload;
    } catch (err) {
      const error = isDomainError(err) ? err : new StoreUnavailableError('the answer was too late to trust', 1000, { cause: err });
      return writeDomainError(request, reply, error);
    }
  });
}

/** Marks `lease` to be checked for freshness once more as the 200 answer to `request` is sent. */
export function confirmBeforeSending(request: FastifyRequest, namespace: string, lease: FreshLease): void {
  request.leaseToConfirm = { namespace, lease };
}
