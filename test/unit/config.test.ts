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
    expect(config.store).toEqual({
      kind: 'redis',
      connection: { mode: 'standalone', url: 'redis://cache:6379/2' },
      keyPrefix: 'keyholder:',
      commandTimeoutMs: 250,
      replicaAcks: null,
    });
  });

  it('REDIS_SENTINELS and REDIS_SENTINEL_NAME select Redis through Sentinel, with replica acknowledgement', () => {
    const config = loadConfig({
      REDIS_SENTINELS: 's1:26379, s2:26379,[::1]:26380',
      REDIS_SENTINEL_NAME: 'locks',
      REDIS_MIN_REPLICA_ACKS: '1',
      REDIS_REPLICA_ACK_TIMEOUT_MS: '50',
    });
    expect(config.store).toMatchObject({
      kind: 'redis',
      connection: {
        mode: 'sentinel',
        name: 'locks',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26379 },
          { host: '::1', port: 26380 },
        ],
      },
      replicaAcks: { minReplicas: 1, timeoutMs: 50 },
    });
  });

  it('REDIS_CLUSTER_NODES selects a Redis Cluster', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: 'n1:7000,n2:7001' });
    expect(config.store).toMatchObject({
      kind: 'redis',
      connection: {
        mode: 'cluster',
        nodes: [
          { host: 'n1', port: 7000 },
          { host: 'n2', port: 7001 },
        ],
      },
      replicaAcks: null,
    });
  });

  it('KEYHOLDER_STORE=etcd with ETCD_ENDPOINTS selects etcd', () => {
    const config = loadConfig({ KEYHOLDER_STORE: 'etcd', ETCD_ENDPOINTS: 'http://e1:2379,http://e2:2379' });
    expect(config.store).toEqual({
      kind: 'etcd',
      endpoints: ['http://e1:2379', 'http://e2:2379'],
      keyPrefix: 'keyholder/',
      commandTimeoutMs: 2_000,
    });
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
    ['unknown store', { KEYHOLDER_STORE: 'consul' }, 'KEYHOLDER_STORE'],
    ['sentinels without a name', { REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_NAME'],
    ['sentinel not host:port', { REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'x' }, 'REDIS_SENTINELS'],
    ['sentinel port out of range', { REDIS_SENTINELS: 's1:99999', REDIS_SENTINEL_NAME: 'x' }, 'REDIS_SENTINELS'],
    [
      'URL and sentinels at once',
      { REDIS_URL: 'redis://x:6379', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'x' },
      'REDIS_SENTINELS',
    ],
    [
      'ack timeout not below the command timeout',
      { REDIS_URL: 'redis://x:6379', REDIS_MIN_REPLICA_ACKS: '1', REDIS_REPLICA_ACK_TIMEOUT_MS: '500' },
      'REDIS_REPLICA_ACK_TIMEOUT_MS',
    ],
    ['replica acks out of range', { REDIS_URL: 'redis://x:6379', REDIS_MIN_REPLICA_ACKS: '-1' }, 'REDIS_MIN_REPLICA_ACKS'],
    ['cluster node not host:port', { REDIS_CLUSTER_NODES: 'n1' }, 'REDIS_CLUSTER_NODES'],
    ['URL and cluster nodes at once', { REDIS_URL: 'redis://x:6379', REDIS_CLUSTER_NODES: 'n1:7000' }, 'REDIS_CLUSTER_NODES'],
    ['store memory with cluster nodes', { KEYHOLDER_STORE: 'memory', REDIS_CLUSTER_NODES: 'n1:7000' }, 'KEYHOLDER_STORE'],
    ['store etcd without endpoints', { KEYHOLDER_STORE: 'etcd' }, 'ETCD_ENDPOINTS'],
    ['etcd endpoint not a URL', { KEYHOLDER_STORE: 'etcd', ETCD_ENDPOINTS: 'e1:2379' }, 'ETCD_ENDPOINTS'],
    ['etcd endpoints without store etcd', { ETCD_ENDPOINTS: 'http://e1:2379' }, 'ETCD_ENDPOINTS'],
    [
      'store etcd with a Redis URL',
      { KEYHOLDER_STORE: 'etcd', ETCD_ENDPOINTS: 'http://e1:2379', REDIS_URL: 'redis://x:6379' },
      'KEYHOLDER_STORE',
    ],
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
