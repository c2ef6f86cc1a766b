import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Every kind of open wait (a queued acquire, a lock set waiting for a busy key, a blocking query on a
 * lock or a semaphore) counts against the same per-key, per-namespace and per-instance caps: none of
 * them is a way for one team to hold more of an instance than its share.
 */
const { keys, A, B } = twoTeamsAndAdmin();
let t: TestApp;
let base: string;
let callers = new AbortController();

beforeAll(async () => {
  t = await buildTestApp({
    auth: { mode: 'keys', keyring: keys.keyring() },
    limits: { ...DEFAULT_LIMITS, maxWaitMs: 30_000, maxWaitersPerKey: 2, maxWaitersPerNamespace: 3, maxWaitersPerInstance: 5 },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  callers.abort();
  await t.close();
});
// Each case starts with an empty waiting room: the waits it opened end with their callers.
afterEach(async () => {
  callers.abort();
  callers = new AbortController();
  await vi.waitFor(() => expect(t.locks.waitingCallers).toBe(0), { timeout: 10_000, interval: 10 });
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

/** A blocking query on `path` at its current index: it waits until the state changes or 25 s pass. */
async function watch(path: string, headers: Record<string, string>) {
  const { index } = (await call('GET', path, headers)).body as { index: number };
  return call('GET', `${path}?index=${index}&waitMs=25000`, headers);
}

/** Starts `count` waits (never awaited here; they end when the case's callers abort) and waits until all are open. */
async function open(count: number, start: () => Promise<unknown>) {
  const before = t.locks.waitingCallers;
  for (let i = 0; i < count; i++) void start().catch(() => undefined);
  await vi.waitFor(() => expect(t.locks.waitingCallers).toBe(before + count), { timeout: 10_000, interval: 10 });
}

function expectRefused(answer: { status: number; body: Record<string, unknown> }, scope: RegExp) {
  expect(answer.status).toBe(429);
  expect(answer.body).toMatchObject({ code: 'too_many_waiters' });
  expect(String(answer.body.detail)).toMatch(scope);
}

describe('open waits of every kind share the waiter caps', () => {
  it("blocking queries count: team B's fourth is refused (namespace), team A still watches, and the instance cap bounds both", async () => {
    await open(3, () => watch(`/v1/locks/w${Math.random()}`, B));
    expectRefused(await watch('/v1/locks/b-more', B), /namespace/);
    await open(2, () => watch(`/v1/locks/w${Math.random()}`, A));
    expectRefused(await watch('/v1/locks/a-more', A), /instance/);
    // An answer at once (no index, or waitMs 0) is not a wait and is never refused.
    expect((await call('GET', '/v1/locks/a-more', A)).status).toBe(200);
    expect((await call('GET', '/v1/locks/a-more?index=1&waitMs=0', A)).status).toBe(200);
  });

  it('blocking queries count per key: a third watcher of one key is refused (key), another key is not', async () => {
    await open(2, () => watch('/v1/locks/one-key', B));
    expectRefused(await watch('/v1/locks/one-key', B), /this lock/);
    await open(1, () => watch('/v1/locks/other-key', B));
  });

  it('semaphore blocking queries count like lock ones', async () => {
    await open(3, () => watch(`/v1/semaphores/s${Math.random()}`, B));
    expectRefused(await watch('/v1/semaphores/s-more', B), /namespace/);
  });

  it("lock-set waits count: B's fourth waiting set is refused, and a set waiting on a key shares that key's cap with its watchers", async () => {
    const held = await call('POST', '/v1/locks/busy/acquire', B, { ttlMs: 20_000 });
    expect(held.status).toBe(200);
    await open(2, () =>
      call('POST', '/v1/lock-sets/acquire', B, { keys: ['busy', `free-${Math.random()}`], ttlMs: 5_000, waitMs: 25_000 }),
    );
    // Both of the key's slots are taken by the waiting sets: a watcher of it is refused.
    expectRefused(await watch('/v1/locks/busy', B), /this lock/);
    await open(1, () => watch('/v1/locks/another', B));
    expectRefused(await call('POST', '/v1/lock-sets/acquire', B, { keys: ['busy2', 'other'], ttlMs: 5_000, waitMs: 25_000 }), /namespace/);
    // A set that does not wait is no open wait: it is answered (409, busy) whatever the room.
    expect((await call('POST', '/v1/lock-sets/acquire', B, { keys: ['busy', 'x'], ttlMs: 5_000 })).status).toBe(409);
    expect((await call('POST', '/v1/locks/busy/release', B, { ownerToken: held.body.ownerToken })).status).toBe(200);
  });

  it('queued acquires and blocking queries share the count', async () => {
    const holder = await call('POST', '/v1/locks/q-held/acquire', A, { ttlMs: 20_000 });
    expect(holder.status).toBe(200);
    await open(2, () => call('POST', '/v1/locks/q-held/acquire', A, { ttlMs: 20_000, waitMs: 25_000 }));
    await open(1, () => watch('/v1/locks/q-watched', A));
    expectRefused(await watch('/v1/locks/q-watched-2', A), /namespace/);
    expect((await call('POST', '/v1/locks/q-held/release', A, { ownerToken: holder.body.ownerToken })).status).toBe(200);
  });
});
