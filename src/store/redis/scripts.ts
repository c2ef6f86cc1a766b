import { readFileSync } from 'node:fs';
import type { Redis, Result } from 'ioredis';

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

export function defineScripts(redis: Redis): void {
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { lua: loadScript(file), numberOfKeys });
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
