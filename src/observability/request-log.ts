import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * One structured line per request (method, route, status, duration, lock key) instead of Fastify's
 * "incoming" + "completed" pair. Bodies and headers are never logged, so owner tokens and credentials
 * cannot leak through the request log.
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {
    // Nothing: the single line is written when the request completes.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const params = request.params as { key?: unknown } | undefined;
    const line = {
      method: request.method,
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      key: typeof params?.key === 'string' ? params.key : undefined,
      // Set by the auth hook on routes that need a caller; absent on public routes.
      keyId: request.principal?.keyId,
    };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request');
  }
}
