import type { Redis, Result } from 'ioredis';
import { composeScript, defineEchoedScript } from './scripts.js';
import { UnexpectedReplyError } from './replies.js';

/**
 * The scripts behind administration and quotas (force release, quota slots), registered like the lock
 * scripts in scripts.ts; kept apart so each group of operations reads on its own. Argument and reply
 * types mirror each script's header comment; the parsers check reply shapes at run time.
 */
const ADMIN_SCRIPTS = {
  // Frees a lock, so it may hand it to a waiter: it takes the wait queue's keys and the prelude.
  khForceRelease: { file: 'force-release.lua', numberOfKeys: 3, prelude: true },
  khSlotReserve: { file: 'slot-reserve.lua', numberOfKeys: 1, prelude: false },
  khSlotExtend: { file: 'slot-extend.lua', numberOfKeys: 1, prelude: false },
} as const;

export function defineAdminScripts(redis: Redis): void {
  for (const [name, { file, numberOfKeys, prelude }] of Object.entries(ADMIN_SCRIPTS)) {
    defineEchoedScript(redis, name, composeScript(file, prelude), numberOfKeys);
  }
}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    khForceRelease(
      ...args: [lockKey: string, queueKey: string, waitersKey: string, graceMs: number, channelPrefix: string, lockName: string]
    ): Result<unknown, Context>;
    khSlotReserve(slotsKey: string, slotId: string, ttlMs: number, maxSlots: number): Result<unknown, Context>;
    khSlotExtend(slotsKey: string, slotId: string, expiresAtMs: number): Result<unknown, Context>;
  }
}

function int(script: string, reply: unknown, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new UnexpectedReplyError(script, reply);
  return value;
}

export type ForceReleaseReply =
  | { released: true; fencingToken: number; holder: string | null; ownerToken: string }
  | { released: false };

export function parseForceRelease(reply: unknown): ForceReleaseReply {
  if (Array.isArray(reply)) {
    if (reply.length === 4 && reply[0] === 1 && typeof reply[2] === 'string' && typeof reply[3] === 'string') {
      return {
        released: true,
        fencingToken: int('force-release', reply, reply[1]),
        holder: reply[2] === '' ? null : reply[2],
        ownerToken: reply[3],
      };
    }
    if (reply.length === 1 && reply[0] === 0) return { released: false };
  }
  throw new UnexpectedReplyError('force-release', reply);
}

export type SlotReserveReply = { reserved: true } | { reserved: false; retryAfterMs: number };

export function parseSlotReserve(reply: unknown): SlotReserveReply {
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === 1) return { reserved: true };
    if (reply.length === 2 && reply[0] === 0) {
      return { reserved: false, retryAfterMs: Math.max(1, int('slot-reserve', reply, reply[1])) };
    }
  }
  throw new UnexpectedReplyError('slot-reserve', reply);
}

export function parseSlotExtend(reply: unknown): boolean {
  if (reply === 1 || reply === 0) return reply === 1;
  throw new UnexpectedReplyError('slot-extend', reply);
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
