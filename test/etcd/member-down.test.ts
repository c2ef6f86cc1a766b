import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * One member of three down (the cluster keeps its majority): a call the etcd client could not even send
 * to that member (connection refused, or refused by the member's open breaker) goes to another member.
 * Only a call that may have reached etcd is not sent again (test/etcd/lost-reply.test.ts); with no
 * retry at all, every call routed to the dead member was a 503.
 */
let cluster: EtcdCluster;
let store: Worded<EtcdStore>;

beforeAll(async () => {
  cluster = await EtcdCluster.start(3);
  store = withWords(
    new EtcdStore({ endpoints: cluster.endpoints, keyPrefix: 'member-down/', commandTimeoutMs: 2_000, fenceGraceMs: 60_000 }),
  );
  await eventually(() => store.ping(), 20_000);
}, 90_000);
afterAll(async () => {
  await store?.close();
  await cluster?.stop();
});

describe('etcd store: one member of three down', () => {
  it('every acquire and release is answered, none refused for the dead member', async () => {
    const leader = await cluster.waitForLeader(20_000);
    const follower = cluster.members.find((m) => m !== leader);
    if (follower === undefined) throw new Error('no follower');
    await cluster.kill(follower);
    const failures: string[] = [];
    for (let i = 0; i < 60; i++) {
      const ownerToken = `m${i}`.padEnd(22, 'm');
      const id = `ns/k-${i % 7}`;
      try {
        const got = await store.acquire({ id, ownerToken, ttlMs: 10_000, holder: null });
        expect(got).toMatchObject({ acquired: true });
        expect(await store.release(id, ownerToken)).toBe(true);
      } catch (err) {
        failures.push(`${i}: ${(err as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
  }, 90_000);
});
