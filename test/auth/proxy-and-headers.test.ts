import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/** Two Authorization headers are refused, not first-wins; TRUST_PROXY decides whose address open mode counts. */
const { keys, A, B } = twoTeamsAndAdmin();

/** node:http with a raw header list, so a header can be sent twice. */
function rawGet(
  port: number,
  path: string,
  rawHeaders: string[],
): Promise<{ status: number; contentType: string; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, path, method: 'GET', headers: ['Host', `127.0.0.1:${port}`, ...rawHeaders] },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type']),
            body: (text ? JSON.parse(text) : { text }) as Record<string, unknown>,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('two Authorization headers', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t.close();
  });

  it('are a 400 invalid_request naming Authorization, whichever keys they carry; one header works', async () => {
    for (const pair of [
      [A, B],
      [A, A],
      [B, { authorization: 'Bearer nonsense' }],
    ]) {
      const raw = pair.flatMap((h) => ['Authorization', h.authorization]);
      const res = await rawGet(port, '/v1/locks/dup', raw);
      expect(res.status).toBe(400);
      expect(res.contentType).toContain('application/problem+json');
      expect(res.body).toMatchObject({ code: 'invalid_request', errors: [{ field: 'Authorization' }] });
    }
    expect((await rawGet(port, '/v1/locks/dup', ['Authorization', A.authorization])).status).toBe(200);
  });
});

describe('TRUST_PROXY', () => {
  it('parses true, false, a hop count and address lists; rejects anything else', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).trustProxy).toBe('10.0.0.0/8,127.0.0.1');
    const hops = loadConfig({ TRUST_PROXY: '1' }).trustProxy;
    expect(typeof hops).toBe('function');
    if (typeof hops === 'function') expect([hops('10.0.0.1', 0), hops('10.0.0.2', 1)]).toEqual([true, false]);
    expect(() => loadConfig({ TRUST_PROXY: 'yes please' })).toThrow(/TRUST_PROXY/);
  });

  it('open mode counts requests by the forwarded client address only when the proxy is trusted', async () => {
    for (const trustProxy of [true, false]) {
      const t = await buildTestApp({ trustProxy, rateLimit: { max: 2, windowMs: 60_000 } });
      try {
        const statuses: number[] = [];
        for (const client of ['203.0.113.1', '203.0.113.1', '203.0.113.2', '203.0.113.2']) {
          const res = await t.app.inject({ method: 'GET', url: '/v1/locks/p', headers: { 'x-forwarded-for': client } });
          statuses.push(res.statusCode);
        }
        // Trusted: two clients with two requests each. Not trusted: one peer with four.
        expect(statuses).toEqual(trustProxy ? [200, 200, 200, 200] : [200, 200, 429, 429]);
      } finally {
        await t.close();
      }
    }
  });
});
