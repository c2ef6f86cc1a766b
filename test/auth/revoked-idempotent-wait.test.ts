import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyRing } from '../../src/auth/api-keys.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * A waiting acquire sent with an Idempotency-Key whose caller can no longer take its answer (here: a reload
 * revoked its key) as a lease is handed to it from the queue: that lease keeps no key (only a grant at once
 * does), so no retry can get it. It is given back, not held by nobody until its TTL.
 */
const namespace = `team-${randomUUID().slice(0, 8)}`;
const keys = makeKeys([
  { id: 'holder-key', namespace, scopes: ['locks'] },
  { id: 'doomed-key', namespace, scopes: ['locks'] },
]);
const HOLDER = bearer(keys.plain['holder-key'] ?? '');
const DOOMED = bearer(keys.plain['doomed-key'] ?? '');

let t: TestApp;
let base: string;
const keyring = new KeyRing(keys.entries);

beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring }, limits: { ...DEFAULT_LIMITS, maxWaitMs: 30_000 } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
});

async function call(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('a revoked key whose idempotent wait was handed the lock as the reload came', () => {
  it('is answered 401 and the lock is given back, not kept for a retry that cannot come', async () => {
    const key = `idem-${randomUUID()}`;
    const held = await call('POST', `/v1/locks/${key}/acquire`, HOLDER, { ttlMs: 30_000 });
    expect(held.status).toBe(200);
    const doomed = call(
      'POST',
      `/v1/locks/${key}/acquire`,
      { ...DOOMED, 'idempotency-key': randomUUID() },
      { ttlMs: 30_000, waitMs: 30_000 },
    );
    await vi.waitFor(async () => expect((await call('GET', `/v1/locks/${key}`, HOLDER)).body.waiters).toBe(1), {
      timeout: 10_000,
      interval: 20,
    });
    // The release hands the lock to the queued caller, and the reload revokes its key before that
    // caller's answer is built.
    const released = t.locks.release(namespace, key, held.body.ownerToken as string);
    keyring.replace(keys.entries.filter((e) => e.id !== 'doomed-key'));
    await released;
    const answer = await doomed;
    expect(answer.status, JSON.stringify(answer.body)).toBe(401);
    // Nobody holds the lock: the holder takes it again at once.
    const again = await call('POST', `/v1/locks/${key}/acquire`, HOLDER, { ttlMs: 1_000 });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  });
});
