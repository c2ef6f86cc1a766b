import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { EtcdStore } from './etcd/etcd-store.js';
import { MemoryStore } from './memory/memory-store.js';
import { RedisStore } from './redis/redis-store.js';
import type { LockStore } from './store.js';

export function createStore(config: Config, log: Logger): LockStore {
  if (config.store.kind === 'redis') {
    const { connection } = config.store;
    if (connection.mode === 'cluster') throw new Error('Redis Cluster is not supported yet');
    return new RedisStore({
      connection,
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
