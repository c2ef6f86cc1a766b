import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { InvalidRequestError } from '../../domain/errors.js';
import { type HistoryPrimitive, timeline } from '../../domain/history.js';
import { principalOf } from '../auth.js';
import { HISTORY_PRIMITIVES, type LeaseHistory } from '../lease-history.js';
import { AdminHistoryQuery, HistoryPrimitiveParams, HistoryQuery, KeyHistory } from '../schemas/history.js';
import { LockKeyParams } from '../schemas/locks.js';
import { ADMIN_ERRORS } from './admin.js';
import { permitPrimitives } from './primitives.js';
import { BAD_REQUEST, iso, routeOptions, routeRule, STORE_UNAVAILABLE } from './responses.js';

const ownRule = routeRule('locks', { 400: BAD_REQUEST, 503: STORE_UNAVAILABLE });
const adminRule = routeRule('admin', ADMIN_ERRORS);

const DESCRIPTION =
  'The recent lease events of this key, oldest first: granted, handed over (granted after waiting), renewed, released, ' +
  'expired, force-released (by which API key) and lock-delay, with holder label, fencing token, times, how long each ' +
  'caller waited and each lease was held. Never owner tokens. Expired and lock-delay are derived when read from a lease ' +
  'whose end passed without a release. Kept per key and per namespace within HISTORY_* bounds; events still in an ' +
  "instance's write buffer (HISTORY_FLUSH_MS) may be missing for a moment. With history off (recording: false), the list is empty.";

/** The answer for one key: its records, as a timeline in [since, until], the last `limit` of them. */
async function answer(
  history: LeaseHistory | null,
  namespace: string,
  primitive: HistoryPrimitive,
  key: string,
  query: z.infer<typeof HistoryQuery>,
): Promise<z.input<typeof KeyHistory>> {
  const since = query.since === undefined ? -Infinity : Date.parse(query.since);
  const until = query.until === undefined ? Infinity : Date.parse(query.until);
  if (since > until) throw new InvalidRequestError('since', 'must not be after until');
  const records = history ? await history.recorder.read({ namespace, primitive, key }) : [];
  const events = timeline(records, history ? history.now() : Date.now(), since, until);
  const kept = events.slice(-query.limit);
  return {
    key,
    recording: history !== null,
    truncated: kept.length < events.length,
    events: kept.map((e) => ({
      type: e.type,
      at: iso(e.at),
      fencingToken: e.fencingToken,
      holder: e.holder,
      ...(e.expiresAt !== undefined ? { expiresAt: iso(e.expiresAt) } : {}),
      ...(e.waitedMs !== undefined ? { waitedMs: e.waitedMs } : {}),
      ...(e.heldMs !== undefined ? { heldMs: e.heldMs } : {}),
      ...(e.by !== undefined ? { by: e.by } : {}),
      ...(e.reason !== undefined ? { reason: e.reason } : {}),
      ...(e.until !== undefined ? { until: iso(e.until) } : {}),
      ...(e.mode !== undefined ? { mode: e.mode } : {}),
      ...(e.lockSet ? { lockSet: true as const } : {}),
    })),
  };
}

/** Lease history: each primitive's key in the caller's namespace (scope `locks`), and any key for an operator (`admin`). */
export const historyRoutes: FastifyPluginAsyncZod = async (app) => {
  const named = [{ path: 'locks', id: 'Lock', noun: 'lock', tag: 'locks' }, ...permitPrimitives().map((p) => p.names)];
  for (const { path, id, noun, tag } of named) {
    const primitive = HISTORY_PRIMITIVES[path] ?? 'lock';
    app.get(
      `/v1/${path}/:key/history`,
      routeOptions(
        ownRule,
        {
          summary: `Recent lease events of a ${noun}`,
          description: DESCRIPTION,
          ok: "The key's recent events",
        },
        KeyHistory,
        { operationId: `history${id}`, tags: [tag], params: LockKeyParams, querystring: HistoryQuery },
      ),
      async (request) => answer(app.leaseHistory, principalOf(request).namespace, primitive, request.params.key, request.query),
    );
  }
  app.get(
    '/v1/history/:primitive/:key',
    routeOptions(
      adminRule,
      {
        summary: 'Recent lease events of any key (admin)',
        description: `As GET /v1/{primitive}/{key}/history, for a key of any namespace. ${DESCRIPTION}`,
        ok: "The key's recent events",
      },
      KeyHistory,
      { operationId: 'historyAdmin', tags: ['admin'], params: HistoryPrimitiveParams, querystring: AdminHistoryQuery },
    ),
    async (request) => {
      const { primitive, key } = request.params;
      return answer(app.leaseHistory, request.query.namespace, HISTORY_PRIMITIVES[primitive] ?? 'lock', key, request.query);
    },
  );
};
