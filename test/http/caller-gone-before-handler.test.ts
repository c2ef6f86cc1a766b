import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * A waiting acquire whose caller left before its handler ran (its connection closed during an async step
 * before the route: a rate limit counted in a shared store, say) must not wait for anybody: the close was
 * emitted once, before the route listened for it. Such a wait would stay queued for its whole waitMs and
 * take the lock at the next release, held by nobody until its TTL.
 */
const LATE = 'x-test-late-handler';

let t: TestApp;
let base: string;
/** Resolved when the late request has reached the step before its handler. */
let reached: () => void = () => undefined;
/** How each acquire ended, as the lock service reports it. */
const acquires: string[] = [];

beforeAll(async () => {
  t = await buildTestApp({
    limits: { ...DEFAULT_LIMITS, maxWaitMs: 60_000 },
    observer: { operation: (op, result) => (op === 'acquire' ? acquires.push(result) : undefined) },
    configure: (app) =>
      app.addHook('preHandler', async (request, reply) => {
        if (request.headers[LATE] === undefined) return;
        reached();
        // The step before the route outlasts the caller: the connection closes while it runs.
        await new Promise<void>((resolve) => (reply.raw.destroyed ? resolve() : reply.raw.once('close', () => resolve())));
      }),
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
});

async function post(path: string, body: unknown) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('a waiting acquire whose caller left before the route ran', () => {
  it('ends at once: it neither waits out its waitMs nor takes the lock at the next release', async () => {
    const holder = await post('/v1/locks/gone-early/acquire', { ttlMs: 60_000 });
    expect(holder.status).toBe(200);
    const before = acquires.length;
    const atHook = new Promise<void>((resolve) => (reached = resolve));
    const { port } = t.app.server.address() as AddressInfo;
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/locks/gone-early/acquire',
      headers: { 'content-type': 'application/json', [LATE]: '1' },
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ ttlMs: 60_000, waitMs: 50_000 }));
    await atHook;
    req.destroy();
    // The acquire ends as soon as its route runs, not after its 50 s wait.
    await vi.waitFor(() => expect(acquires.length).toBe(before + 1), { timeout: 10_000, interval: 20 });
    expect(acquires[before]).not.toBe('ok');
    // The lock goes to a caller that is there, not to the one that left.
    expect((await post('/v1/locks/gone-early/release', { ownerToken: holder.body.ownerToken })).status).toBe(200);
    expect((await post('/v1/locks/gone-early/acquire', { ttlMs: 1_000 })).status).toBe(200);
  });
});
