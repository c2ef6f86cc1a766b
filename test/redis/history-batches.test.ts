import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import calculateSlot from 'cluster-key-slot';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { decodeRecord, encodeRecord, type HistoryLimits, type HistoryRecord } from '../../src/domain/history.js';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { loadScript } from '../../src/store/redis/scripts.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

/**
 * Lease history on a single Redis (redis-history.ts) beyond the history contract: a large batch goes
 * to Redis in calls of at most 64 lists (Redis serves the lock calls between two of them), each event
 * written exactly once; the keys' names it remembers are bounded; each shard's index shares its lists'
 * hash tag; the script ranks a shard's lists in the order written (its ranks are sent as text); a history
 * that could not reach Redis writes again once Redis is there; and closing ends its connection, also one
 * to a Redis that is not there (status 'end', no timer left, a call waiting for it failed at once).
 */

const PREFIX = 'hist:';
const LISTS_PER_CALL = 64;
const limits: HistoryLimits = { eventsPerKey: 5, keysPerNamespace: 10_000, retentionMs: 60_000 };

let server: RedisServer;
const histories: RedisHistory[] = [];

beforeAll(async () => {
  server = await RedisServer.startShared();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(histories.splice(0).map((h) => h.close()));
});
afterAll(async () => {
  await server.stop();
});

function open(url = server.url, commandTimeoutMs = 2_000): RedisHistory {
  const history = new RedisHistory({ connection: { mode: 'standalone', url }, keyPrefix: PREFIX, commandTimeoutMs, limits });
  histories.push(history);
  return history;
}

/** The history's ioredis client (standalone here). */
function clientOf(history: RedisHistory): Redis {
  return (history as unknown as { redis: Redis }).redis;
}

/** The timers keeping this process alive (a client's among them). */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/**
 * Closes `history` while its client waits between two connection attempts, and checks that the close
 * ends it: at once, status 'end' and its 'end' event (a call made then is told it is closed), its
 * reconnect timer gone and no timer added (ioredis's disconnect() left it 'reconnecting' for ever, with a
 * 2 s timer armed on its dead socket, and the QUIT sent first a deadline timer of 3 s).
 */
async function expectEndedOnClose(history: RedisHistory): Promise<void> {
  const redis = clientOf(history);
  await vi.waitFor(() => expect(redis.status).toBe('reconnecting'), { timeout: 5_000, interval: 10 });
  const ended = new Promise<'end'>((resolve) => redis.once('end', () => resolve('end')));
  // Its reconnect timer among them.
  const before = timers();
  const started = performance.now();
  await history.close();
  const closedMs = performance.now() - started;
  const after = timers();
  expect(await Promise.race([ended, sleep(1_000).then(() => `still ${redis.status}`)])).toBe('end');
  expect(redis.status).toBe('end');
  expect(after).toBeLessThan(before);
  // A QUIT's deadline (3 s) or a dead socket's end timer (2 s) would show; 500 ms leaves a busy machine's turns room.
  expect(closedMs).toBeLessThan(500);
}

/** The script calls a batch is sent in: how many lists each carried (each list here in a shard of its own). */
function spyOnCalls(history: RedisHistory) {
  const redis = (history as unknown as { redis: { historyAppend: (args: (string | number)[]) => Promise<unknown> } }).redis;
  const spy = vi.spyOn(redis, 'historyAppend');
  // The first argument is the number of keys: per shard its index and its one list.
  return () => spy.mock.calls.map(([args]) => Number(args[0]) / 2);
}

const record = (lease: string): HistoryRecord => ({ kind: 'released', at: Date.now(), lease });

/** `count` keys, each in a namespace (so a shard) of its own, with two events each. */
function batchOf(count: number) {
  const run = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
  const keys = Array.from({ length: count }, (_, i) => ({ namespace: `ns${run}-${i}`, primitive: 'lock' as const, key: 'k' }));
  const batch = keys.flatMap((key, i) => [
    { ...key, record: record(`a${i}`) },
    { ...key, record: record(`b${i}`) },
  ]);
  return { keys, batch };
}

describe('redis history: batches', () => {
  it('sends a batch in calls of at most 64 lists, every event once', async () => {
    const history = open();
    const calls = spyOnCalls(history);
    const { keys, batch } = batchOf(LISTS_PER_CALL * 2 + 1);
    await history.append(batch);
    expect(calls()).toEqual([LISTS_PER_CALL, LISTS_PER_CALL, 1]);
    for (const [i, key] of keys.entries()) {
      expect((await history.read(key)).map((r) => (r.kind === 'released' ? r.lease : r.kind))).toEqual([`a${i}`, `b${i}`]);
    }
  });

  it('sends a batch of exactly 64 lists in one call', async () => {
    const history = open();
    const calls = spyOnCalls(history);
    await history.append(batchOf(LISTS_PER_CALL).batch);
    expect(calls()).toEqual([LISTS_PER_CALL]);
  });

  it('remembers the names of at most 50,000 keys; a key whose names were forgotten is written to the same list', async () => {
    const history = open();
    // Names by primitive, then namespace, then key text: every key's counted.
    const byPrimitive = (history as unknown as { names: Map<string, Map<string, Map<string, unknown>>> }).names;
    const remembered = () => [...byPrimitive.values()].flatMap((byNamespace) => [...byNamespace.values()]).reduce((n, m) => n + m.size, 0);
    const run = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
    const first = { namespace: `names${run}-0`, primitive: 'lock' as const, key: 'first' };
    await history.append([{ ...first, record: record('a') }]);
    // 50,000 keys more, 5,000 a namespace: under the namespace's cap (10,000), so none is dropped.
    const many = Array.from({ length: 50_000 }, (_, i) => ({
      namespace: `names${run}-${1 + Math.floor(i / 5_000)}`,
      primitive: 'lock' as const,
      key: `k${i}`,
    }));
    await history.append(many.map((key) => ({ ...key, record: record('m') })));
    expect(remembered()).toBeGreaterThan(0);
    expect(remembered()).toBeLessThanOrEqual(50_000);
    await history.append([{ ...first, record: record('b') }]);
    expect((await history.read(first)).map((r) => r.lease)).toEqual(['a', 'b']);
    expect((await history.read(many.at(-1) as (typeof many)[number])).map((r) => r.lease)).toEqual(['m']);
  }, 60_000);

  it('remembers the names of one key text in several namespaces and primitives side by side', async () => {
    const history = open();
    // A key's names are worked out by listKey: called once per key remembered, not on every batch.
    const worked = vi.spyOn(history, 'listKey');
    const run = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
    const keys = [
      { namespace: `a${run}`, primitive: 'lock' as const, key: 'job' },
      { namespace: `b${run}`, primitive: 'lock' as const, key: 'job' },
      { namespace: `a${run}`, primitive: 'semaphore' as const, key: 'job' },
    ];
    // Each written in turn, one batch each, three rounds: the names of the last one written never served.
    for (let round = 0; round < 3; round++) {
      for (const key of keys) await history.append([{ ...key, record: record(`r${round}`) }]);
    }
    expect(worked).toHaveBeenCalledTimes(keys.length);
    for (const key of keys) expect((await history.read(key)).map((r) => r.lease)).toEqual(['r0', 'r1', 'r2']);
  });

  it('keeps each shard’s index in the slot of its lists', async () => {
    const history = open();
    const { keys, batch } = batchOf(3);
    await history.append(batch);
    const client = server.client();
    try {
      for (const key of keys) {
        const list = history.listKey(key);
        const index = history.indexKey(list);
        expect(calculateSlot(index)).toBe(calculateSlot(list));
        expect(await client.zrange(index, 0, -1)).toEqual([list]);
      }
    } finally {
      client.disconnect();
    }
  });
});

describe('redis history: the append script', () => {
  const APPEND = loadScript('history-append.lua');

  it('ranks a shard’s lists by when they were written: 1 µs apart, in order, across the ms they reach', async () => {
    const client = server.client();
    try {
      // 1,100 lists in one shard in one call (a Cluster's call holds a shard's whole batch): their ranks
      // span at least two ms, so the ms's text is made anew within the call.
      const index = 'rank:{s}H';
      const lists = Array.from({ length: 1100 }, (_, i) => `rank:{s}l${i}`);
      const [sec, usec] = (await client.time()).map(Number) as [number, number];
      await client.eval(
        APPEND,
        1 + lists.length,
        index,
        ...lists,
        '60000',
        '5',
        '100000',
        lists.length,
        '0'.repeat(1 + lists.length),
        ...lists.map((l) => `e-${l}`),
      );
      const ranked = await client.zrange(index, 0, -1, 'WITHSCORES');
      const members = ranked.filter((_, i) => i % 2 === 0);
      const scores = ranked.filter((_, i) => i % 2 === 1).map(Number);
      expect(members).toEqual(lists);
      const first = scores[0] as number;
      // Redis's clock in ms (TIME, read just before the call), µs as its fraction.
      expect(first).toBeGreaterThanOrEqual(sec * 1000 + usec / 1000);
      expect(first).toBeLessThan(sec * 1000 + usec / 1000 + 2_000);
      // 1 µs apart, as far as a double near 1.8e12 tells (to 1/4096 ms).
      for (let i = 1; i < scores.length; i++) {
        expect(scores[i]).toBeGreaterThan(scores[i - 1] as number);
        expect((scores[i] as number) - (scores[i - 1] as number)).toBeCloseTo(0.001, 3);
      }
      expect(scores.at(-1) as number).toBeCloseTo(first + 1.099, 2);
    } finally {
      client.disconnect();
    }
  });

  it('trims a list to the events kept, the last ones', async () => {
    const client = server.client();
    try {
      const index = 'trim:{t}H';
      const list = 'trim:{t}l';
      for (let i = 0; i < 8; i++) await client.eval(APPEND, 2, index, list, '60000', '5', '10', 1, '00', `e${i}`);
      await client.eval(APPEND, 2, index, list, '60000', '5', '10', 1, '00', 'e8\ne9');
      expect(await client.lrange(list, 0, -1)).toEqual(['e5', 'e6', 'e7', 'e8', 'e9']);
      expect(await client.zcard(index)).toBe(1);
    } finally {
      client.disconnect();
    }
  });
});

describe("redis history: a lease's facts (lock-delay, holder, grant time) in the lines trimmed", () => {
  const APPEND = loadScript('history-append.lua');

  it("goes on to the lease's first line kept, line to line, and only to a line that leaves the lease going", async () => {
    const client = server.client();
    try {
      const index = 'carry:{c}H';
      const list = 'carry:{c}l';
      const at = 1_796_225_617_711;
      const lease = (id: string, fencingToken: number) => ({ lease: id, fencingToken });
      const lines: string[] = [
        // An older version's JSON form, a `|d` in its holder text: hands nothing on.
        '{"k":"g","t":1796225617000,"l":"J","f":0,"h":"x|d1","d":900}',
        // A short pair, released: nothing to hand on.
        encodeRecord({ kind: 'granted', at, ...lease('B', 2), expiresAt: at + 1_000, lockDelayMs: 3_000, releasedAt: at + 1 }),
        encodeRecord({ kind: 'granted', at: at + 2, ...lease('A', 1), expiresAt: at + 1_002, lockDelayMs: 2_000 }),
        // Another lease's line (a lock set's release naming the key) is passed over.
        encodeRecord({ kind: 'released', at: at + 3, lease: 'E', set: true }),
        // An operator's ask names the lease by its fencing token alone.
        encodeRecord({ kind: 'release_requested', at: at + 4, fencingToken: 1, by: 'ops', reason: null }),
        encodeRecord({ kind: 'renewed', at: at + 5, ...lease('A', 1), expiresAt: at + 1_005 }),
        encodeRecord({ kind: 'released', at: at + 6, lease: 'J' }),
        encodeRecord({ kind: 'renewed', at: at + 7, ...lease('A', 1), expiresAt: at + 1_007 }),
        // A expired; C, granted next, released.
        encodeRecord({ kind: 'granted', at: at + 3_000, ...lease('C', 3), expiresAt: at + 4_000, lockDelayMs: 4_000 }),
        encodeRecord({ kind: 'released', at: at + 3_001, lease: 'C' }),
        // X expires; a line naming it after Y's grant (the lock was free by then) takes nothing on.
        encodeRecord({ kind: 'granted', at: at + 5_000, ...lease('X', 5), expiresAt: at + 6_000, lockDelayMs: 5_000 }),
        encodeRecord({ kind: 'granted', at: at + 9_000, ...lease('Y', 6), expiresAt: at + 10_000 }),
        encodeRecord({ kind: 'renewed', at: at + 9_001, ...lease('X', 5), expiresAt: at + 10_001 }),
        ...Array.from({ length: 3 }, (_, i) =>
          encodeRecord({ kind: 'renewed', at: at + 9_002 + i, ...lease('Y', 6), expiresAt: at + 10_002 + i }),
        ),
      ];
      const push = async (from: number, to: number) => {
        for (const line of lines.slice(from, to)) await client.eval(APPEND, 2, index, list, '60000', '5', '10', 1, '00', line);
      };
      const read = async () => (await client.lrange(list, 0, -1)).map((line) => decodeRecord(line));
      const as = (i: number, facts: Partial<HistoryRecord> = {}) => ({ ...decodeRecord(lines[i] as string), ...facts });
      // What A's grant hands on: its lock-delay and its time (it names no holder).
      const aFacts = { lockDelayMs: 2_000, grantedAt: at + 2 };
      await push(0, 8);
      // A's grant gone: its facts on the ask, the next line of its lease (nothing from the JSON line, nor the pair).
      expect(await read()).toStrictEqual([as(3), as(4, aFacts), as(5), as(6), as(7)]);
      await push(8, 11);
      // Line to line, to A's last line kept.
      expect(await read()).toStrictEqual([as(6), as(7, aFacts), as(8), as(9), as(10)]);
      await push(11, lines.length);
      // The line naming X after another grant took nothing on.
      const kept = await client.lrange(list, 0, -1);
      expect(kept).toEqual(lines.slice(-5));
    } finally {
      client.disconnect();
    }
  });

  it("hands a grant's holder label (or its lack of one) and time on; to the lease's release too, but not its lock-delay", async () => {
    const client = server.client();
    try {
      const at = 1_796_225_617_711;
      const cases: Array<[string, HistoryRecord['holder']]> = [
        ['labelled', 'cron|job %1'],
        ['unlabelled', null],
      ];
      for (const [name, holder] of cases) {
        const index = `facts:{${name}}H`;
        const list = `facts:{${name}}l`;
        const lines = [
          encodeRecord({ kind: 'granted', at, lease: 'A', fencingToken: 1, holder, expiresAt: at + 1_000, lockDelayMs: 2_000 }),
          encodeRecord({ kind: 'released', at: at + 400, lease: 'A' }),
        ];
        // One line kept: the grant goes as its release is written.
        for (const line of lines) await client.eval(APPEND, 2, index, list, '60000', '1', '10', 1, '00', line);
        const kept = (await client.lrange(list, 0, -1)).map((line) => decodeRecord(line));
        expect(kept, name).toStrictEqual([{ kind: 'released', at: at + 400, lease: 'A', holder, grantedAt: at }]);
      }
    } finally {
      client.disconnect();
    }
  });
});

describe('redis history: its connection', () => {
  it('writes again once a Redis that was not there comes up', async () => {
    const port = await freePort();
    const history = open(`redis://127.0.0.1:${port}`, 300);
    const { keys, batch } = batchOf(1);
    await expect(history.append(batch)).rejects.toBeInstanceOf(StoreUnavailableError);
    const late = await RedisServer.start({}, port);
    try {
      await vi.waitFor(() => history.append(batch), { timeout: 10_000, interval: 50 });
      expect(await history.read(keys[0] as (typeof keys)[number])).not.toHaveLength(0);
    } finally {
      await history.close();
      await late.stop();
    }
  });

  it('waits for the connection again after Redis went away and came back', async () => {
    const own = await RedisServer.start();
    try {
      const history = open(own.url, 5_000);
      const { keys, batch } = batchOf(1);
      await history.append(batch);
      await own.kill();
      await vi.waitFor(() => expect((history as unknown as { redis: { status: string } }).redis.status).not.toBe('ready'), {
        timeout: 5_000,
        interval: 10,
      });
      // Sent while the connection is down: it waits for the reconnect (up to a command timeout).
      const appended = history.append(batch);
      await own.launch();
      await appended;
      expect(await history.read(keys[0] as (typeof keys)[number])).toHaveLength(2);
    } finally {
      await own.stop();
    }
  });

  it('writes nothing once closed', async () => {
    const history = open(server.url, 300);
    const { keys, batch } = batchOf(1);
    await history.close();
    await expect(history.append(batch)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await open().read(keys[0] as (typeof keys)[number])).toEqual([]);
  });

  it('stops reconnecting to a Redis that is not there once closed', async () => {
    const port = await freePort();
    const history = open(`redis://127.0.0.1:${port}`, 300);
    await expect(history.append(batchOf(1).batch)).rejects.toBeInstanceOf(StoreUnavailableError);
    await history.close();
    // Something listens there now: a client still reconnecting would be back within its longest
    // reconnect delay (1 s, client.ts).
    let connections = 0;
    const listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(port, '127.0.0.1', resolve));
    try {
      await sleep(1_500);
      expect(connections).toBe(0);
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  });

  it('ends its client when closed while Redis was never there', async () => {
    const port = await freePort();
    // A command timeout no other test uses (nor its 4x for a connection's setup): deadline queues of their own.
    const history = open(`redis://127.0.0.1:${port}`, 777);
    await expect(history.append(batchOf(1).batch)).rejects.toBeInstanceOf(StoreUnavailableError);
    await expectEndedOnClose(history);
  });

  it('ends its client when closed after its Redis went away', async () => {
    const own = await RedisServer.start();
    try {
      const history = open(own.url, 777);
      await history.append(batchOf(1).batch);
      await own.kill();
      await expectEndedOnClose(history);
    } finally {
      await own.stop();
    }
  });

  it('fails a call waiting for the connection as soon as it is closed, not after its command timeout', async () => {
    const port = await freePort();
    const history = open(`redis://127.0.0.1:${port}`, 20_000);
    await vi.waitFor(() => expect(clientOf(history).status).toBe('reconnecting'), { timeout: 5_000, interval: 10 });
    const started = performance.now();
    const appended = history.append(batchOf(1).batch).then(
      () => 'written',
      (err: unknown) => err,
    );
    await history.close();
    const outcome = await Promise.race([appended, sleep(2_000).then(() => 'still waiting')]);
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
