import { setTimeout as sleep } from 'node:timers/promises';
import { KeySpace } from '../../src/store/redis/keys.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/domain/errors.js';
import { newOwnerToken } from '../../src/domain/lock-service.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { RedisServer } from '../helpers/redis-server.js';
import { lockFields } from '../helpers/lock-record.js';
import { withWords, type Worded } from '../helpers/store-words.js';

/**
 * Replies lost on a connection that then carries on (a proxy dropping bytes) put every later reply out
 * of step with its call. The store must never take another call's reply as its own grant, and must
 * get back to serving once the fault is over. Regression test for scenario 7 (network faults).
 */
describe('Redis store: replies dropped mid-stream', () => {
  let redis: RedisServer;
  let proxy: FaultProxy;
  let store: Worded<RedisStore>;
  const PREFIX = 'replydrop:';

  beforeAll(async () => {
    redis = await RedisServer.startShared();
    proxy = await FaultProxy.start(redis.port);
    store = withWords(new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 200, fenceGraceMs: 60_000 }));
    await waitUntilServing(store);
  });
  afterAll(async () => {
    await store?.close();
    await proxy?.close();
    await redis?.stop();
  });

  it('a call never takes another call’s reply as its own after a reply was lost', async () => {
    // Replies are matched to calls by order alone: the reply after a lost one answers the wrong call.
    // The timeout is well above a scheduling delay, so the calls below are all sent and answered before
    // the lost call times out, whatever the machine's load.
    const store = withWords(new RedisStore({ url: proxy.url, keyPrefix: PREFIX, commandTimeoutMs: 1_500, fenceGraceMs: 60_000 }));
    await waitUntilServing(store);
    const settle = <T>(p: Promise<T>) =>
      p.then(
        (value) => value,
        (err: unknown) => err,
      );
    const acquire = (key: string) => settle(store.acquire({ id: key, ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null }));
    // A lock held by someone else: the true answer to acquiring it is "held".
    await store.acquire({ id: 'taken', ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null });
    const dropped = proxy.stats.bytesDropped;
    proxy.set({ kind: 'dropReplies' });
    const lost = acquire('taken');
    // Its reply is gone for good; the connection carries on.
    await vi.waitFor(() => expect(proxy.stats.bytesDropped).toBeGreaterThan(dropped), { timeout: 10_000 });
    proxy.heal();
    // Two more calls, each in its own write (the calls of one turn of the event loop share one): with
    // replies out of step, the lost call reads the reply meant for the one asking for the held lock,
    // and that one reads the reply meant for the free one, a grant: without the echo check it would be
    // told it holds "taken".
    const asksHeld = acquire('taken');
    await new Promise((r) => setImmediate(r));
    const asksFree = acquire(`free-${newOwnerToken()}`);
    const answer = await asksHeld;
    expect(answer).toBeInstanceOf(StoreUnavailableError);
    // The echo check saw the replies out of step (on whichever call read a reply not its own), and the
    // store replaced the connection it could no longer trust: the calls still on it failed with it.
    const answers = [await lost, answer, await asksFree];
    expect(
      answers.some((a) => a instanceof StoreUnavailableError && /out of step/.test(a.message)),
      String(answers),
    ).toBe(true);
    expect(answers.every((a) => a instanceof StoreUnavailableError)).toBe(true);
    // It serves again.
    await waitUntilServing(store);
    await store.close();
  }, 30_000);

  it('never reports a grant that is not its own, and recovers', async () => {
    const checker = redis.client();
    let granted = 0;
    let wrongGrants = 0;
    let unavailable = 0;
    // Half the calls go to locks that are already held (the true answer is "held"), half to new ones;
    // the held ones are taken before any fault starts.
    // A timed-out call (a busy machine) is tried again: either way the key ends up held.
    for (let i = 0; i < 4; i++) {
      await vi.waitFor(() => store.acquire({ id: `held${i}`, ownerToken: newOwnerToken(), ttlMs: 60_000, holder: null }), {
        timeout: 10_000,
      });
    }
    const deadline = Date.now() + 3_000;
    // Short bursts of dropped replies while acquires on distinct keys keep flowing.
    const faults = (async () => {
      while (Date.now() < deadline - 500) {
        await sleep(100);
        proxy.set({ kind: 'dropReplies' });
        await sleep(5 + Math.random() * 10);
        proxy.heal();
      }
    })();
    let n = 0;
    const worker = async () => {
      while (Date.now() < deadline) {
        const i = n++;
        const key = i % 2 === 0 ? `held${i % 4}` : `new${i}`;
        const ownerToken = newOwnerToken();
        try {
          const outcome = await store.acquire({ id: key, ownerToken, ttlMs: 60_000, holder: null });
          if (outcome.acquired) {
            granted++;
            // The lease Redis holds for this key must be this caller's, with the token it was told.
            const { o: owner, t: token } = await lockFields(checker, new KeySpace(PREFIX).lock(key));
            if (owner !== ownerToken || Number(token) !== outcome.fencingToken) wrongGrants++;
          }
        } catch {
          unavailable++;
          await sleep(5);
        }
      }
    };
    await Promise.all([faults, ...Array.from({ length: 16 }, worker)]);
    checker.disconnect();
    console.log(`[faults] reply drops: ${granted} grants, ${wrongGrants} not the caller's, ${unavailable} unavailable`);
    expect(wrongGrants).toBe(0);
    expect(granted).toBeGreaterThan(0);
    expect(unavailable).toBeGreaterThan(0);
    await waitUntilServing(store);
  }, 30_000);
});

async function waitUntilServing(store: Worded<RedisStore>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      await store.ping();
      return;
    } catch {
      await sleep(50);
    }
  }
  throw new Error('the store never served again');
}
