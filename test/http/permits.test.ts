import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Semaphores and read/write locks over HTTP: the lifecycle, waiting, bad input (each followed by a
 * request that must still succeed), and that scopes, namespaces and the namespace quota cover them.
 */
const keys = makeKeys([
  { id: 'a', namespace: 'team-a', scopes: ['locks'] },
  { id: 'b', namespace: 'team-b', scopes: ['locks'] },
  { id: 'ops', namespace: 'ops', scopes: ['admin'] },
]);
const as = (id: 'a' | 'b' | 'ops') => ({ authorization: `Bearer ${keys.plain[id] ?? ''}` });

let t: TestApp;
const server = () => t.app.server;
beforeAll(async () => {
  t = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    // Room for the lifecycle cases; the quota case below fills what is left.
    limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 50 },
  });
});
afterAll(async () => {
  await t.close();
});

const post = (url: string, body: unknown, who: 'a' | 'b' | 'ops' = 'a') =>
  request(server())
    .post(url)
    .set(as(who))
    .send(body as object);

describe('semaphores', () => {
  it('runs the lifecycle: permits up to the limit, 409 semaphore_full with Retry-After, inspect, renew, release', async () => {
    const first = await post('/v1/semaphores/checkout/acquire', { limit: 2, ttlMs: 30_000, holder: 'w1' }).expect(200);
    expect(first.body).toMatchObject({ key: 'checkout', limit: 2, ttlMs: 30_000, holder: 'w1' });
    const second = await post('/v1/semaphores/checkout/acquire', { limit: 2, ttlMs: 30_000 }).expect(200);
    expect(second.body.fencingToken).toBeGreaterThan(first.body.fencingToken);
    const full = await post('/v1/semaphores/checkout/acquire', { limit: 2, ttlMs: 30_000 }).expect(409);
    expect(full.body).toMatchObject({ code: 'semaphore_full' });
    expect(Number(full.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const mismatch = await post('/v1/semaphores/checkout/acquire', { limit: 3, ttlMs: 30_000 }).expect(409);
    expect(mismatch.body).toMatchObject({ code: 'limit_mismatch' });
    expect(mismatch.headers['retry-after']).toBeDefined();

    const inspected = await request(server()).get('/v1/semaphores/checkout').set(as('a')).expect(200);
    expect(inspected.body).toMatchObject({ key: 'checkout', limit: 2, permitsHeld: 2, truncated: false, waiters: 0 });
    expect(inspected.body.holders.map((h: { holder: string | null }) => h.holder)).toEqual(['w1', null]);
    expect(JSON.stringify(inspected.body)).not.toContain(first.body.ownerToken);

    const renewed = await post('/v1/semaphores/checkout/renew', { ownerToken: first.body.ownerToken, ttlMs: 60_000 }).expect(200);
    expect(renewed.body.fencingToken).toBe(first.body.fencingToken);
    await post('/v1/semaphores/checkout/release', { ownerToken: first.body.ownerToken }).expect(200, { key: 'checkout', released: true });
    await post('/v1/semaphores/checkout/release', { ownerToken: first.body.ownerToken }).expect(409);
    await post('/v1/semaphores/checkout/release', { ownerToken: second.body.ownerToken }).expect(200);
    const free = await request(server()).get('/v1/semaphores/checkout').set(as('a')).expect(200);
    expect(free.body).toEqual({
      key: 'checkout',
      index: expect.any(Number),
      limit: null,
      permitsHeld: 0,
      holders: [],
      truncated: false,
      waiters: 0,
    });
    expect(free.body.index).toBeGreaterThan(inspected.body.index);
  });

  for (const [path, acquire] of [
    ['semaphores', { limit: 2, ttlMs: 30_000 }],
    ['rwlocks', { mode: 'read', ttlMs: 30_000 }],
  ] as const) {
    it(`${path}: every inspect carries index; a blocking query answers when it changes, or after waitMs unchanged`, async () => {
      const url = `/v1/${path}/watched`;
      const before = await request(server()).get(url).set(as('a')).expect(200);
      const index = before.body.index as number;
      // A different index answers at once; the same one waits until the grant.
      await request(server())
        .get(`${url}?index=${index + 1}&waitMs=30000`)
        .set(as('a'))
        .expect(200);
      // Whether the query is in place before the grant or reads after it, its answer is the same: the
      // grant (the permit watch contract proves the wake-up itself, with the watchers counted).
      const waiting = request(server())
        .get(`${url}?index=${index}&waitMs=30000`)
        .set(as('a'))
        .then((r) => r);
      const grant = await post(`${url}/acquire`, acquire).expect(200);
      const woken = await waiting;
      expect(woken.status).toBe(200);
      expect(woken.body.index).toBeGreaterThan(index);
      expect(woken.body.holders.map((h: { fencingToken: number }) => h.fencingToken)).toEqual([grant.body.fencingToken]);
      const unchanged = await request(server()).get(`${url}?index=${woken.body.index}&waitMs=20`).set(as('a')).expect(200);
      expect(unchanged.body.index).toBe(woken.body.index);
      await post(`${url}/release`, { ownerToken: grant.body.ownerToken }).expect(200);
      await request(server())
        .get(`${url}?index=1&waitMs=${DEFAULT_LIMITS.maxWaitMs + 1}`)
        .set(as('a'))
        .expect(400);
    });
  }

  it('a waiting caller gets the permit another releases', async () => {
    const held = await post('/v1/semaphores/queue/acquire', { limit: 1, ttlMs: 30_000 }).expect(200);
    const waiting = post('/v1/semaphores/queue/acquire', { limit: 1, ttlMs: 30_000, waitMs: 10_000 }).then((r) => r);
    await expect
      .poll(async () => ((await request(server()).get('/v1/semaphores/queue').set(as('a'))).body as { waiters: number }).waiters)
      .toBe(1);
    await post('/v1/semaphores/queue/release', { ownerToken: held.body.ownerToken }).expect(200);
    const granted = await waiting;
    expect(granted.status).toBe(200);
    expect(granted.body.fencingToken).toBeGreaterThan(held.body.fencingToken);
  });

  it('namespaces keep semaphores apart: the same name in two namespaces is two semaphores', async () => {
    await post('/v1/semaphores/shared-name/acquire', { limit: 1, ttlMs: 30_000 }, 'a').expect(200);
    await post('/v1/semaphores/shared-name/acquire', { limit: 1, ttlMs: 30_000 }, 'b').expect(200);
    await post('/v1/semaphores/shared-name/acquire', { limit: 1, ttlMs: 30_000 }, 'b').expect(409);
    const listed = await request(server()).get('/v1/semaphores?namespace=team-b').set(as('ops')).expect(200);
    expect(listed.body.entries.map((e: { key: string }) => e.key)).toContain('shared-name');
    await request(server()).delete('/v1/semaphores/shared-name?namespace=team-b').set(as('ops')).expect(200);
    await post('/v1/semaphores/shared-name/acquire', { limit: 1, ttlMs: 30_000 }, 'b').expect(200);
  });

  const bad: Array<[string, unknown, string]> = [
    ['missing limit', { ttlMs: 1000 }, 'limit'],
    ['limit 0', { limit: 0, ttlMs: 1000 }, 'limit'],
    ['limit above 10000', { limit: 10_001, ttlMs: 1000 }, 'limit'],
    ['limit fractional', { limit: 1.5, ttlMs: 1000 }, 'limit'],
    ['limit as string', { limit: '2', ttlMs: 1000 }, 'limit'],
    ['ttlMs below the minimum', { limit: 1, ttlMs: 10 }, 'ttlMs'],
    ['waitMs above the maximum', { limit: 1, ttlMs: 1000, waitMs: 10_000_000 }, 'waitMs'],
    ['an unknown field', { limit: 1, ttlMs: 1000, mode: 'read' }, ''],
  ];
  it.each(bad)('400 invalid_request for %s, and the server still serves', async (_name, body, field) => {
    const res = await post('/v1/semaphores/bad-input/acquire', body).expect(400);
    expect(res.body.code).toBe('invalid_request');
    if (field) expect(JSON.stringify(res.body.errors)).toContain(field);
    const ok = await post(`/v1/semaphores/after-bad-${Math.random().toString(36).slice(2)}/acquire`, { limit: 1, ttlMs: 1000 });
    expect(ok.status).toBe(200);
  });
});

describe('read/write locks', () => {
  it('many readers or one writer; a waiting writer holds back later readers', async () => {
    const r1 = await post('/v1/rwlocks/config/acquire', { mode: 'read', ttlMs: 30_000, holder: 'reader-1' }).expect(200);
    expect(r1.body).toMatchObject({ key: 'config', mode: 'read', holder: 'reader-1' });
    await post('/v1/rwlocks/config/acquire', { mode: 'read', ttlMs: 30_000 }).expect(200);
    const refused = await post('/v1/rwlocks/config/acquire', { mode: 'write', ttlMs: 30_000 }).expect(409);
    expect(refused.body.code).toBe('rwlock_held');
    expect(refused.headers['retry-after']).toBeDefined();

    const writer = post('/v1/rwlocks/config/acquire', { mode: 'write', ttlMs: 30_000, waitMs: 10_000 }).then((r) => r);
    await expect
      .poll(async () => ((await request(server()).get('/v1/rwlocks/config').set(as('a'))).body as { waiters: number }).waiters)
      .toBe(1);
    // Read-held, but a writer waits: a new reader is refused.
    await post('/v1/rwlocks/config/acquire', { mode: 'read', ttlMs: 30_000 }).expect(409);
    const inspected = await request(server()).get('/v1/rwlocks/config').set(as('a')).expect(200);
    expect(inspected.body).toMatchObject({ key: 'config', mode: 'read', holderCount: 2, truncated: false, waiters: 1 });
    expect(inspected.body.holders).toHaveLength(2);

    const readers = inspected.body.holders as Array<{ fencingToken: number }>;
    await post('/v1/rwlocks/config/release', { ownerToken: r1.body.ownerToken }).expect(200);
    await request(server())
      .post('/v1/rwlocks/config/release')
      .set(as('a'))
      .send({ ownerToken: 'x'.repeat(22) })
      .expect(409);
    const list = await request(server()).get('/v1/rwlocks?namespace=team-a').set(as('ops')).expect(200);
    expect(list.body.entries).toHaveLength(1);
    await request(server()).delete('/v1/rwlocks/config?namespace=team-a').set(as('ops')).expect(200);
    const w = await writer;
    expect(w.status).toBe(200);
    expect(w.body.fencingToken).toBeGreaterThan(Math.max(...readers.map((r) => r.fencingToken)));
    const held = await request(server()).get('/v1/rwlocks/config').set(as('a')).expect(200);
    expect(held.body).toMatchObject({ mode: 'write', waiters: 0 });
  });

  it('400 for a missing or unknown mode, and the server still serves', async () => {
    for (const body of [{ ttlMs: 1000 }, { mode: 'exclusive', ttlMs: 1000 }, { mode: 'read' }]) {
      const res = await post('/v1/rwlocks/bad/acquire', body).expect(400);
      expect(res.body.code).toBe('invalid_request');
    }
    await post('/v1/rwlocks/bad/acquire', { mode: 'read', ttlMs: 1000 }).expect(200);
  });
});

describe('the namespace quota counts every lease', () => {
  it('a semaphore permit or a read lease is refused with quota_exceeded once the namespace holds its limit', async () => {
    const quota = await buildTestApp({ limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 2 } });
    try {
      const q = (url: string, body: object) => request(quota.app.server).post(url).send(body);
      await q('/v1/locks/one/acquire', { ttlMs: 30_000 }).expect(200);
      const permit = await q('/v1/semaphores/two/acquire', { limit: 5, ttlMs: 30_000 }).expect(200);
      expect((await q('/v1/rwlocks/three/acquire', { mode: 'read', ttlMs: 30_000 }).expect(429)).body.code).toBe('quota_exceeded');
      await q('/v1/semaphores/two/release', { ownerToken: permit.body.ownerToken }).expect(200);
      await q('/v1/rwlocks/three/acquire', { mode: 'read', ttlMs: 30_000 }).expect(200);
    } finally {
      await quota.close();
    }
  });
});
