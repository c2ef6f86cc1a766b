import { z } from 'zod';
import { Namespace } from './admin.js';
import { PERMIT_KINDS, type PermitKind } from '../../domain/permit-values.js';
import { LockKeyParams, queryInteger, SafeCount } from './locks.js';

/** The schemas of lease history (GET .../{key}/history): see domain/history.ts for what is recorded and derived. */

const Instant = z.iso.datetime();

export const HistoryQuery = z.strictObject({
  since: Instant.optional().meta({
    description: 'Only events from this time on (UTC), and every event of a lease live at this time. Default: the retention.',
    examples: ['2026-12-01T14:00:00Z'],
  }),
  until: Instant.optional().meta({
    description: 'Only events up to this time (UTC), and every event of a lease live at this time. Default: now.',
    examples: ['2026-12-01T14:05:00Z'],
  }),
  limit: queryInteger(1, 1000, undefined, 200).meta({
    description: 'At most this many events: the most recent ones (truncated says whether older ones were left out)',
  }),
});

export const AdminHistoryQuery = HistoryQuery.extend({
  namespace: Namespace.meta({ description: 'The namespace of the key' }),
});

/**
 * The path segment of every primitive's routes, `locks` first, then one per kind of PERMIT_KINDS: its
 * kind's plural (`semaphores`, `rwlocks`), so a new kind's routes need no entry here.
 */
export const PRIMITIVE_PATHS = ['locks', ...PERMIT_KINDS.map((kind): `${PermitKind}s` => `${kind}s`)] as const;

export const HistoryPrimitiveParams = LockKeyParams.extend({
  primitive: z.enum(PRIMITIVE_PATHS).meta({ description: "The key's primitive, as in its routes' paths" }),
});

export const HistoryEvent = z
  .object({
    type: z.enum(['granted', 'handed_over', 'renewed', 'release_requested', 'released', 'expired', 'force_released', 'lock_delay']).meta({
      description:
        'granted; handed_over (granted to a caller that waited while another lease of the key ended); renewed; ' +
        'release_requested (an operator asked the holder to let go; the lease goes on); released; ' +
        'expired (derived: its end passed with no release); force_released; lock_delay (derived: after an expiry, the pause ' +
        'the lease asked for before the key is granted again)',
    }),
    at: Instant.meta({ description: 'When (UTC): the store clock for grants, renewals and expiries, the instance clock otherwise' }),
    fencingToken: SafeCount.nullable().meta({ description: 'The lease (null: a release whose grant is no longer kept)' }),
    holder: z.string().nullable().meta({ description: "The lease's holder label" }),
    expiresAt: Instant.optional().meta({ description: 'granted, handed_over, renewed: when the lease was to end' }),
    waitedMs: SafeCount.optional().meta({ description: 'granted, handed_over: how long the caller waited (callers that asked to wait)' }),
    heldMs: SafeCount.optional().meta({ description: 'released, expired, force_released: how long the lease was held' }),
    by: z.string().optional().meta({ description: 'force_released, release_requested: the id of the API key that did it' }),
    reason: z.string().nullable().optional().meta({ description: 'release_requested: why (null: no reason given)' }),
    until: Instant.optional().meta({ description: 'lock_delay: when the key could be granted again' }),
    mode: z.enum(['read', 'write']).optional().meta({ description: 'Read/write locks: the mode of the lease' }),
    lockSet: z.literal(true).optional().meta({ description: 'granted, handed_over: taken as part of a lock set' }),
  })
  .meta({ id: 'HistoryEvent', description: 'One event of a lease (never its owner token)' });

export const KeyHistory = z
  .object({
    key: z.string(),
    recording: z.boolean().meta({
      description: 'false: lease history is off on this instance (HISTORY=off), so nothing is recorded and events is empty',
    }),
    events: z.array(HistoryEvent).meta({ description: 'Oldest first' }),
    truncated: z.boolean().meta({ description: 'Older events of the range were left out (limit)' }),
  })
  .meta({ id: 'KeyHistory', description: "A key's recent lease events" });
