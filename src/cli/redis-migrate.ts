#!/usr/bin/env node
/**
 * `npm run redis:migrate-layout`: moves the Redis data of the layout before shards to the sharded one
 * (src/store/redis/migrate-layout.ts), with the same environment the server reads (REDIS_URL or
 * Sentinel/Cluster settings, REDIS_KEY_PREFIX, NAMESPACE_MAX_HELD_LOCKS). Every keyholder instance must
 * be stopped first: docs/operations.md, "Upgrading to the sharded Redis layout".
 */
import { type Config, ConfigError, loadConfig } from '../config.js';
import { createRedisClient } from '../store/redis/client.js';
import { migrateLayout } from '../store/redis/migrate-layout.js';

const USAGE = `usage: npm run redis:migrate-layout   (node dist/cli/redis-migrate.js)
Moves the Redis data of the layout before shards to the sharded one, with the environment the server
reads (REDIS_URL or the Sentinel/Cluster settings, REDIS_KEY_PREFIX, NAMESPACE_MAX_HELD_LOCKS), and
prints what it moved. Stop every keyholder instance first (docs/operations.md). It takes no flags.
Exit: 0 migrated, 1 Redis failed, 2 bad arguments or configuration.`;

async function main(args: string[]): Promise<number> {
  // A data migration must never run because of a flag it does not know (--help, --dry-run, ...).
  if (args.length === 1 && (args[0] === '--help' || args[0] === '-h')) {
    console.log(USAGE);
    return 0;
  }
  if (args.length > 0) {
    console.error(`redis:migrate-layout: unexpected argument "${args[0]}"; nothing was migrated\n${USAGE}`);
    return 2;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`redis:migrate-layout: ${err.message}`);
    return 2;
  }
  if (config.store.kind !== 'redis') {
    console.error('redis:migrate-layout: no Redis is configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES)');
    return 2;
  }
  const client = createRedisClient(config.store.connection, { commandTimeoutMs: Math.max(5_000, config.store.commandTimeoutMs) });
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('error', reject);
    });
    const report = await migrateLayout(client, config.store.keyPrefix, config.limits.maxHeldLocksPerNamespace ?? 0);
    console.log(JSON.stringify(report));
    return 0;
  } catch (err) {
    console.error(`redis:migrate-layout: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  } finally {
    client.disconnect();
  }
}

const code = await main(process.argv.slice(2));
// Exit now: the Redis client's command-deadline timers would otherwise hold the process for seconds.
await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
process.exit(code);
