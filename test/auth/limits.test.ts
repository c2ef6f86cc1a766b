import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import type { AllowanceSource } from '../../src/http/rate-limit.js';

const { keys, A, B, ADMIN } = twoTeamsAndAdmin();

describe('rate limit per API key', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, rateLimit: { max: 5, windowMs: 3_000 } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('the request over the limit gets 429 rate_limited with Retry-After; other keys and probes are unaffected; it recovers', async () => {
    for (let i = 0; i < 5; i++) expect((await t.app.inject({ method: 'GET', url: '/v1/locks/r', headers: A })).statusCode).toBe(200);
    const limited = await t.app.inject({ method: 'GET', url: '/v1/locks/r', headers: A });
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['content-type']).toContain('application/problem+json');
    const body = limited.json<{ code: string; retryAfterMs: number }>();
    expect(body.code).toBe('rate_limited');
    const retryAfterS = Number(limited.headers['retry-after']);
    expect(retryAfterS).toBeGreaterThanOrEqual(1);
    expect(retryAfterS).toBeLessThanOrEqual(3);

    expect((await t.app.inject({ method: 'GET', url: '/v1/locks/r', headers: B })).statusCode).toBe(200);
    for (let i = 0; i < 10; i++) expect((await t.app.inject({ method: 'GET', url: '/livez' })).statusCode).toBe(200);
    // Requests refused with 401 are not counted against anyone.
    expect((await t.app.inject({ method: 'GET', url: '/v1/locks/r' })).statusCode).toBe(401);

    await sleep(body.retryAfterMs + 100);
    expect((await t.app.inject({ method: 'GET', url: '/v1/locks/r', headers: A })).statusCode).toBe(200);
  });
});

describe('rate limit per API key, with allowance from a shared window', () => {
  let t: TestApp;
  const max = 200;
  /** The shared window as rate-allowance.lua keeps it, in memory (the Redis side has its own tests). */
  const shared: AllowanceSource & { calls: number; handedOut: number } = {
    calls: 0,
    handedOut: 0,
    async handOut(_key: string, wanted: number, limit: number) {
      shared.calls++;
      await Promise.resolve();
      const granted = Math.max(0, Math.min(wanted, limit - shared.handedOut));
      shared.handedOut += granted;
      return { granted, windowLeftMs: 60_000, handedOut: shared.handedOut };
    },
  };
  beforeAll(async () => {
    t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, rateLimit: { max, windowMs: 60_000, allowance: shared } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('counts each request once, with the headers of the count, whether its allowance was held here or fetched', async () => {
    const acquired = await t.app.inject({ method: 'POST', url: '/v1/locks/sw/acquire', headers: A, payload: { ttlMs: 30_000 } });
    expect(acquired.statusCode).toBe(200);
    const ownerToken = acquired.json<{ ownerToken: string }>().ownerToken;
    const remaining = [Number(acquired.headers['x-ratelimit-remaining'])];
    for (let i = 1; i < max; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/v1/locks/sw', headers: A });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe(String(max));
      expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(1);
      expect(Number(res.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(60);
      remaining.push(Number(res.headers['x-ratelimit-remaining']));
      // Renewals and releases are never counted, on either path.
      const renewed = await t.app.inject({ method: 'POST', url: '/v1/locks/sw/renew', headers: A, payload: { ownerToken, ttlMs: 30_000 } });
      expect(renewed.statusCode).toBe(200);
      expect(renewed.headers['x-ratelimit-remaining']).toBeUndefined();
    }
    // One down per counted request, from max - 1 to 0; most allowance was spent from batches held here.
    expect(remaining).toEqual(Array.from({ length: max }, (_, i) => max - 1 - i));
    expect(shared.calls).toBeLessThan(max / 4);
    const limited = await t.app.inject({ method: 'GET', url: '/v1/locks/sw', headers: A });
    expect(limited.statusCode).toBe(429);
    expect(limited.json<{ code: string }>().code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const released = await t.app.inject({ method: 'POST', url: '/v1/locks/sw/release', headers: A, payload: { ownerToken } });
    expect(released.statusCode).toBe(200);
  });
});

describe('cap on locks held at once per namespace', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({
      auth: { mode: 'keys', keyring: keys.keyring() },
      limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 3 },
    });
  });
  afterAll(async () => {
    await t.close();
  });

  const acquire = (key: string, headers: Record<string, string>, ttlMs = 30_000) =>
    t.app.inject({ method: 'POST', url: `/v1/locks/${key}/acquire`, headers, payload: { ttlMs } });

  it('the lock over the cap gets 429 quota_exceeded with Retry-After; a release, an expiry or a force release makes room', async () => {
    const tokens: string[] = [];
    for (const key of ['q1', 'q2']) {
      const res = await acquire(key, A);
      expect(res.statusCode).toBe(200);
      tokens.push(res.json<{ ownerToken: string }>().ownerToken);
    }
    // Contending for a held lock does not use up slots.
    for (let i = 0; i < 5; i++) expect((await acquire('q1', A)).statusCode).toBe(409);
    expect((await acquire('q-short', A, 400)).statusCode).toBe(200);
    // At the cap every acquire is refused with quota_exceeded, even one for a lock that is held anyway.
    expect((await acquire('q1', A)).json()).toMatchObject({ code: 'quota_exceeded' });

    const refused = await acquire('q4', A);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'quota_exceeded', status: 429 });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another namespace has its own quota.
    expect((await acquire('q4', B)).statusCode).toBe(200);

    // The short lease expires by itself and stops counting.
    await sleep(1_600);
    expect((await acquire('q4', A)).statusCode).toBe(200);
    expect((await acquire('q5', A)).statusCode).toBe(429);

    // A release makes room.
    await t.app.inject({ method: 'POST', url: '/v1/locks/q1/release', headers: A, payload: { ownerToken: tokens[0] } });
    expect((await acquire('q5', A)).statusCode).toBe(200);
    expect((await acquire('q6', A)).statusCode).toBe(429);

    // A force release makes room too.
    expect((await t.app.inject({ method: 'DELETE', url: '/v1/locks/q2?namespace=team-a', headers: ADMIN })).statusCode).toBe(200);
    expect((await acquire('q6', A)).statusCode).toBe(200);
  });

  it('concurrent acquires of distinct keys never exceed the cap', async () => {
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => acquire(`race-${i}`, B)));
    // team-b already holds q4.
    expect(outcomes.filter((r) => r.statusCode === 200)).toHaveLength(2);
    expect(outcomes.filter((r) => r.statusCode === 429)).toHaveLength(38);
  });
});

describe('slow clients', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp({
      auth: { mode: 'keys', keyring: keys.keyring() },
      httpTimeouts: { requestTimeoutMs: 3_000, headersTimeoutMs: 1_500, keepAliveTimeoutMs: 2_000, connectionTimeoutMs: 60_000 },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t.close();
  });

  it('a connection sending its headers one byte a second is closed within the headers timeout; others are served meanwhile', async () => {
    const request = `GET /v1/locks/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${keys.plain['team-a-key']}\r\n\r\n`;
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    const started = performance.now();
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - started)));
    let sent = 0;
    // One byte a second: the whole request would take well over a minute.
    const timer = setInterval(() => {
      if (!socket.destroyed && sent < request.length) socket.write(request[sent++] ?? '');
    }, 1_000);
    try {
      // Served while the slow client is still connected.
      await sleep(500);
      const res = await fetch(`http://127.0.0.1:${port}/v1/locks/fast`, { headers: A });
      expect(res.status).toBe(200);
      const closedAfterMs = await Promise.race([closed, sleep(15_000).then(() => -1)]);
      // 1.5 s timeout + up to 1 s between Node's checks; generous slack for a loaded machine.
      expect(closedAfterMs).toBeGreaterThan(0);
      expect(closedAfterMs).toBeLessThan(10_000);
      expect(sent).toBeLessThan(request.length);
      // Node answers 408 before closing.
      expect(received).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      clearInterval(timer);
      socket.destroy();
    }
  });

  it('a client that sends its headers a byte a second and never reads is disconnected by the server within the headers timeout + 2 s', async () => {
    // The server's view of the socket: a half-closed one (answered, FIN sent, client still writing)
    // would stay open as long as the client writes.
    const serverSide = new Promise<Socket>((resolve) => t.app.server.once('connection', resolve));
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    // Never reads: no data listener, paused, so it never sees the server's FIN and never closes by itself.
    socket.pause();
    // Node's headers timeout runs from a request's first byte.
    let started = 0;
    const request = `GET /v1/locks/slow-never-reads HTTP/1.1\r\nHost: 127.0.0.1\r\n${'X-Pad: 1\r\n'.repeat(20)}\r\n`;
    let sent = 0;
    const timer = setInterval(() => {
      if (sent === 0) started = performance.now();
      if (!socket.destroyed && sent < request.length) socket.write(request[sent++] ?? '');
    }, 1_000);
    try {
      const server = await serverSide;
      const closedAfterMs = await Promise.race([
        new Promise<number>((resolve) => server.once('close', () => resolve(performance.now() - started))),
        sleep(15_000).then(() => -1),
      ]);
      expect(closedAfterMs).toBeGreaterThan(0);
      // 1.5 s timeout, up to 1 s until Node's next check, CLOSE_GRACE_MS: about 2.5 s measured.
      expect(closedAfterMs).toBeLessThan(1_500 + 2_000);
      expect(sent).toBeLessThan(request.length);
    } finally {
      clearInterval(timer);
      socket.destroy();
    }
  });

  it('a connection that sends nothing at all is closed after the headers timeout, not the idle timeout', async () => {
    // Measured on the server's side of the connection. Two timers may close it: the socket's own
    // timeout (set to the headers timeout until a first request; it closes the socket without a word)
    // or Node's periodic check of connections past the headers timeout (it answers 408 first, then the
    // socket is closed CLOSE_GRACE_MS later). When the event loop is late both are due at once and
    // either may run first; a client that did not read never saw the 408 path's close (its unread
    // answer held back the end of the stream), so the client's view failed on busy machines.
    const seen: Record<string, number | string> = {};
    const started = performance.now();
    let serverSide: Socket | undefined;
    const serverClosed = new Promise<number>((resolve) => {
      const onConnection = (s: Socket) => {
        if (s.remotePort !== socket.localPort) return;
        t.app.server.off('connection', onConnection);
        serverSide = s;
        seen.acceptedAfterMs = performance.now() - started;
        s.once('timeout', () => (seen.socketTimedOutAfterMs = performance.now() - started));
        s.once('close', () => resolve(performance.now() - started));
      };
      t.app.server.on('connection', onConnection);
    });
    const socket = connect(port, '127.0.0.1');
    socket.on('error', (err) => (seen.clientError = err.message));
    // Reads whatever comes (a 408, if that path ran), so the client sees the end of the stream too.
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    const clientClosed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - started)));
    try {
      const closedAfterMs = await Promise.race([serverClosed, sleep(15_000).then(() => -1)]);
      seen.answered = received.split('\r\n')[0] ?? '';
      expect(serverSide, 'the server accepted the connection').toBeDefined();
      expect(closedAfterMs, JSON.stringify(seen)).toBeGreaterThan(0);
      expect(closedAfterMs, JSON.stringify(seen)).toBeLessThan(10_000);
      // And the client is told: its side closes too.
      expect(await Promise.race([clientClosed, sleep(5_000).then(() => -1)]), JSON.stringify(seen)).toBeGreaterThan(0);
    } finally {
      socket.destroy();
    }
  });

  it("a new connection's first request may outlast the headers timeout: a blocking query of twice it is answered", async () => {
    const view = await fetch(`http://127.0.0.1:${port}/v1/locks/first-long`, { headers: A });
    const { index } = (await view.json()) as { index: number };
    // A connection of its own (no agent): this request is its first.
    const answer = await new Promise<{ status: number; closedEarly: boolean }>((resolve) => {
      const req = request(
        { host: '127.0.0.1', port, path: `/v1/locks/first-long?index=${index}&waitMs=3000`, headers: A, agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, closedEarly: false }));
        },
      );
      req.on('error', () => resolve({ status: 0, closedEarly: true }));
      req.end();
    });
    expect(answer).toEqual({ status: 200, closedEarly: false });
  });

  it('a keep-alive connection survives between requests and serves the next one', async () => {
    const first = await fetch(`http://127.0.0.1:${port}/v1/locks/ka`, { headers: A });
    expect(first.status).toBe(200);
    await first.text();
    await sleep(1_000);
    expect((await fetch(`http://127.0.0.1:${port}/v1/locks/ka`, { headers: A })).status).toBe(200);
  });

  it('a body larger than the limit is refused with 413 before it is read in full', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/locks/big/acquire',
      headers: { ...A, 'content-type': 'application/json' },
      payload: JSON.stringify({ ttlMs: 1000, holder: 'x'.repeat(20_000) }),
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ code: 'payload_too_large' });
  });
});
