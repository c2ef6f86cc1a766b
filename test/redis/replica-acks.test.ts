import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { RedisServer } from '../helpers/redis-server.js';
import { eventually } from '../helpers/redis-store.js';
import { lockField } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Replica acknowledgement (WAIT after the granting script) against a real primary and replica: a grant
 * is answered only once the replica has it; with too few replicas it is rolled back and answered 503.
 */
describe('replica acknowledgement', () => {
  let primary: RedisServer;
  let replica: RedisServer;
  const stores: Worded<RedisStore>[] = [];

  beforeAll(async () => {
    primary = await RedisServer.start({ args: ['--repl-diskless-sync-delay', '0'] });
    replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const client = primary.client();
    try {
      await eventually(async () => {
        if (!/slave0:.*state=online/.test(await client.info('replication'))) throw new Error('replica not online');
      }, 20_000);
    } finally {
      client.disconnect();
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await replica?.stop();
    await primary?.stop();
  });

  // The replica's confirmation is waited for this long: room for a loaded machine where an answer is
  // expected, and short where the test counts on too few replicas.
  const open = async (minReplicas: number, ackTimeoutMs = 100) => {
    const store = withWords(
      new RedisStore({
        url: primary.url,
        replicaAcks: minReplicas > 0 ? { minReplicas, timeoutMs: ackTimeoutMs } : null,
        keyPrefix: 'acks:',
        commandTimeoutMs: 1_000,
        fenceGraceMs: 60_000,
      }),
    );
    stores.push(store);
    await eventually(() => store.ping(), 10_000);
    return store;
  };

  it('answers a grant only once the replica has it', async () => {
    const store = await open(1, 900);
    // A replica the machine is too busy to schedule confirms nothing in time: that grant is rolled back
    // and answered 503 (failing closed), so ask again until one is confirmed; what is checked is that a
    // grant answered 200 is on the replica.
    let ownerToken = '';
    await eventually(
      async () => {
        ownerToken = newOwnerToken();
        const grant = await store.acquire({ id: 'acked', ownerToken, ttlMs: 5_000, holder: null });
        expect(grant.acquired).toBe(true);
      },
      20_000,
      100,
    );
    // Read the replica straight after the answer: WAIT already confirmed it has the lease.
    const client = replica.client();
    try {
      expect(await lockField(client, new KeySpace('acks:').lock('acked'), 'o')).toBe(ownerToken);
    } finally {
      client.disconnect();
    }
    await eventually(async () => expect((await store.renew('acked', ownerToken, 5_000)).renewed).toBe(true), 4_000, 100);
  });

  it('rolls a grant back and answers 503 when fewer replicas confirm it in time', async () => {
    const store = await open(2);
    const ownerToken = newOwnerToken();
    await expect(store.acquire({ id: 'unacked', ownerToken, ttlMs: 5_000, holder: null })).rejects.toBeInstanceOf(StoreUnavailableError);
    // The lease was given back: nobody holds the lock, and the next grant is numbered above the rolled-back one.
    const plain = await open(0);
    expect(await plain.inspect('unacked')).toBeNull();
    const next = await plain.acquire({ id: 'unacked', ownerToken: newOwnerToken(), ttlMs: 5_000, holder: null });
    expect(next.acquired).toBe(true);
  });

  it('an unconfirmed renewal answers 503 but leaves the lease its holder relies on', async () => {
    const plain = await open(0);
    const strict = await open(2);
    const ownerToken = newOwnerToken();
    const grant = await plain.acquire({ id: 'renew-unacked', ownerToken, ttlMs: 5_000, holder: null });
    expect(grant.acquired).toBe(true);
    await expect(strict.renew('renew-unacked', ownerToken, 5_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    const state = await plain.inspect('renew-unacked');
    expect(state?.fencingToken).toBe(grant.acquired ? grant.fencingToken : -1);
  });
});
