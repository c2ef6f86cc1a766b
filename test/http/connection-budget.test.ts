import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { connectionBudget, openFileLimit, PROBE_CONNECTIONS, RESERVED_FILE_DESCRIPTORS } from '../../src/http/connection-budget.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * A flood of sockets is refused by keyholder, with an answer, before the process runs out of file
 * descriptors: past the budget a connection's requests get 503 overloaded at once and it is closed,
 * while probes, renewals and releases are still served on it.
 */
const BUDGET = 20;
let t: TestApp;
let port: number;
const idle: Socket[] = [];

beforeAll(async () => {
  t = await buildTestApp({
    maxConnections: BUDGET,
    // Idle sockets must outlive the test: the headers timeout closes a socket that sends nothing.
    httpTimeouts: { requestTimeoutMs: 60_000, headersTimeoutMs: 60_000, keepAliveTimeoutMs: 60_000, connectionTimeoutMs: 120_000 },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const s of idle) s.destroy();
  await t.close();
});

/** Opens `count` sockets that send nothing, and waits until the server has accepted them all. */
async function fill(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    idle.push(socket);
  }
  await vi.waitFor(
    () =>
      new Promise<void>((resolve, reject) =>
        t.app.server.getConnections((err, n) => (err ? reject(err) : n >= idle.length ? resolve() : reject(new Error(`${n} accepted`)))),
      ),
    { timeout: 10_000, interval: 20 },
  );
}

/** One request on a new connection of its own (no pooled keep-alive connection). */
function ask(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; connection: string | undefined; retryAfter: string | undefined; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      { host: '127.0.0.1', port, method, path, agent: false, headers: payload === undefined ? {} : { 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            connection: res.headers.connection,
            retryAfter: res.headers['retry-after'],
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('connection budget', () => {
  it('derives the budget from the open-file limit, keeping descriptors for the store and the probes', () => {
    expect(connectionBudget(500, 1_100)).toBe(500);
    expect(connectionBudget(undefined, 1_100)).toBe(1_100 - RESERVED_FILE_DESCRIPTORS - PROBE_CONNECTIONS);
    expect(connectionBudget(undefined, 10)).toBe(1);
    expect(openFileLimit()).toBeGreaterThan(0);
  });

  it('past the budget a request gets 503 overloaded at once and its connection closes; probes, renewals and releases are served; room again once sockets close', async () => {
    const lease = await ask('POST', '/v1/locks/cb/acquire', { ttlMs: 30_000 });
    expect(lease.status).toBe(200);
    await fill(BUDGET);

    const refused = await ask('POST', '/v1/locks/other/acquire', { ttlMs: 1_000 });
    expect(refused).toMatchObject({ status: 503, connection: 'close', retryAfter: '1', body: { code: 'overloaded' } });
    expect(String(refused.body.detail)).toContain('connections');
    expect((await ask('GET', '/v1/locks/cb')).status).toBe(503);

    for (const probe of ['/livez', '/readyz']) expect(await ask('GET', probe)).toMatchObject({ status: 200, connection: 'close' });
    expect((await ask('POST', '/v1/locks/cb/renew', { ownerToken: lease.body.ownerToken, ttlMs: 30_000 })).status).toBe(200);
    expect((await ask('POST', '/v1/locks/cb/release', { ownerToken: lease.body.ownerToken })).status).toBe(200);

    for (const s of idle.splice(0)) s.destroy();
    await vi.waitFor(async () => expect((await ask('POST', '/v1/locks/other/acquire', { ttlMs: 1_000 })).status).toBe(200), {
      timeout: 10_000,
      interval: 50,
    });
  });
});
