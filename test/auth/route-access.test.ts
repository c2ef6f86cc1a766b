import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newApiKey } from '../../src/auth/api-keys.js';
import Fastify from 'fastify';
import { registerAuth } from '../../src/http/auth.js';
import { bearer, makeKeys } from '../helpers/api-keys.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { permitPrimitives } from '../../src/http/routes/primitives.js';
import { PRIMITIVE_PATHS } from '../../src/http/schemas/history.js';

/**
 * Every route x {no key, bad key, wrong scope, right scope}: the status and problem code each gets.
 * The public routes answer everyone.
 */
const keys = makeKeys([
  { id: 'locker', namespace: 'team-a', scopes: ['locks'] },
  { id: 'operator', namespace: 'ops', scopes: ['admin'] },
]);

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, metrics: createMetrics({ defaultMetrics: false }) });
});
afterAll(async () => {
  await t.close();
});

type Method = 'GET' | 'POST' | 'DELETE';
interface RouteCase {
  readonly name: string;
  readonly method: Method;
  /** Builds the request; may set up state (a held lock) first, using the right key. */
  readonly prepare: () => Promise<{ url: string; body?: unknown }>;
  readonly scope: 'locks' | 'admin';
  readonly okStatus: number;
}

let n = 0;
const freshKey = () => `matrix-${++n}`;
async function holdLock(key: string): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: `/v1/locks/${key}/acquire`,
    headers: bearer(keys.plain.locker ?? ''),
    payload: { ttlMs: 30_000 },
  });
  expect(res.statusCode).toBe(200);
  return res.json<{ ownerToken: string }>().ownerToken;
}

const ROUTES: RouteCase[] = [
  {
    name: 'acquire',
    method: 'POST',
    scope: 'locks',
    okStatus: 200,
    prepare: async () => ({ url: `/v1/locks/${freshKey()}/acquire`, body: { ttlMs: 5_000 } }),
  },
  {
    name: 'renew',
    method: 'POST',
    scope: 'locks',
    okStatus: 200,
    prepare: async () => {
      const key = freshKey();
      return { url: `/v1/locks/${key}/renew`, body: { ownerToken: await holdLock(key), ttlMs: 5_000 } };
    },
  },
  {
    name: 'release',
    method: 'POST',
    scope: 'locks',
    okStatus: 200,
    prepare: async () => {
      const key = freshKey();
      return { url: `/v1/locks/${key}/release`, body: { ownerToken: await holdLock(key) } };
    },
  },
  { name: 'inspect', method: 'GET', scope: 'locks', okStatus: 200, prepare: async () => ({ url: `/v1/locks/${freshKey()}` }) },
  { name: 'list', method: 'GET', scope: 'admin', okStatus: 200, prepare: async () => ({ url: '/v1/locks?namespace=team-a&limit=5' }) },
  {
    name: 'force release',
    method: 'DELETE',
    scope: 'admin',
    okStatus: 200,
    prepare: async () => {
      const key = freshKey();
      await holdLock(key);
      return { url: `/v1/locks/${key}?namespace=team-a` };
    },
  },
  // Lease history: each primitive's in the key's namespace (`locks`); any namespace's for an operator (`admin`).
  ...PRIMITIVE_PATHS.flatMap((path): RouteCase[] => [
    {
      name: `${path} history`,
      method: 'GET',
      scope: 'locks',
      okStatus: 200,
      prepare: async () => ({ url: `/v1/${path}/${freshKey()}/history` }),
    },
    {
      name: `${path} history (admin)`,
      method: 'GET',
      scope: 'admin',
      okStatus: 200,
      prepare: async () => ({ url: `/v1/history/${path}/${freshKey()}?namespace=team-a` }),
    },
    {
      name: `${path} queue (admin)`,
      method: 'GET',
      scope: 'admin',
      okStatus: 200,
      prepare: async () => ({ url: `/v1/queue/${path}/${freshKey()}?namespace=team-a` }),
    },
  ]),
  // Every permit primitive (semaphores, read/write locks, ...): the `locks` scope in the key's namespace; their admin routes `admin`.
  ...permitPrimitives().flatMap(({ names: { path }, example: body }): RouteCase[] => {
    const hold = async (key: string) => {
      const res = await send('POST', `/v1/${path}/${key}/acquire`, body, bearer(keys.plain.locker ?? ''));
      expect(res.statusCode).toBe(200);
      return res.json<{ ownerToken: string }>().ownerToken;
    };
    return [
      {
        name: `${path} acquire`,
        method: 'POST',
        scope: 'locks',
        okStatus: 200,
        prepare: async () => ({ url: `/v1/${path}/${freshKey()}/acquire`, body }),
      },
      {
        name: `${path} renew`,
        method: 'POST',
        scope: 'locks',
        okStatus: 200,
        prepare: async () => {
          const key = freshKey();
          return { url: `/v1/${path}/${key}/renew`, body: { ownerToken: await hold(key), ttlMs: 5_000 } };
        },
      },
      {
        name: `${path} release`,
        method: 'POST',
        scope: 'locks',
        okStatus: 200,
        prepare: async () => {
          const key = freshKey();
          return { url: `/v1/${path}/${key}/release`, body: { ownerToken: await hold(key) } };
        },
      },
      {
        name: `${path} inspect`,
        method: 'GET',
        scope: 'locks',
        okStatus: 200,
        prepare: async () => ({ url: `/v1/${path}/${freshKey()}` }),
      },
      {
        name: `${path} list`,
        method: 'GET',
        scope: 'admin',
        okStatus: 200,
        prepare: async () => ({ url: `/v1/${path}?namespace=team-a&limit=5` }),
      },
      {
        name: `${path} force release`,
        method: 'DELETE',
        scope: 'admin',
        okStatus: 200,
        prepare: async () => {
          const key = freshKey();
          await hold(key);
          return { url: `/v1/${path}/${key}?namespace=team-a` };
        },
      },
    ];
  }),
];

const send = async (method: Method, url: string, body: unknown, headers: Record<string, string>) =>
  t.app.inject({
    method,
    url,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });

describe('every route x {no key, bad key, wrong scope, right scope}', () => {
  for (const route of ROUTES) {
    it(`${route.name}: no key -> 401 unauthenticated with WWW-Authenticate: Bearer`, async () => {
      const { url, body } = await route.prepare();
      const res = await send(route.method, url, body, {});
      expect(res.statusCode).toBe(401);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json()).toMatchObject({ code: 'unauthenticated', status: 401 });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="keyholder"');
    });

    it(`${route.name}: bad key -> 401 unauthenticated, invalid_token`, async () => {
      const { url, body } = await route.prepare();
      for (const header of [
        `Bearer ${newApiKey()}`,
        'Bearer not-a-key',
        `Basic ${keys.plain.locker}`,
        'Bearer',
        `bearer ${newApiKey()}x`,
      ]) {
        const res = await send(route.method, url, body, { authorization: header });
        expect(res.statusCode, header).toBe(401);
        expect(res.json()).toMatchObject({ code: 'unauthenticated' });
        expect(res.headers['www-authenticate']).toBe('Bearer realm="keyholder", error="invalid_token"');
      }
    });

    it(`${route.name}: wrong scope -> 403 forbidden`, async () => {
      const { url, body } = await route.prepare();
      const wrong = route.scope === 'locks' ? keys.plain.operator : keys.plain.locker;
      const res = await send(route.method, url, body, bearer(wrong ?? ''));
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ code: 'forbidden', status: 403 });
    });

    it(`${route.name}: right scope -> ${route.okStatus}`, async () => {
      const { url, body } = await route.prepare();
      const right = route.scope === 'locks' ? keys.plain.locker : keys.plain.operator;
      const res = await send(route.method, url, body, bearer(right ?? ''));
      expect(res.statusCode, res.body).toBe(route.okStatus);
    });
  }

  for (const url of ['/livez', '/readyz', '/openapi.json', '/openapi.yaml']) {
    it(`${url} is public: no key, a bad key and any scope all get 200`, async () => {
      for (const headers of [{}, bearer(newApiKey()), bearer(keys.plain.locker ?? ''), bearer(keys.plain.operator ?? '')]) {
        expect((await t.app.inject({ method: 'GET', url, headers })).statusCode).toBe(200);
      }
    });
  }

  it('every route declares its access rule (a new route is never open by accident)', async () => {
    // A route without one is refused when it is registered.
    const bare = Fastify();
    registerAuth(bare, { mode: 'open' });
    expect(() => bare.get('/v1/undeclared', async () => ({}))).toThrow('declares no access rule');
    await bare.close();
    // Every documented operation is public with no security, or documents the 401 and 403 of its scope.
    const doc = t.app.swagger() as unknown as {
      paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, { description: string }> }>>;
    };
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const where = `${method} ${path}`;
        if (operation.security?.length === 0) {
          expect(operation.responses['401'], where).toBeUndefined();
        } else {
          expect(operation.responses['401']?.description, where).toMatch(/^unauthenticated/);
          const ownKey = PRIMITIVE_PATHS.some((p) => path.startsWith(`/v1/${p}/{key}`));
          const lockRoute = (ownKey && method !== 'delete' && !path.endsWith('/release-request')) || path.startsWith('/v1/lock-sets/');
          expect(operation.responses['403']?.description, where).toMatch(lockRoute ? /`locks` scope/ : /`admin` scope/);
        }
      }
    }
    // The metrics and the docs page are public like the probes.
    expect((await t.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/docs' })).statusCode).not.toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' })).statusCode).toBe(200);
    // Unknown paths need a key too: a caller without one learns nothing about the route table.
    const res = await t.app.inject({ method: 'GET', url: '/v1/nothing-here' });
    expect(res.statusCode).toBe(401);
  });

  it('an unknown key and a malformed one get byte-identical answers (nothing says which key ids exist)', async () => {
    const a = await send('GET', '/v1/locks/x', undefined, bearer(newApiKey()));
    const b = await send('GET', '/v1/locks/x', undefined, bearer('kh_short'));
    expect(a.body).toBe(b.body);
    expect(a.headers['www-authenticate']).toBe(b.headers['www-authenticate']);
  });
});
