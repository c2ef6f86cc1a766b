import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { idempotencyKeyOf } from '../../src/domain/idempotency.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Replica acknowledgement (REDIS_MIN_REPLICA_ACKS) with an Idempotency-Key. A grant asked with a key is
 * never given back (docs/api.md): a retry with the key, on any instance, may already hold it as its
 * replay. So a keyed grant that WAIT does not confirm is refused (503) but kept, never rolled back under
 * a retry's 200 (two holders, the store healthy); and a replay is answered only once WAIT saw a replica
 * have the lease too (it was answered 200 with no replica at all).
 */
describe('replica acknowledgement with an Idempotency-Key', () => {
  let primary: RedisServer;
  let replica: RedisServer;
  const stores: Worded<RedisStore>[] = [];

  beforeAll(async () => {
    primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
    replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    await online();
  }, 60_000);
  afterAll(async () => {
    replica?.resume();
    await Promise.all(stores.map((s) => s.close()));
    await replica?.stop();
    await primary?.stop();
  });

  async function online(): Promise<void> {
    const client = primary.client();
    try {
      await eventually(async () => {
        if (!/slave0:.*state=online/.test(await client.info('replication'))) throw new Error('replica not online');
      }, 20_000);
    } finally {
      client.disconnect();
    }
  }

  const open = async (ackTimeoutMs: number) => {
    const store = withWords(
      new RedisStore({
        url: primary.url,
        replicaAcks: { minReplicas: 1, timeoutMs: ackTimeoutMs },
        keyPrefix: 'acks-key:',
        commandTimeoutMs: 2_000,
        fenceGraceMs: 60_000,
      }),
    );
    stores.push(store);
    await eventually(() => store.ping(), 10_000);
    return store;
  };
  /** `run`'s answer once it gives one (a replica the machine is slow to schedule may refuse a few times). */
  async function answered<T>(run: () => Promise<T>): Promise<T> {
    let last: unknown;
    for (const started = Date.now(); Date.now() - started < 10_000;) {
      try {
        return await run();
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }
  let n = 0;
  const keyOf = () => idempotencyKeyOf('caller', `retry-${++n}`, { ttlMs: 10_000, holder: null, lockDelayMs: 0 });

  it('a keyed grant no replica confirms is refused but kept: the retry with the key gets that lease', async () => {
    const store = await open(300);
    const id = 'ns/kept';
    const idempotencyKey = keyOf();
    replica.pause();
    let refused: unknown;
    try {
      refused = await store
        .acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, idempotencyKey })
        .catch((e: unknown) => e);
    } finally {
      replica.resume();
    }
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).leaseKept).toBe(true);
    // Not rolled back: the lock is held, by the lease the key names.
    const held = await store.inspect(id);
    expect(held).not.toBeNull();
    await online();
    const retry = await answered(() => store.acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, idempotencyKey }));
    expect(retry).toMatchObject({ acquired: true, fencingToken: held?.fencingToken });
    // Nobody else gets it meanwhile.
    expect(await store.acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null })).toMatchObject({ acquired: false });
  }, 60_000);

  it('a replay on another instance is answered only once a replica has the lease: with none, 503, the lease kept', async () => {
    const instanceA = await open(300);
    const instanceB = await open(300);
    const id = 'ns/replayed';
    const idempotencyKey = keyOf();
    replica.pause();
    let replay: unknown;
    try {
      // A grants (its WAIT fails: 503, kept); the retry lands on B, whose connection wrote nothing yet:
      // a WAIT there alone would count the replica as having everything B wrote, and answer 200.
      const first = await instanceA
        .acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, idempotencyKey })
        .catch((e: unknown) => e);
      expect(first).toBeInstanceOf(StoreUnavailableError);
      replay = await instanceB
        .acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, idempotencyKey })
        .catch((e: unknown) => e);
    } finally {
      replica.resume();
    }
    expect(replay).toBeInstanceOf(StoreUnavailableError);
    // The lease stays (the key's), but it counts under the call that made it: the replaying call kept
    // nothing of its own, so its own quota slot goes back (marked kept, it counted to its TTL as well).
    expect((replay as StoreUnavailableError).leaseKept).toBeFalsy();
    expect(await instanceB.inspect(id)).not.toBeNull();
    await online();
    expect(
      await answered(() => instanceB.acquire({ id, ownerToken: newOwnerToken(), ttlMs: 10_000, holder: null, idempotencyKey })),
    ).toMatchObject({
      acquired: true,
    });
  }, 60_000);
});
