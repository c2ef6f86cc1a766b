import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { PermitCore } from '../../domain/permits.js';
import { RwLockService, rwLockView } from '../../domain/rwlocks.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending, registerFreshAnswers } from '../fresh-answers.js';
import { InspectQuery, LockKeyParams } from '../schemas/locks.js';
import { SharedAnswers } from '../shared-answers.js';
import { RwLockAcquireRequest, RwLockGrant, RwLockStatus } from '../schemas/permits.js';
import { callerSignal, iso, PERMIT_COMMON_ERRORS, PERMIT_INSPECT_ERRORS, PERMIT_WAIT_ERRORS, registerLeaseRoutes, type PermitNames } from './permits.js';
import { jsonResponse, routeRule } from './responses.js';

export const RWLOCK_NAMES: PermitNames = { path: 'rwlocks', id: 'RwLock', noun: 'read/write lock', tag: 'rwlocks' };

const acquireRule = routeRule('locks', {
  ...PERMIT_COMMON_ERRORS,
  409:
    'rwlock_held: held in a mode that excludes this one (a writer; or readers, for a write), or a writer is queued ahead; ' +
    'retryAfterMs and Retry-After say when the first lease ends',
  429: PERMIT_WAIT_ERRORS,
});
const inspectRule = routeRule('locks', PERMIT_INSPECT_ERRORS);

/** Read/write locks (scope `locks`, in the key's namespace): acquire, renew, release, inspect. */
export const rwLockRoutes: FastifyPluginAsyncZod<{ core: PermitCore }> = async (app, { core }) => {
  const rwlocks = new RwLockService(core);
  const watchAnswers = new SharedAnswers(RwLockStatus);
  registerFreshAnswers(app, (namespace, lease) => core.confirmFresh(namespace, lease));

  app.post(
    '/v1/rwlocks/:key/acquire',
    {
      config: acquireRule.config,
      schema: {
        operationId: 'acquireRwLock',
        summary: 'Take a read/write lock for reading or writing',
        description:
          'Many readers or one writer. A read is granted while no writer holds the lock and nobody is queued; a write only ' +
          'when nobody holds it and nobody is queued. Readers and writers wait in one FIFO queue (waitMs), so once a writer ' +
          'waits, later readers queue behind it: writers are not starved. Every grant gets the lock\'s next fencing token.',
        tags: ['rwlocks'],
        params: LockKeyParams,
        body: RwLockAcquireRequest,
        response: { 200: jsonResponse(RwLockGrant, 'Granted: the caller holds a read or write lease until expiresAt'), ...acquireRule.errors },
      },
    },
    async (request, reply) => {
      const { mode, ttlMs, holder, waitMs } = request.body;
      const namespace = principalOf(request).namespace;
      const grant = await rwlocks.acquire(namespace, request.params.key, { mode, ttlMs, holder, waitMs, signal: callerSignal(reply.raw, waitMs) });
      confirmBeforeSending(request, namespace, grant);
      return {
        key: grant.key,
        mode,
        ownerToken: grant.ownerToken,
        fencingToken: grant.fencingToken,
        ttlMs: grant.ttlMs,
        expiresAt: iso(grant.expiresAtMs),
        holder: grant.holder,
      };
    },
  );

  registerLeaseRoutes(app, core, RWLOCK_NAMES);

  app.get(
    '/v1/rwlocks/:key',
    {
      config: inspectRule.config,
      schema: {
        operationId: 'inspectRwLock',
        summary: 'See who holds a read/write lock (or wait for it to change)',
        description:
          'The mode it is held in, its leases (mode, holder label, fencing token, expiry), the callers queued, and the ' +
          'lock\'s watch index. Never owner tokens. A blocking query, as for locks: with ?index=N&waitMs=M the answer ' +
          'comes at once if the index differs from N, otherwise as soon as the lock changes, otherwise after M.',
        tags: ['rwlocks'],
        params: LockKeyParams,
        querystring: InspectQuery,
        response: { 200: jsonResponse(RwLockStatus, 'The read/write lock\'s current state'), ...inspectRule.errors },
      },
    },
    async (request, reply) => {
      const key = request.params.key;
      const { index, waitMs = 0 } = request.query;
      const blocking = index !== undefined && waitMs > 0;
      const watched = await core.watch(principalOf(request).namespace, key, index, waitMs, callerSignal(reply.raw, blocking ? waitMs : 0));
      const answer = () => {
        if (watched.state === null) return { key, index: watched.index, mode: null, holders: [], waiters: 0 };
        const view = rwLockView(watched.state);
        return {
          key,
          index: watched.index,
          mode: view.mode,
          holders: view.holders.map((h) => ({ mode: h.mode, holder: h.holder, fencingToken: h.fencingToken, expiresAt: iso(h.expiresAtMs), ttlRemainingMs: h.ttlRemainingMs })),
          waiters: view.waiters,
        };
      };
      return blocking ? watchAnswers.send(reply, watched, key, answer) : answer();
    },
  );
};
