import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';

/** The levels at which a logger writes info lines. */
const INFO_WRITTEN = new Set(['info', 'debug', 'trace']);

/**
 * One structured line per request (method, route, status, duration, lock key) instead of Fastify's
 * "incoming" + "completed" pair. Bodies and headers are never logged, so owner tokens and credentials
 * cannot leak through the request log.
 */
export class RequestLog extends LogController {
  /**
   * Where the lines of answered requests go: a child of the app's logger without redaction. Such a
   * line holds only the fields below (none of them a secret), and redaction was the largest part of
   * its cost; it runs on every request. Lines with an error go through the request's own logger, which
   * redacts. Absent: every line goes through the request's logger.
   */
  private readonly lines: FastifyBaseLogger | undefined;

  constructor(logger?: FastifyBaseLogger) {
    super();
    this.lines = logger?.child({}, { redact: { paths: [] } });
  }

  override incomingRequest(): void {
    // Nothing: the single line is written when the request completes.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const params = request.params as { key?: unknown } | undefined;
    const line = {
      // As the request's own logger would bind it (Fastify's requestIdLogLabel).
      reqId: request.id,
      method: request.method,
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      key: typeof params?.key === 'string' ? params.key : undefined,
      // Set by the auth hook on routes that need a caller; absent on public routes.
      keyId: request.principal?.keyId,
    };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    // Only where the request's logger writes info lines too (a route may set a quieter logLevel).
    else if (this.lines !== undefined && INFO_WRITTEN.has(reply.log.level) && INFO_WRITTEN.has(this.lines.level)) this.lines.info(line, 'request');
    else reply.log.info(line, 'request');
  }
}
