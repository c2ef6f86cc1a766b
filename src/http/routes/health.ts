import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Store } from '../../domain/lease-store.js';
import { sendProblem } from '../problem.js';
import { jsonResponse, routeRule } from './responses.js';

const Live = z.object({ status: z.literal('ok') }).meta({ id: 'Liveness' });
const Ready = z
  .object({ status: z.literal('ready'), store: z.enum(['memory', 'redis', 'etcd']) })
  .meta({ id: 'Readiness', description: 'The service can grant locks; store says which store it uses.' });

// Load balancers and orchestrators call the probes without credentials; they reveal only up/ready.
const liveRule = routeRule('public');
const readyRule = routeRule('public', {
  503: 'store_unavailable: the store does not answer; warming_up: the instance has just started and is still warming up',
});

export interface HealthOptions {
  readonly store: Pick<Store, 'kind' | 'ping'>;
  /** False until the start's warm-up has run (see warm-up.ts): not ready meanwhile. Always warm when absent. */
  readonly warmedUp?: () => boolean;
}

/** 500 ms: a warm-up takes 2 s at most (WARM_UP_MAX_MS); a probe half a second later may find it done. */
const WARMING_RETRY_AFTER_MS = 500;

export const healthRoutes: FastifyPluginAsyncZod<HealthOptions> = async (app, { store, warmedUp }) => {
  app.get(
    '/livez',
    {
      config: liveRule.config,
      schema: {
        operationId: 'liveness',
        summary: 'Is the process alive?',
        description: 'Always 200 while the process runs, even when the store is down: restarting would not help.',
        tags: ['health'],
        response: { 200: jsonResponse(Live, 'The process is alive'), ...liveRule.errors },
      },
      logLevel: 'warn',
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      config: readyRule.config,
      schema: {
        operationId: 'readiness',
        summary: 'Can the service grant locks now?',
        description:
          '200 when the store answers and the start-up warm-up has run; 503 store_unavailable when the store does not answer, ' +
          '503 warming_up while a new instance warms up (load balancers should route elsewhere).',
        tags: ['health'],
        response: {
          200: jsonResponse(Ready, 'Ready: the store answers'),
          ...readyRule.errors,
        },
      },
      logLevel: 'warn',
    },
    async (request, reply) => {
      if (warmedUp !== undefined && !warmedUp()) {
        return sendProblem(request, reply, 'warming_up', 'the instance has just started and is warming up', {
          retryAfterMs: WARMING_RETRY_AFTER_MS,
        });
      }
      try {
        await store.ping();
      } catch {
        return sendProblem(request, reply, 'store_unavailable', `the ${store.kind} store does not answer`, {
          retryAfterMs: 1000,
          store: store.kind,
        });
      }
      return { status: 'ready' as const, store: store.kind };
    },
  );
};
