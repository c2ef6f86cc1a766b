import type { z } from 'zod';
import type { Access } from '../auth.js';
import { Problem } from '../schemas/problem.js';

type ProblemResponse = { description: string; content: { 'application/problem+json': { schema: typeof Problem } } };

/**
 * Declares error responses in a route schema (for the OpenAPI document) as application/problem+json.
 * The error handler writes these bodies itself, so they all share one shape.
 */
function problemResponses(statuses: Readonly<Record<number, string>>): Record<number, ProblemResponse> {
  const out: Record<number, ProblemResponse> = {};
  for (const [status, description] of Object.entries(statuses)) {
    out[Number(status)] = { description, content: { 'application/problem+json': { schema: Problem } } };
  }
  return out;
}

/** What every route behind an API key can answer, whatever it does. */
function keyErrors(scope: Exclude<Access, 'public'>): Record<number, string> {
  return {
    401: 'unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer)',
    403: `forbidden: the API key lacks the \`${scope}\` scope`,
    429: 'rate_limited: too many requests for this API key; retry after Retry-After',
  };
}

/**
 * A route's access rule and its documented error responses, declared once, in the route: `config`
 * goes in the route options (the auth hook, the rate limiter and the OpenAPI security read it), and
 * `errors` in its response schema. A route behind a key documents 401, 403 and 429 rate_limited
 * without saying so; `errors` adds the route's own (a 429 given here replaces the rate_limited one, so
 * it must mention it).
 */
export function routeRule(access: Access, errors: Readonly<Record<number, string>> = {}) {
  return {
    config: { access },
    errors: problemResponses(access === 'public' ? errors : { ...keyErrors(access), ...errors }),
  };
}

/** Declares a JSON success response with its own description (instead of swagger's "Default Response"). */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}
