import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { PermitCore, PermitGrant } from '../../domain/permits.js';
import type { IndexedPermitState, PermitKind, PermitState } from '../../domain/permit-values.js';
import { principalOf } from '../auth.js';
import { historyOf } from '../lease-history.js';
import { confirmBeforeSending, registerFreshAnswers } from '../fresh-answers.js';
import { sendProblem } from '../problem.js';
import { ForceReleaseQuery, ListLocksQuery } from '../schemas/admin.js';
import { InspectQuery, LockKeyParams, NoQuery } from '../schemas/locks.js';
import { SharedAnswers } from '../shared-answers.js';
import { PermitForceRelease, PermitList } from '../schemas/permits.js';
import { ADMIN_ERRORS, encodeCursor, forceReleaseErrors, HOLDER_CHANGED, registerReleaseRequestRoute, storeListQuery } from './admin.js';
import { callerGone, inspectOrWatch, registerLeaseRoutes } from './lease-routes.js';
import {
  BAD_REQUEST,
  BODY_ERRORS,
  iso,
  leaseView,
  routeOptions,
  routeRule,
  STORE_UNAVAILABLE,
  WATCH_REFUSED,
  type RouteText,
} from './responses.js';

/**
 * The semaphore and read/write lock routes, declared once: a primitive is a PermitRouteSpec (its names, what
 * its acquire and inspect take and answer, its domain service), and its routes are the same code for
 * every kind. Renew, release and the admin list and force release take the same shapes for both.
 */

const COMMON_ERRORS = BODY_ERRORS;
const WAIT_ERRORS =
  'too_many_waiters: the wait queue of this key, of this namespace on this instance, or of this instance is full; rate_limited: ' +
  'too many requests for this API key; or quota_exceeded: the namespace holds its limit of leases at once. Retry after Retry-After.';

const inspectRule = routeRule('locks', { 400: BAD_REQUEST, 429: WATCH_REFUSED, 503: STORE_UNAVAILABLE });
const listRule = routeRule('admin', ADMIN_ERRORS);
const forceReleaseRule = routeRule(
  'admin',
  forceReleaseErrors('not_found: no live lease on this key; nothing changed', { 409: HOLDER_CHANGED }),
  {
    noRetryAfter: true,
  },
);

/** An inspect's description: what the answer shows of the key (`shows`), then the blocking query, alike for every primitive. */
export const inspectDescription = (shows: string, noun: string): string =>
  `${shows}, the callers queued, and the ${noun}'s watch index. Never owner tokens. A blocking query, as for locks: ` +
  `with ?index=N&waitMs=M the answer comes at once if the index differs from N, otherwise as soon as the ${noun} changes, otherwise after M.`;

/** How a primitive is named in paths, operation ids and texts. */
export interface PermitNames {
  /** Path segment: its kind's plural (`semaphores`, `rwlocks`), as history and the admin queue name it. */
  readonly path: `${PermitKind}s`;
  /** For operation ids: `Semaphore`, `RwLock`. */
  readonly id: string;
  /** For texts: `semaphore`, `read/write lock`. */
  readonly noun: string;
  /** OpenAPI tag, and what it says. */
  readonly tag: string;
  readonly tagDescription: string;
}

/** What every permit acquire takes besides the primitive's own field. */
interface AcquireBody {
  readonly ttlMs: number;
  readonly holder?: string;
  readonly waitMs?: number;
}

/** One permit primitive, as its routes need it: everything in which a semaphore and a read/write lock differ. */
export interface PermitRouteSpec<Body extends AcquireBody, View> {
  /** Its kind (PERMIT_KINDS): the permit core its routes run on, and how history names it. */
  readonly kind: PermitKind;
  readonly names: PermitNames;
  /** An acquire that takes the whole of a free key (the next one is refused): what the route tests send. */
  readonly example: Body;
  readonly acquire: RouteText & {
    readonly body: z.ZodType<Body>;
    readonly grant: z.ZodType;
    /** The 409: why the acquire was refused, and what Retry-After means then. */
    readonly refused: string;
  };
  readonly inspect: RouteText & { readonly status: z.ZodType };
  /** The primitive's domain service on its core. */
  service(core: PermitCore): {
    acquire(namespace: string, key: string, request: Body & { signal?: AbortSignal }): Promise<PermitGrant>;
  };
  /** The grant's own field, from the request (a semaphore's limit, a read/write lock's mode). */
  granted(body: Body): object;
  /** The key's state in the primitive's words. */
  view(state: PermitState): View;
  /** A queued caller's weight in the primitive's words, beside the weight (a read/write lock's mode); none for a semaphore. */
  readonly queued?: (weight: number) => object;
  /** The inspect answer: the key's watch index and its view, or `null` when nothing is held. */
  status(key: string, index: number, view: View | null): object;
}

/** A primitive's routes (scope `locks`, in the key's namespace): acquire, renew, release, inspect. */
export function permitRoutes<Body extends AcquireBody, View>(
  kind: PermitRouteSpec<Body, View>,
): FastifyPluginAsyncZod<{ core: PermitCore }> {
  const { names } = kind;
  const acquireRule = routeRule('locks', { ...COMMON_ERRORS, 409: kind.acquire.refused, 429: WAIT_ERRORS });
  const primitive = kind.kind;
  return async (app, { core }) => {
    const service = kind.service(core);
    const answers = {
      shared: new SharedAnswers(kind.inspect.status),
      status: (key: string, watched: IndexedPermitState) =>
        kind.status(key, watched.index, watched.state === null ? null : kind.view(watched.state)),
      queued: kind.queued,
      immediateShared: true,
    };
    registerFreshAnswers(app, primitive, (namespace, lease) => core.confirmFresh(namespace, lease));

    app.post(
      `/v1/${names.path}/:key/acquire`,
      routeOptions(acquireRule, kind.acquire, kind.acquire.grant, {
        operationId: `acquire${names.id}`,
        tags: [names.tag],
        params: LockKeyParams,
        querystring: NoQuery,
        body: kind.acquire.body,
      }),
      async (request, reply) => {
        // The zod validator parsed it with kind.acquire.body; the type provider cannot name a generic schema's type.
        const body = request.body as Body;
        const namespace = principalOf(request).namespace;
        // A waiting caller that disconnects must leave the queue (and give back a lease handed to it).
        const signal = body.waitMs ? callerGone(reply) : undefined;
        const startedMs = body.waitMs ? performance.now() : undefined;
        const grant = await service.acquire(namespace, request.params.key, { ...body, signal });
        confirmBeforeSending(request, namespace, grant);
        const mode = 'mode' in body && (body.mode === 'read' || body.mode === 'write') ? body.mode : undefined;
        historyOf(request)?.granted(primitive, namespace, grant, { startedMs, mode });
        return {
          key: grant.key,
          ...kind.granted(body),
          ownerToken: grant.ownerToken,
          fencingToken: grant.fencingToken,
          ttlMs: grant.ttlMs,
          expiresAt: iso(grant.expiresAtMs),
          holder: grant.holder,
        };
      },
    );

    registerLeaseRoutes(app, core, {
      ...names,
      renew: {
        summary: `Extend a ${names.noun} lease`,
        description: `Sets this lease of the ${names.noun} to end ttlMs from now, only if ownerToken holds it live. The fencing token stays the one it was granted with; the other leases are untouched.`,
        ok: 'Renewed: the lease now ends at expiresAt',
      },
      release: {
        summary: `Give a ${names.noun} lease back`,
        description: `Ends this lease of the ${names.noun}, only if ownerToken holds it live, and hands the room to the first callers queued.`,
        ok: 'Released',
      },
      errors: { 409: 'not_owner: this token holds no live lease here (it expired, was released, or was evicted)' },
    });

    app.get(
      `/v1/${names.path}/:key`,
      routeOptions(inspectRule, kind.inspect, kind.inspect.status, {
        operationId: `inspect${names.id}`,
        tags: [names.tag],
        params: LockKeyParams,
        querystring: InspectQuery,
      }),
      (request, reply) => inspectOrWatch(core, answers, principalOf(request).namespace, request.params.key, request.query, reply),
    );
  };
}

/** The operator's list and force release (scope `admin`), for any permit primitive. */
export function permitAdminRoutes(core: PermitCore, names: PermitNames): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      `/v1/${names.path}`,
      routeOptions(
        listRule,
        {
          summary: `List held ${names.noun}s (admin)`,
          description: `Pages through the ${names.noun}s with live leases, in one namespace or all, with each lease's holder, fencing token and expiry; never owner tokens.`,
          ok: `One page of held ${names.noun}s`,
        },
        PermitList,
        { operationId: `list${names.id}s`, tags: ['admin'], querystring: ListLocksQuery },
      ),
      async (request) => {
        const page = await core.listHeld(storeListQuery(request.query));
        return {
          entries: page.entries.map(({ namespace, key, state }) => ({
            namespace,
            key,
            capacity: state.capacity,
            holders: state.holders.map((h) => ({ ...leaseView(h), weight: h.weight })),
            holderCount: state.holderCount,
            truncated: state.holders.length < state.holderCount,
            waiters: state.waiters,
          })),
          nextCursor: encodeCursor(page.nextCursor),
        };
      },
    );
    app.delete(
      `/v1/${names.path}/:key`,
      routeOptions(
        forceReleaseRule,
        {
          summary: `Force-release every lease of a ${names.noun} (admin)`,
          description:
            `Ends every live lease of the ${names.noun} whoever holds them, writes an audit log line, and hands the room to the queue. ` +
            "The evicted owner tokens no longer renew or release; every later grant's fencing token is above the evicted ones. " +
            'With ?fencingToken=N only the lease with that token ends (the others stay); if it is no longer live while others are, ' +
            'nothing changes (409 holder_changed).',
          ok: 'Freed',
        },
        PermitForceRelease,
        { operationId: `forceRelease${names.id}`, tags: ['admin'], params: LockKeyParams, querystring: ForceReleaseQuery },
      ),
      async (request, reply) => {
        const { key } = request.params;
        const { namespace, fencingToken } = request.query;
        const evicted = await core.forceRelease(namespace, key, fencingToken);
        if (evicted.length === 0) {
          return sendProblem(
            request,
            reply,
            'not_found',
            `no live lease on ${names.noun} "${key}" in namespace "${namespace}"; nothing changed`,
          );
        }
        historyOf(request)?.forceReleased(core.kind, namespace, key, evicted, principalOf(request).keyId);
        request.log.warn(
          {
            audit: 'force_release',
            primitive: core.kind,
            actor: principalOf(request).keyId,
            namespace,
            key,
            evicted,
            at: new Date().toISOString(),
          },
          `audit: ${names.noun} force-released`,
        );
        return { namespace, key, released: true as const, evicted };
      },
    );
    registerReleaseRequestRoute(app, core, names);
  };
}

/** One permit primitive as the app and the shared routes need it, whatever its acquire body and view. */
export interface PermitPrimitive {
  readonly kind: PermitKind;
  readonly names: PermitNames;
  /** Its acquire, renew, release and inspect (scope `locks`), on its kind's core. */
  readonly routes: FastifyPluginAsyncZod<{ core: PermitCore }>;
  /** A queued caller's weight in the primitive's words (see PermitRouteSpec.queued). */
  readonly queued?: (weight: number) => object;
  readonly example: object;
}

/** A primitive's spec as an entry of the table of primitives (routes/primitives.ts). */
export function permitPrimitive<Body extends AcquireBody, View>(spec: PermitRouteSpec<Body, View>): PermitPrimitive {
  return { kind: spec.kind, names: spec.names, routes: permitRoutes(spec), queued: spec.queued, example: spec.example };
}
