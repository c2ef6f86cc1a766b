import { Redis } from 'ioredis';

/** Reconnect quickly at first, then every second, for ever: the service recovers by itself. */
const RECONNECT_MAX_DELAY_MS = 1000;

export interface RedisClientOptions {
  /** Upper bound on one command's round trip; past it the call fails instead of hanging. */
  readonly commandTimeoutMs: number;
  /** Commands issued in the same tick share one round trip (the lock store's hot path wants this). */
  readonly autoPipelining?: boolean;
  /** Called on the first error after the connection was ready: once per outage, not per reconnect attempt. */
  readonly onLost?: (err: Error) => void;
  /** Called each time the connection becomes ready. */
  readonly onReady?: () => void;
}

/**
 * The one way keyholder connects to Redis: set up to fail fast and closed. While disconnected a
 * command errors at once (no offline queue) instead of being answered late; a command in flight when
 * the connection drops is NOT re-sent (its outcome is unknown, and re-sending an acquire could grant a
 * lease nobody knows the token of); reconnection goes on for ever.
 */
export function createRedisClient(url: string, options: RedisClientOptions): Redis {
  const redis = new Redis(url, {
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: Math.max(options.commandTimeoutMs, 1000),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_DELAY_MS),
    enableAutoPipelining: options.autoPipelining ?? false,
    lazyConnect: false,
  });
  let wasReady = false;
  redis.on('ready', () => {
    wasReady = true;
    options.onReady?.();
  });
  redis.on('error', (err: Error) => {
    if (wasReady) options.onLost?.(err);
    wasReady = false;
  });
  return redis;
}
