import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Whole numbers in query strings (fencingToken, index, waitMs, limit) are digits only: an empty value,
 * blanks, hex or an exponent is a 400 naming the field. They were read with Number(): `?fencingToken=`
 * (a script whose variable was empty) force-released as if it named fencing token 0 (409 holder_changed
 * "no longer held by the lease with fencing token 0"), `0x10` as 16, `?index=` ran a blocking query from 0.
 */
describe('whole numbers in query strings', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
    expect((await t.app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 30_000 } })).statusCode).toBe(200);
  });
  afterAll(async () => t.close());

  const refused = async (url: string, method: 'GET' | 'DELETE', field: string) => {
    const res = await t.app.inject({ method, url });
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(400);
    expect(JSON.stringify(res.json()), url).toContain(field);
  };

  for (const value of ['', '%20', '0x10', '1e1', '-1', '1.5']) {
    it(`fencingToken=${value} is a 400`, () => refused(`/v1/locks/k?namespace=default&fencingToken=${value}`, 'DELETE', 'fencingToken'));
    it(`index=${value} is a 400`, () => refused(`/v1/locks/k?index=${value}&waitMs=10`, 'GET', 'index'));
    it(`limit=${value} is a 400`, () => refused(`/v1/locks?namespace=default&limit=${value}`, 'GET', 'limit'));
  }

  it('digits are read as the number; an absent limit takes its default', async () => {
    const listed = await t.app.inject({ method: 'GET', url: '/v1/locks?namespace=default' });
    expect(listed.statusCode, listed.body).toBe(200);
    const page = await t.app.inject({ method: 'GET', url: '/v1/locks?namespace=default&limit=1' });
    expect(page.statusCode, page.body).toBe(200);
    const state = (await t.app.inject({ method: 'GET', url: '/v1/locks/k' })).json<{ index: number; fencingToken: number }>();
    const blocking = await t.app.inject({ method: 'GET', url: `/v1/locks/k?index=${state.index + 1}&waitMs=10` });
    expect(blocking.statusCode, blocking.body).toBe(200);
    const evicted = await t.app.inject({ method: 'DELETE', url: `/v1/locks/k?namespace=default&fencingToken=${state.fencingToken}` });
    expect(evicted.statusCode, evicted.body).toBe(200);
  });
});
