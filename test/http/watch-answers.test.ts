import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, FULL_ACCESS_LOG, type TestApp } from '../helpers/test-app.js';

/**
 * A change's watchers are answered in the pass that wakes them, each answer written straight to its
 * response (src/http/shared-answers.ts) rather than through Fastify's send. What a client sees must not
 * tell the two apart: the status, the headers of a plain answer (the rate limiter's included), the body,
 * a HEAD without a body, a keep-alive connection that serves the next request, one request log line per
 * answer.
 */
let t: TestApp;
let base: string;
let port: number;

beforeAll(async () => {
  t = await buildTestApp({ rateLimit: { max: 1_000, windowMs: 60_000 }, accessLog: FULL_ACCESS_LOG });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await t?.close();
});

const post = (path: string, body: object) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** Resolves once the instance holds `count` watchers (the blocking queries are in place). */
async function watching(count: number): Promise<void> {
  await expect.poll(() => t.locks.changes.size, { timeout: 10_000, interval: 10 }).toBe(count);
}

/** Header names of an answer, without the ones that differ by nature (their values are checked apart). */
function headerNames(res: Response): string[] {
  return [...res.headers.keys()].sort();
}

describe('answers to a change', () => {
  it('carry the status, headers and body of a plain answer, rate-limit headers included', async () => {
    const plain = await fetch(`${base}/v1/locks/wa:1`);
    const before = (await plain.json()) as { index: number };
    const woken = fetch(`${base}/v1/locks/wa:1?index=${before.index}&waitMs=10000`);
    await watching(1);
    const grant = (await (await post('/v1/locks/wa:1/acquire', { ttlMs: 30_000, holder: 'h' })).json()) as { fencingToken: number };
    const res = await woken;
    const after = await fetch(`${base}/v1/locks/wa:1`);
    expect(res.status).toBe(200);
    expect(headerNames(res)).toEqual(headerNames(after));
    expect(res.headers.get('content-type')).toBe(after.headers.get('content-type'));
    expect(res.headers.get('x-ratelimit-limit')).toBe('1000');
    // Counted when it came in: between the plain answer before it and the one after.
    const remaining = (r: Response) => Number(r.headers.get('x-ratelimit-remaining'));
    expect(remaining(res)).toBeLessThan(remaining(plain));
    expect(remaining(res)).toBeGreaterThan(remaining(after));
    const body = await res.text();
    expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
    const expected = (await after.json()) as Record<string, unknown>;
    expect(JSON.parse(body)).toEqual({ ...expected, ttlRemainingMs: expect.any(Number) });
    expect(JSON.parse(body)).toMatchObject({ held: true, index: 2 * grant.fencingToken });
  });

  it('to a HEAD request have the headers and no body, and a keep-alive connection serves the next request', async () => {
    const index = ((await (await fetch(`${base}/v1/locks/wa:3`)).json()) as { index: number }).index;
    const socket = await open();
    const head = exchange(socket, `HEAD /v1/locks/wa:3?index=${index}&waitMs=10000 HTTP/1.1\r\nhost: x\r\n\r\n`, true);
    await watching(1);
    await post('/v1/locks/wa:3/acquire', { ttlMs: 30_000 });
    const answer = await head;
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer).toMatch(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
    expect(answer).toMatch(/\r\nconnection: keep-alive\r\n/i);
    expect(answer.endsWith('\r\n\r\n')).toBe(true);
    // The same connection answers the next request, a plain one.
    const next = await exchange(socket, 'GET /v1/locks/wa:3 HTTP/1.1\r\nhost: x\r\n\r\n', false);
    expect(next).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(next).toContain('"held":true');
    socket.destroy();
  });

  it('are each written to the request log, as any answer', async () => {
    const index = ((await (await fetch(`${base}/v1/locks/wa:4`)).json()) as { index: number }).index;
    const woken = Array.from({ length: 3 }, () => fetch(`${base}/v1/locks/wa:4?index=${index}&waitMs=10000`));
    await watching(3);
    const logged = () =>
      t.logs.filter((line) => line.includes('"route":"/v1/locks/:key"') && line.includes('"key":"wa:4"') && line.includes('"status":200'))
        .length;
    const before = logged();
    await post('/v1/locks/wa:4/acquire', { ttlMs: 30_000 });
    for (const res of await Promise.all(woken)) expect(res.status).toBe(200);
    await expect.poll(logged, { timeout: 5_000 }).toBe(before + 3);
  });
});

function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `request` and resolves with the whole answer: its head for a HEAD, else head and body (content-length). */
function exchange(socket: Socket, request: string, headOnly: boolean): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const headEnd = text.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const length = headOnly ? 0 : Number(/content-length: *(\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
      if (text.length < headEnd + 4 + length) return;
      socket.off('data', onData);
      resolve(text);
    };
    socket.on('data', onData);
    socket.write(request);
  });
}
