import type { z } from 'zod';
import { Problem } from '../schemas/problem.js';

type HeaderSchema = { type: 'string' | 'integer'; minimum?: number; description: string };

/** Response headers the API sends, declared once so every response that carries one says so. */
export const HEADERS = {
  'Retry-After': {
    type: 'integer',
    minimum: 1,
    description: 'Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1)',
  },
  'WWW-Authenticate': { type: 'string', description: 'The scheme to authenticate with: Bearer (RFC 6750)' },
  Allow: { type: 'string', description: 'The methods this path takes' },
  'X-RateLimit-Limit': { type: 'integer', minimum: 0, description: 'Counted requests this API key may make per window' },
  'X-RateLimit-Remaining': { type: 'integer', minimum: 0, description: 'Counted requests left in the current window' },
  'X-RateLimit-Reset': { type: 'integer', minimum: 0, description: 'Seconds until the current window ends' },
} as const satisfies Record<string, HeaderSchema>;

export type HeaderName = keyof typeof HEADERS;

/**
 * Which headers a response with this status may carry (`default`: the catch-all problem). The OpenAPI
 * transform (openapi.ts) writes them into the document, with the rate limiter's on counted routes.
 */
export const STATUS_HEADERS: Readonly<Record<string, readonly HeaderName[]>> = {
  401: ['WWW-Authenticate'],
  405: ['Allow'],
  409: ['Retry-After'],
  429: ['Retry-After'],
  503: ['Retry-After'],
  default: ['Retry-After', 'Allow', 'WWW-Authenticate'],
};

type ProblemResponse = {
  description: string;
  content: { 'application/problem+json': { schema: typeof Problem } };
};

/**
 * Declares error responses in a route schema (for the OpenAPI document) as application/problem+json,
 * with the headers each status carries, plus a catch-all `default` for the errors any route can meet
 * before its own code runs (405, 408, 431, 500, ...). The error handler writes these bodies itself, so
 * they all share one shape.
 */
export function problemResponses<S extends number>(statuses: Record<S, string>) {
  const out: Partial<Record<S | 'default', ProblemResponse>> = {};
  for (const [status, description] of Object.entries<string>(statuses)) {
    out[Number(status) as S] = { description, content: { 'application/problem+json': { schema: Problem } } };
  }
  out.default = {
    description:
      'Any other error, as a problem: 405 method_not_allowed (with Allow), 408 request_timeout, 417 expectation_failed, ' +
      '431 headers_too_large, 500 internal_error, 503 shutting_down, among others. Switch on `code`.',
    content: { 'application/problem+json': { schema: Problem } },
  };
  return out as Record<S | 'default', ProblemResponse>;
}

/** Declares a JSON success response with its own description (instead of swagger's "Default Response"). */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}
