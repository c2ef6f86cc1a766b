import type { FastifyPluginAsync } from 'fastify';
import type { Metrics } from '../../observability/metrics.js';

/** GET /metrics in the Prometheus text format. Kept out of the API document: it is for scrapers. */
export const metricsRoutes: FastifyPluginAsync<{ metrics: Metrics }> = async (app, { metrics }) => {
  app.get('/metrics', { schema: { hide: true }, logLevel: 'warn' }, async (_request, reply) => {
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
};
