import type { z } from 'zod';
import { Problem } from '../schemas/problem.js';

/**
 * Declares error responses in a route schema (for the OpenAPI document) as application/problem+json.
 * The error handler writes these bodies itself, so they all share one shape.
 */
export function problemResponses<S extends number>(statuses: Record<S, string>) {
  type ProblemResponse = { description: string; content: { 'application/problem+json': { schema: typeof Problem } } };
  const out: Partial<Record<S, ProblemResponse>> = {};
  for (const [status, description] of Object.entries<string>(statuses)) {
    out[Number(status) as S] = { description, content: { 'application/problem+json': { schema: Problem } } };
  }
  return out as Record<S, ProblemResponse>;
}

/** Declares a JSON success response with its own description (instead of swagger's "Default Response"). */
export function jsonResponse<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { 'application/json': { schema } } };
}
