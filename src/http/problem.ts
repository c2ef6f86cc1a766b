import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DomainError, DomainErrorCode, FieldError } from '../domain/errors.js';
import type { ProblemBody, ProblemCode } from './schemas/problem.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Every code an error can carry: the API's problem codes, and the domain's (one is never sent). */
export type ErrorCode = ProblemCode | DomainErrorCode;

/**
 * How a lock operation that ended in an error is counted in keyholder_lock_operations_total. The
 * labels predate this table and dashboards use them, so they are not the codes themselves.
 */
export type FailureOutcome =
  | 'held'
  | 'not_owner'
  | 'invalid'
  | 'too_many_waiters'
  | 'aborted'
  | 'quota_exceeded'
  | 'limit_mismatch'
  | 'error';

export interface ErrorContract {
  readonly status: number;
  readonly title: string;
  /** The metrics outcome of a lock operation that failed with this code. */
  readonly outcome: FailureOutcome;
  /** Sent instead of a domain error's own message (5xx details are logged, not sent). */
  readonly detail?: string;
  /** Logged with the error's message when this code is answered. */
  readonly log?: { readonly level: 'info' | 'warn'; readonly msg: string };
  /** Answer with `Connection: close`: the client should reconnect (to another instance). */
  readonly closeConnection?: boolean;
}

/**
 * The one table of error codes: HTTP status and title, metrics outcome, and how the answer is written.
 * Domain errors, Fastify's own errors and the routes all end up here, so a code always means the same
 * status, and a new error is a class in domain/errors.ts plus a row here.
 */
export const ERRORS: Readonly<Record<ErrorCode, ErrorContract>> = Object.freeze({
  invalid_request: { status: 400, title: 'Invalid request', outcome: 'invalid' },
  not_found: { status: 404, title: 'Not found', outcome: 'error' },
  method_not_allowed: { status: 405, title: 'Method not allowed', outcome: 'error' },
  request_timeout: { status: 408, title: 'Request timeout', outcome: 'error' },
  payload_too_large: { status: 413, title: 'Request body too large', outcome: 'error' },
  headers_too_large: { status: 431, title: 'Request header fields too large', outcome: 'error' },
  expectation_failed: { status: 417, title: 'Expectation failed', outcome: 'error' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type', outcome: 'error' },
  lock_held: { status: 409, title: 'Lock is held', outcome: 'held' },
  too_many_waiters: { status: 429, title: 'Too many waiting callers', outcome: 'too_many_waiters' },
  not_owner: { status: 409, title: 'Not the lock owner', outcome: 'not_owner' },
  unauthenticated: { status: 401, title: 'Authentication required', outcome: 'error' },
  forbidden: { status: 403, title: 'Forbidden', outcome: 'error' },
  rate_limited: { status: 429, title: 'Too many requests', outcome: 'error' },
  quota_exceeded: { status: 429, title: 'Lock quota exceeded', outcome: 'quota_exceeded' },
  store_unavailable: {
    status: 503,
    title: 'Lock store unavailable',
    outcome: 'error',
    detail: 'the lock store is unavailable; nothing was granted or changed for certain',
    log: { level: 'warn', msg: 'store unavailable' },
  },
  // Not store_unavailable: this instance refused before any store work, and the store may be fine.
  // Its message is sent: it names the budget, and holds nothing internal.
  overloaded: { status: 503, title: 'Server overloaded', outcome: 'error' },
  shutting_down: { status: 503, title: 'Server is shutting down', outcome: 'aborted', closeConnection: true },
  internal_error: { status: 500, title: 'Internal server error', outcome: 'error' },
  semaphore_full: { status: 409, title: 'No free permit', outcome: 'held' },
  // 409, not 400: the same request succeeds once the live permits (granted under another limit) end.
  limit_mismatch: { status: 409, title: 'Semaphore limit differs', outcome: 'limit_mismatch' },
  rwlock_held: { status: 409, title: 'Read/write lock is held', outcome: 'held' },
  // 501: a feature the configured store does not have (on etcd: semaphores, read/write locks, lock
  // sets, lock-delay). Not the caller's mistake, and no retry helps.
  not_supported: { status: 501, title: 'Not supported by this store', outcome: 'error' },
  // 422, as the IETF httpapi Idempotency-Key draft answers a key reused with another payload: the
  // request is well-formed but cannot be processed as the key promised.
  idempotency_key_reused: { status: 422, title: 'Idempotency-Key reused', outcome: 'invalid' },
  // 409: a conditional force release found another lease than the one it named; nothing changed.
  holder_changed: { status: 409, title: 'The holder changed', outcome: 'error' },
  // The caller disconnected while waiting: nobody reads this answer. 409, as for a wait that ran out.
  wait_aborted: {
    status: 409,
    title: 'Lock is held',
    outcome: 'aborted',
    detail: 'the caller disconnected while waiting',
    log: { level: 'info', msg: 'caller left while waiting' },
  },
});

/** The code a departed waiter's (unread) answer is written with: it must be one the API documents. */
const SENT_AS: Partial<Record<ErrorCode, ProblemCode>> = { wait_aborted: 'lock_held' };

function problemType(code: ProblemCode): string {
  return `urn:keyholder:problem:${code}`;
}

export interface ProblemExtras {
  readonly retryAfterMs?: number;
  readonly errors?: readonly FieldError[];
  readonly store?: 'memory' | 'redis' | 'etcd';
}

function problemBody(code: ProblemCode, detail: string, instance?: string, extras: ProblemExtras = {}): ProblemBody {
  const { status, title } = ERRORS[code];
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

/** A problem body as JSON, for answers written outside Fastify's reply. */
export function problemJson(code: ProblemCode, detail: string): string {
  return JSON.stringify(problemBody(code, detail));
}

/**
 * A whole HTTP/1.1 problem response as bytes, for the few answers written on the socket before any
 * request object exists (Node's parser errors). The connection closes after it.
 */
export function rawProblemResponse(code: ProblemCode, detail: string): string {
  const body = problemJson(code, detail);
  return (
    `HTTP/1.1 ${ERRORS[code].status} ${STATUS_CODES[ERRORS[code].status] ?? ''}\r\n` +
    `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
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
 * The one function that writes a problem response: sets the status and headers on `reply` and returns
 * the serialized body (from onSend, where the body is returned; sendProblem sends it). The body is
 * serialized here, not by the route's response schema, so every error looks the same whichever path
 * produced it. Retry-After is whole seconds, at least 1.
 */
export function writeProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  extras: ProblemExtras = {},
): string {
  const contract = ERRORS[code];
  const sentCode = SENT_AS[code] ?? (code as ProblemCode);
  const body = problemBody(sentCode, detail, request.url.split('?')[0], extras);
  noteProblem(reply, sentCode);
  if (extras.retryAfterMs !== undefined) {
    reply.header('retry-after', String(Math.max(1, Math.ceil(extras.retryAfterMs / 1000))));
  }
  if (contract.closeConnection) reply.header('connection', 'close');
  reply.code(body.status).type(PROBLEM_CONTENT_TYPE);
  return JSON.stringify(body);
}

export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  code: ErrorCode,
  detail: string,
  extras: ProblemExtras = {},
): FastifyReply {
  return reply.send(writeProblem(request, reply, code, detail, extras));
}

/** A domain error as a problem: its code's row in the table, its message, retryAfterMs and fields. */
export function writeDomainError(request: FastifyRequest, reply: FastifyReply, error: DomainError): string {
  const { log, detail } = ERRORS[error.code];
  if (log) request.log[log.level]({ err: error.message }, log.msg);
  return writeProblem(request, reply, error.code, detail ?? error.message, { retryAfterMs: error.retryAfterMs, errors: error.fields });
}

export function sendDomainError(request: FastifyRequest, reply: FastifyReply, error: DomainError): FastifyReply {
  return reply.send(writeDomainError(request, reply, error));
}
