#!/usr/bin/env node
/**
 * `npm run redis:migrate-layout`: moves the Redis data of the layout before shards to the sharded one
 * (src/store/redis/migrate-layout.ts), with the same environment the server reads (REDIS_URL or
 * Sentinel/Cluster settings, REDIS_KEY_PREFIX, NAMESPACE_MAX_HELD_LOCKS). Every keyholder instance must
 * be stopped first: docs/operations.md, "Upgrading to the sharded Redis layout".
 */
import { loadConfig } from '../config.js';
import { createRedisClient } from '../store/redis/client.js';
import { migrateLayout } from '../store/redis/migrate-layout.js';

const config = loadConfig();
if (config.store.kind !== 'redis') {
  console.error('redis:migrate-layout: no Redis is configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES)');
  process.exit(2);
}
const client = createRedisClient(config.store.connection, { commandTimeoutMs: Math.max(5_000, config.store.commandTimeoutMs) });
try {
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
  });
  const report = await migrateLayout(client, config.store.keyPrefix, config.limits.maxHeldLocksPerNamespace ?? 0);
  console.log(JSON.stringify(report));
} finally {
  client.disconnect();
}
