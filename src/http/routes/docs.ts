import type { FastifyPluginAsync } from 'fastify';
import fastifySwaggerUi from '@fastify/swagger-ui';

/**
 * Serves the OpenAPI document that the route schemas generate (the same one committed as openapi.yaml)
 * and an interactive page at /docs. The page's scripts and styles ship inside @fastify/swagger-ui and
 * are served from here, so the docs work on a network without internet access.
 */
export const docsRoutes: FastifyPluginAsync = async (app) => {
  // Public: the document describes the API, not anyone's locks.
  const options = { schema: { hide: true }, logLevel: 'warn', config: { access: 'public' } } as const;
  app.get('/openapi.json', options, async () => app.swagger());
  app.get('/openapi.yaml', options, async (_request, reply) =>
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
