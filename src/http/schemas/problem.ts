import { z } from 'zod';

/** Every stable error code the API can answer with. Clients switch on these, never on `title`. */
export const PROBLEM_CODES = [
  'invalid_request',
  'not_found',
  'method_not_allowed',
  'request_timeout',
  'payload_too_large',
  'headers_too_large',
  'expectation_failed',
  'unsupported_media_type',
  'lock_held',
  'too_many_waiters',
  'not_owner',
  'unauthenticated',
  'forbidden',
  'rate_limited',
  'quota_exceeded',
  'store_unavailable',
  'overloaded',
  'shutting_down',
  'internal_error',
  'semaphore_full',
  'limit_mismatch',
  'rwlock_held',
  'not_supported',
  'idempotency_key_reused',
  'holder_changed',
] as const;

export type ProblemCode = (typeof PROBLEM_CODES)[number];

/** RFC 9457 problem details, plus keyholder's stable `code`. */
export const Problem = z
  .object({
    type: z.string().meta({ description: 'URI naming the problem type', examples: ['urn:keyholder:problem:lock_held'] }),
    title: z.string().meta({ examples: ['Lock is held'] }),
    status: z.number().int().min(400).max(599).meta({ examples: [409] }),
    detail: z.string().meta({ examples: ['lock "invoice:42" is held by another owner'] }),
    code: z.enum(PROBLEM_CODES).meta({ description: 'Stable machine-readable error code' }),
    instance: z.string().optional().meta({ description: 'The request path' }),
    retryAfterMs: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .meta({
        description:
          'lock_held, semaphore_full, limit_mismatch, rwlock_held, too_many_waiters, quota_exceeded, rate_limited, ' +
          'store_unavailable, overloaded and shutting_down: milliseconds after which a retry may succeed (Retry-After is the same, in ' +
          'whole seconds)',
      }),
    errors: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .meta({ description: 'invalid_request: each offending field and what is wrong with it' }),
    store: z.enum(['memory', 'redis', 'etcd']).optional().meta({ description: 'store_unavailable on /readyz: the store kind' }),
  })
  .meta({ id: 'Problem', description: 'An error, as RFC 9457 problem details (application/problem+json).' });

export type ProblemBody = z.infer<typeof Problem>;
