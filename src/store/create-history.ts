import type { HistoryLimits, HistoryStore } from '../domain/history.js';
import { EtcdHistory } from './etcd/etcd-history.js';
import { MemoryHistory } from './memory/memory-history.js';
import { RedisHistory } from './redis/redis-history.js';
import type { StoreSettings } from './create-store.js';

/** Lease history in the store the leases live in (config -> HistoryStore). */
export function createHistoryStore(store: StoreSettings['store'], limits: HistoryLimits): HistoryStore {
  if (store.kind === 'redis') {
    return new RedisHistory({ connection: store.connection, keyPrefix: store.keyPrefix, commandTimeoutMs: store.commandTimeoutMs, limits });
  }
  if (store.kind === 'etcd') {
    return new EtcdHistory({ endpoints: store.endpoints, keyPrefix: store.keyPrefix, commandTimeoutMs: store.commandTimeoutMs, limits });
  }
  return new MemoryHistory(limits);
}
