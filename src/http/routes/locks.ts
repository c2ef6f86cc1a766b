import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { confirmBeforeSending, registerFreshAnswers } from '../fresh-answers.js';
import type { LockService } from '../../domain/lock-service.js';
import { AcquireHeaders, AcquireRequest, AcquireResponse, InspectQuery, LockKeyParams, LockStatus, NoQuery } from '../schemas/locks.js';
import { principalOf } from '../auth.js';
import { historyOf } from '../lease-history.js';
import { SharedAnswers } from '../shared-answers.js';
import { ReleasesInFlight } from '../releases-in-flight.js';
import type { IndexedView } from '../../domain/watch.js';
import type { z } from 'zod';
import { callerGone, inspectOrWatch, registerLeaseRoutes } from './lease-routes.js';
import { BAD_REQUEST, BODY_ERRORS, iso, jsonResponse, leaseView, routeRule, STORE_UNAVAILABLE, WATCH_REFUSED } from './responses.js';

const acquireRule = routeRule('locks', {
  ...BODY_ERRORS,
  409: 'lock_held: another owner holds the lock (or others are queued); retryAfterMs and Retry-After say when its lease ends',
  429:
    'too_many_waiters: the wait queue of this lock, of this namespace on this instance, or of this instance is full; rate_limited: too many ' +
    'requests for this API key; or quota_exceeded: the namespace holds its limit of locks at once. Retry after Retry-After.',
  422:
    'idempotency_key_reused: this Idempotency-Key was sent with another body (ttlMs, holder or lockDelayMs) and the lease it ' +
    'granted is live; nothing was changed. Send the original body, or a new key for a new acquire.',
});
const inspectRule = routeRule('locks', { 400: BAD_REQUEST, 429: WATCH_REFUSED, 503: STORE_UNAVAILABLE });

/** The answer of inspect and of a blocking query, for the lock's indexed view. */
function lockStatus(key: string, view: IndexedView): z.input<typeof LockStatus> {
  const state = view.state;
  if (state === null) {
    return {
      key,
      held: false as const,
      index: view.index,
      ...(view.lockDelayUntilMs !== undefined ? { lockDelayUntil: iso(view.lockDelayUntilMs) } : {}),
    };
  }
  return {
    key,
    held: true as const,
    index: view.index,
    ...leaseView(state),
    waiters: state.waiters,
  };
}

export const lockRoutes: FastifyPluginAsyncZod<{ locks: LockService }> = async (app, { locks }) => {
  const answers = { shared: new SharedAnswers(LockStatus), status: lockStatus };
  registerFreshAnswers(app, 'lock', (namespace, lease) => locks.confirmFresh(namespace, lease));
  const releases = new ReleasesInFlight();

  /**
   * A waiting acquire of a key this instance is releasing right now waits for that release to settle
   * before it is validated and sent (see ReleasesInFlight): here, the earliest point where waitMs is known.
   */
  const afterReleaseInFlight = (request: FastifyRequest, _reply: unknown, done: () => void): void => {
    const waitMs = (request.body as { waitMs?: unknown } | undefined)?.waitMs;
    const settled =
      typeof waitMs === 'number' && waitMs > 0
        ? releases.settledOf(principalOf(request).namespace, (request.params as { key: string }).key)
        : undefined;
    if (settled === undefined) done();
    else void settled.then(done);
  };

  app.post(
    '/v1/locks/:key/acquire',
    {
      config: acquireRule.config,
      preValidation: afterReleaseInFlight,
      schema: {
        operationId: 'acquireLock',
        summary: 'Take a lock',
        description:
          'Grants the lock if nobody holds a live lease on it. The reply carries a secret ownerToken (for renew and ' +
          'release) and a fencingToken to pass to the protected resource. If the lock is held, answers 409 lock_held ' +
          'with Retry-After: the time left on the current lease. With waitMs, a held lock is waited for in a fair ' +
          'FIFO queue (across all instances) and granted the moment it is released or expires; 409 when waitMs runs out. ' +
          'A retry carrying the same Idempotency-Key and body gets the same grant back while its lease is live; the same ' +
          'key with another body is a 422.',
        tags: ['locks'],
        params: LockKeyParams,
        querystring: NoQuery,
        headers: AcquireHeaders,
        body: AcquireRequest,
        response: {
          200: jsonResponse(AcquireResponse, 'Granted: the caller holds the lock until expiresAt unless it renews'),
          ...acquireRule.errors,
        },
      },
    },
    async (request, reply) => {
      const { ttlMs, holder, waitMs, lockDelayMs } = request.body;
      // A waiting caller that disconnects must leave the queue (and give back a lease handed to it).
      const signal = waitMs ? callerGone(reply) : undefined;
      const principal = principalOf(request);
      const namespace = principal.namespace;
      const idempotencyKey = request.headers['idempotency-key'];
      const startedMs = waitMs ? performance.now() : undefined;
      const grant = await locks.acquire(namespace, request.params.key, ttlMs, {
        holder: holder ?? null,
        waitMs,
        signal,
        lockDelayMs,
        idempotency: idempotencyKey === undefined ? undefined : { callerId: principal.keyId, key: idempotencyKey },
      });
      confirmBeforeSending(request, namespace, grant);
      historyOf(request)?.granted('lock', namespace, grant, { startedMs, lockDelayMs });
      return {
        key: grant.key,
        ownerToken: grant.ownerToken,
        fencingToken: grant.fencingToken,
        ttlMs: grant.ttlMs,
        expiresAt: iso(grant.expiresAtMs),
        holder: grant.holder,
      };
    },
  );

  const leases = {
    renew: locks.renew.bind(locks),
    release: (namespace: string, key: string, ownerToken: string) =>
      releases.track(namespace, key, () => locks.release(namespace, key, ownerToken)),
  };
  registerLeaseRoutes(app, leases, {
    path: 'locks',
    id: 'Lock',
    tag: 'locks',
    renew: {
      summary: 'Extend a held lease',
      description:
        'Sets the lease to end ttlMs from now, only if ownerToken holds a live lease. The fencing token stays the one ' +
        'issued at acquire.',
      ok: 'Renewed: the lease now ends at expiresAt; the fencing token is unchanged',
    },
    release: {
      summary: 'Give a lock back',
      description: 'Frees the lock, only if ownerToken holds a live lease. A wrong or stale token changes nothing.',
      ok: 'Released: the lock is free for the next caller',
    },
    errors: { 409: 'not_owner: this token does not hold the lock (its lease expired, was released, or was taken over)' },
  });

  app.get(
    '/v1/locks/:key',
    {
      config: inspectRule.config,
      schema: {
        operationId: 'inspectLock',
        summary: 'See who holds a lock (or wait for it to change)',
        description:
          'Reports whether the lock is held and, if so, by which holder label, fencing token and until when, with the ' +
          "lock's watch index. Never the owner token. A blocking query (like Consul's): with ?index=N&waitMs=M the " +
          'answer comes at once if the index differs from N, otherwise as soon as the lock changes (grant, release, ' +
          'expiry, force release, hand-over), otherwise after M with the unchanged state.',
        tags: ['locks'],
        params: LockKeyParams,
        querystring: InspectQuery,
        response: {
          200: jsonResponse(LockStatus, "The lock's current state"),
          ...inspectRule.errors,
        },
      },
    },
    (request, reply) => inspectOrWatch(locks, answers, principalOf(request).namespace, request.params.key, request.query, reply),
  );
};
