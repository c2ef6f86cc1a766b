import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import createClient, { type Client } from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateClientTypes } from '../../scripts/client-types.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import type { paths } from '../../src/client/openapi-types.js';
import { SpecValidator } from './typescript/spec-validator.js';

const OPENAPI_PATH = fileURLToPath(new URL('../../openapi.yaml', import.meta.url));
const TYPES_PATH = fileURLToPath(new URL('../../src/client/openapi-types.ts', import.meta.url));

/**
 * A client generated from the committed openapi.yaml (openapi-typescript types + openapi-fetch) drives
 * a listening server through every operation and every error path. Each response is checked against
 * the document at run time (SpecValidator); the calls themselves are type-checked against the
 * generated types by `npm run lint`.
 */
describe('generated TypeScript client against a running server', () => {
  let server: TestApp;
  let baseUrl = '';
  let client: Client<paths>;
  const spec = new SpecValidator(OPENAPI_PATH);
  const key = (name: string) => `ts-client-${randomUUID()}-${name}`;

  beforeAll(async () => {
    // The request rate limit on, as deployed by default: its headers are declared, so they must come.
    server = await buildTestApp({ logLevel: 'warn', rateLimit: { max: 10_000, windowMs: 60_000 } });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
    client = createClient<paths>({ baseUrl });
    client.use(spec.middleware());
  });

  afterAll(async () => {
    await server?.close();
  });

  it('uses types generated from the committed openapi.yaml (npm run openapi regenerates them)', async () => {
    const fresh = await generateClientTypes(readFileSync(OPENAPI_PATH, 'utf8'));
    expect(fresh, 'src/client/openapi-types.ts is stale: run `npm run openapi`').toBe(readFileSync(TYPES_PATH, 'utf8'));
  });

  it('is served the same document that is committed', async () => {
    const served = await (await fetch(`${baseUrl}/openapi.yaml`)).text();
    expect(served, 'openapi.yaml is stale: run `npm run openapi`').toBe(readFileSync(OPENAPI_PATH, 'utf8'));
  });

  it('acquires, renews, inspects and releases a lock', async () => {
    const k = key('cycle');
    const acquired = await client.POST('/v1/locks/{key}/acquire', {
      params: { path: { key: k } },
      body: { ttlMs: 5_000, holder: 'ts-client' },
    });
    expect(acquired.response.status).toBe(200);
    const grant = acquired.data;
    if (!grant) throw new Error('no grant');
    expect(grant.key).toBe(k);
    expect(grant.holder).toBe('ts-client');

    const renewed = await client.POST('/v1/locks/{key}/renew', {
      params: { path: { key: k } },
      body: { ownerToken: grant.ownerToken, ttlMs: 10_000 },
    });
    expect(renewed.response.status).toBe(200);
    expect(renewed.data?.fencingToken).toBe(grant.fencingToken);
    expect(renewed.data?.ttlMs).toBe(10_000);

    const held = await client.GET('/v1/locks/{key}', { params: { path: { key: k } } });
    expect(held.data).toMatchObject({ key: k, held: true, holder: 'ts-client', fencingToken: grant.fencingToken });

    const released = await client.POST('/v1/locks/{key}/release', {
      params: { path: { key: k } },
      body: { ownerToken: grant.ownerToken },
    });
    expect(released.data).toEqual({ key: k, released: true });

    const free = await client.GET('/v1/locks/{key}', { params: { path: { key: k } } });
    expect(free.data).toMatchObject({ key: k, held: false });

    const ready = await client.GET('/readyz');
    expect(ready.data).toEqual({ status: 'ready', store: 'memory' });
    expect((await client.GET('/livez')).data).toEqual({ status: 'ok' });
  });

  it('400 invalid_request: a TTL outside the bounds, a malformed key', async () => {
    const ttl = await client.POST('/v1/locks/{key}/acquire', { params: { path: { key: key('ttl') } }, body: { ttlMs: 1 } });
    expect(ttl.response.status).toBe(400);
    expect(ttl.error?.code).toBe('invalid_request');
    expect(ttl.error?.errors?.[0]?.field).toBe('ttlMs');

    const badKey = await client.GET('/v1/locks/{key}', { params: { path: { key: 'no spaces allowed' } } });
    expect(badKey.response.status).toBe(400);
    expect(badKey.error?.errors?.[0]?.field).toBe('key');
  });

  it('404 not_found: a path the API does not have', async () => {
    // A client pointed at the wrong base path; 404 is not an operation's answer, so its body is checked
    // against the Problem schema directly.
    const lost = createClient<paths>({ baseUrl: `${baseUrl}/no-such-prefix` });
    const res = await lost.GET('/v1/locks/{key}', { params: { path: { key: key('404') } } });
    expect(res.response.status).toBe(404);
    expect(res.response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(spec.component('Problem')(res.error), JSON.stringify(res.error)).toBe(true);
    expect(res.error?.code).toBe('not_found');
  });

  it('409 lock_held with Retry-After, 409 not_owner for a stale or foreign token', async () => {
    const k = key('409');
    const first = await client.POST('/v1/locks/{key}/acquire', { params: { path: { key: k } }, body: { ttlMs: 5_000 } });
    expect(first.response.status).toBe(200);

    const second = await client.POST('/v1/locks/{key}/acquire', { params: { path: { key: k } }, body: { ttlMs: 5_000 } });
    expect(second.response.status).toBe(409);
    expect(second.error?.code).toBe('lock_held');
    expect(second.error?.retryAfterMs).toBeGreaterThan(0);
    expect(Number(second.response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    const foreign = randomBytes(16).toString('base64url');
    const renew = await client.POST('/v1/locks/{key}/renew', { params: { path: { key: k } }, body: { ownerToken: foreign, ttlMs: 5_000 } });
    expect(renew.response.status).toBe(409);
    expect(renew.error?.code).toBe('not_owner');
    const release = await client.POST('/v1/locks/{key}/release', { params: { path: { key: k } }, body: { ownerToken: foreign } });
    expect(release.response.status).toBe(409);
    expect(release.error?.code).toBe('not_owner');
  });

  it('413 payload_too_large and 415 unsupported_media_type', async () => {
    const big = await client.POST('/v1/locks/{key}/acquire', {
      params: { path: { key: key('413') } },
      body: { ttlMs: 5_000, holder: 'h'.repeat(20_000) },
    });
    expect(big.response.status).toBe(413);
    expect(big.error?.code).toBe('payload_too_large');

    const xml = await client.POST('/v1/locks/{key}/acquire', {
      params: { path: { key: key('415') } },
      body: { ttlMs: 5_000 },
      headers: { 'content-type': 'application/xml' },
      bodySerializer: () => '<acquire ttlMs="5000"/>',
    });
    expect(xml.response.status).toBe(415);
    expect(xml.error?.code).toBe('unsupported_media_type');
  });
});
