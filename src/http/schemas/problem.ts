import { z } from 'zod';
import { PROBLEM_CODES, type ProblemCode } from '../../domain/error-codes.js';

// Listed once, in the table of codes; re-exported for the HTTP layer's schemas and routes.
export { PROBLEM_CODES, type ProblemCode };

/** A problem's optional count of milliseconds (a whole number, 0 or more), with what it says. */
const optionalMs = (description: string) => z.number().int().nonnegative().optional().meta({ description });

/** RFC 9457 problem details, plus keyholder's stable `code`. */
export const Problem = z
  .object({
    type: z.string().meta({ description: 'URI naming the problem type', examples: ['urn:keyholder:problem:lock_held'] }),
    title: z.string().meta({ examples: ['Lock is held'] }),
    status: z
      .number()
      .int()
      .min(400)
      .max(599)
      .meta({ examples: [409] }),
    detail: z.string().meta({ examples: ['lock "invoice:42" is held by another owner'] }),
    code: z.enum(PROBLEM_CODES).meta({ description: 'Stable machine-readable error code' }),
    instance: z.string().optional().meta({ description: 'The request path' }),
    retryAfterMs: optionalMs(
      'lock_held, semaphore_full, limit_mismatch, rwlock_held, too_many_waiters, quota_exceeded, rate_limited, ' +
        'store_unavailable, overloaded and shutting_down: milliseconds after which a retry may succeed (Retry-After is the same, in ' +
        'whole seconds)',
    ),
    errors: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .meta({ description: 'invalid_request: each offending field and what is wrong with it' }),
    store: z.enum(['memory', 'redis', 'etcd']).optional().meta({ description: 'store_unavailable on /readyz: the store kind' }),
    maxWaitMs: optionalMs(
      'invalid_request for a waitMs out of bounds: the longest waitMs this server takes (LOCK_MAX_WAIT_MS), so a client ' +
        'that chose its wait itself can ask again within it',
    ),
  })
  .meta({ id: 'Problem', description: 'An error, as RFC 9457 problem details (application/problem+json).' });

export type ProblemBody = z.infer<typeof Problem>;
