import { readFileSync } from 'node:fs';
import type { Redis, Result } from 'ioredis';

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
  khInspect: { file: 'inspect.lua', numberOfKeys: 2, prelude: false },
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

/** The full source of a command's script, prelude included. */
export function scriptSource(name: keyof typeof SCRIPTS): string {
  const { file, prelude } = SCRIPTS[name];
  return composeScript(file, prelude);
}

export function defineScripts(redis: Redis): void {
  for (const name of Object.keys(SCRIPTS) as Array<keyof typeof SCRIPTS>) {
    redis.defineCommand(name, { lua: scriptSource(name), numberOfKeys: SCRIPTS[name].numberOfKeys });
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
    khInspect(lockKey: string, queueKey: string): Result<unknown, Context>;
    khCancel(...args: [...keys: Keys3, waiterId: string, ownerToken: string]): Result<unknown, Context>;
    khHeartbeat(
      ...args: [...keys: Keys3, livenessMs: number, graceMs: number, channelPrefix: string, lockName: string, ...waiterIdAndToken: string[]]
    ): Result<unknown, Context>;
  }
}
