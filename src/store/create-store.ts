import type { Logger } from 'pino';
import type { Store } from '../domain/lease-store.js';
import { EtcdStore } from './etcd/etcd-store.js';
import { MemoryStore } from './memory/memory-store.js';
import type { RedisConnection, ReplicaAcks } from './redis/client.js';
import { RedisStore } from './redis/redis-store.js';

/** What createStore reads of the configuration (Config has this shape). */
export interface StoreSettings {
  readonly store:
    | { readonly kind: 'memory' }
    | {
        readonly kind: 'redis';
        readonly connection: RedisConnection;
        readonly keyPrefix: string;
        readonly commandTimeoutMs: number;
        /** Replicas that must confirm a grant before it is answered (WAIT); null = do not wait. */
        readonly replicaAcks: ReplicaAcks | null;
      }
    | {
        readonly kind: 'etcd';
        readonly endpoints: readonly string[];
        readonly keyPrefix: string;
        readonly commandTimeoutMs: number;
      };
  readonly fenceGraceMs: number;
  readonly limits: { readonly maxWaitersPerKey: number };
}

export function createStore(config: StoreSettings, log: Logger): Store {
  if (config.store.kind === 'redis') {
    return new RedisStore({
      connection: config.store.connection,
      replicaAcks: config.store.replicaAcks,
      keyPrefix: config.store.keyPrefix,
      commandTimeoutMs: config.store.commandTimeoutMs,
      fenceGraceMs: config.fenceGraceMs,
      maxWaitersPerKey: config.limits.maxWaitersPerKey,
      log,
    });
  }
  if (config.store.kind === 'etcd') {
    return new EtcdStore({
      endpoints: config.store.endpoints,
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
