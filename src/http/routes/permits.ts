import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { WaitAbortedError } from '../../domain/errors.js';
import type { PermitCore } from '../../domain/permits.js';
import type { PermitState } from '../../domain/permit-store.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending } from '../fresh-answers.js';
import { sendProblem } from '../problem.js';
import { ForceReleaseQuery, ListLocksQuery } from '../schemas/admin.js';
import { LockKeyParams, ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse } from '../schemas/locks.js';
import { PermitForceRelease, PermitList } from '../schemas/permits.js';
import { jsonResponse, routeRule } from './responses.js';

/**
 * What the semaphore and read/write lock routes share: renew, release and the admin list and force
 * release take the same shapes for both, so they are declared once here, for a path and a name.
 */

export const iso = (ms: number) => new Date(ms).toISOString();

const BAD_REQUEST = 'invalid_request: a field is missing or malformed (the problem names it)';
const STORE_UNAVAILABLE = 'store_unavailable: the store did not give a certain answer; nothing was granted. Retry after Retry-After.';
const NOT_SUPPORTED = 'not_supported: the configured store (etcd) has no semaphores or read/write locks';
export const PERMIT_COMMON_ERRORS = {
  400: BAD_REQUEST,
  413: 'payload_too_large: the body is over the limit',
  415: 'unsupported_media_type: the body is not application/json',
  501: NOT_SUPPORTED,
  503: STORE_UNAVAILABLE,
} as const;
export const PERMIT_INSPECT_ERRORS = { 400: BAD_REQUEST, 501: NOT_SUPPORTED, 503: STORE_UNAVAILABLE } as const;
export const PERMIT_WAIT_ERRORS =
  'too_many_waiters: the wait queue of this key, of this namespace on this instance, or of this instance is full; rate_limited: ' +
  'too many requests for this API key; or quota_exceeded: the namespace holds its limit of leases at once. Retry after Retry-After.';
const NOT_OWNER = 'not_owner: this token holds no live lease here (it expired, was released, or was evicted)';

const renewRule = routeRule('locks', { ...PERMIT_COMMON_ERRORS, 409: NOT_OWNER }, { rateLimited: false });
const releaseRule = routeRule('locks', { ...PERMIT_COMMON_ERRORS, 409: NOT_OWNER }, { rateLimited: false });
const ADMIN_ERRORS = { 400: BAD_REQUEST, 501: NOT_SUPPORTED, 503: 'store_unavailable: the store did not answer; nothing was changed for certain' };
const listRule = routeRule('admin', ADMIN_ERRORS);
const forceReleaseRule = routeRule('admin', {
  ...ADMIN_ERRORS,
  404: 'not_found: no live lease on this key; nothing changed',
  413: 'payload_too_large: a body was sent, and it is over the limit (this route takes none)',
  415: 'unsupported_media_type: a body was sent that is not application/json (this route takes none)',
});

/** How a primitive is named in paths, operation ids and texts. */
export interface PermitNames {
  /** Path segment: `semaphores`, `rwlocks`. */
  readonly path: string;
  /** For operation ids: `Semaphore`, `RwLock`. */
  readonly id: string;
  /** For texts: `semaphore`, `read/write lock`. */
  readonly noun: string;
  /** OpenAPI tag. */
  readonly tag: string;
}

/** An AbortSignal for a waiting caller: a caller that disconnects leaves the queue (and gives back a lease handed to it). */
export function callerSignal(raw: { once(event: 'close', listener: () => void): unknown; writableFinished: boolean }, waitMs: number | undefined): AbortSignal | undefined {
  if (!waitMs) return undefined;
  const controller = new AbortController();
  raw.once('close', () => {
    if (!raw.writableFinished) controller.abort(new WaitAbortedError());
  });
  return controller.signal;
}

/** Renew and release of one lease, for any permit primitive. */
export function registerLeaseRoutes(app: FastifyInstance, core: PermitCore, names: PermitNames): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.post(
    `/v1/${names.path}/:key/renew`,
    {
      config: renewRule.config,
      schema: {
        operationId: `renew${names.id}`,
        summary: `Extend a ${names.noun} lease`,
        description: `Sets this lease of the ${names.noun} to end ttlMs from now, only if ownerToken holds it live. The fencing token stays the one it was granted with; the other leases are untouched.`,
        tags: [names.tag],
        params: LockKeyParams,
        body: RenewRequest,
        response: { 200: jsonResponse(RenewResponse, 'Renewed: the lease now ends at expiresAt'), ...renewRule.errors },
      },
    },
    async (request) => {
      const namespace = principalOf(request).namespace;
      const renewal = await core.renew(namespace, request.params.key, request.body.ownerToken, request.body.ttlMs);
      confirmBeforeSending(request, namespace, { ...renewal, ownerToken: request.body.ownerToken });
      return { key: renewal.key, fencingToken: renewal.fencingToken, ttlMs: renewal.ttlMs, expiresAt: iso(renewal.expiresAtMs) };
    },
  );
  typed.post(
    `/v1/${names.path}/:key/release`,
    {
      config: releaseRule.config,
      schema: {
        operationId: `release${names.id}`,
        summary: `Give a ${names.noun} lease back`,
        description: `Ends this lease of the ${names.noun}, only if ownerToken holds it live, and hands the room to the first callers queued.`,
        tags: [names.tag],
        params: LockKeyParams,
        body: ReleaseRequest,
        response: { 200: jsonResponse(ReleaseResponse, 'Released'), ...releaseRule.errors },
      },
    },
    async (request) => {
      await core.release(principalOf(request).namespace, request.params.key, request.body.ownerToken);
      return { key: request.params.key, released: true as const };
    },
  );
}

const holderView = (h: PermitState['holders'][number]) => ({
  holder: h.holder,
  weight: h.weight,
  fencingToken: h.fencingToken,
  expiresAt: iso(h.expiresAtMs),
  ttlRemainingMs: h.ttlRemainingMs,
});

/** The operator's list and force release (scope `admin`), for any permit primitive. */
export function permitAdminRoutes(core: PermitCore, names: PermitNames): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      `/v1/${names.path}`,
      {
        config: listRule.config,
        schema: {
          operationId: `list${names.id}s`,
          summary: `List held ${names.noun}s (admin)`,
          description: `Pages through the ${names.noun}s with live leases, in one namespace or all, with each lease's holder, fencing token and expiry; never owner tokens.`,
          tags: ['admin'],
          querystring: ListLocksQuery,
          response: { 200: jsonResponse(PermitList, `One page of held ${names.noun}s`), ...listRule.errors },
        },
      },
      async (request) => {
        const { namespace, prefix, limit, cursor } = request.query;
        const page = await core.listHeld({ namespace, prefix, limit, cursor: cursor === undefined ? undefined : Buffer.from(cursor, 'base64url').toString('utf8') });
        return {
          entries: page.entries.map((e) => ({
            namespace: e.namespace,
            key: e.key,
            capacity: e.state.capacity,
            holders: e.state.holders.map(holderView),
            waiters: e.state.waiters,
          })),
          nextCursor: page.nextCursor === null ? null : Buffer.from(page.nextCursor, 'utf8').toString('base64url'),
        };
      },
    );
    app.delete(
      `/v1/${names.path}/:key`,
      {
        config: forceReleaseRule.config,
        schema: {
          operationId: `forceRelease${names.id}`,
          summary: `Force-release every lease of a ${names.noun} (admin)`,
          description:
            `Ends every live lease of the ${names.noun} whoever holds them, writes an audit log line, and hands the room to the queue. ` +
            'The evicted owner tokens no longer renew or release; every later grant\'s fencing token is above the evicted ones.',
          tags: ['admin'],
          params: LockKeyParams,
          querystring: ForceReleaseQuery,
          response: { 200: jsonResponse(PermitForceRelease, 'Freed'), ...forceReleaseRule.errors },
        },
      },
      async (request, reply) => {
        const { key } = request.params;
        const { namespace } = request.query;
        const evicted = await core.forceRelease(namespace, key);
        if (evicted.length === 0) {
          return sendProblem(request, reply, 'not_found', `no live lease on ${names.noun} "${key}" in namespace "${namespace}"; nothing changed`);
        }
        request.log.warn(
          { audit: 'force_release', primitive: core.kind, actor: principalOf(request).keyId, namespace, key, evicted, at: new Date().toISOString() },
          `audit: ${names.noun} force-released`,
        );
        return { namespace, key, released: true as const, evicted };
      },
    );
  };
}
