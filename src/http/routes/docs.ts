import type { FastifyPluginAsync } from 'fastify';
import fastifySwaggerUi from '@fastify/swagger-ui';

/**
 * Serves the OpenAPI document that the route schemas generate (the same one committed as openapi.yaml)
 * and an interactive page at /docs. The page's scripts and styles ship inside @fastify/swagger-ui and
 * are served from here, so the docs work on a network without internet access.
 */
export const docsRoutes: FastifyPluginAsync = async (app) => {
  app.get('/openapi.json', { schema: { hide: true }, logLevel: 'warn' }, async () => app.swagger());
  app.get('/openapi.yaml', { schema: { hide: true }, logLevel: 'warn' }, async (_request, reply) =>
    reply.type('application/yaml').send(app.swagger({ yaml: true })),
  );
  await app.register(fastifySwaggerUi, {
    routePrefix: '/docs',
    logLevel: 'warn',
    // No online spec validator badge: it would send the document to a third-party host.
    validatorUrl: false,
    uiConfig: { docExpansion: 'list', deepLinking: true, displayOperationId: true, tryItOutEnabled: false },
    staticCSP: true,
  });
};
