import { z } from 'zod';
import type { components } from './openapi-types.js';

/*
 * What the client accepts as an answer. A 200 from something that is not keyholder (a proxy's page, a
 * login form after a redirect, a test double) must not become a lease: a grant with an undefined owner
 * token or a NaN TTL would be a lock the caller believes it holds and that never times out. Each schema is
 * typed against the types generated from openapi.yaml, so a change to the API that the client's checks do
 * not follow fails to compile. Unknown extra fields are let through: a newer server may add some.
 */

type Schemas = components['schemas'];

const count = z.int().nonnegative();
const ttlMs = z.int().positive();
const instant = z.iso.datetime();
const holder = z.string().nullable();

export const lockGrant: z.ZodType<Schemas['LockGrant']> = z.object({
  key: z.string(),
  ownerToken: z.string().min(1),
  fencingToken: count,
  ttlMs,
  expiresAt: instant,
  holder,
});

export const releaseRequested: z.ZodType<Schemas['ReleaseRequested']> = z.object({
  at: instant,
  by: z.string(),
  reason: z.string().nullable(),
});

export const lockRenewal: z.ZodType<Schemas['LockRenewal']> = z.object({
  key: z.string(),
  fencingToken: count,
  ttlMs,
  expiresAt: instant,
  releaseRequested: releaseRequested.optional(),
});

export const releaseRequestAnswer: z.ZodType<Schemas['ReleaseRequestAnswer']> = z.object({
  namespace: z.string(),
  key: z.string(),
  fencingToken: count,
  releaseRequested,
});

export const lockRelease: z.ZodType<Schemas['LockRelease']> = z.object({ key: z.string(), released: z.literal(true) });

/** A caller in a key's queue, as `?queue=true` lists it (never its owner token). */
export const queuedCaller: z.ZodType<Schemas['QueuedCaller']> = z.object({
  position: z.int().positive(),
  holder,
  waitingSince: instant,
  weight: z.int().positive().optional(),
  mode: z.enum(['read', 'write']).optional(),
});

/** A held lock's lease, as inspect and the admin listing show it. */
const heldLease = {
  key: z.string(),
  holder,
  fencingToken: count,
  expiresAt: instant,
  ttlRemainingMs: count,
  releaseRequested: releaseRequested.optional(),
  waiters: count,
};

export const lockStatus: z.ZodType<Schemas['LockStatus']> = z.discriminatedUnion('held', [
  z.object({ key: z.string(), held: z.literal(false), index: count, lockDelayUntil: instant.optional() }),
  z.object({ ...heldLease, held: z.literal(true), index: count, queue: z.array(queuedCaller).max(100).optional() }),
]);

export const lockList: z.ZodType<Schemas['LockList']> = z.object({
  locks: z.array(z.object({ namespace: z.string(), ...heldLease })),
  nextCursor: z.string().nullable(),
});

export const forceRelease: z.ZodType<Schemas['ForceRelease']> = z.object({
  namespace: z.string(),
  key: z.string(),
  released: z.literal(true),
  evicted: z.object({ holder, fencingToken: count }),
});

export const permitForceRelease: z.ZodType<Schemas['PermitForceRelease']> = z.object({
  namespace: z.string(),
  key: z.string(),
  released: z.literal(true),
  evicted: z.array(z.object({ holder, fencingToken: count })),
});

export const keyHistory: z.ZodType<Schemas['KeyHistory']> = z.object({
  key: z.string(),
  recording: z.boolean(),
  truncated: z.boolean(),
  events: z.array(
    z.object({
      type: z.enum(['granted', 'handed_over', 'renewed', 'release_requested', 'released', 'expired', 'force_released', 'lock_delay']),
      at: instant,
      fencingToken: count.nullable(),
      holder,
      expiresAt: instant.optional(),
      waitedMs: count.optional(),
      heldMs: count.optional(),
      by: z.string().optional(),
      reason: z.string().nullable().optional(),
      until: instant.optional(),
      mode: z.enum(['read', 'write']).optional(),
      lockSet: z.literal(true).optional(),
    }),
  ),
});
