import { Problem } from '../schemas/problem.js';

/**
 * Declares error responses in a route schema (for the OpenAPI document) as application/problem+json.
 * The error handler writes these bodies itself, so they all share one shape.
 */
export function problemResponses<S extends number>(statuses: Record<S, string>) {
  const out = {} as Record<S, { description: string; content: { 'application/problem+json': { schema: typeof Problem } } }>;
  for (const [status, description] of Object.entries(statuses) as Array<[string, string]>) {
    out[Number(status) as S] = { description, content: { 'application/problem+json': { schema: Problem } } };
  }
  return out;
}
