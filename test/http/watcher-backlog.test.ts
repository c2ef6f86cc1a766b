import { connect, type AddressInfo, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WATCHER_BACKLOG_MAX_BYTES } from '../../src/http/shared-answers.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * One watcher that never reads its socket and keeps sending blocking queries on it (HTTP pipelining:
 * the only way one socket gets more than one answer without reading). Each answer is ~24 KB (100
 * holders with 128-character labels). What the server keeps for it must stay bounded: no more than
 * WATCHER_BACKLOG_MAX_BYTES unsent on the socket, a few MB of memory for 1,000 answered queries
 * (one shared body, see shared-answers.ts), and the connection closed once nothing moves on it for
 * HTTP_CONNECTION_TIMEOUT_MS (2 s here).
 */
const CONNECTION_TIMEOUT_MS = 2_000;
/** The per-key waiter cap (WAITERS_PER_KEY_MAX, 1,000): the most queries one key keeps waiting. */
const QUERIES = 1_000;
/**
 * Memory the server may grow by while holding the answers (heap and Buffers, after a full collection):
 * measured 4.5 MB with the shared body (the 1,000 requests' own state), 29.7 MB when each answer was a
 * copy of its own (1,000 x 24 KB).
 */
const HEAP_GROWTH_BOUND_MB = 12;
/** How late past the connection timeout the close may come on a busy machine (measured 0.9-1.3 s). */
const CLOSE_SLACK_MS = 5_000;

let t: TestApp;
let port: number;
const serverSockets: Socket[] = [];
let requests = 0;

beforeAll(async () => {
  t = await buildTestApp({
    logLevel: 'warn',
    httpTimeouts: {
      requestTimeoutMs: 10_000,
      headersTimeoutMs: 5_000,
      keepAliveTimeoutMs: 5_000,
      connectionTimeoutMs: CONNECTION_TIMEOUT_MS,
    },
  });
  t.app.server.on('connection', (s: Socket) => serverSockets.push(s));
  t.app.server.on('request', () => requests++);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await t?.close();
});

// A full collection before each reading: what is counted is what is kept, not garbage not yet collected.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** The process's JavaScript heap and the Buffers outside it (where written answers may sit), once garbage is collected. */
function heldBytes(): number {
  collectGarbage();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

const acquire = (holder: string) =>
  t.app.inject({ method: 'POST', url: '/v1/semaphores/big/acquire', payload: { limit: 1_000, ttlMs: 600_000, holder } });

describe('a watcher that never reads', () => {
  it('pipelining 1,000 blocking queries through 20 changes: bounded backlog and memory, then closed', { timeout: 120_000 }, async () => {
    const holder = 'h'.repeat(128);
    for (let i = 0; i < 100; i++) expect((await acquire(holder)).statusCode).toBe(200);
    const view = await t.app.inject({ method: 'GET', url: '/v1/semaphores/big' });
    expect(view.body.length).toBeGreaterThan(20_000);
    const heapBefore = heldBytes();
    const requestsBefore = requests;

    const client = connect(port, '127.0.0.1');
    client.on('error', () => undefined);
    // Never read: paused, no data listener.
    client.pause();
    const query = (index: number) => `GET /v1/semaphores/big?index=${index}&waitMs=60000 HTTP/1.1\r\nhost: x\r\n\r\n`;
    client.write(query(view.json<{ index: number }>().index).repeat(QUERIES));
    // Every query has reached the server (and waits) before the first change.
    await expect.poll(() => requests - requestsBefore, { timeout: 30_000, interval: 20 }).toBe(QUERIES);
    const server = serverSockets.at(-1) as Socket;

    let peakBacklog = 0;
    let peakHeapGrowthMb = 0;
    for (let change = 0; change < 20 && !server.destroyed; change++) {
      const grant = await acquire(holder);
      expect(grant.statusCode).toBe(200);
      // The watcher asks again at the new index, as a watcher does, without having read anything.
      client.write(query(grant.json<{ index?: number }>().index ?? 0).repeat(50));
      await new Promise((resolve) => setTimeout(resolve, 50));
      peakBacklog = Math.max(peakBacklog, server.writableLength);
      peakHeapGrowthMb = Math.max(peakHeapGrowthMb, (heldBytes() - heapBefore) / 1e6);
    }
    console.log(`watcher-backlog ${JSON.stringify({ answerBytes: view.body.length, peakBacklog, peakHeapGrowthMb })}`);
    expect(peakBacklog).toBeLessThanOrEqual(WATCHER_BACKLOG_MAX_BYTES);
    expect(peakHeapGrowthMb).toBeLessThan(HEAP_GROWTH_BOUND_MB);

    // Nothing moves on the socket: the server closes it after the connection timeout.
    const stalledAt = performance.now();
    await expect.poll(() => server.destroyed, { timeout: CONNECTION_TIMEOUT_MS + CLOSE_SLACK_MS, interval: 50 }).toBe(true);
    console.log(`watcher-backlog closed ${Math.round(performance.now() - stalledAt)} ms after the last change`);
    client.destroy();
  });
});
