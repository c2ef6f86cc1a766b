import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisStore } from '../helpers/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Blocking queries over HTTP at scale: 1,000 long-poll GETs on one key, each on its own connection to
 * a listening keyholder on Redis. One change must answer every one of them with the new state, for
 * the same Redis work as 10 watchers (counted from Redis's INFO commandstats). How fast is the
 * benchmark's job (npm run bench, "Watch": target 50 ms at p99); the time is printed, not asserted.
 */
let redis: RedisServer;
let t: TestApp;
let port: number;

beforeAll(async () => {
  redis = await RedisServer.start();
  // A generous command timeout: a thousand connections arriving at once keep a busy machine's event loop
  // from reading replies for a while, and this test is about the work done, not the time.
  t = await buildTestApp({ store: await openRedisStore(redis, { keyPrefix: 'httpfan:', commandTimeoutMs: 10_000 }), logLevel: 'warn' });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await t?.close();
  await redis?.stop();
});

/**
 * Not counted: INFO itself, and (un)subscriptions, which belong to no change: a key's subscription
 * outlives its last watcher by a few seconds (LINGER_MS), so the earlier case's UNSUBSCRIBE may fall
 * inside the later one's window. Nor the slow log's own set-up (CONFIG, SLOWLOG) that counts the scripts.
 */
const HOUSEKEEPING = new Set(['info', 'subscribe', 'unsubscribe', 'config', 'slowlog']);

/**
 * The script and function calls (EVAL, EVALSHA, FCALL) Redis ran since `startScriptLog`, from its slow log with every
 * command logged: each change and each state read is one, whatever it runs inside. A watch-mark renewal
 * (one key: the lock's record; every mark is renewed every 10 s at a time of its own, so one may fall in
 * the window) belongs to no change: counted apart. Every other script here names 3 or more keys.
 */
async function startScriptLog(): Promise<void> {
  const client = redis.client();
  try {
    await client.config('SET', 'slowlog-log-slower-than', '0');
    await client.config('SET', 'slowlog-max-len', '10000');
    await client.slowlog('RESET');
  } finally {
    client.disconnect();
  }
}

async function scriptsRun(): Promise<{ changes: number; markRenewals: number }> {
  const client = redis.client();
  try {
    const entries = (await client.slowlog('GET', -1)) as Array<[number, number, number, string[]]>;
    const scripts = entries.map((e) => e[3]).filter((args) => /^(eval(sha)?|fcall)$/i.test(args[0] ?? ''));
    const markRenewals = scripts.filter((args) => args[2] === '1').length;
    return { changes: scripts.length - markRenewals, markRenewals };
  } finally {
    client.disconnect();
  }
}

async function commandsRun(): Promise<number> {
  const client = redis.client();
  try {
    let total = 0;
    for (const [, name, calls] of (await client.info('commandstats')).matchAll(/cmdstat_(\w+):calls=(\d+)/g))
      if (!HOUSEKEEPING.has(name ?? '')) total += Number(calls);
    return total;
  } finally {
    client.disconnect();
  }
}

/** Opens `count` sockets to the app, a hundred at a time (a thousand at once would overflow its accept backlog). */
async function openSockets(count: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  while (sockets.length < count) {
    const batch = Math.min(100, count - sockets.length);
    sockets.push(
      ...(await Promise.all(
        Array.from(
          { length: batch },
          () =>
            new Promise<Socket>((resolve, reject) => {
              const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
              socket.once('error', reject);
            }),
        ),
      )),
    );
  }
  return sockets;
}

/** Sends one GET on `socket`; resolves with the status and body once the whole answer is in, and when its first bytes came. */
function blockingGet(socket: Socket, path: string): Promise<{ status: number; body: Record<string, unknown>; at: number }> {
  return new Promise((resolve, reject) => {
    let text = '';
    let at = 0;
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      at ||= performance.now();
      text += chunk;
    });
    socket.on('error', reject);
    socket.once('end', () => {
      const bodyAt = text.indexOf('\r\n\r\n');
      resolve({ status: Number(text.slice(9, 12)), body: JSON.parse(text.slice(bodyAt + 4)) as Record<string, unknown>, at });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
  });
}

/** `count` blocking queries on `key` at its current index, then one grant; their answers and the Redis work of the change. */
async function oneChange(key: string, count: number) {
  const index = (await t.locks.watch('default', key, undefined, 0)).index;
  const sockets = await openSockets(count);
  const queries = sockets.map((socket) => blockingGet(socket, `/v1/locks/${key}?index=${index}&waitMs=60000`));
  // Every query is in place (the instance counts its watchers) before the change.
  await expect.poll(() => t.locks.changes.size, { timeout: 60_000, interval: 20 }).toBe(count);
  const before = await commandsRun();
  await startScriptLog();
  const sentAt = performance.now();
  const lease = await t.locks.acquire('default', key, 30_000);
  const answers = await Promise.all(queries);
  const commands = (await commandsRun()) - before;
  const { changes: scripts, markRenewals } = await scriptsRun();
  // Not a change's work, and at most the one mark of this key.
  expect(markRenewals).toBeLessThanOrEqual(1);
  return { lease, index, answers, commands, scripts, latencies: answers.map((a) => a.at - sentAt).sort((x, y) => x - y) };
}

describe('watch fan-out over HTTP, on Redis', () => {
  it('1,000 long-poll GETs on one key are all answered by one change, for the same Redis work as 10', { timeout: 180_000 }, async () => {
    const few = await oneChange('fanout-http-10', 10);
    const many = await oneChange('fanout-http-1000', 1_000);
    expect(many.answers).toHaveLength(1_000);
    for (const a of many.answers) {
      expect(a.status).toBe(200);
      expect(a.body).toMatchObject({
        key: 'fanout-http-1000',
        held: true,
        index: 2 * many.lease.fencingToken,
        fencingToken: many.lease.fencingToken,
      });
    }
    // The grant script (its one PUBLISH inside) and one state read by the instance: two script calls,
    // for 1,000 watchers as for 10 (the commands inside a script vary a little with the key's state).
    expect(few.scripts).toBe(2);
    expect(many.scripts).toBe(2);
    expect(many.commands).toBeLessThan(20);
    expect(t.locks.changes.size).toBe(0);
    const p = (q: number) => many.latencies[Math.ceil(many.latencies.length * q) - 1]?.toFixed(1);
    console.log(
      `watch fan-out over HTTP: 1000 watchers, ${many.commands} Redis commands per change, answer p50 ${p(0.5)} ms, p99 ${p(0.99)} ms (client in the same process)`,
    );
  });
});
