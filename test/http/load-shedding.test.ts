import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LoadBudget } from '../../src/http/load-shedding.js';
import { createMetrics } from '../../src/observability/metrics.js';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Load shedding: over a budget, a new request is refused at once with 503 `overloaded` (its own code,
 * not store_unavailable) and Retry-After, before any store call; renewals and releases pass far longer;
 * the probes and the metrics scrape always pass.
 */

const OFF: LoadBudget = { maxEventLoopDelayMs: 0, maxRequestsInFlight: 0, maxOpenWaits: 0 };

/** A memory store whose inspect (plain or indexed) and renew calls wait until let go, and that counts every store call it gets. */
class GatedStore extends MemoryStore {
  calls = 0;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  letGo(): void {
    this.open();
  }
  /** The domain's port, gated (the services speak only it). */
  override readonly leases: LeaseStore = this.gatedOver((this as MemoryStore).leases);

  private gatedOver(own: LeaseStore): LeaseStore {
    return {
      ...own,
      inspect: async (kind, key) => {
        this.calls++;
        await this.gate;
        return own.inspect(kind, key);
      },
      // GET /v1/locks/{key} reads the lock's indexed view (it answers blocking queries too).
      inspectIndexed: async (kind, key) => {
        this.calls++;
        await this.gate;
        return own.inspectIndexed(kind, key);
      },
      acquire: async (request) => {
        this.calls++;
        return own.acquire(request);
      },
      renew: async (kind, keys, ownerToken, ttlMs) => {
        this.calls++;
        await this.gate;
        return own.renew(kind, keys, ownerToken, ttlMs);
      },
    };
  }
}

let t: TestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

const metricValue = async (app: TestApp['app'], line: string) => {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(
    text
      .split('\n')
      .find((l) => l.startsWith(line))
      ?.split(' ')
      .pop(),
  );
};

describe('load shedding', () => {
  it('past the requests-in-flight budget: 503 overloaded with Retry-After, before any store call; probes pass', async () => {
    const store = new GatedStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const metrics = createMetrics({ defaultMetrics: false });
    t = await buildTestApp({ store, metrics, loadBudget: { ...OFF, maxRequestsInFlight: 2 } });
    const { app } = t;
    const held = await app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 60_000 } });
    const { ownerToken } = held.json<{ ownerToken: string }>();
    store.hold();
    const working = [app.inject({ method: 'GET', url: '/v1/locks/a' }), app.inject({ method: 'GET', url: '/v1/locks/b' })];
    await vi.waitFor(() => expect(store.calls).toBe(3));

    const refused = await app.inject({ method: 'POST', url: '/v1/locks/c/acquire', payload: { ttlMs: 1000 } });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.json()).toMatchObject({ code: 'overloaded', status: 503, retryAfterMs: 1000 });
    expect(store.calls).toBe(3);

    // The probes are never refused (renewals: next test).
    expect((await app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);

    store.letGo();
    expect((await Promise.all(working)).map((r) => r.statusCode)).toEqual([200, 200]);
    // Answered requests leave the budget: new work is taken again.
    expect((await app.inject({ method: 'POST', url: '/v1/locks/k/release', payload: { ownerToken } })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v1/locks/c/acquire', payload: { ttlMs: 1000 } })).statusCode).toBe(200);

    expect(await metricValue(app, 'keyholder_requests_shed_total{budget="requests_in_flight",priority="normal"}')).toBe(1);
    expect(await metricValue(app, 'keyholder_problems_total{code="overloaded"}')).toBe(1);
    expect(await metricValue(app, 'keyholder_problems_total{code="store_unavailable"}')).toBe(0);
  });

  it('renewals are refused only at four times the budget', async () => {
    const store = new GatedStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    t = await buildTestApp({ store, loadBudget: { ...OFF, maxRequestsInFlight: 1 } });
    const { app } = t;
    const held = await app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 60_000 } });
    const { ownerToken } = held.json<{ ownerToken: string }>();
    store.hold();
    const inspect = app.inject({ method: 'GET', url: '/v1/locks/k' });
    await vi.waitFor(() => expect(store.calls).toBe(2));
    const renew = () => app.inject({ method: 'POST', url: '/v1/locks/k/renew', payload: { ownerToken, ttlMs: 60_000 } });
    // One in flight, the budget: new work is refused; renewals are taken until four are in flight.
    expect((await app.inject({ method: 'GET', url: '/v1/locks/j' })).statusCode).toBe(503);
    const renewals = [renew(), renew(), renew()];
    await vi.waitFor(() => expect(store.calls).toBe(5));
    const fourth = await renew();
    expect(fourth.statusCode).toBe(503);
    expect(fourth.json()).toMatchObject({ code: 'overloaded' });
    store.letGo();
    expect((await Promise.all(renewals)).map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect((await inspect).statusCode).toBe(200);
  });

  it('past the open-waits budget: new acquires are refused, a release is not (and hands the lock over)', async () => {
    t = await buildTestApp({ loadBudget: { ...OFF, maxOpenWaits: 1 } });
    const { app } = t;
    const held = await app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 60_000 } });
    const { ownerToken } = held.json<{ ownerToken: string }>();
    const waiting = app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 1000, waitMs: 10_000 } });
    await vi.waitFor(() => expect(t?.locks.waitingCallers).toBe(1));
    const refused = await app.inject({ method: 'POST', url: '/v1/locks/other/acquire', payload: { ttlMs: 1000 } });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'overloaded' });
    expect((await app.inject({ method: 'POST', url: '/v1/locks/k/release', payload: { ownerToken } })).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);
  });

  it('a burst read in one long turn: refused once the turn is over the delay budget, before the sampler has seen it', async () => {
    t = await buildTestApp({ loadBudget: { ...OFF, maxEventLoopDelayMs: 50 } });
    const { app } = t;
    await vi.waitFor(
      async () => {
        // A fresh turn, with the last sample under the budget: only the turn itself can be over it.
        await new Promise((resolve) => setTimeout(resolve, 20));
        expect(app.memoryUsage().eventLoopDelay).toBeLessThanOrEqual(50);
        // The rest runs in this turn, as a burst's requests do: held up 120 ms, then read one after another.
        blockEventLoop(120);
        const refused = app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 1000 } });
        const probe = app.inject({ method: 'GET', url: '/livez' });
        expect((await refused).statusCode).toBe(503);
        expect((await refused).json()).toMatchObject({ code: 'overloaded', detail: expect.stringContaining('event loop delay') });
        expect((await probe).statusCode).toBe(200);
      },
      { timeout: 10_000, interval: 50 },
    );
  });

  it('a sample window in which no probe ran is read as the longest turn, not as an infinite delay', async () => {
    t = await buildTestApp({ loadBudget: { ...OFF, maxEventLoopDelayMs: 300 } });
    const { app } = t;
    // Turns of 130 ms, each longer than a sample window and under the 300 ms budget: the sampler's
    // probe comes after its sample in each turn, and the sample finds no probe (Infinity).
    let seenEmpty = 0;
    await vi.waitFor(
      async () => {
        await new Promise((resolve) => setImmediate(resolve));
        blockEventLoop(130);
        expect(app.memoryUsage().eventLoopDelay).toBe(Infinity);
        seenEmpty++;
        const answer = await app.inject({ method: 'POST', url: `/v1/locks/k${seenEmpty}/acquire`, payload: { ttlMs: 1000 } });
        expect(answer.statusCode).toBe(200);
        expect(seenEmpty).toBeGreaterThanOrEqual(3);
      },
      { timeout: 15_000, interval: 0 },
    );
    // A loop truly held past the budget is still refused.
    await new Promise((resolve) => setImmediate(resolve));
    blockEventLoop(350);
    const refused = await app.inject({ method: 'POST', url: '/v1/locks/late/acquire', payload: { ttlMs: 1000 } });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'overloaded' });
  });

  it('past the event-loop delay budget: new work is refused until the delay falls back; renewals and releases never are', async () => {
    t = await buildTestApp({ loadBudget: { ...OFF, maxEventLoopDelayMs: 20 } });
    const { app } = t;
    // A starved test process can be over a 20 ms budget already: the holder retries as a client would.
    const ownerToken = await vi.waitFor(
      async () => {
        const held = await app.inject({ method: 'POST', url: '/v1/locks/held/acquire', payload: { ttlMs: 60_000 } });
        expect(held.statusCode).toBe(200);
        return held.json<{ ownerToken: string }>().ownerToken;
      },
      { timeout: 10_000, interval: 50 },
    );
    // The sampler sees a blocked loop within a sample or two.
    await vi.waitFor(
      () => {
        blockEventLoop(150);
        expect(app.memoryUsage().eventLoopDelay).toBeGreaterThan(20);
      },
      { timeout: 10_000, interval: 20 },
    );
    const refused = await app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 1000 } });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'overloaded' });
    expect((await app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    // Renewals and releases are never refused for delay: one refused costs its holder the lease.
    blockEventLoop(150);
    expect(app.memoryUsage().eventLoopDelay).toBeGreaterThan(20);
    const renewed = await app.inject({ method: 'POST', url: '/v1/locks/held/renew', payload: { ownerToken, ttlMs: 60_000 } });
    expect(renewed.statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v1/locks/held/release', payload: { ownerToken } })).statusCode).toBe(200);
    // Idle again, the next samples are small and work is taken.
    await vi.waitFor(
      async () => expect((await app.inject({ method: 'POST', url: '/v1/locks/k/acquire', payload: { ttlMs: 1000 } })).statusCode).toBe(200),
      { timeout: 10_000, interval: 50 },
    );
  });
});
