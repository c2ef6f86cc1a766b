import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { LockService } from '../../domain/lock-service.js';
import type { ReleaseRequest, ReleaseRequestInput } from '../../domain/lock-values.js';
import { principalOf } from '../auth.js';
import { HISTORY_PRIMITIVES, historyOf } from '../lease-history.js';
import { sendProblem } from '../problem.js';
import {
  ForceReleaseQuery,
  ForceReleaseResponse,
  ListLocksQuery,
  LockList,
  ReleaseRequestBody,
  ReleaseRequestQuery,
  ReleaseRequestResponse,
} from '../schemas/admin.js';
import { LockKeyParams } from '../schemas/locks.js';
import { BODY_ERRORS, leaseView, releaseRequestedView, routeOptions, routeRule } from './responses.js';

/** What every admin route can answer (the list takes only a query; force release takes no body). */
export const ADMIN_ERRORS = {
  400: 'invalid_request: a parameter is missing or malformed (the problem names it)',
  503: 'store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work',
} as const;

/** A force release's errors: the admin ones, a body it does not take, and `notFound` (nobody held the key). */
export function forceReleaseErrors(notFound: string, others: Readonly<Record<number, string>> = {}): Record<number, string> {
  return {
    ...ADMIN_ERRORS,
    ...others,
    404: notFound,
    413: 'payload_too_large: a body was sent, and it is over the limit (this route takes none)',
    415: 'unsupported_media_type: a body was sent that is not application/json (this route takes none)',
  };
}

const listRule = routeRule('admin', ADMIN_ERRORS);
/** The 409 of a force release that names its lease (?fencingToken=). */
export const HOLDER_CHANGED =
  'holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed';

// holder_changed has no retry time (the operator looks again): no Retry-After on the 409.
const forceReleaseRule = routeRule(
  'admin',
  forceReleaseErrors('not_found: nobody holds this lock; nothing changed', { 409: HOLDER_CHANGED }),
  { noRetryAfter: true },
);

/** The store's cursor travels base64url-encoded: opaque to clients, and safe in a query string. */
export const encodeCursor = (cursor: string | null) => (cursor === null ? null : Buffer.from(cursor, 'utf8').toString('base64url'));

/** A list query as the store takes it: the client's cursor decoded. */
export function storeListQuery(query: z.infer<typeof ListLocksQuery>) {
  return { ...query, cursor: query.cursor === undefined ? undefined : Buffer.from(query.cursor, 'base64url').toString('utf8') };
}

/** What a release request calls: a lock's service, or a semaphore's or read/write lock's core. */
export interface ReleaseRequestCalls {
  requestRelease(namespace: string, key: string, fencingToken: number, request: ReleaseRequestInput): Promise<ReleaseRequest | null>;
}

export { releaseRequestedView };

// As for a force release: holder_changed has no retry time, the operator looks again.
const releaseRequestRule = routeRule(
  'admin',
  { ...BODY_ERRORS, 400: ADMIN_ERRORS[400], 404: 'not_found: no live lease on this key; nothing was asked', 409: HOLDER_CHANGED },
  { noRetryAfter: true },
);

/**
 * `POST /v1/<path>/:key/release-request`: asks the holder of one lease to let go, without evicting it
 * (scope `admin`, as a force release: it names its target namespace in full). The request names the lease
 * by fencing token, so it never reaches a newer holder; the holder learns of it from its next renewal.
 */
export function registerReleaseRequestRoute(
  app: Parameters<FastifyPluginAsyncZod>[0],
  calls: ReleaseRequestCalls,
  names: { readonly path: string; readonly id: string; readonly noun: string },
): void {
  app.post(
    `/v1/${names.path}/:key/release-request`,
    routeOptions(
      releaseRequestRule,
      {
        summary: `Ask a ${names.noun}'s holder to let go (admin)`,
        description:
          `Asks the holder of the ${names.noun} lease with fencingToken to release it, without evicting it: the request (when, ` +
          'who, reason) is stored with that lease, and every renewal of it answers releaseRequested until the lease ends. The ' +
          'holder decides (clients surface it; keyholder run forwards it to its command as a signal). Asking again replaces ' +
          'the request. If that lease is no longer live while another is, nothing is asked (409 holder_changed).',
        ok: 'Asked: the holder sees it in its next renewal',
      },
      ReleaseRequestResponse,
      {
        operationId: `requestRelease${names.id}`,
        tags: ['admin'],
        params: LockKeyParams,
        querystring: ReleaseRequestQuery,
        body: ReleaseRequestBody,
      },
    ),
    async (request, reply) => {
      const { key } = request.params;
      const { namespace } = request.query;
      const { fencingToken, reason } = request.body;
      const by = principalOf(request).keyId;
      const stored = await calls.requestRelease(namespace, key, fencingToken, { by, reason: reason ?? null });
      if (stored === null) {
        return sendProblem(
          request,
          reply,
          'not_found',
          `nobody holds ${names.noun} "${key}" in namespace "${namespace}"; nothing was asked`,
        );
      }
      historyOf(request)?.releaseRequested(HISTORY_PRIMITIVES[names.path] ?? 'lock', namespace, key, fencingToken, stored);
      request.log.info(
        { audit: 'release_request', actor: by, namespace, key, fencingToken, reason: stored.reason },
        `audit: ${names.noun} holder asked to let go`,
      );
      return { namespace, key, fencingToken, releaseRequested: releaseRequestedView(stored) };
    },
  );
}

/** Operator routes (scope `admin`, any namespace): see held locks, free a stuck one. */
export const adminRoutes: FastifyPluginAsyncZod<{ locks: LockService }> = async (app, { locks }) => {
  app.get(
    '/v1/locks',
    routeOptions(
      listRule,
      {
        summary: 'List held locks (admin)',
        description:
          'Pages through the locks held right now, in one namespace or all of them, with holder, fencing token and ' +
          'expiry; never owner tokens. Walks the store incrementally (Redis SCAN), so it never blocks the store.',
        ok: 'One page of held locks',
      },
      LockList,
      { operationId: 'listLocks', tags: ['admin'], querystring: ListLocksQuery },
    ),
    async (request) => {
      const page = await locks.listHeld(storeListQuery(request.query));
      return {
        locks: page.locks.map((l) => ({ namespace: l.namespace, key: l.key, ...leaseView(l), waiters: l.waiters })),
        nextCursor: encodeCursor(page.nextCursor),
      };
    },
  );

  app.delete(
    '/v1/locks/:key',
    routeOptions(
      forceReleaseRule,
      {
        summary: 'Force-release a stuck lock (admin)',
        description:
          'Frees the lock whoever holds it and writes an audit log line (who, what, when, the evicted holder and fencing ' +
          "token). The evicted owner token can no longer renew or release (409 not_owner), and the next grant's fencing " +
          'token is higher than the evicted one, so a protected resource that checks fencing tokens rejects the evicted ' +
          "holder's late writes. With ?fencingToken=N only the lease with that token is evicted, in the same atomic step: " +
          'if the holder changed since the caller looked, the new holder keeps the lock (409 holder_changed).',
        ok: 'Freed',
      },
      ForceReleaseResponse,
      { operationId: 'forceReleaseLock', tags: ['admin'], params: LockKeyParams, querystring: ForceReleaseQuery },
    ),
    async (request, reply) => {
      const { key } = request.params;
      const { namespace, fencingToken } = request.query;
      const evicted = await locks.forceRelease(namespace, key, fencingToken);
      if (evicted === null) {
        return sendProblem(request, reply, 'not_found', `nobody holds lock "${key}" in namespace "${namespace}"; nothing changed`);
      }
      historyOf(request)?.forceReleased('lock', namespace, key, [evicted], principalOf(request).keyId);
      // The audit trail: warn, so it is kept at the usual production log levels.
      request.log.warn(
        {
          audit: 'force_release',
          actor: principalOf(request).keyId,
          namespace,
          key,
          evictedHolder: evicted.holder,
          evictedFencingToken: evicted.fencingToken,
          at: new Date().toISOString(),
        },
        'audit: lock force-released',
      );
      return { namespace, key, released: true as const, evicted };
    },
  );

  registerReleaseRequestRoute(app, locks, { path: 'locks', id: 'Lock', noun: 'lock' });
};
