import type { Logger } from 'pino';
import { KeyRing, loadKeysFile, reloadKeyRing } from './auth/api-keys.js';
import type { Config } from './config.js';
import type { AuthMode } from './http/auth.js';
import type { RateLimitSettings } from './http/rate-limit.js';
import { openSharedRateLimit } from './store/shared-rate-limit.js';

/**
 * What buildApp needs for authentication and rate limits, built from the configuration, and what the
 * server must do about them over its life (reload the keys, close the rate limiter's client).
 */
export interface AccessSetup {
  readonly auth: AuthMode;
  readonly rateLimit: RateLimitSettings;
  /** Re-reads the keys file (the server calls it on SIGHUP); in open mode it only logs. */
  readonly reloadKeys: () => void;
  close(): Promise<void>;
}

/** Throws KeysFileError when the keys file cannot be read or parsed: the server must not start. */
export function setUpAccess(config: Config, logger: Logger): AccessSetup {
  let auth: AuthMode;
  let reloadKeys: () => void;
  if (config.auth.mode === 'keys') {
    const keysFile = config.auth.keysFile;
    const keyring = new KeyRing(loadKeysFile(keysFile));
    logger.info({ keysFile, keys: keyring.size }, 'API keys loaded; send SIGHUP to reload them');
    // A reload swaps the key set in place: listening sockets and open connections are untouched.
    reloadKeys = () => reloadKeyRing(keyring, keysFile, logger);
    auth = { mode: 'keys', keyring };
  } else {
    logger.warn(
      { auth: 'open' },
      'running OPEN: no API keys are checked and every caller may take, list and force-release every lock. ' +
        'Set KEYHOLDER_API_KEYS_FILE to require keys (production refuses to start without it unless KEYHOLDER_AUTH=open)',
    );
    auth = { mode: 'open' };
    // Still handled: SIGHUP's default action ends the process, and with it every lock of the embedded
    // store. Operators send it by habit (and to every instance at once): a log line answers it.
    reloadKeys = () => logger.info('SIGHUP: running open, there are no API keys to reload');
  }

  const shared =
    config.rateLimit.max > 0
      ? openSharedRateLimit(config.store, (err) =>
          logger.warn({ err: err.message }, 'rate limiter lost Redis; requests are not counted until it is back'),
        )
      : undefined;
  return {
    auth,
    reloadKeys,
    rateLimit: { ...config.rateLimit, ...(shared ? { allowance: shared.allowance } : {}) },
    close: async () => {
      await shared?.close();
    },
  };
}
