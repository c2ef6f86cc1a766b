import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { MemoryStore } from './memory/memory-store.js';
import { RedisStore } from './redis/redis-store.js';
import type { LockStore } from './store.js';

export function createStore(config: Config, log: Logger): LockStore {
  if (config.store.kind === 'redis') {
    return new RedisStore({
      url: config.store.url,
      keyPrefix: config.store.keyPrefix,
      commandTimeoutMs: config.store.commandTimeoutMs,
      fenceGraceMs: config.fenceGraceMs,
      maxWaitersPerKey: config.limits.maxWaitersPerKey,
      log,
    });
  }
  log.warn(
    { store: 'memory' },
    'using the embedded store: locks are held in this process only and are NOT shared between instances; set REDIS_URL to share them',
  );
  return new MemoryStore({ fenceGraceMs: config.fenceGraceMs, maxWaitersPerKey: config.limits.maxWaitersPerKey });
}
