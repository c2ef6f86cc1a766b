import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../src/domain/lease-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { ReleasesInFlight } from '../../src/http/releases-in-flight.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { eventually } from '../helpers/redis-store.js';

/**
 * A waiting acquire of a key whose release is in the store on this instance is sent to the store only
 * once that release has settled (releases-in-flight.ts); other keys, and acquires that do not wait, are
 * not held. The store here holds each release until the test lets it go.
 */
class GatedStore extends MemoryStore {
  /** What reached the store, in order: `acquire <key> <waitMs>`, `release <key>`, `released <key>`. */
  readonly calls: string[] = [];
  private gates: Array<(fail: boolean) => void> = [];

  /** The domain's port, gated (the services speak only it): a lock's acquires logged, its releases held. */
  override readonly leases: LeaseStore = this.gatedOver((this as MemoryStore).leases);

  private gatedOver(own: LeaseStore): LeaseStore {
    return {
      ...own,
      acquire: (request) => {
        if (request.kind === 'lock') this.calls.push(`acquire ${request.ids[0]} ${request.waitMs ?? 0}`);
        return own.acquire(request);
      },
      release: async (kind, keys, ownerToken) => {
        if (kind !== 'lock') return own.release(kind, keys, ownerToken);
        this.calls.push(`release ${keys[0]}`);
        const fail = await new Promise<boolean>((resolve) => this.gates.push(resolve));
        this.calls.push(`released ${keys[0]}`);
        if (fail) throw new Error('store down');
        return own.release(kind, keys, ownerToken);
      },
    };
  }

  get held(): number {
    return this.gates.length;
  }

  /** Lets the oldest held release go on (or fail). */
  open(fail = false): void {
    this.gates.shift()?.(fail);
  }
}

let t: TestApp;
let store: GatedStore;

beforeAll(async () => {
  store = new GatedStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  t = await buildTestApp({ store });
});
afterAll(async () => {
  await t.close();
});

const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });
const acquireCalls = (key: string) => store.calls.filter((c) => c.startsWith('acquire ') && c.includes(key));

describe('a waiting acquire of a key being released on this instance', () => {
  it('is sent after the release settles; other keys and acquires that do not wait are not held', async () => {
    const held = await post('/v1/locks/rif-a/acquire', { ttlMs: 30_000 });
    expect(held.statusCode).toBe(200);
    const release = post('/v1/locks/rif-a/release', { ownerToken: held.json<{ ownerToken: string }>().ownerToken });
    await eventually(async () => expect(store.held).toBe(1), 5_000);

    const waiting = post('/v1/locks/rif-a/acquire', { ttlMs: 30_000, waitMs: 5_000 });
    const noWait = post('/v1/locks/rif-a/acquire', { ttlMs: 30_000 });
    const otherKey = post('/v1/locks/rif-b/acquire', { ttlMs: 30_000, waitMs: 5_000 });
    // Both went through while the release is still in the store: it is held by nothing but its key and waitMs.
    expect((await otherKey).statusCode).toBe(200);
    expect((await noWait).statusCode).toBe(409);
    expect(acquireCalls('rif-a').map((c) => c.endsWith(' 0'))).toEqual([true, true]);

    store.open();
    expect((await release).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);
    const order = store.calls.filter((c) => c.includes('rif-a'));
    // The waiting acquire reached the store only after the release came back from it.
    expect(order.slice(-2)).toEqual([expect.stringMatching(/^released /), expect.stringMatching(/^acquire .* 5000$/)]);
  });

  it('is sent after a release that fails too, and the key is not held back afterwards', async () => {
    const held = await post('/v1/locks/rif-c/acquire', { ttlMs: 30_000 });
    const token = held.json<{ ownerToken: string }>().ownerToken;
    const release = post('/v1/locks/rif-c/release', { ownerToken: token });
    await eventually(async () => expect(store.held).toBe(1), 5_000);
    const waiting = post('/v1/locks/rif-c/acquire', { ttlMs: 30_000, waitMs: 5_000 });
    const noWait = post('/v1/locks/rif-c/acquire', { ttlMs: 30_000 });
    expect((await noWait).statusCode).toBe(409);
    expect(acquireCalls('rif-c')).toHaveLength(2);

    store.open(true);
    expect((await release).statusCode).toBe(500);
    // The failed release left the lock held: the waiting acquire reached the store and queues.
    await eventually(async () => expect(acquireCalls('rif-c')).toHaveLength(3), 5_000);
    const again = post('/v1/locks/rif-c/release', { ownerToken: token });
    await eventually(async () => expect(store.held).toBe(1), 5_000);
    store.open();
    expect((await again).statusCode).toBe(200);
    expect((await waiting).statusCode).toBe(200);

    // Nothing in flight any more: a waiting acquire of the key is sent at once (queued behind the new holder).
    const later = post('/v1/locks/rif-c/acquire', { ttlMs: 30_000, waitMs: 100 });
    await eventually(async () => expect(acquireCalls('rif-c')).toHaveLength(4), 5_000);
    expect((await later).statusCode).toBe(409);
  });
});

describe('the releases in flight', () => {
  it('keep an entry only while its release runs, failed or not, and the latest of one key', async () => {
    const releases = new ReleasesInFlight();
    let finish: Array<(ok: boolean) => void> = [];
    const run = () => new Promise<boolean>((resolve, reject) => finish.push((ok) => (ok ? resolve(true) : reject(new Error('down')))));
    const first = releases.track('ns', 'k', run);
    const second = releases.track('ns', 'k', run);
    const other = releases.track('ns', 'other', run);
    expect(releases.size).toBe(2);
    expect(releases.settledOf('ns', 'nope')).toBeUndefined();
    const [endFirst, endSecond, endOther] = finish;
    finish = [];
    endFirst?.(false);
    await expect(first).rejects.toThrow('down');
    // The first one ended; the second, of the same key, is still in flight.
    expect(releases.settledOf('ns', 'k')).toBeDefined();
    endOther?.(false);
    await expect(other).rejects.toThrow('down');
    endSecond?.(true);
    await expect(second).resolves.toBe(true);
    await Promise.resolve();
    expect(releases.size).toBe(0);
    expect(releases.settledOf('ns', 'k')).toBeUndefined();
  });
});
