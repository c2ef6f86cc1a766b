import { withReleaseRequest } from '../../domain/permit-values.js';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { FreshLease } from '../../domain/lock-service.js';
import { InvalidRequestError, WaitAbortedError } from '../../domain/errors.js';
import type { WatchViewOf } from '../../domain/lease-service.js';
import type { LeaseKind } from '../../domain/lease-store.js';
import type { LeaseVocabulary } from '../../domain/lease-vocabulary.js';
import type { ReleaseRequest as AskedRelease } from '../../domain/lock-values.js';
import { releaseRequestedView } from './admin.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending } from '../fresh-answers.js';
import { HISTORY_PRIMITIVES, historyOf } from '../lease-history.js';
import type { SharedAnswers } from '../shared-answers.js';
import type { z } from 'zod';
import {
  type InspectQuery,
  LockKeyParams,
  NoQuery,
  ReleaseRequest,
  ReleaseResponse,
  RenewRequest,
  RenewResponse,
} from '../schemas/locks.js';
import { BODY_ERRORS, iso, queuedView, routeOptions, routeRule, type RouteText } from './responses.js';

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
 * them. Neither is refused by the request rate limit (see rate-limit.ts): refusing one would cost the
 * caller its lease. (So the limit does not bound how often one lease is renewed: docs/limits.md.)
 */
export function registerLeaseRoutes(app: FastifyInstance, leases: LeaseCalls, doc: LeaseRoutesDoc): void {
  const rule = routeRule('locks', { ...BODY_ERRORS, ...doc.errors }, { rateLimited: false, noRetryAfter: true });
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const primitive = HISTORY_PRIMITIVES[doc.path] ?? 'lock';
  // Both take the key in the path and a JSON body, and are named after the primitive.
  const options = <const B extends z.ZodType>(op: 'renew' | 'release', ok: z.ZodType, body: B) =>
    routeOptions(rule, doc[op], ok, { operationId: `${op}${doc.id}`, tags: [doc.tag], params: LockKeyParams, querystring: NoQuery, body });
  typed.post(`/v1/${doc.path}/:key/renew`, options('renew', RenewResponse, RenewRequest), async (request) => {
    const namespace = principalOf(request).namespace;
    const renewal = await leases.renew(namespace, request.params.key, request.body.ownerToken, request.body.ttlMs);
    const { key, ttlMs, decidedAt } = renewal;
    confirmBeforeSending(request, namespace, { key, ownerToken: request.body.ownerToken, ttlMs, decidedAt, renewal: true });
    historyOf(request)?.renewed(primitive, namespace, renewal, request.body.ownerToken);
    const renewed = { key: renewal.key, fencingToken: renewal.fencingToken, ttlMs: renewal.ttlMs, expiresAt: iso(renewal.expiresAtMs) };
    return withReleaseRequest(renewed, renewal.releaseRequested && releaseRequestedView(renewal.releaseRequested));
  });
  typed.post(`/v1/${doc.path}/:key/release`, options('release', ReleaseResponse, ReleaseRequest), async (request) => {
    const namespace = principalOf(request).namespace;
    const history = historyOf(request);
    const sentAt = history?.now() ?? 0;
    await leases.release(namespace, request.params.key, request.body.ownerToken);
    history?.released(primitive, namespace, request.params.key, request.body.ownerToken, sentAt);
    return { key: request.params.key, released: true as const };
  });
}

/** How one primitive answers an inspect: its status body, shared by the watchers one change wakes. */
export interface InspectAnswers<V, S extends z.ZodType> {
  readonly shared: SharedAnswers<S>;
  status(key: string, view: V): z.input<S>;
  /** A queued caller's weight in the primitive's words (a read/write lock's mode). */
  readonly queued?: (weight: number) => object;
  /**
   * Immediate answers too are written from the view's one body: callers asking together share the view
   * (ChangeWatch.current coalesces a semaphore's page of up to 100 holders), so it is validated and
   * stringified once for all of them.
   */
  readonly immediateShared?: boolean;
}

/**
 * Inspect, or a blocking query (`index` and `waitMs`), of one key, for any primitive. The watchers a
 * change wakes share its view (one body for all of them) and are answered in the pass that wakes them
 * (see ChangeWatch.wait); an answer at once or after waitMs comes here. A blocking answer is one body
 * shared by every watcher of the key, so it carries no queue. Resolves to the body to send, or undefined
 * when the answer was written here (SharedAnswers writes it straight to the socket).
 */
export async function inspectOrWatch<K extends LeaseKind, S extends z.ZodType>(
  calls: Pick<LeaseVocabulary<K>, 'watch' | 'queue'>,
  answers: InspectAnswers<WatchViewOf<K>, S>,
  namespace: string,
  key: string,
  query: z.output<typeof InspectQuery>,
  reply: FastifyReply,
): Promise<z.input<S> | undefined> {
  const { index, waitMs = 0, queue } = query;
  const blocking = index !== undefined && waitMs > 0;
  if (queue === true && blocking) throw new InvalidRequestError('queue', 'not with a blocking query (index and waitMs)');
  const send = (view: WatchViewOf<K>) => answers.shared.send(reply, view, key, () => answers.status(key, view));
  const view = await calls.watch(namespace, key, index, waitMs, blocking ? callerGone(reply) : undefined, blocking ? send : undefined);
  // Answered already (the wake-up pass wrote it, or the caller left): nothing more to send.
  if (reply.sent) return undefined;
  if (blocking || (queue !== true && answers.immediateShared === true)) {
    send(view);
    return undefined;
  }
  const status = answers.status(key, view);
  if (queue !== true || view.state === null) return status;
  const queued = await calls.queue(namespace, key);
  return { ...(status as object), queue: queued.map((q) => queuedView(q, answers.queued)) } as z.input<S>;
}

/**
 * An AbortSignal that fires when the caller of a long request goes away before its answer, or when a
 * reload of the keys takes away what the request was let in with (the reason is then its 401 or 403).
 */
export function callerGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  // Gone before the route ran (its connection closed during an async step before it): 'close' was emitted
  // then and is not again, so listening for it would leave this wait (and its watch of the keys) to
  // nobody, for its whole waitMs, and a lease granted to it held by nobody until its TTL.
  if (reply.raw.destroyed && !reply.raw.writableFinished) {
    controller.abort(new WaitAbortedError());
    return controller.signal;
  }
  const stopWatching = reply.whenAccessLost((answer) => controller.abort(answer));
  reply.raw.once('close', () => {
    stopWatching();
    if (!reply.raw.writableFinished) controller.abort(new WaitAbortedError());
  });
  return controller.signal;
}
