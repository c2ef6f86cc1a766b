import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { PermitCore } from '../../domain/permits.js';
import { SemaphoreService, semaphoreView } from '../../domain/semaphores.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending, registerFreshAnswers } from '../fresh-answers.js';
import { InspectQuery, LockKeyParams } from '../schemas/locks.js';
import { SharedAnswers } from '../shared-answers.js';
import { SemaphoreAcquireRequest, SemaphoreGrant, SemaphoreStatus } from '../schemas/permits.js';
import { callerSignal, iso, PERMIT_COMMON_ERRORS, PERMIT_INSPECT_ERRORS, PERMIT_WAIT_ERRORS, registerLeaseRoutes, type PermitNames } from './permits.js';
import { jsonResponse, routeRule } from './responses.js';

export const SEMAPHORE_NAMES: PermitNames = { path: 'semaphores', id: 'Semaphore', noun: 'semaphore', tag: 'semaphores' };

const acquireRule = routeRule('locks', {
  ...PERMIT_COMMON_ERRORS,
  409:
    'semaphore_full: every permit is held (or others are queued); retryAfterMs and Retry-After say when the first one ends. ' +
    'limit_mismatch: the live permits were granted with another limit; Retry-After says when the last of them ends.',
  429: PERMIT_WAIT_ERRORS,
});
const inspectRule = routeRule('locks', PERMIT_INSPECT_ERRORS);

/** Semaphores (scope `locks`, in the key's namespace): acquire, renew, release, inspect. */
export const semaphoreRoutes: FastifyPluginAsyncZod<{ core: PermitCore }> = async (app, { core }) => {
  const semaphores = new SemaphoreService(core);
  const watchAnswers = new SharedAnswers(SemaphoreStatus);
  registerFreshAnswers(app, (namespace, lease) => core.confirmFresh(namespace, lease));

  app.post(
    '/v1/semaphores/:key/acquire',
    {
      config: acquireRule.config,
      schema: {
        operationId: 'acquireSemaphore',
        summary: 'Take a semaphore permit',
        description:
          'Grants one permit if fewer than limit are held and nobody is queued. Each permit is a lease of its own, with its own ' +
          'ownerToken, fencingToken (increasing per semaphore) and expiry: a holder that crashes frees its permit when its TTL ' +
          'runs out. When all are held: 409 semaphore_full with Retry-After, or with waitMs a place in a FIFO queue, granted ' +
          'as soon as a permit frees. Every caller must send the semaphore\'s limit; another one is 409 limit_mismatch.',
        tags: ['semaphores'],
        params: LockKeyParams,
        body: SemaphoreAcquireRequest,
        response: { 200: jsonResponse(SemaphoreGrant, 'Granted: the caller holds one permit until expiresAt unless it renews'), ...acquireRule.errors },
      },
    },
    async (request, reply) => {
      const { limit, ttlMs, holder, waitMs } = request.body;
      const namespace = principalOf(request).namespace;
      const grant = await semaphores.acquire(namespace, request.params.key, { limit, ttlMs, holder, waitMs, signal: callerSignal(reply.raw, waitMs) });
      confirmBeforeSending(request, namespace, grant);
      return {
        key: grant.key,
        limit,
        ownerToken: grant.ownerToken,
        fencingToken: grant.fencingToken,
        ttlMs: grant.ttlMs,
        expiresAt: iso(grant.expiresAtMs),
        holder: grant.holder,
      };
    },
  );

  registerLeaseRoutes(app, core, SEMAPHORE_NAMES);

  app.get(
    '/v1/semaphores/:key',
    {
      config: inspectRule.config,
      schema: {
        operationId: 'inspectSemaphore',
        summary: 'See who holds a semaphore\'s permits (or wait for it to change)',
        description:
          'The limit, the permits held and by whom (holder label, fencing token, expiry), the callers queued, and the ' +
          'semaphore\'s watch index. Never owner tokens. A blocking query, as for locks: with ?index=N&waitMs=M the answer ' +
          'comes at once if the index differs from N, otherwise as soon as the semaphore changes, otherwise after M.',
        tags: ['semaphores'],
        params: LockKeyParams,
        querystring: InspectQuery,
        response: { 200: jsonResponse(SemaphoreStatus, 'The semaphore\'s current state'), ...inspectRule.errors },
      },
    },
    async (request, reply) => {
      const key = request.params.key;
      const { index, waitMs = 0 } = request.query;
      const blocking = index !== undefined && waitMs > 0;
      const watched = await core.watch(principalOf(request).namespace, key, index, waitMs, callerSignal(reply.raw, blocking ? waitMs : 0));
      const answer = () => {
        if (watched.state === null) return { key, index: watched.index, limit: null, permitsHeld: 0, holders: [], waiters: 0 };
        const view = semaphoreView(watched.state);
        return {
          key,
          index: watched.index,
          limit: view.limit,
          permitsHeld: view.permitsHeld,
          holders: view.holders.map((h) => ({ holder: h.holder, fencingToken: h.fencingToken, expiresAt: iso(h.expiresAtMs), ttlRemainingMs: h.ttlRemainingMs })),
          waiters: view.waiters,
        };
      };
      return blocking ? watchAnswers.send(reply, watched, key, answer) : answer();
    },
  );
};
