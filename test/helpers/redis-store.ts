import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { RedisServer } from './redis-server.js';
import { vi } from 'vitest';

/** A RedisStore on a test server, resolved once it answers (it connects in the background). */
export async function openRedisStore(
  server: RedisServer,
  options: { keyPrefix?: string; commandTimeoutMs?: number; fenceGraceMs?: number; maxWaitersPerKey?: number } = {},
): Promise<RedisStore> {
  const store = new RedisStore({
    url: server.url,
    keyPrefix: options.keyPrefix ?? 'test:',
    commandTimeoutMs: options.commandTimeoutMs ?? 1_000,
    fenceGraceMs: options.fenceGraceMs ?? 60_000,
    maxWaitersPerKey: options.maxWaitersPerKey,
  });
  await eventually(() => store.ping(), 10_000);
  return store;
}

/** Retries `check` (vi.waitFor) until it resolves or the deadline passes; returns how long it took (ms). */
export async function eventually(check: () => Promise<unknown>, timeoutMs: number, intervalMs = 20): Promise<number> {
  const started = Date.now();
  await vi.waitFor(check, { timeout: timeoutMs, interval: intervalMs });
  return Date.now() - started;
}
