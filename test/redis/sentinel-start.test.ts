import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { withClient } from '../helpers/redis-admin.js';
import { SentinelTopology } from '../helpers/redis-sentinel.js';
import { freePort } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * An instance started with Sentinel settings it cannot connect with keeps running (/livez 200) and
 * answers 503, and its log says why from the start: no primary by that name, no sentinel answering, a
 * password the primary asks for. Before its first connection the client's errors are not an outage
 * (onLost), so nothing else reports them.
 */
let topology: SentinelTopology;

beforeAll(async () => {
  // The sentinel must not fail the primary over while it asks for a password (it answers the
  // sentinel's PINGs with NOAUTH): no failover within a test.
  topology = await SentinelTopology.start({ replicas: 1, sentinels: 1, downAfterMs: 120_000 });
}, 60_000);
afterAll(async () => {
  await topology?.stop();
});

/** Starts an instance with `env` and waits for a warning whose error matches `reason`. */
async function warnsAtStart(env: Record<string, string>, reason: RegExp): Promise<void> {
  const server = await KeyholderProcess.start({ env: { ...env, LOG_LEVEL: 'info' }, waitFor: 'livez' });
  try {
    const acquire = await fetch(`${server.url}/v1/locks/start/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs: 10_000 }),
      signal: AbortSignal.timeout(5_000),
    });
    expect(acquire.status).toBe(503);
    await eventually(async () => {
      const warning = server.jsonLogs().find((line) => line.store === 'redis' && reason.test(String(line.err)));
      expect(warning, server.logs.join('\n')).toMatchObject({ level: 40, sentinels: expect.any(String) });
    }, 15_000);
  } finally {
    await server.stop();
  }
}

describe('Sentinel settings that cannot connect are named in the log at start', () => {
  it('a master name the sentinels do not know', async () => {
    await warnsAtStart({ REDIS_SENTINELS: topology.sentinelsEnv, REDIS_SENTINEL_NAME: 'not-monitored' }, /No such master/);
  });

  it('no sentinel listening', async () => {
    await warnsAtStart(
      { REDIS_SENTINELS: `127.0.0.1:${await freePort()}`, REDIS_SENTINEL_NAME: SentinelTopology.NAME },
      /sentinels are unreachable/,
    );
  });

  it('a primary that asks for a password', async () => {
    const primary = await topology.primaryPort();
    await withClient(primary, (c) => c.config('SET', 'requirepass', 'secret'));
    try {
      await warnsAtStart({ REDIS_SENTINELS: topology.sentinelsEnv, REDIS_SENTINEL_NAME: SentinelTopology.NAME }, /NOAUTH/);
    } finally {
      const admin = new Redis({ host: '127.0.0.1', port: primary, password: 'secret', maxRetriesPerRequest: 0 });
      try {
        await admin.config('SET', 'requirepass', '');
      } finally {
        admin.disconnect();
      }
    }
  });
});
