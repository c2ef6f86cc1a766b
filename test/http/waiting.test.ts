import { setTimeout as sleep } from 'node:timers/promises';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/** acquire with waitMs over HTTP: granted on release, 409 on time-out, 400/429 at the bounds, no leaks. */
let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await buildTestApp({
    store: new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0, maxWaitersPerKey: 3 }),
    limits: { ...DEFAULT_LIMITS, maxWaitMs: 10_000, maxWaitersPerInstance: 6 },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t.close();
});

async function post(path: string, body: unknown, signal?: AbortSignal) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown>, at: performance.now() };
}

/** Callers queued on a held lock, as GET /v1/locks/{key} shows them. */
async function waitersOn(key: string): Promise<unknown> {
  const res = await fetch(`${base}/v1/locks/${key}`);
  return ((await res.json()) as { waiters?: number }).waiters;
}

describe('waiting for a held lock', () => {
  it('is granted the moment the holder releases', async () => {
    const holder = await post('/v1/locks/w1/acquire', { ttlMs: 30_000 });
    const waiting = post('/v1/locks/w1/acquire', { ttlMs: 30_000, waitMs: 5_000 });
    await sleep(100);
    const released = await post('/v1/locks/w1/release', { ownerToken: holder.body.ownerToken });
    expect(released.status).toBe(200);
    const waiter = await waiting;
    expect(waiter.status).toBe(200);
    expect(waiter.body.fencingToken as number).toBeGreaterThan(holder.body.fencingToken as number);
    expect(waiter.at - released.at).toBeLessThan(500);
  });

  it('is granted when the holder’s lease expires', async () => {
    await post('/v1/locks/w2/acquire', { ttlMs: 300 });
    const started = performance.now();
    const waiter = await post('/v1/locks/w2/acquire', { ttlMs: 1_000, waitMs: 5_000 });
    expect(waiter.status).toBe(200);
    expect(waiter.at - started).toBeLessThan(2_000);
  });

  it('answers 409 lock_held when waitMs runs out', async () => {
    await post('/v1/locks/w3/acquire', { ttlMs: 30_000 });
    const started = performance.now();
    const waiter = await post('/v1/locks/w3/acquire', { ttlMs: 1_000, waitMs: 300 });
    expect(waiter.status).toBe(409);
    expect(waiter.body.code).toBe('lock_held');
    expect(Number(waiter.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(waiter.at - started).toBeGreaterThanOrEqual(290);
  });

  it('waitMs above the configured bound is a 400 naming waitMs', async () => {
    const res = await post('/v1/locks/w4/acquire', { ttlMs: 1_000, waitMs: 10_001 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(JSON.stringify(res.body.errors)).toContain('waitMs');
    const negative = await post('/v1/locks/w4/acquire', { ttlMs: 1_000, waitMs: -1 });
    expect(negative.status).toBe(400);
  });

  it('a caller that disconnects while waiting leaves the queue; the next waiter gets the lock', async () => {
    const holder = await post('/v1/locks/w5/acquire', { ttlMs: 30_000 });
    const controller = new AbortController();
    const waiters = async () => (await fetch(`${base}/v1/locks/w5`).then((r) => r.json() as Promise<Record<string, unknown>>)).waiters;
    const leaving = post('/v1/locks/w5/acquire', { ttlMs: 30_000, waitMs: 5_000 }, controller.signal).catch((e: Error) => e);
    await vi.waitFor(async () => expect(await waiters()).toBe(1), { timeout: 10_000 });
    const staying = post('/v1/locks/w5/acquire', { ttlMs: 30_000, waitMs: 5_000 });
    await vi.waitFor(async () => expect(await waiters()).toBe(2), { timeout: 10_000 });
    expect((await post('/v1/locks/w5/acquire', { ttlMs: 1_000 })).status).toBe(409);
    controller.abort();
    expect(await leaving).toBeInstanceOf(Error);
    // The server notices the closed connection on its own time: wait for it, then it must hold.
    await vi.waitFor(async () => expect(await waiters()).toBe(1), { timeout: 10_000 });
    await post('/v1/locks/w5/release', { ownerToken: holder.body.ownerToken });
    expect((await staying).status).toBe(200);
  });

  it('a full queue on the key answers 429 too_many_waiters with Retry-After, and recovers', async () => {
    const holder = await post('/v1/locks/w6/acquire', { ttlMs: 30_000 });
    const queued = [1, 2, 3].map(() => post('/v1/locks/w6/acquire', { ttlMs: 30_000, waitMs: 3_000 }));
    await vi.waitFor(async () => expect(await waitersOn('w6')).toBe(3), { timeout: 10_000, interval: 10 });
    const refused = await post('/v1/locks/w6/acquire', { ttlMs: 30_000, waitMs: 1_500 });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('too_many_waiters');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    for (const q of await Promise.all(queued)) expect(q.status).toBe(409);
    await post('/v1/locks/w6/release', { ownerToken: holder.body.ownerToken });
    expect((await post('/v1/locks/w6/acquire', { ttlMs: 1_000, waitMs: 400 })).status).toBe(200);
  });

  it('a full instance answers 429 too_many_waiters', async () => {
    const keys = ['i1', 'i2', 'i3', 'i4', 'i5', 'i6', 'i7'];
    const holders = await Promise.all(keys.map((key) => post(`/v1/locks/${key}/acquire`, { ttlMs: 30_000 })));
    const waiting = keys.slice(0, 6).map((key) => post(`/v1/locks/${key}/acquire`, { ttlMs: 30_000, waitMs: 10_000 }));
    // Refused only once all six are queued, however slow the machine is to get them there.
    await vi.waitFor(async () => expect(await Promise.all(keys.slice(0, 6).map(waitersOn))).toEqual([1, 1, 1, 1, 1, 1]), {
      timeout: 10_000,
      interval: 10,
    });
    const refused = await post('/v1/locks/i7/acquire', { ttlMs: 1_000, waitMs: 400 });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('too_many_waiters');
    // Releasing the holders answers the waiters at once.
    for (const [i, key] of keys.entries()) await post(`/v1/locks/${key}/release`, { ownerToken: holders[i]?.body.ownerToken });
    for (const w of await Promise.all(waiting)) expect(w.status).toBe(200);
  });
});

describe('shutdown while callers wait', () => {
  it('answers waiting requests at once with 503 shutting_down instead of hanging', async () => {
    const app = await buildTestApp();
    await app.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.app.server.address() as AddressInfo).port;
    const body = JSON.stringify({ ttlMs: 30_000, waitMs: 20_000 });
    const send = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(
          { host: '127.0.0.1', port, method: 'POST', path: '/v1/locks/s1/acquire', headers: { 'content-type': 'application/json' } },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    await send(); // the holder
    const waiting = send();
    await sleep(100);
    const started = performance.now();
    await app.close();
    const res = await waiting;
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'shutting_down' });
  });
});
