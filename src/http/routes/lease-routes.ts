import { withReleaseRequest } from '../../domain/permit-store.js';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { FreshLease } from '../../domain/lock-service.js';
import type { ReleaseRequest as AskedRelease } from '../../domain/lock-store.js';
import { releaseRequestedView } from './admin.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending } from '../fresh-answers.js';
import { HISTORY_PRIMITIVES, historyOf } from '../lease-history.js';
import { LockKeyParams, ReleaseRequest, ReleaseResponse, RenewRequest, RenewResponse } from '../schemas/locks.js';
import { BODY_ERRORS, iso, routeOptions, routeRule, type RouteText } from './responses.js';

/** A renewal as every primitive's renew answers it (FreshLease but the owner token, which the caller sent). */
type Renewal = Omit<FreshLease, 'ownerToken'> & {
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly releaseRequested?: AskedRelease;
};

/** What renew and release call: a lock's service, or a semaphore's or read/write lock's core. */
export interface LeaseCalls {
  renew(namespace: string, key: string, ownerToken: string, ttlMs: number): Promise<Renewal>;
  release(namespace: string, key: string, ownerToken: string): Promise<void>;
}

/** How one primitive's renew and release are named and documented. */
export interface LeaseRoutesDoc {
  /** Path segment: `locks`, `semaphores`, `rwlocks`. */
  readonly path: string;
  /** For operation ids: `Lock`, `Semaphore`, `RwLock`. */
  readonly id: string;
  readonly tag: string;
  readonly renew: RouteText;
  readonly release: RouteText;
  /** The errors both answer besides the ones every body route does; `409` is not_owner. */
  readonly errors: Readonly<Record<number, string>>;
}

/**
 * Renew and release of one lease, for any primitive: an owner token and a TTL mean the same for all of
 * them. Neither is refused by the request rate limit (see rate-limit.ts): a holder's renewals are bounded
 * by the leases its key holds, and refusing one would cost the caller its lease.
 */
export function registerLeaseRoutes(app: FastifyInstance, leases: LeaseCalls, doc: LeaseRoutesDoc): void {
  const rule = routeRule('locks', { ...BODY_ERRORS, ...doc.errors }, { rateLimited: false, noRetryAfter: true });
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const primitive = HISTORY_PRIMITIVES[doc.path] ?? 'lock';
  typed.post(
    `/v1/${doc.path}/:key/renew`,
    routeOptions(rule, doc.renew, RenewResponse, {
      operationId: `renew${doc.id}`,
      tags: [doc.tag],
      params: LockKeyParams,
      body: RenewRequest,
    }),
    async (request) => {
      const namespace = principalOf(request).namespace;
      const renewal = await leases.renew(namespace, request.params.key, request.body.ownerToken, request.body.ttlMs);
      const { key, ttlMs, decidedAt } = renewal;
      confirmBeforeSending(request, namespace, { key, ownerToken: request.body.ownerToken, ttlMs, decidedAt });
      historyOf(request)?.renewed(primitive, namespace, renewal);
      const renewed = { key: renewal.key, fencingToken: renewal.fencingToken, ttlMs: renewal.ttlMs, expiresAt: iso(renewal.expiresAtMs) };
      return withReleaseRequest(renewed, renewal.releaseRequested && releaseRequestedView(renewal.releaseRequested));
    },
  );
  typed.post(
    `/v1/${doc.path}/:key/release`,
    routeOptions(rule, doc.release, ReleaseResponse, {
      operationId: `release${doc.id}`,
      tags: [doc.tag],
      params: LockKeyParams,
      body: ReleaseRequest,
    }),
    async (request) => {
      const namespace = principalOf(request).namespace;
      const sentAt = Date.now();
      await leases.release(namespace, request.params.key, request.body.ownerToken);
      historyOf(request)?.released(primitive, namespace, request.params.key, request.body.ownerToken, sentAt);
      return { key: request.params.key, released: true as const };
    },
  );
}
