import type { FastifyPluginAsync } from 'fastify';

/** What the route needs of the metrics module: the exposition text and its content type. */
export interface MetricsSource {
  render(): Promise<{ contentType: string; body: string }>;
}

/** GET /metrics in the Prometheus text format. Kept out of the API document: it is for scrapers. */
export const metricsRoutes: FastifyPluginAsync<{ metrics: MetricsSource }> = async (app, { metrics }) => {
  app.get('/metrics', { schema: { hide: true }, logLevel: 'warn' }, async (_request, reply) => {
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
};
