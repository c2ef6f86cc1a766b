import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd/etcd-store.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { eventually } from '../helpers/redis-store.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * A change etcd applied whose reply was lost (the connection reset as the reply came back). The etcd3
 * client re-sends a call after such an error by itself; a transaction sent again then fails its compare
 * (the first one changed the record), and the engine read that as "not held": a release that freed the
 * lock answered not_owner, a lock set the caller held came back busy (held by nobody who knew it until
 * its TTL, its quota slots freed meanwhile). Such a call must not be re-sent: its outcome is unknown, a
 * 503, as on Redis.
 */
let cluster: EtcdCluster;
let proxy: FaultProxy;
let store: Worded<EtcdStore>;

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  proxy = await FaultProxy.start(cluster.members[0]?.clientPort as number);
  store = withWords(
    new EtcdStore({
      endpoints: [proxy.url.replace(/^redis:/, 'http:')],
      keyPrefix: 'lost/',
      commandTimeoutMs: 1_000,
      fenceGraceMs: 60_000,
    }),
  );
  await eventually(() => store.ping(), 10_000);
}, 60_000);
afterAll(async () => {
  await store?.close();
  await proxy?.close();
  await cluster?.stop();
});

/** Runs `call` with its reply lost: the connection is reset as the first reply comes back. */
async function withReplyLost(call: () => Promise<unknown>, skip = 0): Promise<unknown> {
  proxy.set({ kind: 'resetOnReply', skip });
  try {
    return await call().then(
      (answer) => answer,
      (err: unknown) => err,
    );
  } finally {
    // Fewer reply chunks than `skip` came: nothing was lost, and the next call is not to lose one either.
    proxy.heal();
  }
}

describe('etcd store: a transaction whose reply was lost', () => {
  // Which reply chunk is the write's depends on how HTTP/2 frames the calls before it (a release reads,
  // then writes): each of the first few is lost in turn, on a lock of its own.
  for (const skip of [0, 1, 2, 3, 4]) {
    it(`a release that freed the lock is never answered "not held" (reply chunk ${skip} lost)`, async () => {
      const id = `ns/release-${skip}`;
      const ownerToken = `r${skip}`.padEnd(22, 'r');
      expect(await store.acquire({ id, ownerToken, ttlMs: 30_000, holder: null })).toMatchObject({ acquired: true });
      const answer = await withReplyLost(() => store.release(id, ownerToken), skip);
      // Released (true), or unknown (a 503): never false while the lock was freed.
      if (answer === false) expect(await store.inspect(id), 'answered not held, yet the release freed the lock').not.toBeNull();
    }, 30_000);

    it(`a lock set the caller was granted is never answered busy (reply chunk ${skip} lost)`, async () => {
      const ownerToken = `s${skip}`.padEnd(22, 's');
      const ids = [`ns/a-${skip}`, `ns/b-${skip}`];
      const answer = await withReplyLost(() => store.acquireSet({ ids, ownerToken, ttlMs: 30_000, holder: null }), skip);
      if (typeof answer === 'object' && answer !== null && (answer as { acquired?: boolean }).acquired === false) {
        const renewed = await store.renewSet(ids, ownerToken, 30_000).catch(() => null);
        expect(renewed, "answered busy, yet the set is held under the caller's token").toMatchObject({ renewed: false });
      }
    }, 30_000);
  }
});
