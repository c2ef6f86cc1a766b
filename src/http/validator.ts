import type { FastifySchemaCompiler } from 'fastify';
import { validatorCompiler as zodValidatorCompiler } from 'fastify-type-provider-zod';
import type { $ZodType } from 'zod/v4/core';
import {
  AcquireHeaders,
  AcquireRequest,
  LOCK_KEY_PATTERN,
  LockKeyParams,
  MAX_DURATION_MS,
  NoQuery,
  OWNER_TOKEN_PATTERN,
  ReleaseRequest,
} from './schemas/locks.js';

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
  const quick = QUICK_ACCEPT.get(route.schema);
  if (route.httpPart !== 'headers') return quick === undefined ? validate : (data) => (quick(data) ? UNCHANGED : validate(data));
  return (data) => {
    if (quick?.(data) === true) return UNCHANGED;
    const result = validate(data) as { value?: unknown };
    return 'value' in result && sameFields(result.value, data) ? UNCHANGED : result;
  };
};

/**
 * Quick acceptance of the request parts every lock pair sends (the key in the path, acquire's
 * `{ ttlMs }` without an Idempotency-Key, release's `{ ownerToken }`), without zod's parse and the
 * copy it makes: a part accepted here stays as it came, where zod would hand on an equal copy. A check
 * here only ever accepts, and only a part zod accepts with the same value (test/unit/validator.test.ts
 * holds each to zod on generated parts); anything else (every invalid part, and valid ones of other
 * shapes: a holder, an Idempotency-Key) goes to zod, so every 400 is zod's own.
 */
export const QUICK_ACCEPT = new Map<unknown, (data: unknown) => boolean>([
  [LockKeyParams, (data) => onlyField(data, 'key') && typeof data.key === 'string' && LOCK_KEY_PATTERN.test(data.key)],
  // Other headers are not checked (the schema has none but this one, and strips the rest).
  [AcquireHeaders, (data) => isRecord(data) && data['idempotency-key'] === undefined],
  [AcquireRequest, (data) => onlyField(data, 'ttlMs') && isTtl(data.ttlMs)],
  // A URL without a query (Fastify's parse of none is an empty object).
  [NoQuery, (data) => isRecord(data) && noField(data)],
  [
    ReleaseRequest,
    (data) => onlyField(data, 'ownerToken') && typeof data.ownerToken === 'string' && OWNER_TOKEN_PATTERN.test(data.ownerToken),
  ],
]);

function isRecord(data: unknown): data is Record<string, unknown> {
  return typeof data === 'object' && data !== null && !Array.isArray(data);
}

/** `data` is an object with a field `name` of its own and no other enumerable field (own or inherited). */
function onlyField<N extends string>(data: unknown, name: N): data is Record<N, unknown> {
  if (!isRecord(data) || !Object.hasOwn(data, name)) return false;
  for (const field in data) if (field !== name) return false;
  return true;
}

/** `data` has no enumerable field (own or inherited). */
function noField(data: Record<string, unknown>): boolean {
  for (const _ in data) return false;
  return true;
}

/** TtlMs's checks: a whole number from 1 to MAX_DURATION_MS. */
function isTtl(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_DURATION_MS;
}

/** Every field of `checked` is the very value `sent` has under that name. */
function sameFields(checked: unknown, sent: unknown): boolean {
  if (typeof checked !== 'object' || checked === null || typeof sent !== 'object' || sent === null) return false;
  for (const name in checked) {
    if ((checked as Record<string, unknown>)[name] !== (sent as Record<string, unknown>)[name]) return false;
  }
  return true;
}
