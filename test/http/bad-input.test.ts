import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Every malformed request gets a clear problem+json with a stable code, and the server keeps serving:
 * each case is followed by a good request.
 */
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => {
  await t.close();
});

let served = 0;
/** A valid request right after each bad one: the server still grants locks. */
async function stillServes() {
  await request(t.app.server)
    .post(`/v1/locks/still-serves-${++served}/acquire`)
    .set('content-type', 'application/json')
    .send(JSON.stringify({ ttlMs: 1000 }))
    .expect(200);
}

type Case = {
  name: string;
  path?: string;
  body?: string;
  contentType?: string | null;
  status: number;
  code: string;
  field?: string;
};

const json = (v: unknown) => JSON.stringify(v);

const cases: Case[] = [
  { name: 'missing body', body: '', contentType: null, status: 400, code: 'invalid_request', field: 'body' },
  { name: 'empty JSON body', body: '', status: 400, code: 'invalid_request' },
  { name: 'missing ttlMs', body: json({}), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs as string', body: json({ ttlMs: '30000' }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs negative', body: json({ ttlMs: -5 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs zero', body: json({ ttlMs: 0 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs fractional', body: json({ ttlMs: 1500.5 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs huge', body: '{"ttlMs": 1e300}', status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs below the configured minimum', body: json({ ttlMs: 99 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs above the configured maximum', body: json({ ttlMs: 3_600_001 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs null', body: json({ ttlMs: null }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'holder not a string', body: json({ ttlMs: 1000, holder: 7 }), status: 400, code: 'invalid_request', field: 'holder' },
  { name: 'holder empty', body: json({ ttlMs: 1000, holder: '' }), status: 400, code: 'invalid_request', field: 'holder' },
  { name: 'holder too long', body: json({ ttlMs: 1000, holder: 'h'.repeat(129) }), status: 400, code: 'invalid_request', field: 'holder' },
  {
    name: 'holder with control characters',
    body: json({ ttlMs: 1000, holder: 'a\nb' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'holder with a C1 control character',
    body: json({ ttlMs: 1000, holder: 'a\u0085b' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'holder with a right-to-left override',
    body: json({ ttlMs: 1000, holder: 'worker-\u202Egnp.exe' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'holder with a right-to-left isolate',
    body: json({ ttlMs: 1000, holder: '\u2067admin\u2069' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'holder with a right-to-left mark',
    body: json({ ttlMs: 1000, holder: 'a\u200Fb' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'holder with an Arabic letter mark',
    body: json({ ttlMs: 1000, holder: 'a\u061Cb' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'semaphore holder with a right-to-left override',
    path: '/v1/semaphores/bad-input/acquire',
    body: json({ limit: 2, ttlMs: 1000, holder: 'a\u202Eb' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  { name: 'unknown field', body: json({ ttlMs: 1000, owner: 'me' }), status: 400, code: 'invalid_request', field: 'owner' },
  { name: 'body is an array', body: json([1, 2]), status: 400, code: 'invalid_request' },
  { name: 'body is a string', body: json('hello'), status: 400, code: 'invalid_request' },
  { name: 'malformed JSON', body: '{"ttlMs": ', status: 400, code: 'invalid_request' },
  { name: '__proto__ key', body: '{"ttlMs": 1000, "__proto__": {"admin": true}}', status: 400, code: 'invalid_request' },
  {
    name: 'constructor.prototype key',
    body: '{"ttlMs": 1000, "constructor": {"prototype": {"admin": true}}}',
    status: 400,
    code: 'invalid_request',
  },
  { name: 'text/plain body', body: 'ttlMs=1000', contentType: 'text/plain', status: 415, code: 'unsupported_media_type' },
  { name: 'form body', body: 'ttlMs=1000', contentType: 'application/x-www-form-urlencoded', status: 415, code: 'unsupported_media_type' },
  { name: 'oversized body', body: json({ ttlMs: 1000, holder: 'x'.repeat(20_000) }), status: 413, code: 'payload_too_large' },
  {
    name: 'key with a space',
    path: '/v1/locks/a%20b/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with an encoded slash',
    path: '/v1/locks/a%2Fb/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with a raw slash',
    path: '/v1/locks/a/b/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with braces',
    path: '/v1/locks/%7Bx%7D/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with unicode',
    path: '/v1/locks/%C3%A9t%C3%A9/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key of 257 characters',
    path: `/v1/locks/${'k'.repeat(257)}/acquire`,
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key of 3000 characters',
    path: `/v1/locks/${'k'.repeat(3000)}/acquire`,
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'release without ownerToken',
    path: '/v1/locks/x/release',
    body: json({}),
    status: 400,
    code: 'invalid_request',
    field: 'ownerToken',
  },
  {
    name: 'release with a malformed ownerToken',
    path: '/v1/locks/x/release',
    body: json({ ownerToken: 'not a token!' }),
    status: 400,
    code: 'invalid_request',
    field: 'ownerToken',
  },
  {
    name: 'renew without ttlMs',
    path: '/v1/locks/x/renew',
    body: json({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA' }),
    status: 400,
    code: 'invalid_request',
    field: 'ttlMs',
  },
  {
    name: 'renew with ttlMs out of bounds',
    path: '/v1/locks/x/renew',
    body: json({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 5 }),
    status: 400,
    code: 'invalid_request',
    field: 'ttlMs',
  },
  { name: 'waitMs negative', body: json({ ttlMs: 1000, waitMs: -1 }), status: 400, code: 'invalid_request', field: 'waitMs' },
  { name: 'waitMs as string', body: json({ ttlMs: 1000, waitMs: '10' }), status: 400, code: 'invalid_request', field: 'waitMs' },
  { name: 'waitMs fractional', body: json({ ttlMs: 1000, waitMs: 1.5 }), status: 400, code: 'invalid_request', field: 'waitMs' },
  {
    name: 'waitMs above the configured maximum',
    body: json({ ttlMs: 1000, waitMs: 60_001 }),
    status: 400,
    code: 'invalid_request',
    field: 'waitMs',
  },
  { name: 'waitMs null', body: json({ ttlMs: 1000, waitMs: null }), status: 400, code: 'invalid_request', field: 'waitMs' },
  { name: 'ttlMs boolean', body: json({ ttlMs: true }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs as an array', body: json({ ttlMs: [1000] }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs as an object', body: json({ ttlMs: { value: 1000 } }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'ttlMs over 2^31', body: json({ ttlMs: 2 ** 31 }), status: 400, code: 'invalid_request', field: 'ttlMs' },
  { name: 'holder as an array', body: json({ ttlMs: 1000, holder: ['a'] }), status: 400, code: 'invalid_request', field: 'holder' },
  {
    name: 'holder with an escaped NUL character',
    body: '{"ttlMs":1000,"holder":"a\\u0000b"}',
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  { name: 'holder with a raw NUL byte (invalid JSON)', body: '{"ttlMs":1000,"holder":"a\u0000b"}', status: 400, code: 'invalid_request' },
  { name: 'holder with DEL', body: '{"ttlMs":1000,"holder":"a\\u007fb"}', status: 400, code: 'invalid_request', field: 'holder' },
  { name: 'body is null', body: 'null', status: 400, code: 'invalid_request' },
  { name: 'body is a number', body: '123', status: 400, code: 'invalid_request' },
  { name: 'body is true', body: 'true', status: 400, code: 'invalid_request' },
  { name: 'JSON with trailing garbage', body: '{"ttlMs":1000} x', status: 400, code: 'invalid_request' },
  { name: 'JSON with NaN', body: '{"ttlMs":NaN}', status: 400, code: 'invalid_request' },
  { name: 'JSON with a single-quoted string', body: "{'ttlMs':1000}", status: 400, code: 'invalid_request' },
  { name: 'JSON truncated mid-string', body: '{"ttlMs":1000,"holder":"ab', status: 400, code: 'invalid_request' },
  { name: 'deeply nested JSON', body: `{"ttlMs":1000,"x":${'['.repeat(500)}${']'.repeat(500)}}`, status: 400, code: 'invalid_request' },
  {
    name: 'renew with an ownerToken too short',
    path: '/v1/locks/x/renew',
    body: json({ ownerToken: 'abc', ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'ownerToken',
  },
  {
    name: 'renew with an unknown field',
    path: '/v1/locks/x/renew',
    body: json({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 1000, holder: 'h' }),
    status: 400,
    code: 'invalid_request',
    field: 'holder',
  },
  {
    name: 'release with an ownerToken as a number',
    path: '/v1/locks/x/release',
    body: json({ ownerToken: 12345 }),
    status: 400,
    code: 'invalid_request',
    field: 'ownerToken',
  },
  {
    name: 'release with an unknown field',
    path: '/v1/locks/x/release',
    body: json({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'ttlMs',
  },
  {
    name: 'release with a text/plain body',
    path: '/v1/locks/x/release',
    body: 'token',
    contentType: 'text/plain',
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'renew with an oversized body',
    path: '/v1/locks/x/renew',
    body: json({ ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 1000, pad: 'p'.repeat(20_000) }),
    status: 413,
    code: 'payload_too_large',
  },
  {
    name: 'content type application/xml',
    body: '<ttlMs>1000</ttlMs>',
    contentType: 'application/xml',
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'multipart body',
    body: '--b\r\n\r\nx\r\n--b--',
    contentType: 'multipart/form-data; boundary=b',
    status: 415,
    code: 'unsupported_media_type',
  },
  {
    name: 'key with a percent sign',
    path: '/v1/locks/a%25b/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with a NUL byte',
    path: '/v1/locks/a%00b/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'key',
  },
  {
    name: 'key with bad percent-encoding',
    path: '/v1/locks/a%E0%A4%A/acquire',
    body: json({ ttlMs: 1000 }),
    status: 400,
    code: 'invalid_request',
    field: 'url',
  },
  { name: 'unknown action on a lock', path: '/v1/locks/x/steal', body: json({ ttlMs: 1000 }), status: 404, code: 'not_found' },
];

describe('bad input', () => {
  for (const c of cases) {
    it(`${c.name} -> ${c.status} ${c.code}`, async () => {
      let req = request(t.app.server).post(c.path ?? '/v1/locks/bad-input/acquire');
      if (c.contentType !== null) req = req.set('content-type', c.contentType ?? 'application/json');
      const res = c.body === '' && c.contentType === null ? await req : await req.send(c.body ?? '');
      expect(res.status).toBe(c.status);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: c.status, code: c.code });
      expect(res.body.detail).toEqual(expect.any(String));
      if (c.field) {
        expect(res.body.errors?.map((e: { field: string }) => e.field)).toContain(c.field);
        expect(res.body.detail).toContain(c.field);
      }
      await stillServes();
    });
  }

  it('a holder in any script (accents, CJK, Arabic, emoji) is accepted: only control and bidi formatting characters are refused', async () => {
    for (const holder of ['café-worker', '工人-7', 'عامل-٣', 'worker 🚀']) {
      const res = await request(t.app.server).post('/v1/locks/holder-scripts/acquire').send({ ttlMs: 1000, holder });
      expect(res.status).toBe(200);
      expect(res.body.holder).toBe(holder);
      await request(t.app.server).post('/v1/locks/holder-scripts/release').send({ ownerToken: res.body.ownerToken }).expect(200);
    }
  });

  it('GET with an invalid key -> 400 naming the key', async () => {
    const res = await request(t.app.server).get('/v1/locks/bad%20key');
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(res.body.errors[0].field).toBe('key');
  });

  it('each refusal says what is wrong: a refused key names it, malformed JSON says so, an out-of-range number gets one message', async () => {
    const send = (path: string, body: string) =>
      request(t.app.server).post(path).set('content-type', 'application/json').send(body).expect(400);
    for (const body of ['{"ttlMs": 1000, "__proto__": {"admin": true}}', '{"ttlMs": 1000, "constructor": {"prototype": {}}}']) {
      const res = await send('/v1/locks/why/acquire', body);
      expect(res.body).toMatchObject({ code: 'invalid_request' });
      expect(res.body.detail).toContain('"__proto__" or "constructor.prototype" key');
    }
    expect((await send('/v1/locks/why/acquire', '{"ttlMs": ')).body.detail).toMatch(/^the body is not valid JSON: /);
    // A byte-order mark before valid JSON is no error (as Fastify's own parser takes it).
    await request(t.app.server)
      .post('/v1/locks/why-bom/acquire')
      .set('content-type', 'application/json')
      .send('\ufeff{"ttlMs": 1000}')
      .expect(200);
    for (const [path, body, field, message] of [
      ['/v1/locks/why/acquire', '{"ttlMs": 1e20}', 'ttlMs', 'Too big: expected number to be <=2147483647'],
      ['/v1/locks/why/acquire', '{"ttlMs": -1e20}', 'ttlMs', 'Too small: expected number to be >0'],
      ['/v1/locks/why/acquire', '{"ttlMs": 1000, "waitMs": 1e300}', 'waitMs', 'Too big: expected number to be <=2147483647'],
      ['/v1/semaphores/why/acquire', '{"ttlMs": 1000, "limit": 1e20}', 'limit', expect.stringMatching(/^Too big/)],
    ] as const) {
      const res = await send(path, body);
      expect(res.body.errors).toEqual([{ field, message }]);
    }
  });

  it('a prototype-pollution attempt leaves Object.prototype clean', async () => {
    await request(t.app.server)
      .post('/v1/locks/pp/acquire')
      .set('content-type', 'application/json')
      .send('{"ttlMs": 1000, "__proto__": {"polluted": true}}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('query parameters on the routes that change leases', () => {
  // A parameter these routes do not take is refused, not ignored: `?namespace=` (which the admin routes
  // take) would otherwise take or free the caller's own namespace's lock while it believed it named another.
  const routes: Array<[string, object]> = [
    ['/v1/locks/q-lock/acquire', { ttlMs: 1000 }],
    ['/v1/locks/q-lock/renew', { ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', ttlMs: 1000 }],
    ['/v1/locks/q-lock/release', { ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA' }],
    ['/v1/semaphores/q-sem/acquire', { ttlMs: 1000, limit: 2 }],
    ['/v1/semaphores/q-sem/release', { ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA' }],
    ['/v1/rwlocks/q-rw/acquire', { ttlMs: 1000, mode: 'read' }],
    ['/v1/lock-sets/acquire', { keys: ['q-a', 'q-b'], ttlMs: 1000 }],
    ['/v1/lock-sets/release', { ownerToken: 'AAAAAAAAAAAAAAAAAAAAAA', keys: ['q-a', 'q-b'] }],
  ];
  for (const [path, body] of routes) {
    it(`POST ${path}?namespace=other -> 400 invalid_request naming namespace; nothing taken`, async () => {
      const res = await request(t.app.server).post(`${path}?namespace=other`).send(body);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code: 'invalid_request', errors: [{ field: 'namespace' }] });
      expect(res.body.detail).toContain("a caller's namespace is its API key's");
      await stillServes();
    });
  }

  it('nothing was taken by a refused acquire; the same call without the parameter is granted', async () => {
    await request(t.app.server).post('/v1/locks/q-taken/acquire?foo=1').send({ ttlMs: 60_000 }).expect(400);
    expect((await request(t.app.server).get('/v1/locks/q-taken').expect(200)).body).toMatchObject({ held: false });
    await request(t.app.server).post('/v1/locks/q-taken/acquire').send({ ttlMs: 60_000 }).expect(200);
    // An empty query is none.
    await request(t.app.server).post('/v1/locks/q-empty/acquire?').send({ ttlMs: 60_000 }).expect(200);
  });
});
