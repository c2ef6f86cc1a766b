import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * Idempotency-Key on acquire across two real instances sharing one Redis, with API keys: the key is
 * stored with the lease in Redis (so any instance answers a retry), scoped to the API key that sent it.
 */
describe('Idempotency-Key across instances and API keys', () => {
  let redis: RedisServer;
  let a: KeyholderProcess;
  let b: KeyholderProcess;
  let keysFile: string;
  const keys = makeKeys([
    { id: 'worker-1', namespace: 'jobs', scopes: ['locks'] },
    { id: 'worker-2', namespace: 'jobs', scopes: ['locks'] },
  ]);
  const w1 = bearer(keys.plain['worker-1'] ?? '');
  const w2 = bearer(keys.plain['worker-2'] ?? '');

  const acquire = async (
    base: string,
    auth: Record<string, string>,
    key: string,
    idempotencyKey?: string,
    body: Record<string, unknown> = { ttlMs: 10_000, holder: 'h' },
  ) => {
    const res = await fetch(`${base}/v1/locks/${key}/acquire`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', ...(idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    redis = await RedisServer.start();
    keysFile = keys.writeFile();
    const env = { LOG_LEVEL: 'warn', REDIS_URL: redis.url, KEYHOLDER_STORE: 'redis', KEYHOLDER_API_KEYS_FILE: keysFile };
    [a, b] = await Promise.all([KeyholderProcess.start({ env }), KeyholderProcess.start({ env })]);
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    if (keysFile) rmSync(dirname(keysFile), { recursive: true, force: true });
  });

  it('a retry on another instance gets the same grant; another API key or another Idempotency-Key gets 409', async () => {
    const key = `idem-${randomUUID()}`;
    const idem = randomUUID();
    const first = await acquire(a.url, w1, key, idem);
    expect(first.status).toBe(200);
    const retried = await acquire(b.url, w1, key, idem);
    expect(retried).toEqual(first);

    const otherApiKey = await acquire(b.url, w2, key, idem);
    expect(otherApiKey.status).toBe(409);
    expect(otherApiKey.body.code).toBe('lock_held');
    expect((await acquire(a.url, w1, key, randomUUID())).status).toBe(409);
    expect((await acquire(a.url, w1, key)).status).toBe(409);

    // Released: the Idempotency-Key went with the lease, so it now takes a new one.
    const released = await fetch(`${b.url}/v1/locks/${key}/release`, {
      method: 'POST',
      headers: { ...w1, 'content-type': 'application/json' },
      body: JSON.stringify({ ownerToken: first.body.ownerToken }),
    });
    expect(released.status).toBe(200);
    const next = await acquire(a.url, w1, key, idem);
    expect(next.status).toBe(200);
    expect(next.body.ownerToken).not.toBe(first.body.ownerToken);
    expect(next.body.fencingToken).toBeGreaterThan(first.body.fencingToken as number);
  });

  it('a replay of the same body is the original grant exactly (after a wait too); any change to what shapes the grant is a 422 that changes nothing', async () => {
    const key = `idem-${randomUUID()}`;
    const idem = randomUUID();
    const body = { ttlMs: 20_000, holder: 'worker-1', lockDelayMs: 1_000 };
    const first = await acquire(a.url, w1, key, idem, body);
    expect(first.status).toBe(200);
    expect(await acquire(b.url, w1, key, idem, body)).toEqual(first);
    // waitMs does not shape the grant: a retry that would have waited gets the same answer at once.
    expect(await acquire(b.url, w1, key, idem, { ...body, waitMs: 5_000 })).toEqual(first);
    for (const changed of [
      { ttlMs: 3_600_000 },
      { holder: 'worker-2' },
      { holder: undefined },
      { lockDelayMs: 0 },
      { lockDelayMs: undefined },
    ]) {
      const reused = await acquire(a.url, w1, key, idem, { ...body, ...changed });
      expect(reused.status).toBe(422);
      expect(reused.body).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    }
    // The lease is the first one still, and the original body still replays it.
    expect(await acquire(a.url, w1, key, idem, body)).toEqual(first);
  });

  it('a malformed Idempotency-Key is a 400 naming the header', async () => {
    const res = await acquire(a.url, w1, `idem-${randomUUID()}`, 'has spaces in it');
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(JSON.stringify(res.body.errors)).toContain('idempotency-key');
  });
});
