import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS, loadConfig } from '../../src/config.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * One team's waiting callers cannot fill the waiting room every team shares: each namespace may keep
 * only WAITERS_PER_NAMESPACE_MAX callers waiting on an instance, well under the instance's cap.
 */
const { keys, A, B } = twoTeamsAndAdmin();
let t: TestApp;
let base: string;
const callers = new AbortController();

beforeAll(async () => {
  t = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    limits: { ...DEFAULT_LIMITS, maxWaitMs: 30_000, maxWaitersPerNamespace: 3, maxWaitersPerInstance: 5 },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  callers.abort();
  await t.close();
});

async function call(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: callers.signal,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const acquire = (key: string, headers: Record<string, string>, waitMs = 0) =>
  call('POST', `/v1/locks/${key}/acquire`, headers, { ttlMs: 20_000, ...(waitMs ? { waitMs } : {}) });

async function queued(key: string, headers: Record<string, string>, count: number) {
  await vi.waitFor(async () => expect((await call('GET', `/v1/locks/${key}`, headers)).body.waiters).toBe(count), {
    timeout: 10_000,
    interval: 20,
  });
}

describe('waiters per namespace', () => {
  it('the default is well under the instance cap', () => {
    const config = loadConfig({});
    expect(config.limits.maxWaitersPerNamespace).toBe(1000);
    expect(config.limits.maxWaitersPerNamespace).toBeLessThanOrEqual(config.limits.maxWaitersPerInstance / 10);
    expect(() => loadConfig({ WAITERS_PER_NAMESPACE_MAX: '0' })).toThrow(/WAITERS_PER_NAMESPACE_MAX/);
  });

  it('the caps compose: lowering the instance cap alone lowers the namespace share with it; a namespace cap at or over the instance cap is refused', () => {
    expect(loadConfig({ WAITERS_PER_INSTANCE_MAX: '60' }).limits).toMatchObject({ maxWaitersPerInstance: 60, maxWaitersPerNamespace: 6 });
    expect(loadConfig({ WAITERS_PER_INSTANCE_MAX: '5' }).limits.maxWaitersPerNamespace).toBe(1);
    expect(loadConfig({ WAITERS_PER_INSTANCE_MAX: '60', WAITERS_PER_NAMESPACE_MAX: '30' }).limits.maxWaitersPerNamespace).toBe(30);
    expect(() => loadConfig({ WAITERS_PER_INSTANCE_MAX: '60', WAITERS_PER_NAMESPACE_MAX: '60' })).toThrow(
      /WAITERS_PER_NAMESPACE_MAX: must be below/,
    );
    expect(() => loadConfig({ WAITERS_PER_NAMESPACE_MAX: '10000' })).toThrow(/WAITERS_PER_NAMESPACE_MAX/);
  });

  it("team B's full waiting room answers B 429 too_many_waiters while team A still waits and is granted", async () => {
    expect((await acquire('b-held', B)).status).toBe(200);
    const bWaiters = [1, 2, 3].map(() => acquire('b-held', B, 25_000).catch(() => undefined));
    await queued('b-held', B, 3);

    const refused = await acquire('b-held', B, 25_000);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'too_many_waiters', status: 429 });
    expect(String(refused.body.detail)).toContain('namespace');

    const holderA = await acquire('a-held', A);
    expect(holderA.status).toBe(200);
    const waiterA = acquire('a-held', A, 25_000);
    await queued('a-held', A, 1);
    const released = await call('POST', '/v1/locks/a-held/release', A, { ownerToken: holderA.body.ownerToken });
    expect(released.status).toBe(200);
    expect((await waiterA).status).toBe(200);

    // The instance cap still holds over all namespaces: 3 of B + 2 of A fill it.
    expect((await acquire('a-held-2', A)).status).toBe(200);
    const aWaiters = [1, 2].map(() => acquire('a-held-2', A, 25_000).catch(() => undefined));
    await queued('a-held-2', A, 2);
    const full = await acquire('a-held-2', A, 25_000);
    expect(full.status).toBe(429);
    expect(String(full.body.detail)).toContain('instance');

    callers.abort();
    await Promise.all([...bWaiters, ...aWaiters]);
  });
});

describe('WAITERS_PER_INSTANCE_MAX=60 alone', () => {
  let small: TestApp;
  let smallBase: string;
  const smallCallers = new AbortController();
  beforeAll(async () => {
    small = await buildTestApp({
      auth: { mode: 'keys', keyring: keys.keyring() },
      limits: { ...loadConfig({ WAITERS_PER_INSTANCE_MAX: '60' }).limits, maxWaitMs: 30_000 },
    });
    await small.app.listen({ port: 0, host: '127.0.0.1' });
    smallBase = `http://127.0.0.1:${(small.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    smallCallers.abort();
    await small.close();
  });

  const post = async (path: string, headers: Record<string, string>, body: unknown) => {
    const res = await fetch(`${smallBase}${path}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: smallCallers.signal,
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it("one team's 100 waiting callers leave room for another team's waiting acquire", async () => {
    expect((await post('/v1/locks/b-busy/acquire', B, { ttlMs: 20_000 })).status).toBe(200);
    let refusedB = 0;
    const bWaiters = Array.from({ length: 100 }, () =>
      post('/v1/locks/b-busy/acquire', B, { ttlMs: 20_000, waitMs: 25_000 }).then(
        (r) => (refusedB += r.status === 429 ? 1 : 0),
        () => undefined,
      ),
    );
    // B gets its share (a tenth of 60) queued; the other 94 are refused at once.
    await vi.waitFor(() => expect(refusedB).toBe(94), { timeout: 20_000, interval: 20 });
    const holderA = await post('/v1/locks/a-busy/acquire', A, { ttlMs: 20_000 });
    expect(holderA.status).toBe(200);
    const waiterA = post('/v1/locks/a-busy/acquire', A, { ttlMs: 20_000, waitMs: 25_000 });
    await vi.waitFor(
      async () => {
        const res = await fetch(`${smallBase}/v1/locks/a-busy`, { headers: A });
        expect(((await res.json()) as { waiters: number }).waiters).toBe(1);
      },
      { timeout: 10_000, interval: 20 },
    );
    expect((await post('/v1/locks/a-busy/release', A, { ownerToken: holderA.body.ownerToken })).status).toBe(200);
    expect((await waiterA).status).toBe(200);
    smallCallers.abort();
    await Promise.all(bWaiters);
  });
});
