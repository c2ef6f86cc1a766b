import { z } from 'zod';
import { MAX_HOLDERS_SHOWN } from '../../domain/permit-values.js';
import { MAX_READERS } from '../../domain/rwlocks.js';
import { MAX_SEMAPHORE_LIMIT } from '../../domain/semaphores.js';
import { AskedToLetGo, ExpiresAt, FencingToken, grantFields, Holder, QueueField, SafeCount, TtlMs, WaitMs } from './locks.js';

/**
 * Request and response schemas of semaphores and read/write locks, and the parts every permit primitive's
 * schemas are made of (a later primitive declares its own with them, beside its routes). Renew and release
 * take and answer the lock's shapes (RenewRequest, LockRenewal, ReleaseRequest, LockRelease): an owner
 * token and a TTL mean the same for every primitive.
 */

const Limit = z
  .number()
  .min(1, { abort: true })
  .max(MAX_SEMAPHORE_LIMIT, { abort: true })
  .int()
  .meta({
    description:
      `Most permits held at once, 1 to ${MAX_SEMAPHORE_LIMIT}. Every caller of one semaphore must send the same limit: while ` +
      'permits are held, another limit is refused with 409 limit_mismatch.',
    examples: [5],
  });

/** A permit primitive's acquire body: its own field (a semaphore's limit, a read/write lock's mode), then what every acquire takes. */
export const acquireRequest = <S extends z.ZodRawShape>(id: string, own: S) =>
  z.strictObject({ ...own, ttlMs: TtlMs, holder: Holder.optional(), waitMs: WaitMs.optional() }).meta({ id });

/** A permit primitive's grant: the key, its own field, then a grant's fields with the primitive's fencing token. */
export const permitGrant = <S extends z.ZodRawShape>(id: string, own: S, fencingToken: string, description: string) =>
  z.object({ key: z.string(), ...own, ...grantFields(FencingToken.meta({ description: fencingToken })) }).meta({ id, description });

export const SemaphoreAcquireRequest = acquireRequest('SemaphoreAcquireRequest', { limit: Limit });

export const SemaphoreGrant = permitGrant(
  'SemaphoreGrant',
  { limit: z.number().int().positive() },
  'Per-semaphore number, above every token granted before on this semaphore',
  'A granted permit: a lease of its own, which ends by itself at expiresAt.',
);

export const PermitWatchIndex = SafeCount.meta({
  description:
    'Watch index: a per-key number that rises on every grant, release, expiry, force release and hand-over (not on a ' +
    'renewal). Pass it back as ?index= to wait for the next change. Compare for inequality only: it is 0 once the ' +
    "key's state is forgotten after the fencing grace period.",
  examples: [1796131701226485],
});

/** A key's leases as an answer shows them: at most MAX_HOLDERS_SHOWN, the ones that end first. */
export const shownHolders = <T extends z.ZodType>(holder: T) =>
  z
    .array(holder)
    .max(MAX_HOLDERS_SHOWN)
    .meta({
      description:
        `The live leases (never owner tokens), at most ${MAX_HOLDERS_SHOWN}: when more are live, the ${MAX_HOLDERS_SHOWN} that end ` +
        'first. Listed in grant order (ascending fencing token).',
    });

export const Truncated = z.boolean().meta({
  description: `true when more leases are live than holders shows (at most ${MAX_HOLDERS_SHOWN}); the count says how many`,
});

export const HolderCount = z.number().int().nonnegative().meta({ description: 'Every live lease, shown in holders or not' });

export const PermitHolder = z.object({
  holder: Holder.nullable(),
  fencingToken: FencingToken,
  expiresAt: ExpiresAt,
  ttlRemainingMs: z.number().int().nonnegative(),
  releaseRequested: AskedToLetGo,
});

export const SemaphoreStatus = z
  .object({
    key: z.string(),
    index: PermitWatchIndex,
    limit: z.number().int().positive().nullable().meta({ description: "The live permits' limit; null when no permit is held" }),
    permitsHeld: z.number().int().nonnegative().meta({ description: 'Every live permit, shown in holders or not' }),
    holders: shownHolders(PermitHolder),
    truncated: Truncated,
    waiters: z.number().int().nonnegative().meta({ description: 'Callers queued for a permit' }),
    queue: QueueField,
  })
  .meta({ id: 'SemaphoreStatus', description: "Who holds a semaphore's permits right now. Never owner tokens." });

const Mode = z.enum(['read', 'write']).meta({
  description: `read: shared with other readers (at most ${MAX_READERS}); write: exclusive.`,
  examples: ['read'],
});

export const RwLockAcquireRequest = acquireRequest('RwLockAcquireRequest', { mode: Mode });

export const RwLockGrant = permitGrant(
  'RwLockGrant',
  { mode: Mode },
  "Per-lock number, above every token granted before on this lock (a write's is above every earlier read's and write's)",
  'A granted read or write lease.',
);

export const RwLockStatus = z
  .object({
    key: z.string(),
    index: PermitWatchIndex,
    mode: Mode.nullable().meta({ description: 'read (one or more readers), write (one writer), or null when free' }),
    holders: shownHolders(PermitHolder.extend({ mode: Mode })),
    holderCount: HolderCount,
    truncated: Truncated,
    waiters: z.number().int().nonnegative().meta({ description: 'Callers queued, readers and writers in one FIFO queue' }),
    queue: QueueField,
  })
  .meta({ id: 'RwLockStatus', description: 'Who holds a read/write lock right now. Never owner tokens.' });

export const PermitList = z
  .object({
    entries: z.array(
      z.object({
        namespace: z.string(),
        key: z.string(),
        capacity: z.number().int().positive().meta({ description: "A semaphore's limit (a read/write lock's reader cap)" }),
        holders: shownHolders(PermitHolder.extend({ weight: z.number().int().positive() })),
        holderCount: HolderCount,
        truncated: Truncated,
        waiters: z.number().int().nonnegative(),
      }),
    ),
    nextCursor: z.string().nullable().meta({ description: 'Pass as cursor for the next page; null when the listing is complete' }),
  })
  .meta({ id: 'PermitList', description: 'One page of held semaphores or read/write locks. Owner tokens are never shown.' });

export const PermitForceRelease = z
  .object({
    namespace: z.string(),
    key: z.string(),
    released: z.literal(true),
    evicted: z.array(z.object({ holder: z.string().nullable(), fencingToken: z.number().int().nonnegative() })),
  })
  .meta({ id: 'PermitForceRelease', description: 'Every live lease was ended; their owner tokens no longer renew or release.' });
