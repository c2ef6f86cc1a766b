import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError, KeyholderClient } from '../../src/client/index.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { byName, runPythonScript } from '../helpers/python-scripts.js';
import { requireTool } from '../helpers/tools.js';

/** Below the 30 s that observe(), campaign() and the Python client's watch() wait per request by default. */
const MAX_WAIT_MS = 5_000;

const key = (name: string) => `max-wait-${randomUUID().slice(0, 8)}-${name}`;

/**
 * A server whose LOCK_MAX_WAIT_MS is below the wait the clients' helpers pick by default: the helpers keep
 * working (they ask again within the bound the server's 400 names), while a wait the caller asked for
 * itself is never changed behind its back: it is refused, as the server refuses it.
 */
describe('clients against a server with LOCK_MAX_WAIT_MS below their default waits', { timeout: 90_000 }, () => {
  let server: KeyholderProcess;
  let kh: KeyholderClient;

  beforeAll(async () => {
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', LOCK_MAX_WAIT_MS: String(MAX_WAIT_MS) } });
    kh = new KeyholderClient({ baseUrl: server.url });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("the server's 400 for a wait above its bound names the bound (maxWaitMs), for an acquire and a blocking query", async () => {
    const k = key('problem');
    const acquire = await fetch(`${server.url}/v1/locks/${k}/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs: 1_000, waitMs: MAX_WAIT_MS + 1 }),
    });
    expect(acquire.status).toBe(400);
    expect(await acquire.json()).toMatchObject({ code: 'invalid_request', maxWaitMs: MAX_WAIT_MS });
    const watch = await fetch(`${server.url}/v1/locks/${k}?index=1&waitMs=${MAX_WAIT_MS + 1}`);
    expect(watch.status).toBe(400);
    expect(await watch.json()).toMatchObject({ code: 'invalid_request', maxWaitMs: MAX_WAIT_MS });
  });

  it('observe() with its default wait sees the state and then a change', async () => {
    const k = key('observe');
    const controller = new AbortController();
    const states = kh.observe(k, { signal: controller.signal });
    const first = await states.next();
    expect(first.value).toMatchObject({ held: false });
    // The next query blocks on the unchanged state until the grant below changes it.
    const second = states.next();
    second.catch(() => undefined); // (awaited below; a refusal must not go unhandled meanwhile)
    const lease = await kh.acquire(k, { ttlMs: 10_000 });
    expect((await second).value).toMatchObject({ held: true, fencingToken: lease.fencingToken });
    controller.abort();
    await states.return();
    await lease.release();
  });

  it('campaign() with its default wait leads once the leader lets go', async () => {
    const k = key('campaign');
    const leader = await kh.acquire(k, { ttlMs: 10_000 });
    const follower = kh.campaign(k, { ttlMs: 10_000 });
    let failed: Error | undefined;
    follower.catch((err: unknown) => (failed = err instanceof Error ? err : new Error(String(err))));
    // The follower is queued (it did not fail at once on its first turn) before the leader lets go.
    await until(async () => {
      if (failed !== undefined) throw failed;
      return ((await kh.inspect(k, { queue: true })) as { queue?: unknown[] }).queue?.length === 1 || undefined;
    });
    await leader.release();
    const led = await follower;
    expect(led.fencingToken).toBeGreaterThan(leader.fencingToken);
    await led.release();
  });

  it('a wait the caller gives that is above the bound is refused, not shortened', async () => {
    const k = key('explicit');
    const states = kh.observe(k, { waitMs: 30_000 });
    // The first answer is the state now (no wait); the first blocking query is the one refused.
    expect((await states.next()).value).toMatchObject({ held: false });
    await expect(states.next()).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(kh.campaign(k, { ttlMs: 1_000, waitMs: 30_000 })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(kh.acquire(k, { ttlMs: 1_000, waitMs: 30_000 })).rejects.toMatchObject({ code: 'invalid_request', status: 400 });
  });

  it("the Python client's watch() with its default wait; an explicit wait above the bound is refused", async () => {
    requireTool('python3', 'python3');
    const steps = byName(await runPythonScript('short_max_wait.py', server.url), 'step');
    for (const name of ['watch', 'watch_semaphore', 'watch_rwlock']) {
      expect(steps[name], name).toMatchObject({ states: [false, true] });
    }
    expect(steps.explicit).toMatchObject({ error: 'InvalidRequestError', code: 'invalid_request', status: 400 });
  });
});

/** Polls `value` (every 20 ms, up to 20 s) until it gives something other than undefined. */
async function until<T>(value: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + 20_000;
  for (;;) {
    const got = await value();
    if (got !== undefined) return got;
    if (performance.now() > deadline) throw new Error('condition not met in 20 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
