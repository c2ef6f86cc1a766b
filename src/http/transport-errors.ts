import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, problemJson, rawProblemResponse, sendProblem } from './problem.js';
import type { ProblemCode } from './schemas/problem.js';

/**
 * Errors raised below the routes, by Node's HTTP parser and by Fastify's router, answered as problems
 * like every other error. Node and Fastify would write plain text or plain JSON here.
 */

/** Node's parser errors by their code; anything else it cannot parse is a 400. */
const PARSER_ERRORS: Readonly<Record<string, { code: ProblemCode; detail: string }>> = {
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'request_timeout', detail: 'the request did not arrive in time' },
  HPE_HEADER_OVERFLOW: { code: 'headers_too_large', detail: 'the request line and headers are over the size limit' },
};

/**
 * 500 ms after the problem answer to a request that failed to parse or timed out, its socket is
 * destroyed. `end()` alone only half-closes it: a client that never reads and keeps writing (a
 * slowloris) held the socket half-open (server FIN-WAIT-2, client CLOSE-WAIT) for as long as it wrote,
 * each one a file descriptor. Half a second lets a client that does read take the answer off the wire.
 */
export const CLOSE_GRACE_MS = 500;

/**
 * Fastify's clientErrorHandler: a request Node could not parse (malformed, headers too large, too slow)
 * gets a problem and the connection closes, at the latest CLOSE_GRACE_MS later. Logged at debug with
 * the error's code and message only: the error also carries the raw bytes received (`rawPacket`),
 * credentials included.
 */
export function clientErrorHandler(this: { log: FastifyBaseLogger }, err: NodeJS.ErrnoException, socket: Socket): void {
  answerClientError(this.log, err, socket, undefined);
}

/**
 * clientErrorHandler, telling `answered` the code of each problem it writes (the metrics count error
 * answers by code: these never reach a request's completion, where the others are counted).
 */
export function countingClientErrorHandler(answered: ((code: ProblemCode) => void) | undefined) {
  return function (this: { log: FastifyBaseLogger }, err: NodeJS.ErrnoException, socket: Socket): void {
    answerClientError(this.log, err, socket, answered);
  };
}

function answerClientError(
  log: FastifyBaseLogger,
  err: NodeJS.ErrnoException,
  socket: Socket,
  answered: ((code: ProblemCode) => void) | undefined,
): void {
  // A reset connection has nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const known = err.code === undefined ? undefined : PARSER_ERRORS[err.code];
  const { code, detail } = known ?? {
    code: 'invalid_request' as const,
    detail: `the request is not valid HTTP/1.1 (${err.code ?? 'unknown'})`,
  };
  log.debug({ err: { code: err.code, message: err.message } }, 'client error');
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(rawProblemResponse(code, detail));
  answered?.(code);
  const destroyLater = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
  destroyLater.unref();
  socket.once('close', () => clearTimeout(destroyLater));
}

/**
 * Fastify's frameworkErrors: a URL the router cannot decode (bad percent-encoding) or a path parameter
 * over the router's length limit is the caller's mistake, a 400 like any other.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    const message =
      error.code === 'FST_ERR_BAD_URL' ? 'is not a valid URL (bad percent-encoding)' : 'has a path segment over the length limit';
    sendProblem(request, reply, 'invalid_request', `url: ${message}`, { errors: [{ field: 'url', message }] });
    return;
  }
  request.log.error({ err: error }, 'router error');
  sendProblem(request, reply, 'internal_error', 'an internal error occurred; it has been logged');
}

/**
 * An `Expect` other than `100-continue`: Node answers 417 with an empty body; answer a problem instead.
 * The body (if any) is not read, so the connection closes after the answer.
 */
export function refuseUnknownExpectations(server: Server, answered?: (code: ProblemCode) => void): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const body = problemJson('expectation_failed', `Expect: ${String(req.headers.expect)} is not supported (only 100-continue)`);
    res.writeHead(417, { 'content-type': PROBLEM_CONTENT_TYPE, 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
    answered?.('expectation_failed');
  });
}
