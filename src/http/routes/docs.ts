import type { FastifyPluginAsync } from 'fastify';

/** Serves the OpenAPI document that the route schemas generate (the same one committed as openapi.yaml). */
export const docsRoutes: FastifyPluginAsync = async (app) => {
  app.get('/openapi.json', { schema: { hide: true }, logLevel: 'warn' }, async () => app.swagger());
  app.get('/openapi.yaml', { schema: { hide: true }, logLevel: 'warn' }, async (_request, reply) =>
    reply.type('application/yaml').send(app.swagger({ yaml: true })),
  );
};
