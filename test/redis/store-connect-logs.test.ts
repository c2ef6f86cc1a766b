import { createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { RedisConnection } from '../../src/store/redis/client.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';
import { until } from '../helpers/redis-admin.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * What the Redis store tells the operator about its connection: the lines an outage writes, how often
 * (one per reason, not one per reconnect attempt), and what they name (the seed list and master name,
 * never a URL, which may carry a password). In-process, so every line is seen as the store writes it.
 */

interface Line {
  readonly level: 'info' | 'warn';
  readonly obj: Record<string, unknown>;
  readonly msg: string;
  readonly at: number;
}

const CANNOT_CONNECT = 'cannot connect to Redis; answering 503 until it can';
const LOST = 'Redis connection error; answering 503 until it is back';
const CONNECTED = 'connected to Redis';

const opened: RedisStore[] = [];
const servers: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function openLogged(connection: RedisConnection): { store: RedisStore; lines: Line[]; errors: () => number } {
  const lines: Line[] = [];
  const log = {
    info: (obj: object, msg: string) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg, at: Date.now() }),
    warn: (obj: object, msg: string) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg, at: Date.now() }),
  };
  const store = new RedisStore({ connection, keyPrefix: 'connect-logs:', commandTimeoutMs: 500, fenceGraceMs: 60_000, log });
  opened.push(store);
  // Every connection error the client reports, to wait on reconnect attempts rather than on time.
  let errors = 0;
  (store as unknown as { redis: Redis }).redis.on('error', () => errors++);
  return { store, lines, errors: () => errors };
}

const said = (lines: readonly Line[], msg: string) => lines.filter((l) => l.msg === msg);

describe('redis store: connection log lines', () => {
  it('before the first connection: one warning per reason, not per attempt; never the URL; then connected', async () => {
    const port = await freePort();
    const { store, lines, errors } = openLogged({ mode: 'standalone', url: `redis://:s3cret@127.0.0.1:${port}` });

    // Nothing listens: every attempt is refused for the same reason; one warning says so.
    await until('three refused attempts', 20_000, async () => (errors() >= 3 ? true : undefined));
    const refused = said(lines, CANNOT_CONNECT);
    expect(refused).toHaveLength(1);
    expect(refused[0]?.level).toBe('warn');
    expect(refused[0]?.obj).toEqual({ store: 'redis', err: expect.stringContaining('ECONNREFUSED') });
    expect(JSON.stringify(lines)).not.toContain('s3cret');
    await expect(store.ping()).rejects.toThrow();

    // Something on the port that refuses the password: another reason, warned of at once.
    const sockets = new Set<Socket>();
    const refusing = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', () => socket.write('-WRONGPASS invalid username-password pair or user is disabled.\r\n'));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => refusing.listen(port, '127.0.0.1', resolve));
    try {
      await until('the password refused', 20_000, async () => (said(lines, CANNOT_CONNECT).length >= 2 ? true : undefined));
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => refusing.close(resolve));
    }
    const reasons = said(lines, CANNOT_CONNECT).map((l) => String(l.obj.err));
    expect(reasons[1]).toContain('WRONGPASS');
    // At once: well within the ten seconds that hold back a reason already told (an attempt a second at most).
    const [first, second] = said(lines, CANNOT_CONNECT);
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeLessThan(9_000);
    expect(said(lines, CONNECTED)).toHaveLength(0);

    // A Redis (that asks for no password): connected, said once, and the store answers.
    servers.push(await RedisServer.start({}, port));
    await eventually(() => store.ping(), 20_000);
    expect(said(lines, CONNECTED)).toMatchObject([{ level: 'info', obj: { store: 'redis' }, msg: CONNECTED }]);
    expect(said(lines, CONNECTED)[0]?.obj).toEqual({ store: 'redis' });
    expect(said(lines, LOST)).toHaveLength(0);
    expect(JSON.stringify(lines)).not.toContain('s3cret');
  });

  it('a connection lost after it was made: one warning for the outage, none of the never-connected kind; connected again', async () => {
    const server = await RedisServer.start();
    servers.push(server);
    const { store, lines, errors } = openLogged({ mode: 'standalone', url: server.url });
    await eventually(() => store.ping(), 20_000);
    expect(said(lines, CONNECTED)).toHaveLength(1);

    await server.kill();
    const before = errors();
    await until('three failed reconnects', 20_000, async () => (errors() >= before + 3 ? true : undefined));
    expect(said(lines, LOST)).toHaveLength(1);
    expect(said(lines, LOST)[0]?.obj).toEqual({ store: 'redis', err: expect.any(String) });
    expect(said(lines, CANNOT_CONNECT)).toHaveLength(0);

    await server.launch();
    await eventually(() => store.ping(), 20_000);
    expect(said(lines, CONNECTED)).toHaveLength(2);
    expect(said(lines, CANNOT_CONNECT)).toHaveLength(0);
  });

  it('through Sentinel: the warning names the sentinels and the master, not a URL', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const { lines, errors } = openLogged({
      mode: 'sentinel',
      sentinels: [
        { host: '127.0.0.1', port: a },
        { host: '127.0.0.1', port: b },
      ],
      name: 'orders',
    });
    await until('a warning', 20_000, async () => (said(lines, CANNOT_CONNECT).length > 0 ? true : undefined));
    const [first] = said(lines, CANNOT_CONNECT);
    expect(first?.obj).toMatchObject({ store: 'redis', sentinels: `127.0.0.1:${a},127.0.0.1:${b}`, name: 'orders' });
    expect(first?.obj).not.toHaveProperty('nodes');
    // Each attempt's message names its own retry delay ("... after 100ms", "... after 200ms"): numbers
    // aside, one reason, told once.
    await until('three failed attempts', 20_000, async () => (errors() >= 3 ? true : undefined));
    expect(said(lines, CANNOT_CONNECT)).toHaveLength(1);
  });

  it('a Cluster: the warning names its seed nodes', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const { lines } = openLogged({
      mode: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: a },
        { host: '127.0.0.1', port: b },
      ],
    });
    await until('a warning', 20_000, async () => (said(lines, CANNOT_CONNECT).length > 0 ? true : undefined));
    const [first] = said(lines, CANNOT_CONNECT);
    expect(first?.obj).toMatchObject({ store: 'redis', nodes: `127.0.0.1:${a},127.0.0.1:${b}` });
    expect(first?.obj).not.toHaveProperty('sentinels');
    expect(first?.obj).not.toHaveProperty('name');
  });
});

describe('redis store: connection settings', () => {
  const pipelined = (store: RedisStore) =>
    (store as unknown as { redis: { options: { enableAutoPipelining?: boolean } } }).redis.options.enableAutoPipelining;

  it('auto-pipelines on a Cluster only (on one Redis the scripts batch their own calls)', () => {
    const port = 1;
    const standalone = openLogged({ mode: 'standalone', url: `redis://127.0.0.1:${port}` }).store;
    const sentinel = openLogged({ mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port }], name: 'm' }).store;
    const cluster = openLogged({ mode: 'cluster', nodes: [{ host: '127.0.0.1', port }] }).store;
    expect([pipelined(standalone), pipelined(sentinel), pipelined(cluster)]).toEqual([false, false, true]);
  });

  it('stops the process when Redis refuses the URL’s database number, and only then', async () => {
    const server = await RedisServer.start();
    servers.push(server);
    const exits: unknown[] = [];
    const exit = vi.spyOn(process, 'exit').mockImplementation(((code?: number) => {
      exits.push(code);
    }) as typeof process.exit);
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const fine = openLogged({ mode: 'standalone', url: `${server.url}/3` }).store;
      await eventually(() => fine.ping(), 20_000);
      // A SELECT refused for another reason (a password asked for, perhaps being rotated) is an outage to ride out.
      const port = await freePort();
      const asking = createServer((socket) => {
        socket.on('data', () => socket.write('-NOAUTH Authentication required.\r\n'));
        socket.on('error', () => undefined);
      });
      const sockets = new Set<Socket>();
      asking.on('connection', (socket) => sockets.add(socket));
      await new Promise<void>((resolve) => asking.listen(port, '127.0.0.1', resolve));
      try {
        const { errors } = openLogged({ mode: 'standalone', url: `redis://127.0.0.1:${port}/3` });
        await until('three refused SELECTs', 20_000, async () => (errors() >= 3 ? true : undefined));
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => asking.close(resolve));
      }
      expect(exits).toEqual([]);
      openLogged({ mode: 'standalone', url: `${server.url}/999` });
      await vi.waitFor(() => expect(exits).toEqual([2]), { timeout: 20_000, interval: 10 });
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(/REDIS_URL: Redis refused its database number/);
    } finally {
      exit.mockRestore();
      stderr.mockRestore();
    }
  });
});
