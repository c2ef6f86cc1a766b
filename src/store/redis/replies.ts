import { type ReleaseRequest, type ReleaseRequestInput, withReleaseRequest } from '../../domain/permit-values.js';
import type { CancelReply, LeaseReply } from '../shared/lease-replies.js';

export type { CancelReply, LeaseReply };

/**
 * Run-time checks of script replies. A reply of the wrong shape (a different script under the same
 * name, a proxy mangling data) must never be read as a grant, so anything unexpected throws.
 */
export class UnexpectedReplyError extends Error {
  override readonly name = 'UnexpectedReplyError';
  constructor(script: string, reply: unknown) {
    super(`unexpected reply from ${script}: ${JSON.stringify(reply)}`);
  }
}

/**
 * A reply that is not the answer to this call: the connection's replies are out of step with its
 * calls, so nothing more read from it can be trusted until it is replaced.
 */
export class MisalignedReplyError extends Error {
  override readonly name = 'MisalignedReplyError';
  constructor(script: string) {
    super(`reply to ${script} echoes another call's nonce: replies on this connection are out of step`);
  }
}

/** Checks a wrapped script reply {nonce, reply} (see withEcho) is the answer to this call, and unwraps it. */
export function unwrapEcho(script: string, reply: unknown, nonce: string): unknown {
  if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] !== 'string') {
    throw new MisalignedReplyError(script);
  }
  if (reply[0] !== nonce) throw new MisalignedReplyError(script);
  return reply[1];
}

function int(script: string, reply: unknown, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new UnexpectedReplyError(script, reply);
  return value;
}

export type AcquireReply =
  | { kind: 'granted'; fencingToken: number; expiresAtMs: number }
  | { kind: 'replayed'; fencingToken: number; expiresAtMs: number; ownerToken: string; holder: string | null }
  | { kind: 'held' | 'queue_full' | 'queued' | 'quota_full'; retryAfterMs: number }
  | { kind: 'idempotency_key_reused' };

const ACQUIRE_KINDS = { 0: 'held', 2: 'queue_full', 3: 'queued', 5: 'quota_full' } as const;

export function parseAcquire(reply: unknown): AcquireReply {
  if (Array.isArray(reply)) {
    if (reply.length === 3 && reply[0] === 1) {
      return { kind: 'granted', fencingToken: int('acquire', reply, reply[1]), expiresAtMs: int('acquire', reply, reply[2]) };
    }
    if (reply.length === 5 && reply[0] === 4 && typeof reply[3] === 'string' && typeof reply[4] === 'string') {
      return {
        kind: 'replayed',
        fencingToken: int('acquire', reply, reply[1]),
        expiresAtMs: int('acquire', reply, reply[2]),
        ownerToken: reply[3],
        holder: reply[4] === '' ? null : reply[4],
      };
    }
    if (reply.length === 2 && (reply[0] === 0 || reply[0] === 2 || reply[0] === 3 || reply[0] === 5)) {
      return { kind: ACQUIRE_KINDS[reply[0] as 0 | 2 | 3 | 5], retryAfterMs: Math.max(1, int('acquire', reply, reply[1])) };
    }
    if (reply.length === 1 && reply[0] === 6) return { kind: 'idempotency_key_reused' };
  }
  throw new UnexpectedReplyError('acquire', reply);
}

/** The request-release scripts' payload (what they store after "atMs|"): the asker and the reason. */
export function releaseRequestPayload(request: ReleaseRequestInput): string {
  return JSON.stringify([request.by, request.reason]);
}

const DIGITS = /^[0-9]{1,16}$/;

/** A stored release request, "atMs|payload" (request-release.lua); undefined when it is not one. */
function parseReleaseRequest(stored: unknown): ReleaseRequest | undefined {
  if (typeof stored !== 'string') return undefined;
  const bar = stored.indexOf('|');
  // Digits only, as request-release.lua writes the time: Number() would also read '' as 0 and take hex,
  // exponents, signs and spaces.
  const time = stored.slice(0, bar);
  if (bar < 0 || !DIGITS.test(time)) return undefined;
  const atMs = Number(time);
  if (!Number.isSafeInteger(atMs)) return undefined;
  try {
    const [by, reason] = JSON.parse(stored.slice(bar + 1)) as unknown[];
    if (typeof by === 'string' && (reason === null || typeof reason === 'string')) return { atMs, by, reason };
  } catch {
    // Not a request these scripts wrote: read as none below.
  }
  return undefined;
}

/** request-release: {1, atMs} stored, or {0}; the request as stored, or null. */
export function parseRequestRelease(script: string, reply: unknown, request: ReleaseRequestInput): ReleaseRequest | null {
  if (Array.isArray(reply)) {
    if (reply.length === 2 && reply[0] === 1) return { atMs: int(script, reply, reply[1]), by: request.by, reason: request.reason };
    if (reply.length === 1 && reply[0] === 0) return null;
  }
  throw new UnexpectedReplyError(script, reply);
}

/** renew: {1, fencingToken, expiresAtMs}, with the lease's release request as a fourth element, or {0}. */
export function parseLease(script: string, reply: unknown): LeaseReply {
  if (Array.isArray(reply)) {
    // Tag 2 from renew.lua only: renewed, a lease whose quota is counted through the quota-slot calls.
    const tag: unknown = reply[0];
    if ((reply.length === 3 || reply.length === 4) && (tag === 1 || (tag === 2 && script === 'renew'))) {
      const fencingToken = int(script, reply, reply[1]);
      const expiresAtMs = int(script, reply, reply[2]);
      const lease =
        tag === 1
          ? { held: true as const, fencingToken, expiresAtMs }
          : { held: true as const, fencingToken, expiresAtMs, quotaOutside: true as const };
      if (reply.length === 3) return lease;
      const releaseRequested = parseReleaseRequest(reply[3]);
      if (releaseRequested !== undefined) return { ...lease, releaseRequested };
    }
    if (reply.length === 1 && tag === 0) return { held: false };
  }
  throw new UnexpectedReplyError(script, reply);
}

/** cancel: {1, fencingToken, expiresAtMs} (it was granted meanwhile) or {0, remainingLeaseMs}. */
export function parseCancel(reply: unknown): CancelReply {
  if (Array.isArray(reply)) {
    if (reply.length === 3 && reply[0] === 1) {
      return { held: true, fencingToken: int('cancel', reply, reply[1]), expiresAtMs: int('cancel', reply, reply[2]) };
    }
    if (reply.length === 2 && reply[0] === 0) return { held: false, retryAfterMs: int('cancel', reply, reply[1]) };
  }
  throw new UnexpectedReplyError('cancel', reply);
}

export function parseRelease(reply: unknown): boolean {
  if (reply === 1 || reply === 0) return reply === 1;
  throw new UnexpectedReplyError('release', reply);
}

/**
 * A lock release's reply (release.lua): released or not, and the waiter of the calling instance the lock
 * was handed to, when it was (that waiter is sent no hand-over message: this reply is its notice).
 */
export function parseLockRelease(reply: unknown): { released: boolean; handedTo?: HandOverNotice } {
  if (reply === 1 || reply === 0) return { released: reply === 1 };
  if (Array.isArray(reply) && reply.length === 4 && reply[0] === 1 && typeof reply[1] === 'string' && reply[1] !== '') {
    const handedTo = { waiterId: reply[1], fencingToken: int('release', reply, reply[2]), expiresAtMs: int('release', reply, reply[3]) };
    return { released: true, handedTo };
  }
  throw new UnexpectedReplyError('release', reply);
}

export type InspectReply =
  | {
      held: true;
      fencingToken: number;
      expiresAtMs: number;
      ttlRemainingMs: number;
      holder: string | null;
      waiters: number;
      releaseRequested?: ReleaseRequest;
    }
  | { held: false; lastFencingToken: number; lockDelayLeftMs: number };

export function parseInspect(reply: unknown): InspectReply {
  if (Array.isArray(reply)) {
    if ((reply.length === 6 || reply.length === 7) && reply[0] === 1 && typeof reply[4] === 'string') {
      const held = {
        held: true as const,
        fencingToken: int('inspect', reply, reply[1]),
        expiresAtMs: int('inspect', reply, reply[2]),
        ttlRemainingMs: int('inspect', reply, reply[3]),
        holder: reply[4] === '' ? null : reply[4],
        waiters: int('inspect', reply, reply[5]),
      };
      if (reply.length === 6) return held;
      const releaseRequested = parseReleaseRequest(reply[6]);
      if (releaseRequested !== undefined) return { ...held, releaseRequested };
    }
    if (reply.length === 3 && reply[0] === 0) {
      return { held: false, lastFencingToken: int('inspect', reply, reply[1]), lockDelayLeftMs: int('inspect', reply, reply[2]) };
    }
  }
  throw new UnexpectedReplyError('inspect', reply);
}

export type LockSetReply =
  { granted: true; expiresAtMs: number; fencingTokens: number[] } | { granted: false; retryAfterMs: number; busyIndex: number };

/** A lock set's granted or renewed reply, {1, expiresAtMs, token1, ..., tokenN}: the lease of every lock. */
function setLease(script: string, reply: unknown[]): { expiresAtMs: number; fencingTokens: number[] } {
  return { expiresAtMs: int(script, reply, reply[1]), fencingTokens: reply.slice(2).map((t: unknown) => int(script, reply, t)) };
}

/** lock-set-acquire's reply for a set of `size` locks. */
export function parseLockSetAcquire(reply: unknown, size: number): LockSetReply {
  if (Array.isArray(reply)) {
    if (reply[0] === 1 && reply.length === size + 2) return { granted: true, ...setLease('lockSetAcquire', reply) };
    if (reply[0] === 0 && reply.length === 3) {
      const busyIndex = int('lockSetAcquire', reply, reply[2]);
      if (busyIndex >= 0 && busyIndex < size) return { granted: false, retryAfterMs: int('lockSetAcquire', reply, reply[1]), busyIndex };
    }
  }
  throw new UnexpectedReplyError('lockSetAcquire', reply);
}

/** lock-set-renew's reply for a set of `size` locks. */
export function parseLockSetRenew(
  reply: unknown,
  size: number,
): { renewed: true; expiresAtMs: number; fencingTokens: number[]; releaseRequested?: ReleaseRequest } | { renewed: false } {
  if (Array.isArray(reply)) {
    if (reply[0] === 1 && reply.length === size + 2) return { renewed: true, ...setLease('lockSetRenew', reply) };
    // A release request on one of the keys comes last (lock-set-renew.lua).
    const releaseRequested = reply[0] === 1 && reply.length === size + 3 ? parseReleaseRequest(reply[size + 2]) : undefined;
    if (releaseRequested !== undefined) return { renewed: true, ...setLease('lockSetRenew', reply.slice(0, size + 2)), releaseRequested };
    if (reply.length === 1 && reply[0] === 0) return { renewed: false };
  }
  throw new UnexpectedReplyError('lockSetRenew', reply);
}

/** A 0/1 reply (lock-set-release, lock-delay). */
export function parseFlag(script: string, reply: unknown): boolean {
  if (reply === 1 || reply === 0) return reply === 1;
  throw new UnexpectedReplyError(script, reply);
}

export function parseHeartbeat(reply: unknown): { remainingLeaseMs: number; grantedWaiterId: string | null; lostWaiterIds?: string[] } {
  if (Array.isArray(reply) && reply.length >= 2 && reply.slice(1).every((id) => typeof id === 'string')) {
    const parsed = { remainingLeaseMs: int('heartbeat', reply, reply[0]), grantedWaiterId: reply[1] === '' ? null : (reply[1] as string) };
    // This instance's waiters whose place in the queue is gone (heartbeat.lua).
    return reply.length > 2 ? { ...parsed, lostWaiterIds: reply.slice(2) as string[] } : parsed;
  }
  throw new UnexpectedReplyError('heartbeat', reply);
}

/** What a hand-over announcement says: which waiter was handed the lock, and the lease it was given. */
export interface HandOverNotice {
  readonly waiterId: string;
  readonly fencingToken: number;
  /** The lease's end on the Redis clock. */
  readonly expiresAtMs: number;
}

/**
 * A hand-over announcement ("waiterId|fencingToken|expiresAtMs|lockName"), or null for a message of
 * another shape. The lock's waiter may be answered from it (RedisStore.confirm); a permit's is
 * confirmed with a renew, which reads the lease from Redis.
 */
export function parseHandOver(message: string): HandOverNotice | null {
  const match = /^([^|]+)\|(\d+)\|(\d+)\|(.+)$/.exec(message);
  if (!match) return null;
  const fencingToken = Number(match[2]);
  const expiresAtMs = Number(match[3]);
  if (!Number.isSafeInteger(fencingToken) || !Number.isSafeInteger(expiresAtMs)) return null;
  return { waiterId: match[1] as string, fencingToken, expiresAtMs };
}

export type ForceReleaseReply =
  | {
      released: true;
      fencingToken: number;
      holder: string | null;
      ownerToken: string;
      /** The evicted lease's end (Unix ms, Redis clock). */
      expiresAtMs: number;
      /** It took no unit of the lock scripts' quota: its quota slot, if any, is the caller's to give back. */
      quotaOutside?: true;
    }
  | { released: false };

export function parseForceRelease(reply: unknown): ForceReleaseReply {
  if (Array.isArray(reply)) {
    if (
      reply.length === 6 &&
      reply[0] === 1 &&
      typeof reply[2] === 'string' &&
      typeof reply[3] === 'string' &&
      (reply[5] === 0 || reply[5] === 1)
    ) {
      const evicted = {
        released: true as const,
        fencingToken: int('force-release', reply, reply[1]),
        holder: reply[2] === '' ? null : reply[2],
        ownerToken: reply[3],
        expiresAtMs: int('force-release', reply, reply[4]),
      };
      return reply[5] === 0 ? { ...evicted, quotaOutside: true } : evicted;
    }
    if (reply.length === 1 && reply[0] === 0) return { released: false };
  }
  throw new UnexpectedReplyError('force-release', reply);
}

export type QuotaReserveReply = { reserved: true } | { reserved: false; retryAfterMs: number };

export function parseQuotaReserve(reply: unknown): QuotaReserveReply {
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === 1) return { reserved: true };
    if (reply.length === 2 && reply[0] === 0) {
      return { reserved: false, retryAfterMs: Math.max(1, int('quota-reserve', reply, reply[1])) };
    }
  }
  throw new UnexpectedReplyError('quota-reserve', reply);
}

/** Whether the unit was counted already (1); 0: counted again; 2: retired, nothing counted (quota-extend.lua). */
export function parseQuotaExtend(reply: unknown): boolean {
  if (reply === 1 || reply === 0 || reply === 2) return reply === 1;
  throw new UnexpectedReplyError('quota-extend', reply);
}

/** rate-allowance's reply {granted, windowLeftMs, handedOut}. */
export function parseRateAllowance(reply: unknown): { granted: number; windowLeftMs: number; handedOut: number } {
  if (Array.isArray(reply) && reply.length === 3) {
    const [granted, windowLeftMs, handedOut] = reply.map((v: unknown) => int('rate-allowance', reply, v)) as [number, number, number];
    if (granted >= 0 && windowLeftMs >= 1 && handedOut >= granted) return { granted, windowLeftMs, handedOut };
  }
  throw new UnexpectedReplyError('rate-allowance', reply);
}

/** SCAN's reply: [next cursor, [keys…]]. */
export function parseScan(reply: unknown): { cursor: string; keys: string[] } {
  if (
    Array.isArray(reply) &&
    reply.length === 2 &&
    typeof reply[0] === 'string' &&
    Array.isArray(reply[1]) &&
    reply[1].every((k) => typeof k === 'string')
  ) {
    return { cursor: reply[0], keys: reply[1] };
  }
  throw new UnexpectedReplyError('scan', reply);
}

export type PermitAcquireReply =
  | { kind: 'granted'; fencingToken: number; expiresAtMs: number }
  | { kind: 'held' | 'queue_full' | 'queued'; retryAfterMs: number }
  | { kind: 'mismatch'; capacity: number; retryAfterMs: number };

/** permit-acquire: {1, token, end}, {0|2|3, retryAfterMs} or {5, liveCapacity, retryAfterMs}. */
export function parsePermitAcquire(reply: unknown): PermitAcquireReply {
  const name = 'permit-acquire';
  if (Array.isArray(reply)) {
    if (reply.length === 3 && reply[0] === 1) {
      return { kind: 'granted', fencingToken: int(name, reply, reply[1]), expiresAtMs: int(name, reply, reply[2]) };
    }
    if (reply.length === 3 && reply[0] === 5) {
      return { kind: 'mismatch', capacity: int(name, reply, reply[1]), retryAfterMs: Math.max(1, int(name, reply, reply[2])) };
    }
    if (reply.length === 2 && (reply[0] === 0 || reply[0] === 2 || reply[0] === 3)) {
      return { kind: ACQUIRE_KINDS[reply[0] as 0 | 2 | 3], retryAfterMs: Math.max(1, int(name, reply, reply[1])) };
    }
  }
  throw new UnexpectedReplyError(name, reply);
}

/** permit-heartbeat: {remainingMs, grantedWaiterId...}. */
export function parsePermitHeartbeat(reply: unknown): { remainingLeaseMs: number; grantedWaiterIds: string[]; lostWaiterIds?: string[] } {
  if (Array.isArray(reply) && reply.length >= 1 && reply.slice(1).every((id) => typeof id === 'string')) {
    const ids = reply.slice(1) as string[];
    const parsed = {
      remainingLeaseMs: int('permit-heartbeat', reply, reply[0]),
      grantedWaiterIds: ids.filter((id) => !id.startsWith('!')),
    };
    // "!" .. id: this instance's waiter whose place in the queue is gone (permit-heartbeat.lua).
    const lost = ids.filter((id) => id.startsWith('!')).map((id) => id.slice(1));
    return lost.length > 0 ? { ...parsed, lostWaiterIds: lost } : parsed;
  }
  throw new UnexpectedReplyError('permit-heartbeat', reply);
}

export interface PermitLeaseReply {
  readonly weight: number;
  readonly fencingToken: number;
  readonly expiresAtMs: number;
  readonly holder: string | null;
  readonly releaseRequested?: ReleaseRequest;
}

/** permit-inspect: {1, capacity, waiters, nowMs, index, count, (weight, token, end, holder, asked)...} or {0, index}. */
export function parsePermitInspect(reply: unknown): {
  index: number;
  held: { capacity: number; waiters: number; nowMs: number; count: number; leases: PermitLeaseReply[] } | null;
} {
  const name = 'permit-inspect';
  if (Array.isArray(reply)) {
    if (reply.length === 2 && reply[0] === 0) return { index: int(name, reply, reply[1]), held: null };
    if (reply.length >= 6 && reply[0] === 1 && (reply.length - 6) % 5 === 0) {
      const leases: PermitLeaseReply[] = [];
      for (let i = 6; i < reply.length; i += 5) {
        const holder: unknown = reply[i + 3];
        const asked: unknown = reply[i + 4];
        if (typeof holder !== 'string' || typeof asked !== 'string') throw new UnexpectedReplyError(name, reply);
        const releaseRequested = asked === '' ? undefined : parseReleaseRequest(asked);
        if (asked !== '' && releaseRequested === undefined) throw new UnexpectedReplyError(name, reply);
        const lease = {
          weight: int(name, reply, reply[i]),
          fencingToken: int(name, reply, reply[i + 1]),
          expiresAtMs: int(name, reply, reply[i + 2]),
          holder: holder === '' ? null : holder,
        };
        leases.push(withReleaseRequest(lease, releaseRequested));
      }
      const held = {
        capacity: int(name, reply, reply[1]),
        waiters: int(name, reply, reply[2]),
        nowMs: int(name, reply, reply[3]),
        count: int(name, reply, reply[5]),
        leases,
      };
      return { index: int(name, reply, reply[4]), held };
    }
  }
  throw new UnexpectedReplyError(name, reply);
}

/** permit-force-release: {(ownerToken, token, holder)...}. */
export function parsePermitForceRelease(
  reply: unknown,
): Array<{ ownerToken: string; fencingToken: number; holder: string | null; expiresAtMs: number }> {
  const name = 'permit-force-release';
  if (Array.isArray(reply) && reply.length % 4 === 0) {
    const evicted = [];
    for (let i = 0; i < reply.length; i += 4) {
      const owner: unknown = reply[i];
      const holder: unknown = reply[i + 2];
      if (typeof owner !== 'string' || typeof holder !== 'string') throw new UnexpectedReplyError(name, reply);
      evicted.push({
        ownerToken: owner,
        fencingToken: int(name, reply, reply[i + 1]),
        holder: holder === '' ? null : holder,
        expiresAtMs: int(name, reply, reply[i + 3]),
      });
    }
    return evicted;
  }
  throw new UnexpectedReplyError(name, reply);
}

/** queue.lua's reply: {holder, arrivedUs, weight, ...}, head first; weight 0 for a lock. */
export function parseQueue(reply: unknown): Array<{ holder: string | null; waitingSinceMs: number; weight: number }> {
  const name = 'queue';
  if (!Array.isArray(reply) || reply.length % 3 !== 0) throw new UnexpectedReplyError(name, reply);
  const queued = [];
  for (let i = 0; i < reply.length; i += 3) {
    const holder: unknown = reply[i];
    const arrivedUs = Number(reply[i + 1]);
    if (typeof holder !== 'string' || !Number.isFinite(arrivedUs)) throw new UnexpectedReplyError(name, reply);
    queued.push({
      holder: holder === '' ? null : holder,
      waitingSinceMs: Math.floor(arrivedUs / 1000),
      weight: int(name, reply, reply[i + 2]),
    });
  }
  return queued;
}
