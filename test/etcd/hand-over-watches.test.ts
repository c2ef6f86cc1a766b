import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Etcd3, type Watcher } from 'etcd3';
import { HandOverWatches } from '../../src/store/etcd/etcd-watches.js';
import { EtcdCluster } from '../helpers/etcd-cluster.js';

/**
 * A waiter of this instance learns that another instance handed it a lease through a watch on the
 * record that changed: one watch per record with waiters here, dropped once nobody here waits on it.
 */
const PREFIX = 'hand-over-watches/';
let cluster: EtcdCluster;
let client: Etcd3;

beforeAll(async () => {
  cluster = await EtcdCluster.startShared(1);
  client = new Etcd3({ hosts: cluster.endpoints });
}, 60_000);
afterAll(async () => {
  client?.close();
  await cluster?.stop();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** A room whose waiters are set by the test, recording every hand-over it is told of. */
function room() {
  const waiting = new Set<string>();
  const granted: string[] = [];
  return { waiting, granted, hasWaitersOn: (roomKey: string) => waiting.has(roomKey) };
}

function watchesOn(r: ReturnType<typeof room>) {
  return new HandOverWatches(client, { hasWaitersOn: (k) => r.hasWaitersOn(k), granted: (id) => r.granted.push(id) });
}

const handedTo = (value: Buffer) => (JSON.parse(value.toString('utf8')) as { g: string[] }).g;

/**
 * Resolves once every watch event of the puts made so far has been delivered: a watch of its own on the
 * same client (so on the same stream) sees a later put. etcd sends each revision's events before the next's.
 */
async function delivered(): Promise<void> {
  const marker = `${PREFIX}marker`;
  const w = await client.watch().key(marker).create();
  const seen = new Promise<void>((resolve) => w.once('put', () => resolve()));
  await client.put(marker).value('x');
  await seen;
  await w.cancel();
}

/** The sweep the watches scheduled for `roomKey`'s record, run now rather than in 5 s. */
function sweepOf(spy: { mock: { calls: unknown[][] } }, index: number): () => void {
  const call = spy.mock.calls[index];
  if (!call) throw new Error('no sweep was scheduled');
  return call[0] as () => void;
}

describe('etcd hand-over watches', () => {
  it('tells the room of each waiter a put of the record hands a lease to, once it is live', async () => {
    const r = room();
    const watches = watchesOn(r);
    const key = `${PREFIX}lock/ns/a`;
    r.waiting.add('lock:ns/a');
    await watches.open('lock:ns/a', Buffer.from(key), handedTo);
    await client.put(key).value(JSON.stringify({ g: ['w1', 'w2'] }));
    await delivered();
    expect(r.granted).toEqual(['w1', 'w2']);
    r.waiting.clear();
    await watches.closeAll();
  });

  it('keeps one watch per record however many callers wait on it', async () => {
    const r = room();
    const watches = watchesOn(r);
    const key = `${PREFIX}lock/ns/b`;
    r.waiting.add('lock:ns/b');
    const first = watches.open('lock:ns/b', Buffer.from(key), handedTo);
    const second = watches.open('lock:ns/b', Buffer.from(key), handedTo);
    expect(second).toBe(first);
    await Promise.all([first, second]);
    await client.put(key).value(JSON.stringify({ g: ['w3'] }));
    await delivered();
    // A second watch would tell the room of the same hand-over twice.
    expect(r.granted).toEqual(['w3']);
    r.waiting.clear();
    await watches.closeAll();
  });

  it('keeps the watch while callers here still wait on the record, and drops it once none does', async () => {
    const interval = vi.spyOn(globalThis, 'setInterval');
    const r = room();
    const watches = watchesOn(r);
    const key = `${PREFIX}pool/semaphore/ns/c`;
    r.waiting.add('semaphore:ns/c');
    const watch = watches.open('semaphore:ns/c', Buffer.from(key), handedTo);
    await watch;
    const sweep = sweepOf(interval, 0);
    interval.mockRestore();

    sweep();
    await client.put(key).value(JSON.stringify({ g: ['w4'] }));
    await delivered();
    expect(r.granted).toEqual(['w4']);
    expect(watches.open('semaphore:ns/c', Buffer.from(key), handedTo)).toBe(watch);

    r.waiting.delete('semaphore:ns/c');
    const w = (await watch) as Watcher;
    let ended = false;
    w.once('end', () => (ended = true));
    sweep();
    // The sweep cancels it: etcd confirms the cancel with the watch's end.
    await vi.waitFor(() => expect(ended).toBe(true), { timeout: 5_000 });
    await client.put(key).value(JSON.stringify({ g: ['w5'] }));
    await delivered();
    expect(r.granted).toEqual(['w4']);

    // A caller that queues again gets a new watch.
    r.waiting.add('semaphore:ns/c');
    const again = watches.open('semaphore:ns/c', Buffer.from(key), handedTo);
    expect(again).not.toBe(watch);
    await again;
    await client.put(key).value(JSON.stringify({ g: ['w6'] }));
    await delivered();
    expect(r.granted).toEqual(['w4', 'w6']);
    r.waiting.clear();
    await watches.closeAll();
  });

  it('cancels every watch when the store closes', async () => {
    const r = room();
    const watches = watchesOn(r);
    const keys = [`${PREFIX}lock/ns/d`, `${PREFIX}lock/ns/e`];
    r.waiting.add('lock:ns/d').add('lock:ns/e');
    await watches.open('lock:ns/d', Buffer.from(keys[0]!), handedTo);
    await watches.open('lock:ns/e', Buffer.from(keys[1]!), handedTo);
    await watches.closeAll();
    for (const key of keys) {
      await client.put(key).value(JSON.stringify({ g: [`after-${key}`] }));
      await delivered();
    }
    expect(r.granted).toEqual([]);
    r.waiting.clear();
  });
});
