import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import type { LeaseService } from '../../src/domain/lease-service.js';
import type { LeaseKind } from '../../src/domain/lease-store.js';
import { KeySpace } from '../../src/store/redis/keys.js';
import { everyStore } from '../helpers/both-stores.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * POST /v1/{locks,semaphores,rwlocks}/{key}/release-request: an operator asks one lease's holder to let
 * go. Nothing is evicted; the holder's renewals answer releaseRequested until the lease ends; a request
 * naming a lease that is gone never reaches the newer holder (409 holder_changed); inspect and watch
 * answers show it on the lease asked. On every store (embedded, Redis, etcd, Redis Cluster).
 */
const { keys, B, ADMIN } = twoTeamsAndAdmin();

const STORES = everyStore('rr');
const SHARDS = new KeySpace('');

type Grant = { ownerToken: string; fencingToken: number };

describe.each(STORES)('release requests on the %s store', (_name, openStore) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ store: await openStore(), auth: { mode: 'keys', keyring: keys.keyring() } });
  });
  afterAll(async () => {
    await t.close();
  });

  const post = (url: string, headers: Record<string, string>, payload: object) => t.app.inject({ method: 'POST', url, headers, payload });
  const ask = (path: string, key: string, payload: object, headers = ADMIN) =>
    post(`/v1/${path}/${key}/release-request?namespace=team-b`, headers, payload);

  it('a lock: asked by fencing token, carried by every renewal, the lease untouched', async () => {
    const key = `job-${randomUUID().slice(0, 8)}`;
    const grant = (await post(`/v1/locks/${key}/acquire`, B, { ttlMs: 60_000, holder: 'w1' })).json<Grant>();
    const plain = await post(`/v1/locks/${key}/renew`, B, { ownerToken: grant.ownerToken, ttlMs: 60_000 });
    expect(plain.json()).not.toHaveProperty('releaseRequested');

    const before = Date.now();
    const asked = await ask('locks', key, { fencingToken: grant.fencingToken, reason: 'deploy' });
    expect(asked.statusCode, asked.body).toBe(200);
    const body = asked.json<{ releaseRequested: { at: string } }>();
    expect(body).toMatchObject({
      namespace: 'team-b',
      key,
      fencingToken: grant.fencingToken,
      releaseRequested: { by: 'ops-key', reason: 'deploy' },
    });
    expect(Date.parse(body.releaseRequested.at)).toBeGreaterThanOrEqual(before - 50);

    const renewed = await post(`/v1/locks/${key}/renew`, B, { ownerToken: grant.ownerToken, ttlMs: 60_000 });
    expect(renewed.statusCode).toBe(200);
    expect(renewed.json()).toMatchObject({ fencingToken: grant.fencingToken, releaseRequested: body.releaseRequested });
    expect((await t.app.inject({ method: 'GET', url: `/v1/locks/${key}`, headers: B })).json()).toMatchObject({ held: true, holder: 'w1' });

    // Released: the next holder starts without it, and the old token's request is a 409 naming it.
    expect((await post(`/v1/locks/${key}/release`, B, { ownerToken: grant.ownerToken })).statusCode).toBe(200);
    const newer = (await post(`/v1/locks/${key}/acquire`, B, { ttlMs: 60_000 })).json<Grant>();
    const changed = await ask('locks', key, { fencingToken: grant.fencingToken });
    expect(changed.statusCode).toBe(409);
    expect(changed.headers['content-type']).toContain('application/problem+json');
    expect(changed.headers['retry-after']).toBeUndefined();
    expect(changed.json()).toMatchObject({ code: 'holder_changed' });
    expect(changed.json<{ detail: string }>().detail).toContain(String(newer.fencingToken));
    const next = await post(`/v1/locks/${key}/renew`, B, { ownerToken: newer.ownerToken, ttlMs: 60_000 });
    expect(next.json()).not.toHaveProperty('releaseRequested');
  });

  it('semaphores, read/write locks and lock sets: the renewal of the lease asked carries it, no other', async () => {
    const sem = `sem-${randomUUID().slice(0, 8)}`;
    const p1 = (await post(`/v1/semaphores/${sem}/acquire`, B, { limit: 2, ttlMs: 60_000 })).json<Grant>();
    const p2 = (await post(`/v1/semaphores/${sem}/acquire`, B, { limit: 2, ttlMs: 60_000 })).json<Grant>();
    expect((await ask('semaphores', sem, { fencingToken: p2.fencingToken })).statusCode).toBe(200);
    const r1 = await post(`/v1/semaphores/${sem}/renew`, B, { ownerToken: p1.ownerToken, ttlMs: 60_000 });
    const r2 = await post(`/v1/semaphores/${sem}/renew`, B, { ownerToken: p2.ownerToken, ttlMs: 60_000 });
    expect(r1.json()).not.toHaveProperty('releaseRequested');
    expect(r2.json()).toMatchObject({ releaseRequested: { by: 'ops-key', reason: null } });

    const rw = `rw-${randomUUID().slice(0, 8)}`;
    const reader = (await post(`/v1/rwlocks/${rw}/acquire`, B, { mode: 'read', ttlMs: 60_000 })).json<Grant>();
    expect((await ask('rwlocks', rw, { fencingToken: reader.fencingToken, reason: 'schema change' })).statusCode).toBe(200);
    const renewed = await post(`/v1/rwlocks/${rw}/renew`, B, { ownerToken: reader.ownerToken, ttlMs: 60_000 });
    expect(renewed.json()).toMatchObject({ releaseRequested: { reason: 'schema change' } });

    // Two names in one shard of the Redis key layout: on a Cluster a lock set is one hash slot.
    const tag = randomUUID().slice(0, 8);
    const keysOfSet: string[] = [];
    for (let i = 0; keysOfSet.length < 2; i++)
      if (SHARDS.shardOf(`s${i}-${tag}`) === SHARDS.shardOf(`s0-${tag}`)) keysOfSet.push(`s${i}-${tag}`);
    const set = (await post('/v1/lock-sets/acquire', B, { keys: keysOfSet, ttlMs: 60_000 })).json<{
      ownerToken: string;
      locks: Array<{ key: string; fencingToken: number }>;
    }>();
    const second = set.locks[1] as { key: string; fencingToken: number };
    expect((await ask('locks', second.key, { fencingToken: second.fencingToken, reason: 'rebalance' })).statusCode).toBe(200);
    const setRenewed = await post('/v1/lock-sets/renew', B, { ownerToken: set.ownerToken, keys: keysOfSet, ttlMs: 60_000 });
    expect(setRenewed.statusCode, setRenewed.body).toBe(200);
    expect(setRenewed.json()).toMatchObject({ releaseRequested: { reason: 'rebalance' } });
  });

  /** Blocking queries in place on this instance for `kind` (the lease engine's own count; not part of the API). */
  const watchers = (kind: LeaseKind) => {
    const engine = kind === 'lock' ? t.locks : kind === 'semaphore' ? t.permits.semaphores : t.permits.rwlocks;
    return (engine as unknown as { lease: LeaseService }).lease.changesOf(kind).size;
  };
  const KIND = { locks: 'lock', semaphores: 'semaphore', rwlocks: 'rwlock' } as const;

  it('inspect and watch answers show the request on the lease asked, for every primitive; a blocking query answers it', async () => {
    const get = (url: string) => t.app.inject({ method: 'GET', url, headers: B });
    type Status = { index: number; releaseRequested?: unknown; holders?: Array<{ fencingToken: number; releaseRequested?: unknown }> };
    /** The request shown on the lease with `fencingToken` (a lock's held state, or that holder of a permit key). */
    const shownOn = (status: Status, fencingToken: number) =>
      status.holders === undefined
        ? status.releaseRequested
        : status.holders.find((h) => h.fencingToken === fencingToken)?.releaseRequested;

    for (const [path, body] of [
      ['locks', {}],
      ['semaphores', { limit: 2 }],
      ['rwlocks', { mode: 'read' }],
    ] as const) {
      const key = `shown-${randomUUID().slice(0, 8)}`;
      const grant = (await post(`/v1/${path}/${key}/acquire`, B, { ttlMs: 60_000, holder: 'asked', ...body })).json<Grant>();
      const beside = path === 'locks' ? null : (await post(`/v1/${path}/${key}/acquire`, B, { ttlMs: 60_000, ...body })).json<Grant>();
      const before = (await get(`/v1/${path}/${key}`)).json<Status>();
      expect(JSON.stringify(before), path).not.toContain('releaseRequested');

      // A watcher waits on the current index (in place before the request: its first read is done); the
      // request does not end its wait (no change of holder)...
      // (An inject starts when awaited: Promise.resolve sends it now.)
      const watching = Promise.resolve(get(`/v1/${path}/${key}?index=${before.index}&waitMs=1000`));
      await expect.poll(() => watchers(KIND[path]), { timeout: 10_000, interval: 5 }).toBe(1);
      const asked = await ask(path, key, { fencingToken: grant.fencingToken, reason: 'rebalance' });
      expect(asked.statusCode, asked.body).toBe(200);
      const expected = asked.json<{ releaseRequested: object }>().releaseRequested;
      // ...and its answer, when the wait runs out, shows it.
      const watched = (await watching).json<Status>();
      expect(watched.index, path).toBe(before.index);
      expect(shownOn(watched, grant.fencingToken), path).toEqual(expected);

      const now = (await get(`/v1/${path}/${key}`)).json<Status>();
      expect(shownOn(now, grant.fencingToken), path).toEqual(expected);
      expect(now.index, path).toBe(before.index);
      if (beside) expect(shownOn(now, beside.fencingToken), path).toBeUndefined();
      const atOnce = (await get(`/v1/${path}/${key}?index=${before.index + 1}&waitMs=10000`)).json<Status>();
      expect(shownOn(atOnce, grant.fencingToken), path).toEqual(expected);

      // The next change (its release) wakes a watcher, whose answer no longer has it.
      const next = Promise.resolve(get(`/v1/${path}/${key}?index=${before.index}&waitMs=30000`));
      await expect.poll(() => watchers(KIND[path]), { timeout: 10_000, interval: 5 }).toBe(1);
      expect((await post(`/v1/${path}/${key}/release`, B, { ownerToken: grant.ownerToken })).statusCode).toBe(200);
      const changed = (await next).json<Status>();
      expect(changed.index, path).not.toBe(before.index);
      expect(JSON.stringify(changed), path).not.toContain('releaseRequested');
      if (beside) await post(`/v1/${path}/${key}/release`, B, { ownerToken: beside.ownerToken });
    }
  });

  it('is an admin route, and refuses a malformed request or a key nobody holds', async () => {
    const key = `guarded-${randomUUID().slice(0, 8)}`;
    const grant = (await post(`/v1/locks/${key}/acquire`, B, { ttlMs: 60_000 })).json<Grant>();
    // The holder's team key is not an operator's.
    expect((await ask('locks', key, { fencingToken: grant.fencingToken }, B)).json()).toMatchObject({ code: 'forbidden' });
    expect((await ask('locks', `nobody-${key}`, { fencingToken: 1 })).json()).toMatchObject({ code: 'not_found', status: 404 });
    for (const bad of [
      {},
      { fencingToken: -1 },
      { fencingToken: grant.fencingToken, reason: 'x'.repeat(201) },
      { fencingToken: 1, extra: 1 },
    ]) {
      const refused = await ask('locks', key, bad);
      expect(refused.statusCode, JSON.stringify(bad)).toBe(400);
      expect(refused.json()).toMatchObject({ code: 'invalid_request' });
    }
    const noNamespace = await post(`/v1/locks/${key}/release-request`, ADMIN, { fencingToken: grant.fencingToken });
    expect(noNamespace.json()).toMatchObject({ code: 'invalid_request' });
    const renewed = await post(`/v1/locks/${key}/renew`, B, { ownerToken: grant.ownerToken, ttlMs: 60_000 });
    expect(renewed.json()).not.toHaveProperty('releaseRequested');
  });
});
