import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('config', () => {
  it('defaults: embedded store on 127.0.0.1:3000 with the documented TTL bounds', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      logLevel: 'info',
      store: { kind: 'memory' },
      limits: { minTtlMs: 100, maxTtlMs: 3_600_000 },
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('REDIS_URL selects the Redis store', () => {
    const config = loadConfig({ REDIS_URL: 'redis://cache:6379/2', REDIS_COMMAND_TIMEOUT_MS: '250' });
    expect(config.store).toEqual({ kind: 'redis', url: 'redis://cache:6379/2', keyPrefix: 'keyholder:', commandTimeoutMs: 250 });
  });

  it('empty variables fall back to defaults', () => {
    expect(loadConfig({ PORT: '', REDIS_URL: '', LOG_LEVEL: '' })).toMatchObject({ port: 3000, store: { kind: 'memory' } });
  });

  const rejections: Array<[string, Record<string, string>, string]> = [
    ['PORT not a number', { PORT: 'abc' }, 'PORT'],
    ['PORT out of range', { PORT: '70000' }, 'PORT'],
    ['PORT fractional', { PORT: '80.5' }, 'PORT'],
    ['LOG_LEVEL unknown', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    ['REDIS_URL not a URL', { REDIS_URL: 'localhost:6379' }, 'REDIS_URL'],
    ['REDIS_URL wrong scheme', { REDIS_URL: 'http://localhost:6379' }, 'REDIS_URL'],
    ['min TTL above max TTL', { LOCK_MIN_TTL_MS: '5000', LOCK_MAX_TTL_MS: '1000' }, 'LOCK_MIN_TTL_MS'],
    ['command timeout zero', { REDIS_COMMAND_TIMEOUT_MS: '0' }, 'REDIS_COMMAND_TIMEOUT_MS'],
    ['store redis without URL', { KEYHOLDER_STORE: 'redis' }, 'REDIS_URL'],
    ['store memory with a URL', { KEYHOLDER_STORE: 'memory', REDIS_URL: 'redis://x:6379' }, 'KEYHOLDER_STORE'],
    ['unknown store', { KEYHOLDER_STORE: 'etcd' }, 'KEYHOLDER_STORE'],
    ['production without Redis', { NODE_ENV: 'production' }, 'REDIS_URL'],
  ];
  for (const [name, env, variable] of rejections) {
    it(`rejects ${name}, naming ${variable}`, () => {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(new RegExp(`\\b${variable}\\b`));
    });
  }

  it('production may run the embedded store when asked for explicitly', () => {
    const open = { KEYHOLDER_AUTH: 'open' };
    expect(loadConfig({ NODE_ENV: 'production', KEYHOLDER_STORE: 'memory', ...open }).store.kind).toBe('memory');
    expect(loadConfig({ NODE_ENV: 'production', REDIS_URL: 'redis://r:6379', ...open }).store.kind).toBe('redis');
  });
});
