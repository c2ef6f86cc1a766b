import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { LockService } from '../../domain/lock-service.js';
import type { PermitCores } from '../../domain/primitives.js';
import { AdminKeyQuery, AdminQueue } from '../schemas/queue.js';
import { HistoryPrimitiveParams } from '../schemas/history.js';
import { ADMIN_ERRORS } from './admin.js';
import { queuedView, routeOptions, routeRule } from './responses.js';
import { PERMIT_PRIMITIVES } from './primitives.js';

const queueRule = routeRule('admin', ADMIN_ERRORS);

/** How a permit primitive words a queued caller's weight (a read/write lock's mode), by its path. */
const queuedOf = (path: string) => Object.values(PERMIT_PRIMITIVES).find((p) => p.names.path === path)?.queued;

/**
 * Who waits for a key of any namespace (scope `admin`): what inspect?queue=true lists for a team's own
 * key, for the operator, whose key has no namespace of its own. Through the domain services, so every
 * store answers it the same way.
 */
export const adminQueueRoutes: FastifyPluginAsyncZod<{ locks: LockService; permits: PermitCores }> = async (app, { locks, permits }) => {
  app.get(
    '/v1/queue/:primitive/:key',
    routeOptions(
      queueRule,
      {
        summary: 'Who waits for a key (admin)',
        description:
          'The callers queued for a lock, semaphore or read/write lock of any namespace, head first (at most 100): position, ' +
          'holder label, when each joined the queue (store clock) and, for a semaphore or read/write lock, the weight or mode ' +
          'it asks for. Only live waiters: not those whose wait ran out or who left. Never owner tokens.',
        ok: "The key's queue",
      },
      AdminQueue,
      { operationId: 'queueAdmin', tags: ['admin'], params: HistoryPrimitiveParams, querystring: AdminKeyQuery },
    ),
    async (request) => {
      const { primitive, key } = request.params;
      const { namespace } = request.query;
      const queued =
        primitive === 'locks'
          ? (await locks.queue(namespace, key)).map((q) => queuedView(q))
          : (await permits[primitive].queue(namespace, key)).map((q) => queuedView(q, queuedOf(primitive)));
      return { namespace, key, queue: queued };
    },
  );
};
