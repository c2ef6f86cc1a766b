import type { RedisConnection } from '../../src/store/redis/client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { KeySpace } from '../../src/store/redis/keys.js';
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

/**
 * A RedisStore on a replicated Redis (a Sentinel topology or a Cluster) with replica acknowledgement on:
 * every grant and renewal is answered only once a replica has it. Resolved once it answers.
 */
export async function openReplicatedStore(
  connection: RedisConnection,
  options: { keyPrefix: string; fenceGraceMs: number; maxWaitersPerKey?: number },
): Promise<RedisStore> {
  const store = new RedisStore({ connection, replicaAcks: { minReplicas: 1, timeoutMs: 500 }, commandTimeoutMs: 1_000, ...options });
  await eventually(() => store.ping(), 10_000);
  return store;
}

/** Retries `check` (vi.waitFor) until it resolves or the deadline passes; returns how long it took (ms). */
export async function eventually(check: () => Promise<unknown>, timeoutMs: number, intervalMs = 20): Promise<number> {
  const started = performance.now();
  await vi.waitFor(check, { timeout: timeoutMs, interval: intervalMs });
  return performance.now() - started;
}

/** The quota units a namespace's shards count now (each shard's `n`), however they were taken. */
export async function quotaUnitsCounted(server: RedisServer, keys: KeySpace, namespace: string): Promise<number> {
  const raw = server.client();
  try {
    let units = 0;
    for (const shard of keys.quotaShards(namespace)) units += Number((await raw.hget(shard.count, 'n')) ?? 0);
    return units;
  } finally {
    raw.disconnect();
  }
}
