import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

let t: TestApp;
const server = () => t.app.server;
const PROBLEM = /^application\/problem\+json/;

beforeAll(async () => {
  t = await buildTestApp({ limits: { ...DEFAULT_LIMITS, maxLockDelayMs: 5_000 } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t.close();
});

function expectProblem(res: request.Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(PROBLEM);
  expect(res.body).toMatchObject({ status, code });
}

const acquire = (key: string, body: object = { ttlMs: 30_000 }) => request(server()).post(`/v1/locks/${key}/acquire`).send(body);

describe('watch (blocking queries) over HTTP', () => {
  it('every inspect answer carries index; a blocking query answers when the lock changes', async () => {
    const free = await request(server()).get('/v1/locks/w:1').expect(200);
    expect(free.body).toEqual({ key: 'w:1', held: false, index: 1 });
    const watching = request(server()).get(`/v1/locks/w:1?index=1&waitMs=10000`);
    const answered = watching.then((res) => res);
    const grant = await acquire('w:1', { ttlMs: 30_000, holder: 'leader-a' }).expect(200);
    const res = await answered;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ held: true, holder: 'leader-a', index: 2 * grant.body.fencingToken });
    // A different index answers at once; the same one waits for the release.
    expect((await request(server()).get('/v1/locks/w:1?index=7&waitMs=10000').expect(200)).body.index).toBe(2 * grant.body.fencingToken);
    const next = request(server())
      .get(`/v1/locks/w:1?index=${2 * grant.body.fencingToken}&waitMs=10000`)
      .then((r) => r);
    await request(server()).post('/v1/locks/w:1/release').send({ ownerToken: grant.body.ownerToken }).expect(200);
    expect((await next).body).toEqual({ key: 'w:1', held: false, index: 2 * grant.body.fencingToken + 1 });
  });

  it('answers after waitMs with the unchanged state; waitMs above the bound is a 400', async () => {
    const started = performance.now();
    const res = await request(server()).get('/v1/locks/w:2?index=1&waitMs=200').expect(200);
    expect(res.body).toEqual({ key: 'w:2', held: false, index: 1 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expectProblem(await request(server()).get(`/v1/locks/w:2?index=1&waitMs=${DEFAULT_LIMITS.maxWaitMs + 1}`), 400, 'invalid_request');
    expectProblem(await request(server()).get('/v1/locks/w:2?index=-1'), 400, 'invalid_request');
  });
});

describe('lock-delay over HTTP', () => {
  it('an expired lease with lockDelayMs keeps the key unavailable; inspect shows lockDelayUntil; above the bound is a 400', async () => {
    await acquire('d:1', { ttlMs: 100, lockDelayMs: 2_000 }).expect(200);
    await expect.poll(async () => (await request(server()).get('/v1/locks/d:1')).body.held as boolean, { timeout: 5_000 }).toBe(false);
    const inspected = await request(server()).get('/v1/locks/d:1').expect(200);
    expect(Date.parse(inspected.body.lockDelayUntil)).toBeGreaterThan(Date.now());
    const refused = await acquire('d:1');
    expectProblem(refused, 409, 'lock_held');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expectProblem(await acquire('d:2', { ttlMs: 1_000, lockDelayMs: 5_001 }), 400, 'invalid_request');
  });
});

describe('lock sets over HTTP', () => {
  const sets = (op: string, body: object) => request(server()).post(`/v1/lock-sets/${op}`).send(body);

  it('acquire all, a plain acquire of a member is refused, renew and release all', async () => {
    const granted = await sets('acquire', { keys: ['acct:2', 'acct:1'], ttlMs: 30_000, holder: 'transfer-9' }).expect(200);
    expect(granted.body.locks.map((l: { key: string }) => l.key)).toEqual(['acct:2', 'acct:1']);
    expect(granted.body.ownerToken).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect((await request(server()).get('/v1/locks/acct:1').expect(200)).body).toMatchObject({ held: true, holder: 'transfer-9' });
    expectProblem(await acquire('acct:2'), 409, 'lock_held');
    const { ownerToken } = granted.body;
    const renewed = await sets('renew', { ownerToken, keys: ['acct:1', 'acct:2'], ttlMs: 30_000 }).expect(200);
    expect(renewed.body.locks).toEqual([
      { key: 'acct:1', fencingToken: granted.body.locks[1].fencingToken },
      { key: 'acct:2', fencingToken: granted.body.locks[0].fencingToken },
    ]);
    await sets('release', { ownerToken, keys: ['acct:1', 'acct:2'] }).expect(200, { released: true });
    expectProblem(await sets('release', { ownerToken, keys: ['acct:1', 'acct:2'] }), 409, 'not_owner');
    expectProblem(await sets('renew', { ownerToken, keys: ['acct:1', 'acct:2'], ttlMs: 1_000 }), 409, 'not_owner');
  });

  it('refuses the whole set (409, Retry-After) when one key is held; with waitMs it is granted once that key is free', async () => {
    const single = await acquire('acct:3', { ttlMs: 30_000 }).expect(200);
    const refused = await sets('acquire', { keys: ['acct:3', 'acct:4'], ttlMs: 30_000 });
    expectProblem(refused, 409, 'lock_held');
    expect(refused.headers['retry-after']).toBeDefined();
    expect((await request(server()).get('/v1/locks/acct:4')).body.held).toBe(false);
    const waiting = sets('acquire', { keys: ['acct:4', 'acct:3'], ttlMs: 30_000, waitMs: 10_000 }).then((r) => r);
    await request(server()).post('/v1/locks/acct:3/release').send({ ownerToken: single.body.ownerToken }).expect(200);
    const granted = await waiting;
    expect(granted.status).toBe(200);
    expect(granted.body.locks[1].fencingToken).toBeGreaterThan(single.body.fencingToken);
  });

  it('bad sets are 400: no keys, more than 16, a repeated key, a bad key', async () => {
    expectProblem(await sets('acquire', { keys: [], ttlMs: 1_000 }), 400, 'invalid_request');
    expectProblem(await sets('acquire', { keys: Array.from({ length: 17 }, (_v, i) => `k${i}`), ttlMs: 1_000 }), 400, 'invalid_request');
    expectProblem(await sets('acquire', { keys: ['a', 'a'], ttlMs: 1_000 }), 400, 'invalid_request');
    expectProblem(await sets('acquire', { keys: ['a/b'], ttlMs: 1_000 }), 400, 'invalid_request');
  });
});
