import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { newOwnerToken } from '../../src/domain/lease-service.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { defineScripts, type Scripts } from '../../src/store/redis/scripts.js';
import { lockScriptCalls } from '../helpers/lock-scripts.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * When the direct sender sends the function library (FUNCTION LOAD) and how a call goes (FCALL, or
 * EVAL/EVALSHA) when Redis refuses the library or FCALL, counted in Redis's command statistics. Every
 * load refused and every FCALL refused is one more round trip on the hot path, so a refusal that lasts
 * must turn functions off, one that passes must be tried again a second later (not on every call), and
 * a call is sent again only when Redis refused it before it ran.
 */
const space = new KeySpace('fl:');
const GRACE_MS = 60_000;
let server: RedisServer;
let raw: Redis;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
  raw = server.client();
});

afterEach(async () => {
  vi.restoreAllMocks();
  for (const client of clients.splice(0)) client.disconnect();
});

afterAll(async () => {
  raw.disconnect();
  await server.stop();
});

let n = 0;
const newLock = () => `ns/lock-${++n}`;

/** A client as a user `user` (created with these ACL rules), ready, and its script table. */
async function connect(user?: { name: string; rules: string[] }): Promise<Scripts> {
  const url = new URL(server.url);
  if (user) {
    await raw.call('ACL', 'SETUSER', user.name, 'on', 'nopass', '~*', '&*', '+@all', ...user.rules);
    url.username = user.name;
  }
  const client = new Redis(url.toString(), { maxRetriesPerRequest: 1 });
  clients.push(client);
  await client.ping();
  return defineScripts(client);
}

/** Calls of a command since the last CONFIG RESETSTAT: every one Redis was sent, run or refused. */
async function sent(command: string): Promise<number> {
  const info = await raw.info('commandstats');
  const stat = (field: string) => Number(new RegExp(`cmdstat_${command}:.*\\b${field}=(\\d+)`).exec(info)?.[1] ?? 0);
  return stat('calls') + stat('rejected_calls');
}

const { acquire, release } = lockScriptCalls(space, GRACE_MS);

async function pair(scripts: Scripts): Promise<void> {
  const id = newLock();
  const owner = newOwnerToken();
  expect(await acquire(scripts, id, owner)).toEqual([1, expect.any(Number), expect.any(Number)]);
  expect(await release(scripts, id, owner)).toBe(1);
}

/** performance.now() while frozen (the load's retry clock), a whole number of ms: moved on by advance() alone. */
let frozenAt = 0;
const advance = (ms: number) => {
  frozenAt += ms;
};

/** Clears the library (unless told to keep it) and the statistics, and freezes performance.now(). */
async function fromScratch(options: { keepLibrary?: boolean } = {}): Promise<void> {
  if (options.keepLibrary !== true) await raw.call('FUNCTION', 'FLUSH');
  await raw.config('RESETSTAT');
  frozenAt = Math.round(performance.now());
  vi.spyOn(performance, 'now').mockImplementation(() => frozenAt);
}

describe('the function library: when it is sent', () => {
  it('a connection that runs none of the hot path sends no library', async () => {
    await fromScratch();
    const scripts = await connect();
    const id = newLock();
    expect(await scripts.run('inspect', { keys: space.lockKeys(id) })).toEqual([0, 0, 0]);
    expect(await scripts.run('inspect', { keys: space.lockKeys(id) })).toEqual([0, 0, 0]);
    expect(await sent('function\\|load')).toBe(0);
  });

  it('a load refused for the moment (NOREPLICAS) is sent again on a call a second later, not on every call', async () => {
    // The library is in Redis already (another instance loaded it): this connection's load is still
    // refused while writes are, and so is an FCALL of a function without flags.
    await fromScratch();
    const holder = await connect();
    const id = newLock();
    expect(await acquire(holder, id, newOwnerToken())).toEqual([1, expect.any(Number), expect.any(Number)]);
    await fromScratch({ keepLibrary: true });
    await raw.config('SET', 'min-replicas-to-write', '1');
    try {
      const scripts = await connect();
      // An acquire of a held lock writes nothing: answered while writes are refused.
      for (let i = 0; i < 3; i++) expect(await acquire(scripts, id, newOwnerToken())).toEqual([0, expect.any(Number)]);
      expect(await sent('function\\|load')).toBe(1);
      // Only the call written behind the refused load went as an FCALL: the connection's socket is not
      // taken for one that has the library, and the others went as scripts.
      expect(await sent('fcall')).toBe(1);
      advance(999);
      expect(await acquire(scripts, id, newOwnerToken())).toEqual([0, expect.any(Number)]);
      expect(await sent('function\\|load')).toBe(1);
      advance(1);
      expect(await acquire(scripts, id, newOwnerToken())).toEqual([0, expect.any(Number)]);
      expect(await sent('function\\|load')).toBe(2);
    } finally {
      await raw.config('SET', 'min-replicas-to-write', '0');
    }
  });

  it("a library flushed after this connection's own load is sent again before the next call", async () => {
    await fromScratch();
    const scripts = await connect();
    await pair(scripts);
    expect(await sent('function\\|load')).toBe(1);
    await raw.call('FUNCTION', 'FLUSH');
    await raw.config('RESETSTAT');
    await pair(scripts);
    await pair(scripts);
    // The first acquire's FCALL finds no function and goes as an EVAL; the library is then sent again
    // and the three calls after it are FCALLs.
    expect(await sent('function\\|load')).toBe(1);
    expect(await sent('fcall')).toBe(4);
  });

  it('a load refused for good (an ACL without FUNCTION) turns functions off: no load again, every call a script', async () => {
    await fromScratch();
    const scripts = await connect({ name: 'no-function', rules: ['-function'] });
    await pair(scripts);
    advance(5_000);
    await pair(scripts);
    await pair(scripts);
    expect(await sent('function\\|load')).toBe(1);
    // At most the call written behind the refused load went as an FCALL.
    expect(await sent('fcall')).toBeLessThanOrEqual(1);
    expect(await sent('evalsha')).toBeGreaterThanOrEqual(4);
  });

  it('an FCALL the ACL refuses (FUNCTION allowed) turns functions off after that one call', async () => {
    await fromScratch();
    const scripts = await connect({ name: 'no-fcall', rules: ['-fcall'] });
    await pair(scripts);
    await pair(scripts);
    await pair(scripts);
    expect(await sent('fcall')).toBe(1);
    expect(await sent('function\\|load')).toBe(1);
  });
});

describe('a call that fails', () => {
  it('is not sent again when the script ran and raised an error', async () => {
    await fromScratch();
    const scripts = await connect();
    const quota = space.quotaFor('ns', 'a', 100);
    await expect(scripts.run('quotaAdd', { quota, endMs: 1.5e12 + 0.5, quotaSlotId: '' })).rejects.toThrow(/not a whole number/);
    expect((await sent('eval')) + (await sent('evalsha'))).toBe(1);
  });
});

describe('a call sent at once', () => {
  it('made before the connection has a socket, is sent once it has one', async () => {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    clients.push(client);
    const scripts = defineScripts(client);
    // Nothing held: the release answers "not the owner".
    expect(await release(scripts, newLock(), newOwnerToken(), true)).toBe(0);
  });
});
