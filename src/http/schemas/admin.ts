import { z } from 'zod';
import { NAMESPACE_PATTERN } from '../../domain/namespaces.js';
import { AskedToLetGo, FencingToken, queryInteger, ReleaseReason, ReleaseRequested } from './locks.js';

/** Request and response schemas of the administrator's routes (list held locks, force release). */

export const Namespace = z
  .string()
  .regex(NAMESPACE_PATTERN, 'must be 1 to 64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit')
  .meta({ description: "A team's namespace, as given to its API keys", examples: ['team-a'] });

export const ListLocksQuery = z.strictObject({
  namespace: Namespace.optional().meta({
    description: 'Only this namespace. Without it, every namespace is listed (and prefix must be empty).',
  }),
  prefix: z
    .string()
    .max(256)
    .regex(/^[A-Za-z0-9._\-:@]*$/, 'must contain only A-Z a-z 0-9 . _ - : @')
    .default('')
    .meta({ description: 'Only lock keys starting with this (needs namespace)', examples: ['invoice:'] }),
  limit: queryInteger(1, 1000, undefined, 100).meta({
    description:
      'Page size, 1 to 1000 (default 100). The embedded store returns at most this many; the Redis store about ' +
      'this many (its SCAN COUNT), and may show a lock on two pages.',
  }),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1024}$/, 'must be a nextCursor returned by this route')
    .optional()
    .meta({ description: 'nextCursor from the previous page; omit for the first page' }),
});

const ListedLock = z.object({
  namespace: z.string(),
  key: z.string(),
  holder: z.string().nullable(),
  fencingToken: z.number().int().nonnegative(),
  expiresAt: z.iso.datetime(),
  ttlRemainingMs: z.number().int().nonnegative(),
  releaseRequested: AskedToLetGo,
  waiters: z.number().int().nonnegative().meta({ description: 'Callers queued for this lock' }),
});

export const LockList = z
  .object({
    locks: z.array(ListedLock),
    nextCursor: z.string().nullable().meta({ description: 'Pass as cursor for the next page; null when the listing is complete' }),
  })
  .meta({ id: 'LockList', description: 'One page of held locks. Owner tokens are never shown.' });

export const ForceReleaseQuery = z.strictObject({
  namespace: Namespace.meta({ description: 'The namespace of the lock to free (required: an override names its target in full)' }),
  fencingToken: queryInteger(0, Number.MAX_SAFE_INTEGER, [42])
    .optional()
    .meta({
      description:
        'Evict only the lease with this fencing token (the one the operator looked at). When another lease holds the key ' +
        'instead, nothing is changed and the answer is 409 holder_changed.',
    }),
});

export const ForceReleaseResponse = z
  .object({
    namespace: z.string(),
    key: z.string(),
    released: z.literal(true),
    evicted: z.object({
      holder: z.string().nullable(),
      fencingToken: z.number().int().nonnegative().meta({
        description: "The evicted lease's fencing token; every later grant of this lock has a higher one",
      }),
    }),
  })
  .meta({ id: 'ForceRelease', description: 'The lock was freed; the evicted owner token no longer renews or releases it.' });

export const ReleaseRequestQuery = z.strictObject({
  namespace: Namespace.meta({ description: 'The namespace of the key whose holder is asked (required, as for a force release)' }),
});

export const ReleaseRequestBody = z
  .strictObject({
    fencingToken: FencingToken.meta({
      description:
        'The lease whose holder is asked (the one the operator looked at). When another lease holds the key instead, nothing is ' +
        'asked and the answer is 409 holder_changed: a request never reaches a newer holder.',
      examples: [42],
    }),
    reason: ReleaseReason.optional(),
  })
  .meta({ id: 'ReleaseRequestBody' });

export const ReleaseRequestResponse = z
  .object({
    namespace: z.string(),
    key: z.string(),
    fencingToken: z.number().int().nonnegative(),
    releaseRequested: ReleaseRequested,
  })
  .meta({
    id: 'ReleaseRequestAnswer',
    description: "Stored with the lease: its holder's renewals carry it until the lease ends. Nothing was evicted.",
  });
