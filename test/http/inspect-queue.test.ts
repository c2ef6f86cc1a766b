import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { everyStore } from '../helpers/both-stores.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/** inspect?queue=true lists who waits (like the Web Locks API's query()), for every primitive, on every store. */
const STORES = everyStore('q');

describe.each(STORES)('inspect?queue=true on the %s store', (_name, openStore) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ store: await openStore() });
  });
  afterAll(async () => {
    await t.close();
  });

  const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });
  const get = (url: string) => t.app.inject({ method: 'GET', url });
  /** Starts a waiting acquire (answered when the test releases or the app closes). */
  const wait = (url: string, payload: object) => void post(url, { ...payload, waitMs: 30_000 }).catch(() => undefined);

  it('a lock: position, holder label and waiting since, head first; nothing without the parameter', async () => {
    const key = `q-${randomUUID().slice(0, 8)}`;
    const held = (await post(`/v1/locks/${key}/acquire`, { ttlMs: 60_000, holder: 'holding' })).json<{ ownerToken: string }>();
    const before = Date.now();
    wait(`/v1/locks/${key}/acquire`, { ttlMs: 5_000, holder: 'first' });
    await vi.waitFor(async () => expect((await get(`/v1/locks/${key}`)).json()).toMatchObject({ waiters: 1 }), {
      timeout: 10_000,
      interval: 10,
    });
    wait(`/v1/locks/${key}/acquire`, { ttlMs: 5_000 });
    await vi.waitFor(async () => expect((await get(`/v1/locks/${key}`)).json()).toMatchObject({ waiters: 2 }), {
      timeout: 10_000,
      interval: 10,
    });

    expect((await get(`/v1/locks/${key}`)).json()).not.toHaveProperty('queue');
    const answer = (await get(`/v1/locks/${key}?queue=true`)).json<{
      queue: Array<{ position: number; holder: string | null; waitingSince: string }>;
    }>();
    expect(answer.queue.map(({ position, holder }) => [position, holder])).toEqual([
      [1, 'first'],
      [2, null],
    ]);
    for (const q of answer.queue) expect(Date.parse(q.waitingSince)).toBeGreaterThanOrEqual(before - 1_000);
    expect(JSON.stringify(answer)).not.toContain(held.ownerToken);
    // Not with a blocking query: its answer is shared by every watcher of the key.
    expect((await get(`/v1/locks/${key}?queue=true&index=1&waitMs=1000`)).json()).toMatchObject({
      code: 'invalid_request',
      errors: [{ field: 'queue' }],
    });
    expect((await get(`/v1/locks/${key}?queue=maybe`)).statusCode).toBe(400);
  });

  it("a semaphore and a read/write lock: weight, and a read/write lock's mode", async () => {
    const key = `q-${randomUUID().slice(0, 8)}`;
    expect((await post(`/v1/semaphores/${key}/acquire`, { limit: 1, ttlMs: 60_000 })).statusCode).toBe(200);
    wait(`/v1/semaphores/${key}/acquire`, { limit: 1, ttlMs: 5_000, holder: 'next' });
    await vi.waitFor(async () => expect((await get(`/v1/semaphores/${key}`)).json()).toMatchObject({ waiters: 1 }), {
      timeout: 10_000,
      interval: 10,
    });
    expect((await get(`/v1/semaphores/${key}?queue=true`)).json()).toMatchObject({ queue: [{ position: 1, holder: 'next', weight: 1 }] });

    expect((await post(`/v1/rwlocks/${key}/acquire`, { mode: 'write', ttlMs: 60_000 })).statusCode).toBe(200);
    wait(`/v1/rwlocks/${key}/acquire`, { mode: 'read', ttlMs: 5_000, holder: 'reader' });
    await vi.waitFor(async () => expect((await get(`/v1/rwlocks/${key}`)).json()).toMatchObject({ waiters: 1 }), {
      timeout: 10_000,
      interval: 10,
    });
    wait(`/v1/rwlocks/${key}/acquire`, { mode: 'write', ttlMs: 5_000, holder: 'writer' });
    await vi.waitFor(async () => expect((await get(`/v1/rwlocks/${key}`)).json()).toMatchObject({ waiters: 2 }), {
      timeout: 10_000,
      interval: 10,
    });
    const rw = (await get(`/v1/rwlocks/${key}?queue=true`)).json<{ queue: Array<{ position: number; holder: string; mode: string }> }>();
    expect(rw.queue.map(({ position, holder, mode }) => [position, holder, mode])).toEqual([
      [1, 'reader', 'read'],
      [2, 'writer', 'write'],
    ]);
  });
});
