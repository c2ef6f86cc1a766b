import type { StoreSettings } from './create-store.js';
import { closeClient, createRedisClient } from './redis/client.js';
import { RedisRateAllowance } from './redis/rate-allowance.js';

/** The rate limiter's counts shared by every instance (handed out in batches of allowance), and their client. */
export interface SharedRateLimit {
  readonly allowance: RedisRateAllowance;
  close(): Promise<void>;
}

/**
 * Shared allowance when the store can carry them (Redis); undefined otherwise, and each instance then
 * counts on its own. The caller closes what it gets.
 */
export function openSharedRateLimit(store: StoreSettings['store'], onLost: (err: Error) => void): SharedRateLimit | undefined {
  if (store.kind !== 'redis') return undefined;
  // Its own client, failing fast like the store's: while Redis is unreachable a batch call errors
  // at once and the limiter lets the request through (skipOnError) instead of hanging it or turning
  // it into a 500. It carries one batch of allowance now and then, not a call per request.
  const client = createRedisClient(store.connection, { commandTimeoutMs: store.commandTimeoutMs, onLost });
  return {
    // On a Cluster a call waits (up to a command timeout) for its master's connection made anew.
    allowance: new RedisRateAllowance(client, store.keyPrefix, store.commandTimeoutMs),
    // Ended at once also while Redis is gone (see closeClient).
    close: () => closeClient(client),
  };
}
