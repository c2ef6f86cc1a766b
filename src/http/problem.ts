import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ProblemBody, ProblemCode } from './schemas/problem.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The one table from error code to HTTP status and title. Domain errors, Fastify's own errors and the
 * routes all end up here, so a code always means the same status.
 */
export const PROBLEMS: Readonly<Record<ProblemCode, { readonly status: number; readonly title: string }>> = Object.freeze({
  invalid_request: { status: 400, title: 'Invalid request' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  payload_too_large: { status: 413, title: 'Request body too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  lock_held: { status: 409, title: 'Lock is held' },
  too_many_waiters: { status: 429, title: 'Too many waiting callers' },
  not_owner: { status: 409, title: 'Not the lock owner' },
  unauthenticated: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Forbidden' },
  rate_limited: { status: 429, title: 'Too many requests' },
  quota_exceeded: { status: 429, title: 'Lock quota exceeded' },
  store_unavailable: { status: 503, title: 'Lock store unavailable' },
  shutting_down: { status: 503, title: 'Server is shutting down' },
  internal_error: { status: 500, title: 'Internal server error' },
});

export function problemType(code: ProblemCode): string {
  return `urn:keyholder:problem:${code}`;
}

export interface ProblemExtras {
  readonly retryAfterMs?: number;
  readonly errors?: ReadonlyArray<{ field: string; message: string }>;
  readonly store?: 'memory' | 'redis';
}

export function problemBody(code: ProblemCode, detail: string, instance?: string, extras: ProblemExtras = {}): ProblemBody {
  const { status, title } = PROBLEMS[code];
  return {
    type: problemType(code),
    title,
    status,
    detail,
    code,
    ...(instance === undefined ? {} : { instance }),
    ...(extras.retryAfterMs === undefined ? {} : { retryAfterMs: extras.retryAfterMs }),
    ...(extras.errors === undefined ? {} : { errors: [...extras.errors] }),
    ...(extras.store === undefined ? {} : { store: extras.store }),
  };
}

/** The code of the problem each reply answered with, for the metrics' onResponse hook. */
const answeredProblems = new WeakMap<FastifyReply, ProblemCode>();

/** Records that `reply` answers with problem `code` (sendProblem does it; so must any other writer). */
export function noteProblem(reply: FastifyReply, code: ProblemCode): void {
  answeredProblems.set(reply, code);
}

/** The problem code `reply` answered with, if it answered with one. */
export function problemCodeOf(reply: FastifyReply): ProblemCode | undefined {
  return answeredProblems.get(reply);
}

/**
 * Sends a problem response. The body is serialized here (not by the route's response schema), so
 * every error looks the same whichever path produced it. Retry-After is whole seconds, at least 1.
 */
export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  code: ProblemCode,
  detail: string,
  extras: ProblemExtras = {},
): FastifyReply {
  const body = problemBody(code, detail, request.url.split('?')[0], extras);
  noteProblem(reply, code);
  if (extras.retryAfterMs !== undefined) {
    reply.header('retry-after', String(Math.max(1, Math.ceil(extras.retryAfterMs / 1000))));
  }
  return reply.code(body.status).type(PROBLEM_CONTENT_TYPE).send(JSON.stringify(body));
}
