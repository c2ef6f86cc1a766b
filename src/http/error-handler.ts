import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { AccessLostError, isDomainError } from '../domain/errors.js';
import { INVALID_TOKEN_CHALLENGE } from './auth.js';
import { drainUnreadBody } from './body-limit.js';
import { chargeFailedOwnership } from './rate-limit.js';
import { sendDomainError, sendProblem } from './problem.js';
import { LOCK_KEY_PATTERN } from './schemas/locks.js';
import type { ProblemCode } from './schemas/problem.js';

type Field = { field: string; message: string };

/** The methods a route may be declared with; findRoute tells which of them a path takes. */
const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Fastify's own 4xx errors whose status has a code of its own; every other 4xx is invalid_request. */
const CLIENT_ERROR_CODES: Readonly<Partial<Record<number, ProblemCode>>> = {
  404: 'not_found',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

/** Turns a zod validation failure into one entry per offending field, e.g. `ttlMs` or `key`. */
function validationFields(error: FastifyError & { validation: unknown[] }, context: string | undefined): Field[] {
  const where = context === 'params' ? '' : (context ?? 'body');
  return (error.validation as Array<{ instancePath?: string; message?: string; params?: { keys?: string[] } }>).map((v) => {
    const path = (v.instancePath ?? '').split('/').filter(Boolean).join('.');
    const unknownKeys = v.params?.keys;
    const field = unknownKeys?.length ? unknownKeys.join(', ') : path || where || 'body';
    return { field, message: v.message ?? 'is invalid' };
  });
}

/**
 * The one error handler: domain errors, validation failures and Fastify's own errors all become
 * problem+json with a stable code. 5xx details are logged, never sent: no stack traces to clients.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const errors = validationFields(error, error.validationContext);
      const detail = errors.map((e) => `${e.field}: ${e.message}`).join('; ');
      return sendProblem(request, reply, 'invalid_request', detail, { errors });
    }
    // Domain errors (and the rate limiter's): their code's row in the error table says the rest.
    if (isDomainError(error)) {
      // A wait whose key a reload revoked: answered as the key would be now (see auth.ts).
      if (error instanceof AccessLostError && error.code === 'unauthenticated') reply.header('www-authenticate', INVALID_TOKEN_CHALLENGE);
      const limited = error.code === 'not_owner' ? await chargeFailedOwnership(request) : undefined;
      return sendDomainError(request, reply, limited ?? error);
    }
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        await drainUnreadBody(request, reply);
        return sendProblem(request, reply, 'payload_too_large', error.message);
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        await drainUnreadBody(request, reply);
        return sendProblem(request, reply, 'unsupported_media_type', 'the request body must be application/json');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return sendProblem(request, reply, 'invalid_request', 'the body is empty but the content type is application/json', {
          errors: [{ field: 'body', message: 'must be a JSON object' }],
        });
      default:
        break;
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Malformed JSON, prototype-pollution keys, bad content-length: the client's fault, said plainly.
      const detail = error instanceof SyntaxError ? `the body is not valid JSON: ${error.message}` : error.message;
      return sendProblem(request, reply, CLIENT_ERROR_CODES[status] ?? 'invalid_request', detail);
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(request, reply, 'internal_error', 'an internal error occurred; it has been logged');
  });

  app.setNotFoundHandler((request, reply) => {
    // A path under /v1/locks/ that matched no route usually means a key the router cannot take (a `/`
    // in it, say): say what is wrong with the key rather than a bare 404.
    const path = request.url.split('?')[0] ?? '';
    const candidate = lockKeyOfUnroutedPath(request.method, path);
    if (candidate !== undefined && !LOCK_KEY_PATTERN.test(candidate)) {
      const message = 'must be 1 to 256 characters from A-Z a-z 0-9 . _ - : @';
      return sendProblem(request, reply, 'invalid_request', `key: ${message}`, { errors: [{ field: 'key', message }] });
    }
    // A known path asked with a method it does not take: 405, and Allow lists the ones it does.
    const allowed = ALL_METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return sendProblem(
        request,
        reply,
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`,
      );
    }
    return sendProblem(request, reply, 'not_found', `no route for ${request.method} ${path}`);
  });
}

/**
 * The lock key a request meant, for a path under /v1/locks/ that matched no route (`GET /v1/locks/a/b`,
 * `POST /v1/locks/a/b/acquire`): everything between the prefix and the action. Undefined when the path
 * is not a lock operation at all (an unknown action, a wrong method), which stays a 404.
 */
function lockKeyOfUnroutedPath(method: string, path: string): string | undefined {
  const match = /^\/v1\/locks\/(.+?)(?:\/(acquire|renew|release))?$/.exec(path);
  if (!match?.[1]) return undefined;
  const isOperation = (method === 'POST' && match[2] !== undefined) || (method === 'GET' && match[2] === undefined);
  if (!isOperation) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}
