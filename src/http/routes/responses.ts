import type { z } from 'zod';
import type { Access } from '../auth.js';
import { type QueuedCaller, type ReleaseRequest, withReleaseRequest } from '../../domain/lock-values.js';
import { Problem } from '../schemas/problem.js';

type ProblemResponse = { description: string; content: { 'application/problem+json': { schema: typeof Problem } } };

type HeaderSchema = { type: 'string' | 'integer'; minimum?: number; description: string };

/** Response headers the API sends, declared once so every response that carries one says so. */
export const HEADERS = {
  'Retry-After': {
    type: 'integer',
    minimum: 1,
    description: 'Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1)',
  },
  'WWW-Authenticate': { type: 'string', description: 'The scheme to authenticate with: Bearer (RFC 6750)' },
  // The request rate limit is on by default; with RATE_LIMIT_MAX=0 it is off and these are not sent.
  'X-RateLimit-Limit': {
    type: 'integer',
    minimum: 0,
    description: 'Counted requests this API key may make per window (not sent when the rate limit is off)',
  },
  'X-RateLimit-Remaining': { type: 'integer', minimum: 0, description: 'Counted requests left in the current window' },
  'X-RateLimit-Reset': { type: 'integer', minimum: 0, description: 'Seconds until the current window ends' },
} as const satisfies Record<string, HeaderSchema>;

export type HeaderName = keyof typeof HEADERS;

/**
 * Which headers a problem with this status carries (every one of them, every time: a declared header
 * is a promise generated clients read). The OpenAPI transform (openapi.ts) writes them into the
 * document, with the rate limiter's on counted routes; a route whose 409 is only not_owner, which has
 * no retry time, leaves Retry-After out of it (`routeRule`'s `noRetryAfter`).
 */
export const STATUS_HEADERS: Readonly<Record<string, readonly HeaderName[]>> = {
  401: ['WWW-Authenticate'],
  409: ['Retry-After'],
  429: ['Retry-After'],
  503: ['Retry-After'],
};

/**
 * Declares error responses in a route schema (for the OpenAPI document) as application/problem+json.
 * The error handler writes these bodies itself, so they all share one shape. No `default` response:
 * generators read it as "the result or a problem", so only the statuses a route answers are listed;
 * the errors any route can meet before its own code runs (405, 408, 417, 431, 500) are in docs/api.md.
 */
function problemResponses(statuses: Readonly<Record<number, string>>): Record<number, ProblemResponse> {
  const out: Record<number, ProblemResponse> = {};
  for (const [status, description] of Object.entries(statuses)) {
    out[Number(status)] = { description, content: { 'application/problem+json': { schema: Problem } } };
  }
  return out;
}

/** What every route behind an API key can answer, whatever it does (429 only where the rate limit counts). */
function keyErrors(scope: Exclude<Access, 'public'>, rateLimited: boolean): Record<number, string> {
  const errors: Record<number, string> = {
    401: 'unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer)',
    403: `forbidden: the API key lacks the \`${scope}\` scope`,
  };
  errors[429] = rateLimited
    ? 'rate_limited: too many requests for this API key; retry after Retry-After'
    : 'rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). ' +
      'Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After';
  return errors;
}

/**
 * A route's access rule and its documented error responses, declared once, in the route: `config`
 * goes in the route options (the auth hook, the rate limiter and the OpenAPI document read it), and
 * `errors` in its response schema. A route behind a key documents 401, 403 and 429 rate_limited
 * without saying so; `errors` adds the route's own (a 429 given here replaces the rate_limited one, so
 * it must mention it). `rateLimited: false` takes the route out of the request rate limit (see
 * rate-limit.ts) except for its not_owner answers, which count (chargeFailedOwnership), and says so in
 * its 429. `noRetryAfter`: the route's 409 has no retry time (not_owner; a force release's
 * holder_changed), so the document does not promise a Retry-After on it.
 */
export function routeRule(
  access: Access,
  errors: Readonly<Record<number, string>> = {},
  options: { rateLimited?: boolean; noRetryAfter?: true } = {},
) {
  const rateLimited = options.rateLimited ?? true;
  return {
    config: {
      access,
      ...(rateLimited ? {} : { rateLimit: false as const }),
      ...(options.noRetryAfter ? { noRetryAfter: true as const } : {}),
    },
    errors: problemResponses(access === 'public' ? errors : { ...keyErrors(access, rateLimited), ...errors }),
  };
}

/** Declares a JSON success response with its own description (instead of swagger's "Default Response"). */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}

/** A route's documentation: its summary and description, and the description of its 200 answer. */
export interface RouteText {
  readonly summary: string;
  readonly description: string;
  readonly ok: string;
}

/**
 * A route's options from its parts: the rule's config, and a schema with the route's texts, its 200
 * answer and the rule's errors added to `schema` (its operation id, tags and what it takes).
 */
export function routeOptions<const S extends object>(rule: ReturnType<typeof routeRule>, text: RouteText, ok: z.ZodType, schema: S) {
  return {
    config: rule.config,
    schema: {
      ...schema,
      summary: text.summary,
      description: text.description,
      response: { 200: jsonResponse(ok, text.ok), ...rule.errors },
    },
  };
}

/** The first instant of year 10000: from there on toISOString writes a six-digit, signed year. */
const YEAR_10000_MS = 253_402_300_800_000;
/** The second whose text was made last (ms since the epoch, a multiple of 1000), and that text up to its ms. */
let lastSecondMs = Number.NaN;
let lastSecondText = '';

/**
 * A store time (ms since the epoch) as answers write it: ISO 8601 in UTC, exactly what
 * `new Date(ms).toISOString()` writes. Every grant and renewal answer writes one: the date and time
 * up to the second are made once per second, and only the milliseconds per answer.
 */
export const iso = (ms: number): string => {
  if (!Number.isInteger(ms) || ms < 0 || ms >= YEAR_10000_MS) return new Date(ms).toISOString();
  const millis = ms % 1000;
  const secondMs = ms - millis;
  if (secondMs !== lastSecondMs) {
    // "YYYY-MM-DDTHH:MM:SS." (20 characters) for every year from 0 to 9999.
    lastSecondText = new Date(secondMs).toISOString().slice(0, 20);
    lastSecondMs = secondMs;
  }
  return `${lastSecondText}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
};

/** A stored release request as answers show it (renewals, inspect and watch answers, the request's own answer). */
export const releaseRequestedView = (r: ReleaseRequest) => ({ at: iso(r.atMs), by: r.by, reason: r.reason });

/** A lease as anyone may see it (never its owner token), with its release request when one was made. */
export const leaseView = (h: {
  holder: string | null;
  fencingToken: number;
  expiresAtMs: number;
  ttlRemainingMs: number;
  releaseRequested?: ReleaseRequest;
}) =>
  withReleaseRequest(
    { holder: h.holder, fencingToken: h.fencingToken, expiresAt: iso(h.expiresAtMs), ttlRemainingMs: h.ttlRemainingMs },
    h.releaseRequested && releaseRequestedView(h.releaseRequested),
  );

/** The texts of the errors most routes document, so one code reads the same everywhere. */
export const BAD_REQUEST = 'invalid_request: a field is missing or malformed (the problem names it)';
export const STORE_UNAVAILABLE =
  'store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any ' +
  'store work. Either way nothing was granted; retry after Retry-After.';
/** The 429 of an inspect that may be a blocking query: every open wait counts against the waiter caps. */
export const WATCH_REFUSED =
  'too_many_waiters (a blocking query only): this key, this namespace on this instance, or this instance has as many open waits ' +
  '(queued acquires, waiting lock sets, blocking queries) as it may; or rate_limited: too many requests for this API key. Retry after Retry-After.';
/** What every operation with a body can answer besides its own refusals. */
export const BODY_ERRORS = {
  400: BAD_REQUEST,
  413: 'payload_too_large: the body is over the limit',
  415: 'unsupported_media_type: the body is not application/json',
  503: STORE_UNAVAILABLE,
} as const;

/** A queued caller as inspect?queue=true shows it; `extra` adds a primitive's own words (a read/write lock's mode). */
export function queuedView(q: QueuedCaller, extra: (weight: number) => object = () => ({})) {
  return {
    position: q.position,
    holder: q.holder,
    waitingSince: iso(q.waitingSinceMs),
    ...(q.weight === undefined ? {} : { weight: q.weight, ...extra(q.weight) }),
  };
}
