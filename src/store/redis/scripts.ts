import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis, Result } from 'ioredis';
import { unwrapEcho } from './replies.js';

/**
 * The Lua scripts, one file per atomic operation, each registered once with ioredis `defineCommand`
 * (EVALSHA, falling back to EVAL after a Redis restart flushed the script cache).
 * The argument and reply types below mirror each script's header comment.
 */
const SCRIPTS = {
  khAcquire: { file: 'acquire.lua', numberOfKeys: 1 },
  khRenew: { file: 'renew.lua', numberOfKeys: 1 },
  khRelease: { file: 'release.lua', numberOfKeys: 1 },
  khInspect: { file: 'inspect.lua', numberOfKeys: 1 },
} as const;

export function loadScript(file: string): string {
  return readFileSync(new URL(`./scripts/${file}`, import.meta.url), 'utf8');
}

/**
 * Every script runs inside this wrapper: the caller passes a one-off nonce as the last argument (taken
 * off ARGV before the script body runs, so each script's header stays true) and the reply comes back as
 * {nonce, reply}. Replies on a connection are matched to calls by order alone; if one is ever lost (a
 * proxy dropping bytes, a reply skipped after a timeout), every later reply would answer the wrong call,
 * and an acquire could be told it was granted another call's lease. The echo makes that impossible.
 */
export function withEcho(body: string): string {
  return `local __nonce = table.remove(ARGV)\nlocal __reply = (function()\n${body}\nend)()\nreturn {__nonce, __reply}\n`;
}

/** 12 random bytes: unique per call for all practical purposes, cheap to send. */
function newNonce(): string {
  return randomBytes(12).toString('base64url');
}

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

export function defineScripts(redis: Redis): void {
  // The raw commands are reached through an index signature: ioredis adds them at run time.
  const commands = redis as unknown as Record<string, ScriptFn>;
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    const raw = `${name}Echoed`;
    redis.defineCommand(raw, { lua: withEcho(loadScript(file)), numberOfKeys });
    const call = commands[raw] as ScriptFn;
    commands[name] = async (...args) => {
      const nonce = newNonce();
      return unwrapEcho(name, await call.call(redis, ...args, nonce), nonce);
    };
  }
}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    khAcquire(lockKey: string, ownerToken: string, ttlMs: number, holder: string, graceMs: number): Result<unknown, Context>;
    khRenew(lockKey: string, ownerToken: string, ttlMs: number, graceMs: number): Result<unknown, Context>;
    khRelease(lockKey: string, ownerToken: string, graceMs: number): Result<unknown, Context>;
    khInspect(lockKey: string): Result<unknown, Context>;
  }
}
