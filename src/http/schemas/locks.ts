import { z } from 'zod';
import { MAX_RELEASE_REASON } from '../../domain/lease-service.js';

/**
 * The request and response schemas of the lock API: the single source for validation, response
 * serialization, TypeScript types and the OpenAPI document. Named schemas (`.meta({ id })`) become
 * `$ref`s under components/schemas.
 */

export const LOCK_KEY_PATTERN = /^[A-Za-z0-9._\-:@]{1,256}$/;

export const LockKeyParams = z.object({
  key: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[A-Za-z0-9._\-:@]+$/, 'must contain only A-Z a-z 0-9 . _ - : @')
    .meta({
      description: 'Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @',
      examples: ['user_email_send_lock:42'],
    }),
});

/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days); every duration field is bounded by it. */
export const MAX_DURATION_MS = 2_147_483_647;

/*
 * The whole numbers below: range checks before the whole-number check, each ending the checks when it
 * fails ({ abort: true }): a value out of range then gets one message naming the range, not a second one
 * about 2^53 (zod's int check carries its own safe-integer bounds). The JSON Schema (openapi.yaml) is the
 * same either way.
 */

/** A duration in milliseconds that may be 0 (a wait, a delay). */
export const DurationMs = z.number().nonnegative({ abort: true }).max(MAX_DURATION_MS, { abort: true }).int();

export const TtlMs = z
  .number()
  .positive({ abort: true })
  .max(MAX_DURATION_MS, { abort: true })
  .int()
  .meta({
    description: 'Lease length in milliseconds. The server bounds it (by default 100 to 3,600,000); a value outside the bounds is a 400.',
    examples: [30000],
  });

/** What an owner token looks like (the one rule OwnerToken checks). */
export const OWNER_TOKEN_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

export const OwnerToken = z
  .string()
  .regex(OWNER_TOKEN_PATTERN, 'must be the ownerToken returned by acquire')
  .meta({
    description: 'The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.',
    examples: ['q3HbVfYJm3cS1kQxv7x8XA'],
  });

/** A whole number JSON carries exactly (tokens and indexes are microsecond-scale, far below 2^53). */
export const SafeCount = z.number().nonnegative({ abort: true }).max(Number.MAX_SAFE_INTEGER, { abort: true }).int();

export const FencingToken = SafeCount.meta({
  description:
    'Per-key number, strictly greater than every token issued before for this key. Pass it to the protected ' +
    'resource, which must reject any write carrying a lower token than it has seen.',
  examples: [1764496077123456],
});

export const ExpiresAt = z.iso.datetime().meta({
  description: 'When the lease ends (UTC), measured on the store clock.',
  examples: ['2026-11-30T10:00:30.000Z'],
});

/**
 * Control characters (C0, DEL, C1) and the bidirectional formatting marks (ALM, LRM/RLM, the
 * embeddings and overrides, the isolates) are refused: a label is shown to other teams in the console,
 * logs and terminals, where these can reorder or hide what is displayed (a reversed worker name).
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what this rejects
const PRINTABLE = /^[^\x00-\x1F\x7F-\x9F\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]+$/;

export const Holder = z
  .string()
  .min(1)
  .max(128)
  .regex(PRINTABLE, 'must be printable characters only (no control or bidirectional formatting characters)')
  .meta({
    description:
      'Optional free-form label shown to others (for operators), e.g. a worker name. Not a secret. 1 to 128 characters; control ' +
      'characters (U+0000-U+001F, U+007F-U+009F) and bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E, ' +
      'U+2066-U+2069) are refused with 400 invalid_request (errors[].field `holder`).',
    examples: ['consumer-7'],
  });

export const LockDelayMs = DurationMs.meta({
  description:
    'Lock-delay: if this lease EXPIRES (its holder neither renewed nor released it), the lock stays unavailable for ' +
    'this many milliseconds after the lease end, for resources that cannot check fencing tokens. A release ends it at ' +
    'once. Default 0; the server bounds it (by default 60,000); above is a 400.',
  examples: [5000],
});

export const WaitMs = DurationMs.meta({
  description:
    'If the lock is held, wait up to this many milliseconds in a fair (FIFO) queue and be granted the moment it is ' +
    'released or expires. 0 or absent: answer 409 at once. The server bounds it (by default 60,000); above is a 400.',
  examples: [10000],
});

export const AcquireRequest = z
  .strictObject({
    ttlMs: TtlMs,
    holder: Holder.optional(),
    waitMs: WaitMs.optional(),
    lockDelayMs: LockDelayMs.optional(),
  })
  .meta({ id: 'AcquireRequest' });

export const AcquireHeaders = z.object({
  'idempotency-key': z
    .string()
    .regex(/^[\x21-\x7E]{1,255}$/, 'must be 1 to 255 visible ASCII characters')
    .optional()
    .meta({
      description:
        'Makes a retried acquire safe (the IETF httpapi Idempotency-Key header). While the lease an acquire granted ' +
        'is live, an acquire with the same Idempotency-Key and body from the same API key answers 200 with that same grant ' +
        '(same ownerToken, fencingToken, ttlMs, expiresAt and holder) instead of 409, so a caller whose first answer was lost ' +
        'cannot lock itself out; the same key with another ttlMs, holder or lockDelayMs is 422 idempotency_key_reused ' +
        '(waitMs may differ). Kept only as long as that lease; a lease handed over after waiting in the queue does not keep it. ' +
        'Send a fresh random value (e.g. a UUID) for each logical acquire.',
      examples: ['4f6b8a52-0d5e-4a9b-9a51-6f1c0c1e2d3a'],
    }),
});

/**
 * What every grant carries after the primitive's own fields (the key, a semaphore's limit, a read/write
 * lock's mode); `fencingToken` is the shared schema with the primitive's own description.
 */
export function grantFields(fencingToken: typeof FencingToken = FencingToken) {
  return { ownerToken: OwnerToken, fencingToken, ttlMs: z.number().int().positive(), expiresAt: ExpiresAt, holder: Holder.nullable() };
}

export const AcquireResponse = z.object({ key: z.string(), ...grantFields() }).meta({ id: 'LockGrant', description: 'A granted lease.' });

export const RenewRequest = z
  .strictObject({
    ownerToken: OwnerToken,
    ttlMs: TtlMs,
  })
  .meta({ id: 'RenewRequest' });

/** A reason an operator gives the holder: printable, as a label is (it lands in the holder's logs). */
export const ReleaseReason = z
  .string()
  .min(1)
  .max(MAX_RELEASE_REASON)
  .regex(PRINTABLE, 'must be printable characters only (no control or bidirectional formatting characters)')
  .meta({ description: `Why the holder is asked to let go, 1 to ${MAX_RELEASE_REASON} printable characters`, examples: ['deploy'] });

export const ReleaseRequested = z
  .object({
    at: z.iso.datetime().meta({ description: 'When it was asked (UTC, store clock)' }),
    by: z.string().meta({ description: 'The API key id that asked' }),
    reason: ReleaseReason.nullable(),
  })
  .meta({
    id: 'ReleaseRequested',
    description:
      "Someone asked this lease's holder to let go (POST .../release-request). Not an eviction: the lease stays until its " +
      'holder releases it or stops renewing. The request ends with the lease.',
  });

/**
 * A lease's release request as inspect, watch and listing answers show it. A request does not move the
 * watch index (it is no change of holder), so a blocking query shows it in its next answer.
 */
export const AskedToLetGo = ReleaseRequested.optional().meta({
  description:
    "Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the " +
    'watch index: a blocking query shows it in its next answer.',
});

export const RenewResponse = z
  .object({
    key: z.string(),
    fencingToken: FencingToken,
    ttlMs: z.number().int().positive(),
    expiresAt: ExpiresAt,
    releaseRequested: ReleaseRequested.optional().meta({ description: 'Present when the holder was asked to let go' }),
  })
  .meta({ id: 'LockRenewal', description: 'A renewed lease. The fencing token is the one issued at acquire.' });

export const ReleaseRequest = z.strictObject({ ownerToken: OwnerToken }).meta({ id: 'ReleaseRequest' });

export const ReleaseResponse = z.object({ key: z.string(), released: z.literal(true) }).meta({ id: 'LockRelease' });

export const WatchIndex = z
  .number()
  .positive({ abort: true })
  .max(Number.MAX_SAFE_INTEGER, { abort: true })
  .int()
  .meta({
    description:
      'Watch index: a per-key number that changes on every grant, release, expiry, force release and hand-over ' +
      '(2 x fencingToken while held, 2 x last fencingToken + 1 while free). Pass it back as ?index= to wait for the ' +
      "next change. Compare for inequality only: it drops to 1 when a free key's state is forgotten after the " +
      'fencing grace period.',
    examples: [3528064724432477],
  });

/** A caller queued for the key, as inspect?queue=true lists it (like the Web Locks API's query()). */
export const QueuedCaller = z
  .object({
    position: z.number().int().positive().meta({ description: '1 for the head of the queue' }),
    holder: Holder.nullable(),
    waitingSince: ExpiresAt.meta({ description: 'When the caller joined the queue (UTC, store clock)' }),
    weight: z
      .number()
      .int()
      .positive()
      .optional()
      .meta({ description: 'Semaphores and read/write locks: how much of the capacity it asks for' }),
    mode: z.enum(['read', 'write']).optional().meta({ description: 'Read/write locks: the mode it waits for' }),
  })
  .meta({ id: 'QueuedCaller' });

/** With ?queue=true: the first callers queued, head first (at most 100). */
export const QueueField = z
  .array(QueuedCaller)
  .max(100)
  .optional()
  .meta({ description: 'With ?queue=true: the first callers queued, head first (at most 100), never owner tokens' });

const FreeLock = z
  .object({
    key: z.string(),
    held: z.literal(false),
    index: WatchIndex,
    lockDelayUntil: ExpiresAt.optional().meta({
      description: 'Present while the lock-delay of an expired lease runs: the lock cannot be taken before this (UTC).',
    }),
  })
  .meta({ id: 'FreeLock', description: 'Nobody holds the lock.' });

const HeldLock = z
  .object({
    key: z.string(),
    held: z.literal(true),
    index: WatchIndex,
    holder: Holder.nullable(),
    fencingToken: FencingToken,
    expiresAt: ExpiresAt,
    ttlRemainingMs: z.number().int().nonnegative(),
    releaseRequested: AskedToLetGo,
    waiters: z.number().int().nonnegative().meta({ description: 'Callers queued for this lock' }),
    queue: QueueField,
  })
  .meta({ id: 'HeldLock', description: 'The lock is held: by which holder label, with which fencing token, until when.' });

/** Split on `held`, so a held lock always has its fencing token and expiry (generated types say so too). */
export const LockStatus = z.discriminatedUnion('held', [FreeLock, HeldLock]).meta({
  id: 'LockStatus',
  description: 'Who holds a lock right now. Never the owner token.',
});

/** Digits only: what a query string's whole number may be (Number() would read '' and ' ' as 0, '0x10' as 16). */
const DIGITS = /^\d+$/;

/**
 * A whole number from a query string, `min` to `max`: its digits read as a number, anything else left as
 * the string, which the number schema then refuses (400 naming the field). The JSON Schema is the
 * number's; `examples` and a default go on the number (on the outer schema a preprocess drops them).
 */
export function queryInteger(min: number, max: number, examples?: number[], byDefault?: number) {
  const number = z.number().min(min, { abort: true }).max(max, { abort: true }).int();
  const whole = examples ? number.meta({ examples }) : number;
  // (A default on the number: with none given, the query's value is optional only through .optional().)
  return z.preprocess(
    (v) => (typeof v === 'string' && DIGITS.test(v) ? Number(v) : v),
    byDefault === undefined ? whole : whole.default(byDefault),
  );
}

/**
 * The query of the routes that change leases (acquire, renew, release, lock sets): none. A parameter is a
 * 400, not ignored: an ignored `?namespace=` (which the admin routes take) would take or free the lock of
 * the caller's own namespace while the caller believed it named another.
 */
export const NoQuery = z.strictObject(
  {},
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? "not a parameter of this route (a caller's namespace is its API key's)" : undefined,
  },
);

/** Not strict: inspect took no query before, so a parameter it does not know (a cache-buster) is still ignored. */
export const InspectQuery = z.object({
  index: queryInteger(0, Number.MAX_SAFE_INTEGER, [3528064724432477])
    .optional()
    .meta({
      description:
        "Blocking query: the index from a previous answer. If the lock's index differs, the answer comes at once; " +
        'otherwise when it changes, or after waitMs with the unchanged state.',
    }),
  waitMs: queryInteger(0, MAX_DURATION_MS, [30000])
    .optional()
    .meta({
      description:
        'With index: wait up to this long for a change (default 0: answer at once). The server bounds it like an ' +
        "acquire's waitMs (by default 60,000); above is a 400.",
    }),
  queue: z
    .stringbool()
    .optional()
    .meta({
      description:
        'true: the answer also lists the callers queued (position, holder label, waiting since, weight or mode), one ' +
        'more store read. Not with a blocking query (index and waitMs): a 400.',
    }),
});
