import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AuthMode } from '../http/auth.js';
import type { RateLimitSettings } from '../http/rate-limit.js';
import { KeyRing, loadKeysFile, reloadKeyRing } from './api-keys.js';

/**
 * Builds what buildApp needs for authentication and rate limits from the configuration, and what the
 * server must do about them over its life (reload keys on SIGHUP, close the rate limiter's client).
 */
export interface AccessSetup {
  readonly auth: AuthMode;
  readonly rateLimit: RateLimitSettings;
  close(): Promise<void>;
}

/** Throws KeysFileError when the keys file cannot be read or parsed: the server must not start. */
export function setUpAccess(config: Config, logger: Logger): AccessSetup {
  let auth: AuthMode;
  if (config.auth.mode === 'keys') {
    const keysFile = config.auth.keysFile;
    const keyring = new KeyRing(loadKeysFile(keysFile));
    logger.info({ keysFile, keys: keyring.size }, 'API keys loaded; send SIGHUP to reload them');
    // A reload swaps the key set in place: listening sockets and open connections are untouched.
    process.on('SIGHUP', () => {
      reloadKeyRing(keyring, keysFile, logger);
    });
    auth = { mode: 'keys', keyring };
  } else {
    logger.warn(
      { auth: 'open' },
      'running OPEN: no API keys are checked and every caller may take, list and force-release every lock. ' +
        'Set KEYHOLDER_API_KEYS_FILE to require keys (production refuses to start without it unless KEYHOLDER_AUTH=open)',
    );
    auth = { mode: 'open' };
    // SIGHUP's default action ends the process, and with it every lock of the embedded store. Operators
    // send it by habit (and to every instance at once): answer it with a log line instead.
    process.on('SIGHUP', () => {
      logger.info('SIGHUP: running open, there are no API keys to reload');
    });
  }

  let redis: Redis | undefined;
  if (config.store.kind === 'redis' && config.rateLimit.max > 0) {
    // Its own client, set up to fail fast: while Redis is unreachable a counter call errors at once
    // (no offline queue, no retries, a short timeout) and the limiter lets the request through
    // (skipOnError) instead of hanging it or turning it into a 500.
    redis = new Redis(config.store.url, {
      commandTimeout: config.store.commandTimeoutMs,
      connectTimeout: Math.max(config.store.commandTimeoutMs, 1000),
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: (attempt) => Math.min(attempt * 50, 1000),
    });
    let wasReady = false;
    redis.on('ready', () => {
      wasReady = true;
    });
    redis.on('error', (err: Error) => {
      if (wasReady) logger.warn({ err: err.message }, 'rate limiter lost Redis; requests are not counted until it is back');
      wasReady = false;
    });
  }
  const client = redis;
  return {
    auth,
    rateLimit: { ...config.rateLimit, redis: client, keyPrefix: config.store.kind === 'redis' ? config.store.keyPrefix : '' },
    close: async () => {
      if (!client) return;
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
