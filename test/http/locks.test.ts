import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

let t: TestApp;
const server = () => t.app.server;

beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => {
  await t.close();
});

const PROBLEM = /^application\/problem\+json/;

function expectProblem(res: request.Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(PROBLEM);
  expect(res.body).toMatchObject({ status, code, type: `urn:keyholder:problem:${code}` });
  expect(typeof res.body.title).toBe('string');
  expect(typeof res.body.detail).toBe('string');
  expect(JSON.stringify(res.body)).not.toMatch(/at .*\.(ts|js):\d+/); // no stack traces
}

describe('acquire / renew / release / inspect', () => {
  it('runs the whole lifecycle', async () => {
    const acquired = await request(server()).post('/v1/locks/invoice:42/acquire').send({ ttlMs: 30_000, holder: 'consumer-7' }).expect(200);
    expect(acquired.headers['content-type']).toMatch(/^application\/json/);
    expect(acquired.body).toMatchObject({ key: 'invoice:42', ttlMs: 30_000, holder: 'consumer-7' });
    expect(acquired.body.ownerToken).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(Number.isSafeInteger(acquired.body.fencingToken)).toBe(true);
    expect(Date.parse(acquired.body.expiresAt)).toBeGreaterThan(Date.now() + 25_000);

    const inspected = await request(server()).get('/v1/locks/invoice:42').expect(200);
    expect(inspected.body).toMatchObject({
      key: 'invoice:42',
      held: true,
      holder: 'consumer-7',
      fencingToken: acquired.body.fencingToken,
      expiresAt: acquired.body.expiresAt,
    });
    expect(inspected.body.ttlRemainingMs).toBeGreaterThan(25_000);
    expect(JSON.stringify(inspected.body)).not.toContain(acquired.body.ownerToken);

    const renewed = await request(server())
      .post('/v1/locks/invoice:42/renew')
      .send({ ownerToken: acquired.body.ownerToken, ttlMs: 60_000 })
      .expect(200);
    expect(renewed.body).toMatchObject({ key: 'invoice:42', fencingToken: acquired.body.fencingToken, ttlMs: 60_000 });
    expect(Date.parse(renewed.body.expiresAt)).toBeGreaterThan(Date.parse(acquired.body.expiresAt));

    await request(server())
      .post('/v1/locks/invoice:42/release')
      .send({ ownerToken: acquired.body.ownerToken })
      .expect(200, { key: 'invoice:42', released: true });

    const after = await request(server()).get('/v1/locks/invoice:42').expect(200);
    expect(after.body).toEqual({ key: 'invoice:42', held: false, index: expect.any(Number) as number });
  });

  it('a second acquirer gets 409 lock_held with Retry-After and retryAfterMs', async () => {
    await request(server()).post('/v1/locks/busy/acquire').send({ ttlMs: 2_500 }).expect(200);
    const res = await request(server()).post('/v1/locks/busy/acquire').send({ ttlMs: 1_000 });
    expectProblem(res, 409, 'lock_held');
    expect(res.body.retryAfterMs).toBeGreaterThan(0);
    expect(res.body.retryAfterMs).toBeLessThanOrEqual(2_500);
    expect(res.headers['retry-after']).toBe('3');
  });

  it('Retry-After is at least one second even when the lease is almost over', async () => {
    await request(server()).post('/v1/locks/short/acquire').send({ ttlMs: 100 }).expect(200);
    const res = await request(server()).post('/v1/locks/short/acquire').send({ ttlMs: 100 });
    expectProblem(res, 409, 'lock_held');
    expect(res.headers['retry-after']).toBe('1');
  });

  it('renew and release with a token that does not hold the lock get 409 not_owner', async () => {
    const grant = await request(server()).post('/v1/locks/owned/acquire').send({ ttlMs: 10_000 }).expect(200);
    const stranger = 'AAAAAAAAAAAAAAAAAAAAAA';
    expectProblem(await request(server()).post('/v1/locks/owned/renew').send({ ownerToken: stranger, ttlMs: 1_000 }), 409, 'not_owner');
    expectProblem(await request(server()).post('/v1/locks/owned/release').send({ ownerToken: stranger }), 409, 'not_owner');
    // The real owner is unaffected.
    const state = await request(server()).get('/v1/locks/owned').expect(200);
    expect(state.body.fencingToken).toBe(grant.body.fencingToken);
    await request(server()).post('/v1/locks/owned/release').send({ ownerToken: grant.body.ownerToken }).expect(200);
    // Released: the same token is no longer the owner.
    expectProblem(await request(server()).post('/v1/locks/owned/release').send({ ownerToken: grant.body.ownerToken }), 409, 'not_owner');
  });

  it('an expired lease cannot be renewed or released, and the next grant has a higher token', async () => {
    const grant = await request(server()).post('/v1/locks/expiring/acquire').send({ ttlMs: 100 }).expect(200);
    await sleep(200);
    expectProblem(
      await request(server()).post('/v1/locks/expiring/renew').send({ ownerToken: grant.body.ownerToken, ttlMs: 1_000 }),
      409,
      'not_owner',
    );
    expectProblem(await request(server()).post('/v1/locks/expiring/release').send({ ownerToken: grant.body.ownerToken }), 409, 'not_owner');
    const next = await request(server()).post('/v1/locks/expiring/acquire').send({ ttlMs: 1_000 }).expect(200);
    expect(next.body.fencingToken).toBeGreaterThan(grant.body.fencingToken);
  });

  it('every grant gets a fresh owner token', async () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const res = await request(server()).post(`/v1/locks/fresh-${i}/acquire`).send({ ttlMs: 1_000 }).expect(200);
      tokens.add(res.body.ownerToken);
    }
    expect(tokens.size).toBe(20);
  });

  it('accepts every allowed key character and a 256-character key', async () => {
    await request(server()).post('/v1/locks/Az09._-:@x/acquire').send({ ttlMs: 1_000 }).expect(200);
    await request(server())
      .post(`/v1/locks/${'k'.repeat(256)}/acquire`)
      .send({ ttlMs: 1_000 })
      .expect(200);
  });
});

describe('health', () => {
  it('/livez is 200 and /readyz reports the store kind', async () => {
    await request(server()).get('/livez').expect(200, { status: 'ok' });
    await request(server()).get('/readyz').expect(200, { status: 'ready', store: 'memory' });
  });
});

describe('unknown routes', () => {
  it('answer 404 not_found as problem+json', async () => {
    expectProblem(await request(server()).get('/nope'), 404, 'not_found');
    expectProblem(await request(server()).post('/v1/locks/abc/explode').send({}), 404, 'not_found');
  });

  it('answer 405 method_not_allowed with Allow for a known path and the wrong method', async () => {
    const res = await request(server()).delete('/v1/locks/abc/acquire');
    expectProblem(res, 405, 'method_not_allowed');
    expect(res.headers.allow).toBe('POST');
    const inspect = await request(server()).put('/v1/locks/abc');
    expectProblem(inspect, 405, 'method_not_allowed');
    expect(inspect.headers.allow).toBe('GET, HEAD, DELETE');
  });
});
