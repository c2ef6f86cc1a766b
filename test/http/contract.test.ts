import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { makeKeys } from '../helpers/api-keys.js';
import { OpenApiContract } from '../helpers/openapi-contract.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { HistoryRecorder } from '../../src/domain/history.js';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { permitPrimitives } from '../../src/http/routes/primitives.js';
import { PRIMITIVE_PATHS } from '../../src/http/schemas/history.js';

/**
 * Every route and every status it declares, driven over real HTTP and each answer checked against
 * openapi.yaml (status, content type, body schema, headers) as a validating proxy would. The last test
 * fails if a declared response was never seen: a new status needs a case here.
 */
const contract = new OpenApiContract(fileURLToPath(new URL('../../openapi.yaml', import.meta.url)));

const keys = makeKeys([
  { id: 'team-key', namespace: 'team', scopes: ['locks'] },
  { id: 'ops-key', namespace: 'ops', scopes: ['admin'] },
]);
const TEAM = { authorization: `Bearer ${keys.plain['team-key'] ?? ''}` };
const OPS = { authorization: `Bearer ${keys.plain['ops-key'] ?? ''}` };
const JSON_TYPE = { 'content-type': 'application/json' };
/** An owner token of the right shape that no lease has. */
const WRONG_TOKEN = 'AAAAAAAAAAAAAAAAAAAAAA';
const BIG = JSON.stringify({ ttlMs: 1000, holder: 'x'.repeat(20_000) });

interface Case {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
  status: number;
}

const apps: TestApp[] = [];
/** An app as deployed by default: with the request rate limit on, so its declared headers are sent. */
async function start(options: Parameters<typeof buildTestApp>[0]): Promise<string> {
  const t = await buildTestApp({ rateLimit: { max: 10_000, windowMs: 60_000 }, ...options });
  apps.push(t);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}
afterAll(async () => {
  await Promise.all(apps.map((t) => t.close()));
});

async function drive(base: string, c: Case): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}${c.url}`, { method: c.method, headers: c.headers, body: c.body });
  const body = await res.text();
  expect(res.status, `${c.method} ${c.url}: ${body}`).toBe(c.status);
  contract.check({ method: c.method, url: c.url, status: res.status, headers: res.headers, body });
  return { status: res.status, body };
}

/**
 * What every lease route family (locks, semaphores, read/write locks) answers alike for a lease `c1`
 * already held by `ownerToken`: each action's client errors, conflicts with the held lease, reads, then
 * a renew and a release of that lease.
 */
/** The release-request route's answers (an admin route with a body) for `key`, held by the lease with `fencingToken`. */
function releaseRequestCases(path: string, key: string, fencingToken: number): Case[] {
  const url = `/v1/${path}/${key}/release-request`;
  const ops = { ...OPS, ...JSON_TYPE };
  const body = JSON.stringify({ fencingToken, reason: 'contract' });
  return [
    { method: 'POST', url: `${url}?namespace=team`, headers: ops, body, status: 200 },
    { method: 'POST', url, headers: ops, body, status: 400 },
    { method: 'POST', url: `${url}?namespace=team`, headers: JSON_TYPE, body, status: 401 },
    { method: 'POST', url: `${url}?namespace=team`, headers: { ...TEAM, ...JSON_TYPE }, body, status: 403 },
    { method: 'POST', url: `/v1/${path}/nobody/release-request?namespace=team`, headers: ops, body, status: 404 },
    // Another lease than the one named holds it: 409 holder_changed, nothing asked.
    { method: 'POST', url: `${url}?namespace=team`, headers: ops, body: JSON.stringify({ fencingToken: fencingToken + 1 }), status: 409 },
    { method: 'POST', url: `${url}?namespace=team`, headers: ops, body: BIG, status: 413 },
    { method: 'POST', url: `${url}?namespace=team`, headers: { ...OPS, 'content-type': 'text/plain' }, body: 'x', status: 415 },
  ];
}

function leaseRouteCases(path: string, acquireBody: string, ownerToken: string): Case[] {
  const at = (rest: string) => `/v1/${path}/c1${rest}`;
  const cases: Case[] = [];
  for (const action of ['acquire', 'renew', 'release'] as const) {
    const url = at(`/${action}`);
    cases.push(
      { method: 'POST', url, headers: { ...TEAM, ...JSON_TYPE }, body: '{"ttlMs":"x"}', status: 400 },
      { method: 'POST', url, headers: JSON_TYPE, body: '{}', status: 401 },
      { method: 'POST', url, headers: { ...OPS, ...JSON_TYPE }, body: '{}', status: 403 },
      { method: 'POST', url, headers: { ...TEAM, ...JSON_TYPE }, body: BIG, status: 413 },
      { method: 'POST', url, headers: { ...TEAM, 'content-type': 'text/plain' }, body: 'ttl', status: 415 },
    );
  }
  cases.push(
    { method: 'POST', url: at('/acquire'), headers: { ...TEAM, ...JSON_TYPE }, body: acquireBody, status: 409 },
    {
      method: 'POST',
      url: at('/renew'),
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN, ttlMs: 30_000 }),
      status: 409,
    },
    {
      method: 'POST',
      url: at('/release'),
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN }),
      status: 409,
    },
    { method: 'GET', url: at(''), headers: TEAM, status: 200 },
    { method: 'GET', url: `/v1/${path}/free-one`, headers: TEAM, status: 200 },
    { method: 'GET', url: `/v1/${path}/bad%20key`, headers: TEAM, status: 400 },
    { method: 'GET', url: at(''), status: 401 },
    { method: 'GET', url: at(''), headers: OPS, status: 403 },
    {
      method: 'POST',
      url: at('/renew'),
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken, ttlMs: 30_000 }),
      status: 200,
    },
    { method: 'POST', url: at('/release'), headers: { ...TEAM, ...JSON_TYPE }, body: JSON.stringify({ ownerToken }), status: 200 },
  );
  return cases;
}

const auth = () => ({ mode: 'keys' as const, keyring: keys.keyring() });

describe('every route and status against openapi.yaml', () => {
  let base: string;
  beforeAll(async () => {
    base = await start({ auth: auth(), metrics: createMetrics({ defaultMetrics: false }), rateLimit: { max: 10_000, windowMs: 60_000 } });
  });

  it('the lock routes: success and client errors', async () => {
    const grant = JSON.parse(
      (
        await drive(base, {
          method: 'POST',
          url: '/v1/locks/c1/acquire',
          headers: { ...TEAM, ...JSON_TYPE },
          body: '{"ttlMs":30000}',
          status: 200,
        })
      ).body,
    ) as {
      ownerToken: string;
    };
    const cases = leaseRouteCases('locks', '{"ttlMs":30000}', grant.ownerToken);
    const idem = { ...TEAM, ...JSON_TYPE, 'idempotency-key': 'contract-1' };
    cases.push(
      { method: 'POST', url: '/v1/locks/c2/acquire', headers: idem, body: '{"ttlMs":30000}', status: 200 },
      { method: 'POST', url: '/v1/locks/c2/acquire', headers: idem, body: '{"ttlMs":30000}', status: 200 },
      { method: 'POST', url: '/v1/locks/c2/acquire', headers: idem, body: '{"ttlMs":60000}', status: 422 },
      // Errors every route can meet before its own code runs.
      { method: 'PUT', url: '/v1/locks/c1', headers: TEAM, status: 405 },
    );
    for (const c of cases) {
      // 405 has no operation of its own (the document lists a path's methods): its body is a Problem.
      if (c.status === 405) {
        const res = await fetch(`${base}${c.url}`, { method: c.method, headers: c.headers });
        const body = await res.text();
        expect(res.status).toBe(405);
        expect(res.headers.get('allow')).toBe('GET, HEAD, DELETE');
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(contract.component('Problem')(JSON.parse(body)), body).toBe(true);
        continue;
      }
      await drive(base, c);
    }
  });

  it('the admin routes', async () => {
    const grant = await fetch(`${base}/v1/locks/stuck/acquire`, {
      method: 'POST',
      headers: { ...TEAM, ...JSON_TYPE },
      body: '{"ttlMs":30000}',
    });
    expect(grant.status).toBe(200);
    const { fencingToken } = (await grant.json()) as { fencingToken: number };
    const cases: Case[] = [
      ...releaseRequestCases('locks', 'stuck', fencingToken),
      { method: 'GET', url: '/v1/locks?namespace=team', headers: OPS, status: 200 },
      { method: 'GET', url: '/v1/locks?limit=0', headers: OPS, status: 400 },
      { method: 'GET', url: '/v1/locks', status: 401 },
      { method: 'GET', url: '/v1/locks', headers: TEAM, status: 403 },
      { method: 'DELETE', url: '/v1/locks/stuck', headers: OPS, status: 400 },
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team', status: 401 },
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team', headers: TEAM, status: 403 },
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team', headers: { ...OPS, ...JSON_TYPE }, body: BIG, status: 413 },
      {
        method: 'DELETE',
        url: '/v1/locks/stuck?namespace=team',
        headers: { ...OPS, 'content-type': 'text/plain' },
        body: 'x',
        status: 415,
      },
      // Another lease than the one named (fencing token 1) holds it: 409 holder_changed, nothing changed.
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team&fencingToken=1', headers: OPS, status: 409 },
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team', headers: OPS, status: 200 },
      { method: 'DELETE', url: '/v1/locks/stuck?namespace=team', headers: OPS, status: 404 },
    ];
    for (const c of cases) await drive(base, c);
  });

  it('the public routes', async () => {
    for (const url of ['/livez', '/readyz', '/openapi.json', '/openapi.yaml']) await drive(base, { method: 'GET', url, status: 200 });
  });

  it('429 on every counted route; on renew and release only when they fail (not_owner)', async () => {
    const limited = await start({ auth: auth(), rateLimit: { max: 1, windowMs: 60_000 } });
    const grant = await fetch(`${limited}/v1/locks/r1/acquire`, {
      method: 'POST',
      headers: { ...TEAM, ...JSON_TYPE },
      body: '{"ttlMs":30000}',
    });
    expect(grant.status).toBe(200);
    const { ownerToken } = (await grant.json()) as { ownerToken: string };
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r2/acquire',
      headers: { ...TEAM, ...JSON_TYPE },
      body: '{"ttlMs":1000}',
      status: 429,
    });
    await drive(limited, { method: 'GET', url: '/v1/locks/r1', headers: TEAM, status: 429 });
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r1/renew',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken, ttlMs: 30_000 }),
      status: 200,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r1/release',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken }),
      status: 200,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r1/renew',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN, ttlMs: 1000 }),
      status: 429,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r1/release',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN }),
      status: 429,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/lock-sets/renew',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN, keys: ['r3'], ttlMs: 1000 }),
      status: 429,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/lock-sets/release',
      headers: { ...TEAM, ...JSON_TYPE },
      body: JSON.stringify({ ownerToken: WRONG_TOKEN, keys: ['r3'] }),
      status: 429,
    });
    await drive(limited, {
      method: 'POST',
      url: '/v1/lock-sets/acquire',
      headers: { ...TEAM, ...JSON_TYPE },
      body: '{"keys":["r3"],"ttlMs":1000}',
      status: 429,
    });
    await drive(limited, { method: 'GET', url: '/v1/locks', headers: OPS, status: 200 });
    await drive(limited, { method: 'GET', url: '/v1/locks', headers: OPS, status: 429 });
    await drive(limited, { method: 'DELETE', url: '/v1/locks/r1?namespace=team', headers: OPS, status: 429 });
    const ask = JSON.stringify({ fencingToken: 1 });
    await drive(limited, {
      method: 'POST',
      url: '/v1/locks/r1/release-request?namespace=team',
      headers: { ...OPS, ...JSON_TYPE },
      body: ask,
      status: 429,
    });
  });

  it('503 on every route that needs the store, when it is gone', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const down = await start({ auth: auth(), store, limits: DEFAULT_LIMITS });
    await store.close();
    const token = JSON.stringify({ ownerToken: WRONG_TOKEN, ttlMs: 1000 });
    const cases: Case[] = [
      { method: 'POST', url: '/v1/locks/d/acquire', headers: { ...TEAM, ...JSON_TYPE }, body: '{"ttlMs":1000}', status: 503 },
      { method: 'POST', url: '/v1/locks/d/renew', headers: { ...TEAM, ...JSON_TYPE }, body: token, status: 503 },
      {
        method: 'POST',
        url: '/v1/locks/d/release',
        headers: { ...TEAM, ...JSON_TYPE },
        body: JSON.stringify({ ownerToken: WRONG_TOKEN }),
        status: 503,
      },
      { method: 'GET', url: '/v1/locks/d', headers: TEAM, status: 503 },
      {
        method: 'POST',
        url: '/v1/lock-sets/acquire',
        headers: { ...TEAM, ...JSON_TYPE },
        body: '{"keys":["d"],"ttlMs":1000}',
        status: 503,
      },
      {
        method: 'POST',
        url: '/v1/lock-sets/renew',
        headers: { ...TEAM, ...JSON_TYPE },
        body: JSON.stringify({ ownerToken: WRONG_TOKEN, keys: ['d'], ttlMs: 1000 }),
        status: 503,
      },
      {
        method: 'POST',
        url: '/v1/lock-sets/release',
        headers: { ...TEAM, ...JSON_TYPE },
        body: JSON.stringify({ ownerToken: WRONG_TOKEN, keys: ['d'] }),
        status: 503,
      },
      { method: 'GET', url: '/v1/locks', headers: OPS, status: 503 },
      { method: 'DELETE', url: '/v1/locks/d?namespace=team', headers: OPS, status: 503 },
      ...PRIMITIVE_PATHS.map((path) => ({
        method: 'GET',
        url: `/v1/queue/${path}/d?namespace=team`,
        headers: OPS,
        status: 503,
      })),
      {
        method: 'POST',
        url: '/v1/locks/d/release-request?namespace=team',
        headers: { ...OPS, ...JSON_TYPE },
        body: '{"fencingToken":1}',
        status: 503,
      },
      { method: 'GET', url: '/readyz', status: 503 },
    ];
    for (const c of cases) await drive(down, c);
  });

  it('the lock-set routes', async () => {
    const set = (op: string, body: object, status: number, headers: Record<string, string> = { ...TEAM, ...JSON_TYPE }) =>
      drive(base, { method: 'POST', url: `/v1/lock-sets/${op}`, headers, body: JSON.stringify(body), status });
    const grant = JSON.parse((await set('acquire', { keys: ['s1', 's2'], ttlMs: 30_000 }, 200)).body) as { ownerToken: string };
    const { ownerToken } = grant;
    await set('acquire', { keys: ['s2', 's3'], ttlMs: 30_000 }, 409);
    await set('renew', { ownerToken: WRONG_TOKEN, keys: ['s1', 's2'], ttlMs: 30_000 }, 409);
    await set('release', { ownerToken: WRONG_TOKEN, keys: ['s1', 's2'] }, 409);
    await set('renew', { ownerToken, keys: ['s1', 's2'], ttlMs: 30_000 }, 200);
    await set('release', { ownerToken, keys: ['s1', 's2'] }, 200);
    for (const op of ['acquire', 'renew', 'release']) {
      const url = `/v1/lock-sets/${op}`;
      await drive(base, { method: 'POST', url, headers: { ...TEAM, ...JSON_TYPE }, body: '{"keys":[]}', status: 400 });
      await drive(base, { method: 'POST', url, headers: JSON_TYPE, body: '{}', status: 401 });
      await drive(base, { method: 'POST', url, headers: { ...OPS, ...JSON_TYPE }, body: '{}', status: 403 });
      await drive(base, { method: 'POST', url, headers: { ...TEAM, ...JSON_TYPE }, body: BIG, status: 413 });
      await drive(base, { method: 'POST', url, headers: { ...TEAM, 'content-type': 'text/plain' }, body: 'x', status: 415 });
    }
  });

  describe('semaphores, read/write locks and every other permit primitive', () => {
    // Each primitive's example acquire takes the whole of a free key, so the next acquire is refused (409).
    const PRIMITIVES = permitPrimitives().map(({ names, example }) => ({ path: names.path, body: JSON.stringify(example) }));

    it('their routes: success and client errors', async () => {
      for (const p of PRIMITIVES) {
        const at = (rest: string) => `/v1/${p.path}/c1${rest}`;
        const grant = JSON.parse(
          (await drive(base, { method: 'POST', url: at('/acquire'), headers: { ...TEAM, ...JSON_TYPE }, body: p.body, status: 200 })).body,
        ) as {
          ownerToken: string;
        };
        const cases = leaseRouteCases(p.path, p.body, grant.ownerToken);
        for (const c of cases) await drive(base, c);
      }
      // A semaphore asked for with another limit than its live permits'.
      await drive(base, {
        method: 'POST',
        url: '/v1/semaphores/m1/acquire',
        headers: { ...TEAM, ...JSON_TYPE },
        body: '{"limit":2,"ttlMs":30000}',
        status: 200,
      });
      await drive(base, {
        method: 'POST',
        url: '/v1/semaphores/m1/acquire',
        headers: { ...TEAM, ...JSON_TYPE },
        body: '{"limit":3,"ttlMs":30000}',
        status: 409,
      });
    });

    it('their admin routes', async () => {
      for (const p of PRIMITIVES) {
        const held = await drive(base, {
          method: 'POST',
          url: `/v1/${p.path}/stuck/acquire`,
          headers: { ...TEAM, ...JSON_TYPE },
          body: p.body,
          status: 200,
        });
        const url = `/v1/${p.path}/stuck`;
        const cases: Case[] = [
          ...releaseRequestCases(p.path, 'stuck', (JSON.parse(held.body) as { fencingToken: number }).fencingToken),
          { method: 'GET', url: `/v1/${p.path}?namespace=team`, headers: OPS, status: 200 },
          { method: 'GET', url: `/v1/${p.path}?limit=0`, headers: OPS, status: 400 },
          { method: 'GET', url: `/v1/${p.path}`, status: 401 },
          { method: 'GET', url: `/v1/${p.path}`, headers: TEAM, status: 403 },
          { method: 'DELETE', url, headers: OPS, status: 400 },
          { method: 'DELETE', url: `${url}?namespace=team`, status: 401 },
          { method: 'DELETE', url: `${url}?namespace=team`, headers: TEAM, status: 403 },
          { method: 'DELETE', url: `${url}?namespace=team`, headers: { ...OPS, ...JSON_TYPE }, body: BIG, status: 413 },
          { method: 'DELETE', url: `${url}?namespace=team`, headers: { ...OPS, 'content-type': 'text/plain' }, body: 'x', status: 415 },
          { method: 'DELETE', url: `${url}?namespace=team&fencingToken=1`, headers: OPS, status: 409 },
          { method: 'DELETE', url: `${url}?namespace=team`, headers: OPS, status: 200 },
          { method: 'DELETE', url: `${url}?namespace=team`, headers: OPS, status: 404 },
        ];
        for (const c of cases) await drive(base, c);
      }
    });

    it('429 on their counted routes', async () => {
      for (const p of PRIMITIVES) {
        const one = await start({ auth: auth(), rateLimit: { max: 1, windowMs: 60_000 } });
        await drive(one, {
          method: 'POST',
          url: `/v1/${p.path}/r1/acquire`,
          headers: { ...TEAM, ...JSON_TYPE },
          body: p.body,
          status: 200,
        });
        await drive(one, {
          method: 'POST',
          url: `/v1/${p.path}/r2/acquire`,
          headers: { ...TEAM, ...JSON_TYPE },
          body: p.body,
          status: 429,
        });
        await drive(one, { method: 'GET', url: `/v1/${p.path}/r1`, headers: TEAM, status: 429 });
        await drive(one, {
          method: 'POST',
          url: `/v1/${p.path}/r1/renew`,
          headers: { ...TEAM, ...JSON_TYPE },
          body: JSON.stringify({ ownerToken: WRONG_TOKEN, ttlMs: 1000 }),
          status: 429,
        });
        await drive(one, {
          method: 'POST',
          url: `/v1/${p.path}/r1/release`,
          headers: { ...TEAM, ...JSON_TYPE },
          body: JSON.stringify({ ownerToken: WRONG_TOKEN }),
          status: 429,
        });
        await drive(one, { method: 'GET', url: `/v1/${p.path}`, headers: OPS, status: 200 });
        await drive(one, { method: 'GET', url: `/v1/${p.path}`, headers: OPS, status: 429 });
        await drive(one, { method: 'DELETE', url: `/v1/${p.path}/r1?namespace=team`, headers: OPS, status: 429 });
        await drive(one, {
          method: 'POST',
          url: `/v1/${p.path}/r1/release-request?namespace=team`,
          headers: { ...OPS, ...JSON_TYPE },
          body: '{"fencingToken":1}',
          status: 429,
        });
      }
    });

    it('503 when the store is gone', async () => {
      const gone = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
      const down = await start({ auth: auth(), store: gone, limits: DEFAULT_LIMITS });
      await gone.close();
      const token = JSON.stringify({ ownerToken: WRONG_TOKEN, ttlMs: 1000 });
      for (const p of PRIMITIVES) {
        for (const [target, status] of [[down, 503]] as const) {
          const cases: Case[] = [
            { method: 'POST', url: `/v1/${p.path}/d/acquire`, headers: { ...TEAM, ...JSON_TYPE }, body: p.body, status },
            { method: 'POST', url: `/v1/${p.path}/d/renew`, headers: { ...TEAM, ...JSON_TYPE }, body: token, status },
            {
              method: 'POST',
              url: `/v1/${p.path}/d/release`,
              headers: { ...TEAM, ...JSON_TYPE },
              body: JSON.stringify({ ownerToken: WRONG_TOKEN }),
              status,
            },
            { method: 'GET', url: `/v1/${p.path}/d`, headers: TEAM, status },
            { method: 'GET', url: `/v1/${p.path}`, headers: OPS, status },
            { method: 'DELETE', url: `/v1/${p.path}/d?namespace=team`, headers: OPS, status },
            {
              method: 'POST',
              url: `/v1/${p.path}/d/release-request?namespace=team`,
              headers: { ...OPS, ...JSON_TYPE },
              body: '{"fencingToken":1}',
              status,
            },
          ];
          for (const c of cases) await drive(target, c);
        }
      }
    });
  });

  it('the history routes', async () => {
    const limited = await start({ auth: auth(), rateLimit: { max: 1, windowMs: 60_000 } });
    const unavailable = () => Promise.reject(new StoreUnavailableError('history store gone'));
    const gone = new HistoryRecorder(
      { append: unavailable, read: unavailable, close: () => Promise.resolve() },
      { flushMs: 5, maxBuffered: 10 },
    );
    const down = await start({ auth: auth(), history: gone });
    for (const path of PRIMITIVE_PATHS) {
      const own = `/v1/${path}/h1/history`;
      const admin = `/v1/history/${path}/h1?namespace=team`;
      for (const c of [
        { method: 'GET', url: own, headers: TEAM, status: 200 },
        { method: 'GET', url: `${own}?since=2026-12-01T14:00:00Z&until=2026-12-01T14:05:00Z&limit=10`, headers: TEAM, status: 200 },
        { method: 'GET', url: `${own}?since=yesterday`, headers: TEAM, status: 400 },
        { method: 'GET', url: own, status: 401 },
        { method: 'GET', url: own, headers: OPS, status: 403 },
        { method: 'GET', url: admin, headers: OPS, status: 200 },
        { method: 'GET', url: `/v1/history/${path}/h1`, headers: OPS, status: 400 },
        { method: 'GET', url: admin, status: 401 },
        { method: 'GET', url: admin, headers: TEAM, status: 403 },
      ]) {
        await drive(base, c);
      }
      await drive(down, { method: 'GET', url: own, headers: TEAM, status: 503 });
      await drive(down, { method: 'GET', url: admin, headers: OPS, status: 503 });
    }
    // One counted request per key and window: the second of each key is refused.
    await drive(limited, { method: 'GET', url: '/v1/locks/h1/history', headers: TEAM, status: 200 });
    for (const path of PRIMITIVE_PATHS) {
      await drive(limited, { method: 'GET', url: `/v1/${path}/h1/history`, headers: TEAM, status: 429 });
    }
    await drive(limited, { method: 'GET', url: '/v1/history/locks/h1?namespace=team', headers: OPS, status: 200 });
    for (const path of PRIMITIVE_PATHS) {
      await drive(limited, { method: 'GET', url: `/v1/history/${path}/h1?namespace=team`, headers: OPS, status: 429 });
    }
  });

  it('the queue route (admin)', async () => {
    const limited = await start({ auth: auth(), rateLimit: { max: 1, windowMs: 60_000 } });
    for (const path of PRIMITIVE_PATHS) {
      const url = `/v1/queue/${path}/q1?namespace=team`;
      for (const c of [
        { method: 'GET', url, headers: OPS, status: 200 },
        { method: 'GET', url: `/v1/queue/${path}/q1`, headers: OPS, status: 400 },
        { method: 'GET', url, status: 401 },
        { method: 'GET', url, headers: TEAM, status: 403 },
      ]) {
        await drive(base, c);
      }
    }
    await drive(limited, { method: 'GET', url: '/v1/queue/locks/q1?namespace=team', headers: OPS, status: 200 });
    await drive(limited, { method: 'GET', url: '/v1/queue/rwlocks/q1?namespace=team', headers: OPS, status: 429 });
  });

  it('saw every response openapi.yaml declares', () => {
    expect(contract.declared().filter((d) => !contract.seen.has(d))).toEqual([]);
  });
});
