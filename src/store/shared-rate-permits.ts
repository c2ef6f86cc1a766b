import type { StoreSettings } from './create-store.js';
import { createRedisClient } from './redis/client.js';
import { RedisRatePermits } from './redis/rate-permits.js';

/** The rate limiter's permits shared by every instance, and the client they travel on. */
export interface SharedRatePermits {
  readonly permits: RedisRatePermits;
  close(): Promise<void>;
}

/**
 * Shared permits when the store can carry them (Redis); undefined otherwise, and each instance then
 * counts on its own. The caller closes what it gets.
 */
export function openSharedRatePermits(
  store: StoreSettings['store'],
  onLost: (err: Error) => void,
): SharedRatePermits | undefined {
  if (store.kind !== 'redis') return undefined;
  // Its own client, failing fast like the store's: while Redis is unreachable a batch call errors
  // at once and the limiter lets the request through (skipOnError) instead of hanging it or turning
  // it into a 500. It carries one batch of permits now and then, not a call per request.
  const client = createRedisClient(store.connection, { commandTimeoutMs: store.commandTimeoutMs, onLost });
  return {
    permits: new RedisRatePermits(client, store.keyPrefix),
    close: async () => {
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
