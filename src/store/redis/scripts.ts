import { readFileSync } from 'node:fs';
import type { Redis, Result } from 'ioredis';
import { randomBase64url } from '../../domain/random.js';
import { unwrapEcho } from './replies.js';

/**
 * The Lua scripts, one file per atomic operation, each registered once with ioredis `defineCommand`
 * (EVALSHA, falling back to EVAL after a Redis restart flushed the script cache). Scripts that can
 * hand a lock to a waiter are prefixed with the shared _handover.lua prelude.
 * The argument and reply types below mirror each script's header comment.
 */
const SCRIPTS = {
  khAcquire: { file: 'acquire.lua', numberOfKeys: 3, prelude: true },
  khRenew: { file: 'renew.lua', numberOfKeys: 1, prelude: false },
  khRelease: { file: 'release.lua', numberOfKeys: 3, prelude: true },
  khInspect: { file: 'inspect.lua', numberOfKeys: 3, prelude: true },
  khCancel: { file: 'cancel.lua', numberOfKeys: 3, prelude: false },
  khHeartbeat: { file: 'heartbeat.lua', numberOfKeys: 3, prelude: true },
} as const;

export function loadScript(file: string): string {
  return readFileSync(new URL(`./scripts/${file}`, import.meta.url), 'utf8');
}

/** A script's source, with the _handover.lua prelude in front when it can hand a lock to a waiter. */
export function composeScript(file: string, prelude: boolean): string {
  return prelude ? `${loadScript('_handover.lua')}\n${loadScript(file)}` : loadScript(file);
}

/** The full source of a command's script, prelude included (without the echo wrapper). */
export function scriptSource(name: keyof typeof SCRIPTS): string {
  const { file, prelude } = SCRIPTS[name];
  return composeScript(file, prelude);
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
  return randomBase64url(12);
}

type ScriptFn = (...args: Array<string | number>) => Promise<unknown>;

/**
 * Registers `lua` as command `name` behind the echo wrapper: calling `redis[name](...args)` sends the
 * script with a fresh nonce and resolves to the script's own reply, or rejects with MisalignedReplyError.
 */
export function defineEchoedScript(redis: Redis, name: string, lua: string, numberOfKeys: number): void {
  // The raw commands are reached through an index signature: ioredis adds them at run time.
  const commands = redis as unknown as Record<string, ScriptFn>;
  const raw = `${name}Echoed`;
  redis.defineCommand(raw, { lua: withEcho(lua), numberOfKeys });
  const call = commands[raw] as ScriptFn;
  commands[name] = async (...args) => {
    const nonce = newNonce();
    return unwrapEcho(name, await call.call(redis, ...args, nonce), nonce);
  };
}

export function defineScripts(redis: Redis): void {
  for (const name of Object.keys(SCRIPTS) as Array<keyof typeof SCRIPTS>) {
    defineEchoedScript(redis, name, scriptSource(name), SCRIPTS[name].numberOfKeys);
  }
}

type Keys3 = [lock: string, queue: string, waiters: string];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    khAcquire(
      ...args: [
        ...keys: Keys3,
        ownerToken: string,
        ttlMs: number,
        holder: string,
        graceMs: number,
        waitMs: number,
        waiterId: string,
        instanceId: string,
        maxWaiters: number,
        livenessMs: number,
        channelPrefix: string,
        lockName: string,
      ]
    ): Result<unknown, Context>;
    khRenew(lockKey: string, ownerToken: string, ttlMs: number, graceMs: number): Result<unknown, Context>;
    khRelease(
      ...args: [...keys: Keys3, ownerToken: string, graceMs: number, channelPrefix: string, lockName: string]
    ): Result<unknown, Context>;
    khInspect(...keys: Keys3): Result<unknown, Context>;
    khCancel(...args: [...keys: Keys3, waiterId: string, ownerToken: string]): Result<unknown, Context>;
    khHeartbeat(
      ...args: [...keys: Keys3, livenessMs: number, graceMs: number, channelPrefix: string, lockName: string, ...waiterIdAndToken: string[]]
    ): Result<unknown, Context>;
  }
}
