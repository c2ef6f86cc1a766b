import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * A rolling restart behind a load balancer. Instance A, shutting down, ends its open blocking
 * queries with 503 shutting_down (Retry-After 1 s: "retry on another instance"); instance B serves the
 * retry. A client's watch loop must retry such a query as it retries any other call, however long the
 * query had been waiting: its retry budget is for the retries, not for the wait it asked for (an acquire's
 * deadline has its waitMs added for that reason).
 */
let store: MemoryStore;
let a: TestApp;
let b: TestApp;
let front: Server;
let target: { port: number };
let base: string;
let portA: number;
let portB: number;

async function listen(t: TestApp): Promise<number> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  return (t.app.server.address() as AddressInfo).port;
}

beforeAll(async () => {
  store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  a = await buildTestApp({ store });
  b = await buildTestApp({ store });
  portA = await listen(a);
  portB = await listen(b);
  target = { port: portA };
  // The load balancer: every request goes to the instance `target` names when it comes in.
  front = createServer((req, res) => {
    const upstream = httpRequest(
      { host: '127.0.0.1', port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
});
afterAll(async () => {
  front?.close();
  await a?.app.close();
  await b?.app.close();
  await store?.close();
});

describe('TypeScript observe() across a rolling restart', () => {
  it('retries a blocking query that the instance shutting down ended with 503, and goes on observing', async () => {
    const kh = new KeyholderClient({ baseUrl: base, retryBudgetMs: 2_500 });
    const stop = new AbortController();
    const seen: Array<{ held: boolean; holder?: string }> = [];
    const errors: unknown[] = [];
    const loop = (async () => {
      try {
        for await (const s of kh.observe('rolling', { waitMs: 10_000, signal: stop.signal })) seen.push(s as never);
      } catch (err) {
        errors.push(err);
      }
    })();
    // The first answer (free), then a blocking query open on A.
    await expect.poll(() => [seen.length, a.locks.changes.size], { timeout: 5_000, interval: 10 }).toEqual([1, 1]);
    // The query has waited longer than the client's retry budget when A shuts down (a 503 that came at
    // once would be retried: its Retry-After, 1 s, is well inside the 2.5 s budget).
    await new Promise((r) => setTimeout(r, 2_600));
    target.port = portB;
    a.locks.waitGate.shutdown();
    // Its retry reaches B and waits there; the next change is observed.
    await expect
      .poll(() => ({ onB: b.locks.changes.size, errors: errors.map(String) }), { timeout: 5_000, interval: 10 })
      .toEqual({
        onB: 1,
        errors: [],
      });
    await kh.acquire('rolling', { ttlMs: 10_000, holder: 'after-restart' });
    await expect.poll(() => seen.at(-1)?.holder, { timeout: 5_000, interval: 10 }).toBe('after-restart');
    stop.abort();
    await loop;
  }, 30_000);

  it('Python watch() retries it too', async () => {
    target.port = portB;
    // A fresh instance A' for this case: the first one was shut down.
    const a2 = await buildTestApp({ store });
    const portA2 = await listen(a2);
    target.port = portA2;
    try {
      const script = fileURLToPath(new URL('./python/watch_rolling.py', import.meta.url));
      const child = spawn('python3', ['-I', script, base], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
      await expect.poll(() => a2.locks.changes.size, { timeout: 10_000, interval: 10 }).toBe(1);
      await new Promise((r) => setTimeout(r, 2_600));
      target.port = portB;
      a2.locks.waitGate.shutdown();
      await expect.poll(() => b.locks.changes.size > 0 || out.includes('"end"'), { timeout: 5_000, interval: 10 }).toBe(true);
      await new KeyholderClient({ baseUrl: base }).acquire('rolling-py', { ttlMs: 10_000, holder: 'py-after-restart' });
      await closed;
      const lines = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toEqual([{ held: false, holder: null }, { held: true, holder: 'py-after-restart' }, { end: 'ok' }]);
    } finally {
      await a2.app.close();
    }
  }, 30_000);
});
