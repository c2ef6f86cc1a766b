import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { threeStores } from '../helpers/three-stores.js';

/** An answer's fields, read as the API documents them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const stores = threeStores('lock-sets-quota');

describe.each(stores)('lock sets under a namespace quota (%s)', (_name, open) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({
      store: await open(),
      logLevel: 'silent',
      history: null,
      limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 3 },
    });
  }, 30_000);
  afterAll(async () => {
    await t?.close();
  });
  const post = async (url: string, body: object) => {
    const res = await t.app.inject({ method: 'POST', url, payload: body });
    return { status: res.statusCode, body: res.json<Record<string, Json>>() };
  };
  const k = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

  it('a set counts one per key; refused and partly released sets give their slots back', async () => {
    const [a, b, c, d] = [k('qa'), k('qb'), k('qc'), k('qd')];
    const held = await post(`/v1/locks/${c}/acquire`, { ttlMs: 10_000 });
    expect(held.status).toBe(200);
    // refused (c busy): nothing kept
    expect((await post('/v1/lock-sets/acquire', { keys: [a, c], ttlMs: 10_000 })).status).toBe(409);
    expect((await post('/v1/lock-sets/acquire', { keys: [a, c], ttlMs: 10_000, waitMs: 300 })).status).toBe(409);
    const set = await post('/v1/lock-sets/acquire', { keys: [a, b], ttlMs: 10_000 });
    expect(set.status).toBe(200);
    expect((await post(`/v1/locks/${d}/acquire`, { ttlMs: 10_000 })).status).toBe(429);
    expect((await post('/v1/lock-sets/release', { ownerToken: set.body.ownerToken, keys: [b] })).status).toBe(200);
    const dd = await post(`/v1/locks/${d}/acquire`, { ttlMs: 10_000 });
    expect(dd.status).toBe(200);
    expect((await post(`/v1/locks/${a}/release`, { ownerToken: set.body.ownerToken })).status).toBe(200);
    expect((await post(`/v1/locks/${b}/acquire`, { ttlMs: 10_000 })).status).toBe(200);
  });
});
