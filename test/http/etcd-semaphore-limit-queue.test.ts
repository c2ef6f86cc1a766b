import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { etcdOnly } from '../helpers/etcd-only.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * etcd: "an acquire with another limit gets 409 limit_mismatch until every live permit has ended"
 * (primitives.md). A waiter decides to queue on one read and writes its waiter record in a later call,
 * with nothing guarding that the pool is still as it read it. Here the record's put is held back (as a
 * slow network would) until the live permit has run out and another caller took the semaphore with
 * another limit.
 */
const stores = etcdOnly('limit-queue');

describe.each(stores)('semaphore limit while a waiter queues (%s)', (_name, open) => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });
  const post = (url: string, payload: unknown) => t!.app.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });
  const get = (url: string) => t!.app.inject({ method: 'GET', url });

  it('a waiter that asked with limit 1 is never granted beside a permit of limit 5', async () => {
    const store = await open();
    t = await buildTestApp({ store, limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 0 } });
    // A first call to a fresh etcd store can outlast its deadline on a busy machine (503, failed closed):
    // the race below needs a store that answers, so one call on another semaphore must succeed first.
    await vi.waitFor(async () => expect((await post('/v1/semaphores/warm/acquire', { limit: 1, ttlMs: 200 })).statusCode).toBe(200), {
      timeout: 20_000,
      interval: 100,
    });
    // Hold back the next waiter's record (it waits for the instance's session lease first) until released.
    const host = store as unknown as { sessionLease: () => Promise<string> };
    const session = host.sessionLease.bind(store);
    let reached!: () => void;
    const atPut = new Promise<void>((resolve) => (reached = resolve));
    let letGo!: () => void;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    let armed = true;
    host.sessionLease = async () => {
      if (armed) {
        armed = false;
        reached();
        await gate;
      }
      return session();
    };

    const a = await post('/v1/semaphores/s/acquire', { limit: 1, ttlMs: 400 });
    expect(a.statusCode).toBe(200);
    const b = post('/v1/semaphores/s/acquire', { limit: 1, ttlMs: 30_000, waitMs: 4_000 });
    await atPut;
    // The limit-1 permit runs out; another caller takes the semaphore with limit 5 (nobody is queued yet).
    await vi.waitFor(async () => expect((await get('/v1/semaphores/s')).json().permitsHeld).toBe(0), { timeout: 3_000, interval: 20 });
    const c = await post('/v1/semaphores/s/acquire', { limit: 5, ttlMs: 30_000 });
    expect(c.statusCode).toBe(200);
    letGo();
    const answer = await b;
    // B asked for "at most 1 holder": it must not hold a permit while C's (limit 5) is live.
    const held = (await get('/v1/semaphores/s')).json();
    expect({ b: answer.statusCode, code: answer.json().code, held: held.permitsHeld, limit: held.limit }).toEqual({
      b: 409,
      code: 'limit_mismatch',
      held: 1,
      limit: 5,
    });
  }, 30_000);
});
