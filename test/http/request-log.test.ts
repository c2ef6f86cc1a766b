import { afterEach, describe, expect, it, vi } from 'vitest';
import { withLeases } from '../helpers/with-leases.js';
import type { AccessLogSettings } from '../../src/observability/request-log.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Which request lines are written: with ACCESS_LOG=sampled (the default) a count per route and status
 * and one line in N, yet every 5xx answer, slow request, warning and audit line; with full, every line.
 */

type Line = Record<string, unknown> & { msg?: string; level?: number };
const parse = (logs: readonly string[]): Line[] => logs.map((l) => JSON.parse(l) as Line);
const requestLines = (t: TestApp) => parse(t.logs).filter((l) => l.msg === 'request');
const summaries = (t: TestApp) => parse(t.logs).filter((l) => l.msg === 'requests');

/** A summary interval no test reaches: the counts are written when the app closes. */
const AT_CLOSE = 3_600_000;
const sampled = (over: Partial<AccessLogSettings> = {}): AccessLogSettings => ({
  mode: 'sampled',
  sampleEvery: 10,
  summaryMs: AT_CLOSE,
  slowMs: 1000,
  ...over,
});

const apps: TestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((t) => t.close().catch(() => undefined)));
});
async function start(options: Parameters<typeof buildTestApp>[0]): Promise<TestApp> {
  const t = await buildTestApp(options);
  apps.push(t);
  return t;
}

const json = { 'content-type': 'application/json' };
async function acquire(t: TestApp, key: string, body: Record<string, unknown> = {}) {
  const res = await t.app.inject({ method: 'POST', url: `/v1/locks/${key}/acquire`, headers: json, payload: { ttlMs: 30_000, ...body } });
  return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
}
async function release(t: TestApp, key: string, ownerToken: unknown) {
  return (await t.app.inject({ method: 'POST', url: `/v1/locks/${key}/release`, headers: json, payload: { ownerToken } })).statusCode;
}

describe('request log, sampled (the default)', () => {
  it('writes one request line in sampleEvery, and the count by route and status when the app closes', async () => {
    const t = await start({ accessLog: sampled() });
    for (let i = 0; i < 20; i++) {
      const grant = await acquire(t, `s${i}`);
      expect(await release(t, `s${i}`, grant.body.ownerToken)).toBe(200);
    }
    await acquire(t, 'held');
    for (let i = 0; i < 4; i++) expect((await acquire(t, 'held')).status).toBe(409);
    // 45 requests: 4 of them sampled.
    expect(requestLines(t)).toHaveLength(4);
    for (const line of requestLines(t)) expect(line).toMatchObject({ level: 30, sampledOneIn: 10, method: 'POST' });
    expect(summaries(t)).toHaveLength(0);
    await t.app.close();
    const [summary, ...more] = summaries(t);
    expect(more).toHaveLength(0);
    expect(summary).toMatchObject({ level: 30, requests: 45 });
    const routes = summary?.routes as Array<Record<string, unknown>>;
    expect(routes.find((r) => r.route === '/v1/locks/:key/acquire')).toMatchObject({
      method: 'POST',
      count: 25,
      status: { 200: 21, 409: 4 },
    });
    expect(routes.find((r) => r.route === '/v1/locks/:key/release')).toMatchObject({ method: 'POST', count: 20, status: { 200: 20 } });
  });

  it('writes the counts every summaryMs while the app runs, and nothing for an interval without requests', async () => {
    const t = await start({ accessLog: sampled({ summaryMs: 100, sampleEvery: 0 }) });
    await acquire(t, 'counted');
    await vi.waitFor(() => expect(summaries(t)).toHaveLength(1), { timeout: 10_000, interval: 20 });
    expect(summaries(t)[0]).toMatchObject({ requests: 1 });
    expect(requestLines(t)).toHaveLength(0);
    // Several intervals pass without a request: still one summary.
    const intervals = summaries(t).length;
    await new Promise((r) => setTimeout(r, 350));
    expect(summaries(t)).toHaveLength(intervals);
  });

  it('writes every 5xx answer, at error, however many there are', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const t = await start({ store, accessLog: sampled({ sampleEvery: 1000 }) });
    await store.close();
    for (let i = 0; i < 30; i++) expect((await acquire(t, `down${i}`)).status).toBe(503);
    const lines = requestLines(t);
    expect(lines).toHaveLength(30);
    for (const line of lines) expect(line).toMatchObject({ level: 50, status: 503, route: '/v1/locks/:key/acquire' });
    expect(new Set(lines.map((l) => l.key)).size).toBe(30);
  });

  it('counts 503 overloaded answers and writes one in sampleEvery, at warn: a burst of refusals is not a burst of lines', async () => {
    const t = await start({
      accessLog: sampled({ sampleEvery: 10 }),
      loadBudget: { maxEventLoopDelayMs: 0, maxRequestsInFlight: 0, maxOpenWaits: 1 },
    });
    await acquire(t, 'held');
    const waiting = acquire(t, 'held', { waitMs: 60_000 });
    await vi.waitFor(() => expect(t.locks.waitingCallers).toBe(1));
    for (let i = 0; i < 25; i++) expect((await acquire(t, `shed${i}`)).status).toBe(503);
    const refusals = parse(t.logs).filter((l) => l.msg === 'request refused: overloaded');
    expect(refusals).toHaveLength(2);
    for (const line of refusals) expect(line).toMatchObject({ level: 40, status: 503, sampledOneIn: 10, route: '/v1/locks/:key/acquire' });
    expect(parse(t.logs).filter((l) => l.level === 50)).toHaveLength(0);
    await t.app.close();
    await waiting;
    const routes = summaries(t)[0]?.routes as Array<Record<string, unknown>>;
    expect(routes.find((r) => r.route === '/v1/locks/:key/acquire')).toMatchObject({ status: { 200: 1, 503: 26 } });
  });

  it('writes a slow request as a warning; a request answered within the wait it asked for is not slow', async () => {
    // The store takes longer than slowMs for keys starting "slow": a lower bound, whatever the machine's load.
    const slowMs = 1000;
    const memory = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const store = withLeases(memory, (own) => ({
      acquire: async (request) => {
        if ((request.ids[0] as string).includes('slow')) await new Promise((r) => setTimeout(r, slowMs + 100));
        return own.acquire(request);
      },
    }));
    const t = await start({ store, accessLog: sampled({ sampleEvery: 0, slowMs }) });
    expect((await acquire(t, 'slow-one')).status).toBe(200);
    await acquire(t, 'busy');
    // Waits its 1,200 ms (longer than slowMs), then 409: within the wait it asked for, so not slow.
    expect((await acquire(t, 'busy', { waitMs: slowMs + 200 })).status).toBe(409);
    const lines = parse(t.logs).filter((l) => l.msg === 'slow request');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, slow: true, slowMs, key: 'slow-one', status: 200 });
    expect(lines[0]?.durationMs as number).toBeGreaterThan(slowMs);
    expect(requestLines(t)).toHaveLength(0);
  });

  it('writes the audit line of a force release and keeps owner tokens out of every line', async () => {
    const t = await start({ accessLog: sampled({ sampleEvery: 1 }) });
    const grant = await acquire(t, 'audited');
    const evicted = await t.app.inject({ method: 'DELETE', url: '/v1/locks/audited?namespace=default' });
    expect(evicted.statusCode).toBe(200);
    const audit = parse(t.logs).filter((l) => l.audit === 'force_release' && l.key === 'audited');
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ level: 40 });
    expect(t.logs.join('\n')).not.toContain(grant.body.ownerToken as string);
  });
});

describe('request log, full', () => {
  it('writes one line per request and no counts', async () => {
    const t = await start({ accessLog: { mode: 'full', sampleEvery: 10, summaryMs: 100, slowMs: 1000 } });
    const grant = await acquire(t, 'every');
    await release(t, 'every', grant.body.ownerToken);
    await release(t, 'every', grant.body.ownerToken);
    await t.app.close();
    const lines = requestLines(t);
    expect(lines.map((l) => l.status).sort()).toEqual([200, 200, 409]);
    for (const line of lines) expect(line).not.toHaveProperty('sampledOneIn');
    expect(summaries(t)).toHaveLength(0);
  });
});

describe("a request's own logger (request.log)", () => {
  it('is made only when the request writes a line through it; that line carries the request id', async () => {
    const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
    const t = await start({ store, accessLog: sampled({ sampleEvery: 1 }) });
    // pino's child, which the request logger calls on its first line (app.log.child itself runs for every request).
    const child = vi.spyOn(Object.getPrototypeOf(t.app.log) as typeof t.app.log, 'child');
    for (let i = 0; i < 5; i++) {
      const grant = await acquire(t, `quiet${i}`);
      expect(await release(t, `quiet${i}`, grant.body.ownerToken)).toBe(200);
    }
    expect((await acquire(t, 'quiet0')).status).toBe(200);
    expect((await acquire(t, 'quiet0')).status).toBe(409);
    // Twelve answers, each with its request line (sampled one in one), none through request.log.
    expect(requestLines(t)).toHaveLength(12);
    expect(child).not.toHaveBeenCalled();
    await store.close();
    for (const key of ['down1', 'down2']) expect((await acquire(t, key)).status).toBe(503);
    // A 5xx is written at error through the request's own logger: made for these two requests only.
    expect(child).toHaveBeenCalledTimes(2);
    const errors = parse(t.logs).filter((l) => l.level === 50 && l.msg === 'request');
    expect(errors.map((l) => l.key)).toEqual(['down1', 'down2']);
    const ids = errors.map((l) => l.reqId);
    for (const id of ids) expect(id).toEqual(expect.any(String));
    expect(new Set(ids).size).toBe(2);
  });

  it("keeps a route's quieter level: the probes write no request line even with ACCESS_LOG=full", async () => {
    const t = await start({ accessLog: { mode: 'full', sampleEvery: 10, summaryMs: 100, slowMs: 1000 } });
    expect((await t.app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    await acquire(t, 'counted');
    expect(requestLines(t).map((l) => l.route)).toEqual(['/v1/locks/:key/acquire']);
  });
});
