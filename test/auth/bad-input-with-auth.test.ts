import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/auth/api-keys.js';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { buildTestApp, FULL_ACCESS_LOG, type TestApp } from '../helpers/test-app.js';

/**
 * The bad-input cases, with authentication on: a valid key gets the same 400/413/415 answers as in
 * open mode; without a key every one of them is a 401 before the body is even parsed. Afterwards, no
 * API key and no owner token appears anywhere in the logs.
 */
const keys = makeKeys([
  { id: 'team-a-key', namespace: 'team-a', scopes: ['locks'] },
  { id: 'ops-key', namespace: 'ops', scopes: ['admin'] },
]);
const KEY = keys.plain['team-a-key'] ?? '';
const ADMIN_KEY = keys.plain['ops-key'] ?? '';
const BAD_KEY = newApiKey();

let t: TestApp;
const ownerTokens: string[] = [];
beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, logLevel: 'trace', accessLog: FULL_ACCESS_LOG });
  const grant = await t.app.inject({ method: 'POST', url: '/v1/locks/held/acquire', headers: bearer(KEY), payload: { ttlMs: 60_000 } });
  ownerTokens.push(grant.json<{ ownerToken: string }>().ownerToken);
});
afterAll(async () => {
  await t.close();
});

interface BadCase {
  readonly name: string;
  readonly url: string;
  readonly method?: 'POST' | 'GET' | 'DELETE';
  /** Sent with the operator's key (scope admin) instead of the team's. */
  readonly admin?: boolean;
  readonly body?: string;
  readonly contentType?: string;
  readonly status: number;
  readonly code: string;
}

const token = () => ownerTokens[0] ?? '';
let served = 0;
const CASES: Array<() => BadCase> = [
  () => ({ name: 'ttlMs as a string', url: '/v1/locks/k/acquire', body: '{"ttlMs":"1000"}', status: 400, code: 'invalid_request' }),
  () => ({
    name: 'holder as a number',
    url: '/v1/locks/k/acquire',
    body: '{"ttlMs":1000,"holder":5}',
    status: 400,
    code: 'invalid_request',
  }),
  () => ({ name: 'missing ttlMs', url: '/v1/locks/k/acquire', body: '{}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'missing ownerToken', url: '/v1/locks/held/renew', body: '{"ttlMs":1000}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'negative ttl', url: '/v1/locks/k/acquire', body: '{"ttlMs":-1}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'fractional ttl', url: '/v1/locks/k/acquire', body: '{"ttlMs":1500.5}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'huge ttl', url: '/v1/locks/k/acquire', body: '{"ttlMs":1e15}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'ttl above the bound', url: '/v1/locks/k/acquire', body: '{"ttlMs":86400000}', status: 400, code: 'invalid_request' }),
  () => ({
    name: 'bad ttl on renew, valid token',
    url: '/v1/locks/held/renew',
    body: JSON.stringify({ ownerToken: token(), ttlMs: 0 }),
    status: 400,
    code: 'invalid_request',
  }),
  () => ({ name: 'unknown field', url: '/v1/locks/k/acquire', body: '{"ttlMs":1000,"admin":true}', status: 400, code: 'invalid_request' }),
  () => ({
    name: 'key too long',
    url: `/v1/locks/${'k'.repeat(300)}/acquire`,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'invalid_request',
  }),
  () => ({ name: 'illegal key character', url: '/v1/locks/a$b/acquire', body: '{"ttlMs":1000}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'slash in the key', url: '/v1/locks/a%2Fb/acquire', body: '{"ttlMs":1000}', status: 400, code: 'invalid_request' }),
  () => ({ name: 'path traversal in the key', url: '/v1/locks/..%2Fteam-b%2Fx', method: 'GET', status: 400, code: 'invalid_request' }),
  () => ({ name: 'malformed JSON', url: '/v1/locks/k/acquire', body: '{"ttlMs":', status: 400, code: 'invalid_request' }),
  () => ({
    name: 'wrong content type',
    url: '/v1/locks/k/acquire',
    body: 'ttlMs=1000',
    contentType: 'application/x-www-form-urlencoded',
    status: 415,
    code: 'unsupported_media_type',
  }),
  () => ({
    name: 'oversized body',
    url: '/v1/locks/k/acquire',
    body: JSON.stringify({ ttlMs: 1000, holder: 'x'.repeat(20_000) }),
    status: 413,
    code: 'payload_too_large',
  }),
  () => ({
    name: '__proto__ key',
    url: '/v1/locks/k/acquire',
    body: '{"ttlMs":1000,"__proto__":{"admin":true}}',
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'constructor.prototype key',
    url: '/v1/locks/k/acquire',
    body: '{"ttlMs":1000,"constructor":{"prototype":{"admin":true}}}',
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'namespace smuggled in the body',
    url: '/v1/locks/k/acquire',
    body: '{"ttlMs":1000,"namespace":"team-b"}',
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'renew with a token of another lock',
    url: '/v1/locks/not-held/renew',
    body: JSON.stringify({ ownerToken: token(), ttlMs: 1000 }),
    status: 409,
    code: 'not_owner',
  }),
  () => ({
    name: 'release with a token of another lock',
    url: '/v1/locks/not-held/release',
    body: JSON.stringify({ ownerToken: token() }),
    status: 409,
    code: 'not_owner',
  }),
  () => ({ name: 'acquire of a held lock', url: '/v1/locks/held/acquire', body: '{"ttlMs":1000}', status: 409, code: 'lock_held' }),
  () => ({ name: 'admin route with a locks-only key', url: '/v1/locks', method: 'GET', status: 403, code: 'forbidden' }),
  () => ({ name: 'admin list: limit 0', url: '/v1/locks?limit=0', method: 'GET', admin: true, status: 400, code: 'invalid_request' }),
  () => ({
    name: 'admin list: limit over 1000',
    url: '/v1/locks?limit=1001',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: limit not a number',
    url: '/v1/locks?limit=ten',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: invalid namespace',
    url: '/v1/locks?namespace=-bad',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: prefix without namespace',
    url: '/v1/locks?prefix=abc',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: prefix with a bad character',
    url: '/v1/locks?namespace=team-a&prefix=a%20b',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: cursor with bad characters',
    url: '/v1/locks?cursor=%21%21',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: cursor it did not return',
    url: '/v1/locks?cursor=eAB5',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'admin list: unknown query parameter',
    url: '/v1/locks?owner=me',
    method: 'GET',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'force release without namespace',
    url: '/v1/locks/held',
    method: 'DELETE',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'force release with an invalid namespace',
    url: '/v1/locks/held?namespace=a/b',
    method: 'DELETE',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'force release with an invalid key',
    url: '/v1/locks/a%20b?namespace=team-a',
    method: 'DELETE',
    admin: true,
    status: 400,
    code: 'invalid_request',
  }),
  () => ({
    name: 'force release of a free lock',
    url: '/v1/locks/free-one?namespace=team-a',
    method: 'DELETE',
    admin: true,
    status: 404,
    code: 'not_found',
  }),
  () => ({
    name: 'force release with a body that is not JSON',
    url: '/v1/locks/held?namespace=team-a',
    method: 'DELETE',
    admin: true,
    body: 'x',
    contentType: 'text/plain',
    status: 415,
    code: 'unsupported_media_type',
  }),
  () => ({
    name: 'lock route with an admin-only key',
    url: '/v1/locks/k/acquire',
    admin: true,
    body: '{"ttlMs":1000}',
    status: 403,
    code: 'forbidden',
  }),
];

const send = (c: BadCase, headers: Record<string, string>) =>
  t.app.inject({
    method: c.method ?? 'POST',
    url: c.url,
    headers: { ...headers, ...(c.body === undefined ? {} : { 'content-type': c.contentType ?? 'application/json' }) },
    ...(c.body === undefined ? {} : { payload: c.body }),
  });

describe('bad input with authentication on', () => {
  for (const make of CASES) {
    const probe = make();
    it(`${probe.name}: ${probe.status} ${probe.code} with a key; 401 without one or with a bad one`, async () => {
      const c = make();
      const res = await send(c, bearer(c.admin ? ADMIN_KEY : KEY));
      expect(res.statusCode, res.body).toBe(c.status);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json()).toMatchObject({ code: c.code, status: c.status });
      // A valid request right after is served.
      const valid = await t.app.inject({
        method: 'POST',
        url: `/v1/locks/valid-${++served}/acquire`,
        headers: bearer(KEY),
        payload: { ttlMs: 1000 },
      });
      expect(valid.statusCode).toBe(200);
      for (const headers of [{}, bearer(BAD_KEY)]) {
        const refused = await send(c, headers);
        expect(refused.statusCode).toBe(401);
        expect(refused.json()).toMatchObject({ code: 'unauthenticated' });
      }
    });
  }

  it('the held lock is still held, unchanged by any of it', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/locks/held', headers: bearer(KEY) });
    expect(res.json()).toMatchObject({ held: true });
  });

  it('no API key (good or bad) and no owner token appears in the logs', () => {
    expect(t.logs.length).toBeGreaterThan(CASES.length);
    const all = t.logs.join('\n');
    for (const secret of [KEY, BAD_KEY, ...ownerTokens]) expect(all).not.toContain(secret);
    // The request lines do name the caller's key id.
    expect(all).toContain('"keyId":"team-a-key"');
  });
});
