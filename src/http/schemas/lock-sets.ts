import { z } from 'zod';
import { MAX_LOCK_SET_KEYS } from '../../domain/lock-sets.js';
import { DurationMs, Holder, LockDelayMs, LockKeyParams, MAX_DURATION_MS, ReleaseRequested, SafeCount } from './locks.js';

/** Request and response schemas of lock sets: several keys of one namespace, held all or none. */

const Keys = z
  .array(LockKeyParams.shape.key)
  .min(1)
  .max(MAX_LOCK_SET_KEYS)
  .meta({ description: `1 to ${MAX_LOCK_SET_KEYS} distinct lock keys, in any order`, examples: [['account:17', 'account:42']] });

const TtlMs = z
  .number()
  .int()
  .positive()
  .max(MAX_DURATION_MS)
  .meta({ description: 'Lease length of every key, ms (bounded as for locks)', examples: [30000] });

const OwnerToken = z
  .string()
  .regex(/^[A-Za-z0-9_-]{16,128}$/, 'must be the ownerToken returned by lock-sets/acquire')
  .meta({ description: "The set's secret owner token, returned by acquire", examples: ['q3HbVfYJm3cS1kQxv7x8XA'] });

const LockTokens = z
  .array(z.object({ key: z.string(), fencingToken: SafeCount }))
  .meta({ description: 'Each key with its own fencing token (per-key sequence, as for locks), in the order asked' });

export const LockSetAcquireRequest = z
  .strictObject({
    keys: Keys,
    ttlMs: TtlMs,
    holder: Holder.optional().meta({
      description: "Optional public label shown on every key of the set (the same rules as a lock's holder)",
    }),
    waitMs: DurationMs.optional().meta({
      description:
        'If some key is busy, keep trying for up to this long: the server waits for the busy key to change (no ' +
        'polling) and asks for the whole set again. Nothing is held meanwhile; no FIFO order among sets. 0 or absent: 409 at once.',
    }),
    lockDelayMs: LockDelayMs.optional(),
  })
  .meta({ id: 'LockSetAcquireRequest' });

export const LockSetGrant = z
  .object({
    ownerToken: OwnerToken,
    locks: LockTokens,
    ttlMs: z.number().int().positive(),
    expiresAt: z.iso.datetime(),
    holder: z.string().nullable(),
  })
  .meta({ id: 'LockSetGrant', description: 'Every key of the set is held until expiresAt, under one owner token.' });

export const LockSetRenewRequest = z.strictObject({ ownerToken: OwnerToken, keys: Keys, ttlMs: TtlMs }).meta({ id: 'LockSetRenewRequest' });

export const LockSetRenewal = z
  .object({
    locks: LockTokens,
    ttlMs: z.number().int().positive(),
    expiresAt: z.iso.datetime(),
    releaseRequested: ReleaseRequested.optional().meta({ description: 'Present when the holder of one of the keys was asked to let go' }),
  })
  .meta({ id: 'LockSetRenewal', description: 'Every key of the set renewed; fencing tokens unchanged.' });

export const LockSetReleaseRequest = z.strictObject({ ownerToken: OwnerToken, keys: Keys }).meta({ id: 'LockSetReleaseRequest' });

export const LockSetRelease = z.object({ released: z.literal(true) }).meta({ id: 'LockSetRelease' });
