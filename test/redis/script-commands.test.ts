import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newOwnerToken } from '../../src/domain/lease-service.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { defineScripts, type Scripts } from '../../src/store/redis/scripts.js';
import { lockScriptCalls } from '../helpers/lock-scripts.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * The script table on connections that take the `kh<Name>` commands ioredis defines (not the direct
 * sender, which writes each call to the socket itself): an auto-pipelined connection (what a Cluster
 * client is) and one with an ioredis key prefix. A script with a fixed key count and one whose arguments
 * start with their key count (a lock set) must both reach their keys there: through the pipeline, and
 * under the prefix the client adds to every key. And on a plain connection (the direct sender), the
 * function library is sent once per connection, however many calls wait for it.
 */
const space = new KeySpace('cmd:');
const GRACE_MS = 60_000;
const { acquire } = lockScriptCalls(space, GRACE_MS);
let server: RedisServer;
let raw: Redis;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await RedisServer.startShared();
  raw = server.client();
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  raw.disconnect();
  await server.stop();
});

function connect(options: { enableAutoPipelining?: boolean; keyPrefix?: string }): Scripts {
  const client = new Redis(server.url, { maxRetriesPerRequest: 1, ...options });
  clients.push(client);
  return defineScripts(client);
}

let n = 0;
/** A lock and a two-lock set of names no other test uses. */
function names(): { lock: string; set: [string, string] } {
  n++;
  return { lock: `ns/lock-${n}`, set: [`ns/set-${n}-a`, `ns/set-${n}-b`] };
}

function setAcquire(scripts: Scripts, ids: readonly string[], ownerToken: string): Promise<unknown> {
  return scripts.run('lockSetAcquire', {
    members: ids.map((id) => ({ keys: space.lockKeys(id), name: id })),
    ownerToken,
    ttlMs: 10_000,
    holder: 'h',
    graceMs: GRACE_MS,
    lockDelayMs: 0,
    channelPrefix: space.grantChannelPrefix(),
  });
}

describe('the script table through the commands ioredis defines', () => {
  it('on an auto-pipelined connection, calls of one turn share its pipeline, and each script finds its keys', async () => {
    const client = new Redis(server.url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
    clients.push(client);
    await client.ping();
    const scripts = defineScripts(client);
    const { lock, set } = names();
    const owner = newOwnerToken();
    const calls = [acquire(scripts, lock, owner), setAcquire(scripts, set, owner)];
    // Both calls wait in the pipeline for the end of this turn, as every auto-pipelined command does.
    expect(client.autoPipelineQueueSize).toBe(2);
    const [granted, setGranted] = await Promise.all(calls);
    expect(granted).toEqual([1, expect.any(Number), expect.any(Number)]);
    expect(setGranted).toEqual([1, expect.any(Number), expect.any(Number), expect.any(Number)]);
    for (const id of [lock, ...set]) expect(await raw.exists(space.lock(id)), id).toBe(1);
    // Taken: a second acquire is told so.
    expect(await acquire(scripts, lock, newOwnerToken())).toEqual([0, expect.any(Number)]);
  });

  it('with an ioredis key prefix, every key a script touches is under the prefix', async () => {
    const scripts = connect({ keyPrefix: 'p:' });
    const { lock, set } = names();
    const owner = newOwnerToken();
    expect(await acquire(scripts, lock, owner)).toEqual([1, expect.any(Number), expect.any(Number)]);
    expect(await setAcquire(scripts, set, owner)).toEqual([1, expect.any(Number), expect.any(Number), expect.any(Number)]);
    for (const id of [lock, ...set]) {
      expect(await raw.exists(`p:${space.lock(id)}`), id).toBe(1);
      expect(await raw.exists(space.lock(id)), id).toBe(0);
    }
    expect(
      await scripts.run('release', {
        graceMs: GRACE_MS,
        channelPrefix: space.grantChannelPrefix(),
        lockName: lock,
        keys: space.lockKeys(lock),
        ownerToken: owner,
      }),
    ).toBe(1);
  });
});

describe('the function library on a plain connection', () => {
  /** FUNCTION LOAD commands Redis was sent since the last CONFIG RESETSTAT, whether it took them or not. */
  async function loads(): Promise<number> {
    const info = await raw.info('commandstats');
    const stat = (field: string) => Number(new RegExp(`cmdstat_function\\|load:.*\\b${field}=(\\d+)`).exec(info)?.[1] ?? 0);
    return stat('calls') + stat('rejected_calls');
  }

  it('is sent once for the calls made before the connection was ready, and those calls are FCALLs', async () => {
    await raw.call('FUNCTION', 'FLUSH');
    await raw.config('RESETSTAT');
    const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
    clients.push(client);
    const scripts = defineScripts(client);
    // Three calls of the hot path at once, all queued until the connection is ready.
    const ids = [names().lock, names().lock, names().lock];
    const granted = await Promise.all(ids.map((id) => acquire(scripts, id, newOwnerToken())));
    for (const reply of granted) expect(reply).toEqual([1, expect.any(Number), expect.any(Number)]);
    expect(await loads()).toBe(1);
    expect(await raw.info('commandstats')).toMatch(/cmdstat_fcall:calls=3,/);
  });
});
