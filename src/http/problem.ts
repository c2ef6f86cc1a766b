import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ERROR_CODES, sentCodeOf, type ErrorCode, type ProblemCode } from '../domain/error-codes.js';
import type { DomainError, FieldError } from '../domain/errors.js';
import type { ProblemBody } from './schemas/problem.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** How the answer of a code is written, beyond its row in the table of codes; most codes need nothing here. */
interface AnswerRule {
  /** Sent instead of a domain error's own message (5xx details are logged, not sent). */
  readonly detail?: string;
  /** Logged with the error's message when this code is answered. */
  readonly log?: { readonly level: 'info' | 'warn'; readonly msg: string };
  /** Answer with `Connection: close`: the client should reconnect (to another instance). */
  readonly closeConnection?: boolean;
}

/**
 * The codes whose answer is written differently. Status and title come from the table of codes
 * (domain/error-codes.ts), so a code always means the same status whichever path produced it.
 */
const ANSWER_RULES: Readonly<Partial<Record<ErrorCode, AnswerRule>>> = Object.freeze({
  store_unavailable: {
    detail: 'the lock store is unavailable; nothing was granted or changed for certain',
    log: { level: 'warn', msg: 'store unavailable' },
  },
  // overloaded's message is sent: it names the budget, and holds nothing internal.
  shutting_down: { closeConnection: true },
  wait_aborted: { detail: 'the caller disconnected while waiting', log: { level: 'info', msg: 'caller left while waiting' } },
});

function problemType(code: ProblemCode): string {
  return `urn:keyholder:problem:${code}`;
}

export interface ProblemExtras {
  readonly retryAfterMs?: number;
  readonly errors?: readonly FieldError[];
  readonly store?: 'memory' | 'redis' | 'etcd';
  readonly maxWaitMs?: number;
}

function problemBody(code: ProblemCode, detail: string, instance?: string, extras: ProblemExtras = {}): ProblemBody {
  const { status, title } = ERROR_CODES[code];
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
    ...(extras.maxWaitMs === undefined ? {} : { maxWaitMs: extras.maxWaitMs }),
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
    `HTTP/1.1 ${ERROR_CODES[code].status} ${STATUS_CODES[ERROR_CODES[code].status] ?? ''}\r\n` +
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
  const rule = ANSWER_RULES[code];
  const sentCode = sentCodeOf(code);
  const body = problemBody(sentCode, detail, request.url.split('?')[0], extras);
  noteProblem(reply, sentCode);
  if (extras.retryAfterMs !== undefined) {
    reply.header('retry-after', String(Math.max(1, Math.ceil(extras.retryAfterMs / 1000))));
  }
  if (rule?.closeConnection) reply.header('connection', 'close');
  if (body.status === 503) {
    // A 503 carries no rate-limit headers: some are refused before the limiter counts (load shedding,
    // shutdown), and openapi.yaml promises a header on every answer of a status or on none.
    reply.removeHeader('x-ratelimit-limit');
    reply.removeHeader('x-ratelimit-remaining');
    reply.removeHeader('x-ratelimit-reset');
  }
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

/** A domain error as a problem: its code's row in the table of codes, its message, retryAfterMs, fields and maxWaitMs. */
export function writeDomainError(request: FastifyRequest, reply: FastifyReply, error: DomainError): string {
  const { log, detail } = ANSWER_RULES[error.code] ?? {};
  if (log) request.log[log.level]({ err: error.message }, log.msg);
  return writeProblem(request, reply, error.code, detail ?? error.message, {
    retryAfterMs: error.retryAfterMs,
    errors: error.fields,
    maxWaitMs: error.maxWaitMs,
  });
}

export function sendDomainError(request: FastifyRequest, reply: FastifyReply, error: DomainError): FastifyReply {
  return reply.send(writeDomainError(request, reply, error));
}
