import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it, vi } from 'vitest';
import { makeKeys } from '../helpers/api-keys.js';
import { OpenApiContract } from '../helpers/openapi-contract.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * A 503 `overloaded` from load shedding is refused before the rate limiter counts anything, so it carries
 * no X-RateLimit-* headers: openapi.yaml must not declare them on 503 (a declared header is a promise
 * every such answer keeps, docs/api.md). The answer matches the contract.
 */
const contract = new OpenApiContract(fileURLToPath(new URL('../../openapi.yaml', import.meta.url)));
const keys = makeKeys([{ id: 'team-key', namespace: 'team', scopes: ['locks'] }]);
const TEAM = { authorization: `Bearer ${keys.plain['team-key'] ?? ''}`, 'content-type': 'application/json' };
let t: TestApp | undefined;
afterAll(async () => t?.close());

it('a 503 overloaded on acquire matches openapi.yaml (no X-RateLimit-* declared on a 503)', async () => {
  t = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    rateLimit: { max: 10_000, windowMs: 60_000 },
    // Every new acquire is over the event-loop budget: refused with 503 overloaded.
    loadBudget: { maxEventLoopDelayMs: 0, maxRequestsInFlight: 0, maxOpenWaits: 1 },
  });
  // One caller waiting makes open_waits >= 1, so the next acquire is refused at once.
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const holder = await fetch(`${base}/v1/locks/k/acquire`, { method: 'POST', headers: TEAM, body: '{"ttlMs":30000}' });
  expect(holder.status).toBe(200);
  const waiting = fetch(`${base}/v1/locks/k/acquire`, { method: 'POST', headers: TEAM, body: '{"ttlMs":30000,"waitMs":5000}' });
  // Once that caller waits (the lock's queue shows it), the budget of open waits is spent.
  const app = t;
  await vi.waitFor(async () => expect(await app.store.leases.queue('lock', 'team/k', 10)).toHaveLength(1), {
    timeout: 10_000,
    interval: 20,
  });
  const url = '/v1/locks/other/acquire';
  const res = await fetch(`${base}${url}`, { method: 'POST', headers: TEAM, body: '{"ttlMs":30000}' });
  const body = await res.text();
  expect(res.status, body).toBe(503);
  expect(JSON.parse(body).code).toBe('overloaded');
  expect(() => contract.check({ method: 'POST', url, status: res.status, headers: res.headers, body })).not.toThrow();
  await waiting;
});
