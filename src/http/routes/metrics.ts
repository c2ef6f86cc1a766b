import type { FastifyPluginAsync } from 'fastify';

/** What the route needs of the metrics module: the exposition text and its content type. */
export interface MetricsSource {
  render(): Promise<{ contentType: string; body: string }>;
}

/** GET /metrics in the Prometheus text format. Kept out of the API document: it is for scrapers. */
export const metricsRoutes: FastifyPluginAsync<{ metrics: MetricsSource }> = async (app, { metrics }) => {
  // Public: scraped by Prometheus without credentials; it carries counts, never keys or tokens. Keep
  // the port on a private network (see the threat table in docs/security.md).
  app.get('/metrics', { schema: { hide: true }, logLevel: 'warn', config: { access: 'public' } }, async (_request, reply) => {
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
};
