import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { openApiYaml } from '../openapi.js';
import { jsonResponse } from './responses.js';

/**
 * Serves the OpenAPI document that the route schemas generate (the same one committed as openapi.yaml)
 * and an interactive page at /docs. The page's scripts and styles ship inside @fastify/swagger-ui and
 * are served from here, so the docs work on a network without internet access.
 */
export const docsRoutes: FastifyPluginAsyncZod = async (app) => {
  // Public: the document describes the API, not anyone's locks.
  const config = { access: 'public' } as const;
  app.get(
    '/openapi.json',
    {
      config,
      schema: {
        operationId: 'openApiJson',
        summary: 'This OpenAPI document, as JSON',
        tags: ['docs'],
        response: { 200: jsonResponse(z.looseObject({ openapi: z.string() }), 'The OpenAPI 3.1 document') },
      },
      logLevel: 'warn',
    },
    async () => app.swagger() as unknown as { openapi: string },
  );
  app.get(
    '/openapi.yaml',
    {
      config,
      schema: {
        operationId: 'openApiYaml',
        summary: 'This OpenAPI document, as YAML',
        tags: ['docs'],
        response: { 200: { description: 'The OpenAPI 3.1 document', content: { 'application/yaml': { schema: z.string() } } } },
      },
      logLevel: 'warn',
    },
    async (_request, reply) => reply.type('application/yaml').send(openApiYaml(app.swagger())),
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
