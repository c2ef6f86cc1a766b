import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { requestLineLogger } from './logger.js';

/** The levels at which a logger writes info lines. */
const INFO_WRITTEN = new Set(['info', 'debug', 'trace']);

/**
 * One structured line per request (method, route, status, duration, lock key) instead of Fastify's
 * "incoming" + "completed" pair. Bodies and headers are never logged, so owner tokens and credentials
 * cannot leak through the request log.
 */
export class RequestLog extends LogController {
  /**
   * Where the lines of answered requests go (requestLineLogger: no redaction, written in batches). Such
   * a line holds only the fields below, none of them a secret. Lines with an error go through the
   * request's own logger, which redacts. Absent: every line goes through the request's logger.
   */
  private readonly lines: FastifyBaseLogger | undefined;

  constructor(logger?: FastifyBaseLogger) {
    super();
    this.lines = logger === undefined ? undefined : requestLineLogger(logger);
  }

  override incomingRequest(): void {
    // Nothing: the single line is written when the request completes.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Only where the request's logger writes info lines too (a route may set a quieter logLevel).
    const direct = !error && this.lines !== undefined && INFO_WRITTEN.has(reply.log.level) && INFO_WRITTEN.has(this.lines.level);
    const params = request.params as { key?: unknown } | undefined;
    const line = {
      // The request's own logger binds the id itself (Fastify's requestIdLogLabel); pino leaves out
      // an undefined field.
      reqId: direct ? request.id : undefined,
      method: request.method,
      route: request.routeOptions.url ?? null,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100,
      key: typeof params?.key === 'string' ? params.key : undefined,
      // Set by the auth hook on routes that need a caller; absent on public routes.
      keyId: request.principal?.keyId,
    };
    if (direct) this.lines?.info(line, 'request');
    else if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request');
  }
}
