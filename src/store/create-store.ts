import type { Logger } from 'pino';
import { MemoryStore } from './memory/memory-store.js';
import { RedisStore } from './redis/redis-store.js';
import type { LockStore } from '../domain/lock-store.js';

/** What createStore reads of the configuration (Config has this shape). */
export interface StoreSettings {
  readonly store:
    | { readonly kind: 'memory' }
    | { readonly kind: 'redis'; readonly url: string; readonly keyPrefix: string; readonly commandTimeoutMs: number };
  readonly fenceGraceMs: number;
  readonly limits: { readonly maxWaitersPerKey: number };
}

export function createStore(config: StoreSettings, log: Logger): LockStore {
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
