import type { FastifySchemaCompiler } from 'fastify';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import type { $ZodType } from 'zod/v4/core';

/** A valid answer that leaves the request part as it came (Fastify replaces it only when `value` is given). */
const UNCHANGED = Object.freeze({});

/**
 * fastify-type-provider-zod's validation (same checks, same 400s), except that valid headers whose
 * checked values are the ones sent are left in place. Given a value, Fastify keeps it beside the raw
 * headers, and every later read of request.headers then copies all of them into a new object; on the
 * lock acquire (the one route with a headers schema) that was a copy per read and a property added to
 * every request. A header schema that changes a value (a transform, a default) still hands it on.
 */
export const validatorCompiler: FastifySchemaCompiler<$ZodType> = (route) => {
  const validate = zodValidatorCompiler(route);
  if (route.httpPart !== 'headers') return validate;
  return (data) => {
    const result = validate(data) as { value?: unknown };
    return 'value' in result && sameFields(result.value, data) ? UNCHANGED : result;
  };
};

/** Every field of `checked` is the very value `sent` has under that name. */
function sameFields(checked: unknown, sent: unknown): boolean {
  if (typeof checked !== 'object' || checked === null || typeof sent !== 'object' || sent === null) return false;
  for (const name in checked) {
    if ((checked as Record<string, unknown>)[name] !== (sent as Record<string, unknown>)[name]) return false;
  }
  return true;
}
