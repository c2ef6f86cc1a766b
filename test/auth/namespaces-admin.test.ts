import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { embeddedAndRedis } from '../helpers/both-stores.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Namespaces isolate teams, and the admin routes see across them, on both stores: the same lock name
 * in two namespaces is two locks; a team's key can neither see nor touch another team's lock.
 */
const { keys, A, B, ADMIN } = twoTeamsAndAdmin();

const STORES = embeddedAndRedis('ns');

describe.each(STORES)('namespaces and admin routes on the %s store', (_name, openStore) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ store: await openStore(), auth: { mode: 'keys', keyring: keys.keyring() } });
  });
  afterAll(async () => {
    await t.close();
  });

  const post = (url: string, headers: Record<string, string>, payload: object) => t.app.inject({ method: 'POST', url, headers, payload });
  const get = (url: string, headers: Record<string, string>) => t.app.inject({ method: 'GET', url, headers });

  it('team A and team B take the same lock name at once: two locks, independent tokens, no crossing over', async () => {
    const name = `job-1-${randomUUID().slice(0, 8)}`;
    const [a, b] = await Promise.all([
      post(`/v1/locks/${name}/acquire`, A, { ttlMs: 30_000, holder: 'a-worker' }),
      post(`/v1/locks/${name}/acquire`, B, { ttlMs: 30_000, holder: 'b-worker' }),
    ]);
    expect(a.statusCode).toBe(200);
    expect(b.statusCode).toBe(200);
    const grantA = a.json<{ ownerToken: string; fencingToken: number; key: string }>();
    const grantB = b.json<{ ownerToken: string; fencingToken: number; key: string }>();
    expect(grantA.key).toBe(name);
    expect(grantB.key).toBe(name);
    expect(grantA.ownerToken).not.toBe(grantB.ownerToken);

    // A cannot release or renew B's lock, even holding B's owner token: in A's namespace it is not a lease.
    expect((await post(`/v1/locks/${name}/release`, A, { ownerToken: grantB.ownerToken })).json()).toMatchObject({ code: 'not_owner' });
    expect((await post(`/v1/locks/${name}/renew`, A, { ownerToken: grantB.ownerToken, ttlMs: 60_000 })).json()).toMatchObject({
      code: 'not_owner',
    });
    // A's inspect sees A's own lock, never B's (a namespace parameter on a lock route changes nothing).
    for (const url of [`/v1/locks/${name}`, `/v1/locks/${name}?namespace=team-b`]) {
      const seen = (await get(url, A)).json<{ holder: string; fencingToken: number }>();
      expect(seen).toMatchObject({ holder: 'a-worker', fencingToken: grantA.fencingToken });
    }
    // A cannot list anything (no admin scope).
    expect((await get('/v1/locks?namespace=team-b', A)).statusCode).toBe(403);
    // B's lock is intact, and B's own calls work.
    expect((await get(`/v1/locks/${name}`, B)).json()).toMatchObject({ holder: 'b-worker', fencingToken: grantB.fencingToken });
    expect((await post(`/v1/locks/${name}/renew`, B, { ownerToken: grantB.ownerToken, ttlMs: 30_000 })).statusCode).toBe(200);

    // Independent fencing sequences: A taking and giving back its lock many times leaves B's untouched.
    await post(`/v1/locks/${name}/release`, A, { ownerToken: grantA.ownerToken });
    for (let i = 0; i < 20; i++) {
      const again = (await post(`/v1/locks/${name}/acquire`, A, { ttlMs: 5_000 })).json<{ ownerToken: string }>();
      await post(`/v1/locks/${name}/release`, A, { ownerToken: again.ownerToken });
    }
    expect((await get(`/v1/locks/${name}`, B)).json()).toMatchObject({ fencingToken: grantB.fencingToken });
    await post(`/v1/locks/${name}/release`, B, { ownerToken: grantB.ownerToken });
  });

  it('a cursor this route did not return is a 400 on cursor, and the store stays up', async () => {
    for (const cursor of ['abc', 'bm90IGEgY3Vyc29y', 'eAB5']) {
      const res = await get(`/v1/locks?cursor=${cursor}`, ADMIN);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json()).toMatchObject({ code: 'invalid_request', errors: [{ field: 'cursor' }] });
    }
    expect((await get('/readyz', {})).statusCode).toBe(200);
    expect((await get('/v1/locks', ADMIN)).statusCode).toBe(200);
  });

  it('admin lists held locks per namespace or across all, with holder and token, never owner tokens', async () => {
    const prefix = `list-${randomUUID().slice(0, 8)}-`;
    const ownerTokens: string[] = [];
    for (let i = 0; i < 5; i++) {
      const a = (await post(`/v1/locks/${prefix}${i}/acquire`, A, { ttlMs: 30_000, holder: `a${i}` })).json<{ ownerToken: string }>();
      const b = (await post(`/v1/locks/${prefix}${i}/acquire`, B, { ttlMs: 30_000, holder: `b${i}` })).json<{ ownerToken: string }>();
      ownerTokens.push(a.ownerToken, b.ownerToken);
    }
    type Page = { locks: Array<{ namespace: string; key: string; holder: string; fencingToken: number }>; nextCursor: string | null };
    const listAll = async (query: string) => {
      const seen: Page['locks'] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 200; page++) {
        const res = await get(`/v1/locks?${query}${query ? '&' : ''}limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, ADMIN);
        expect(res.statusCode, res.body).toBe(200);
        for (const token of ownerTokens) expect(res.body).not.toContain(token);
        const body = res.json<Page>();
        seen.push(...body.locks);
        cursor = body.nextCursor;
        if (cursor === null) break;
      }
      // The Redis store may show a lock twice (SCAN); a client dedupes by namespace and key.
      return new Map(seen.map((l) => [`${l.namespace}/${l.key}`, l.holder]));
    };
    const teamB = await listAll(`namespace=team-b&prefix=${prefix}`);
    expect([...teamB.entries()].sort()).toEqual([0, 1, 2, 3, 4].map((i) => [`team-b/${prefix}${i}`, `b${i}`]));
    const everyone = await listAll('');
    for (let i = 0; i < 5; i++) {
      expect(everyone.get(`team-a/${prefix}${i}`)).toBe(`a${i}`);
      expect(everyone.get(`team-b/${prefix}${i}`)).toBe(`b${i}`);
    }
    // A key prefix without a namespace is refused rather than guessed at.
    expect((await get(`/v1/locks?prefix=${prefix}`, ADMIN)).json()).toMatchObject({ code: 'invalid_request' });
  });

  it('force release: audit line, the evicted holder gets 409 on renew and release, the next token is higher', async () => {
    const name = `stuck-${randomUUID().slice(0, 8)}`;
    const a = (await post(`/v1/locks/${name}/acquire`, A, { ttlMs: 60_000, holder: 'a-stuck' })).json<{ ownerToken: string }>();
    const b = (await post(`/v1/locks/${name}/acquire`, B, { ttlMs: 60_000, holder: 'b-stuck' })).json<{
      ownerToken: string;
      fencingToken: number;
    }>();

    const res = await t.app.inject({ method: 'DELETE', url: `/v1/locks/${name}?namespace=team-b`, headers: ADMIN });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      namespace: 'team-b',
      key: name,
      released: true,
      evicted: { holder: 'b-stuck', fencingToken: b.fencingToken },
    });
    const audit = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.audit === 'force_release' && l.key === name);
    expect(audit).toMatchObject({
      actor: 'ops-key',
      namespace: 'team-b',
      evictedHolder: 'b-stuck',
      evictedFencingToken: b.fencingToken,
    });
    expect(typeof audit?.at).toBe('string');
    expect(JSON.stringify(audit)).not.toContain(b.ownerToken);

    // The evicted holder is out for good.
    expect((await post(`/v1/locks/${name}/renew`, B, { ownerToken: b.ownerToken, ttlMs: 60_000 })).statusCode).toBe(409);
    expect((await post(`/v1/locks/${name}/release`, B, { ownerToken: b.ownerToken })).statusCode).toBe(409);
    const next = await post(`/v1/locks/${name}/acquire`, B, { ttlMs: 5_000 });
    expect(next.statusCode).toBe(200);
    expect(next.json<{ fencingToken: number }>().fencingToken).toBeGreaterThan(b.fencingToken);
    // Team A's lock of the same name was not touched.
    expect((await get(`/v1/locks/${name}`, A)).json()).toMatchObject({ held: true, holder: 'a-stuck' });
    expect((await post(`/v1/locks/${name}/release`, A, { ownerToken: a.ownerToken })).statusCode).toBe(200);

    // Nothing held: 404, nothing changed; the namespace is required.
    const missing = await t.app.inject({ method: 'DELETE', url: `/v1/locks/${name}-free?namespace=team-b`, headers: ADMIN });
    expect(missing.statusCode).toBe(404);
    const noNs = await t.app.inject({ method: 'DELETE', url: `/v1/locks/${name}`, headers: ADMIN });
    expect(noNs.json()).toMatchObject({ code: 'invalid_request' });
  });

  it('force release with ?fencingToken= evicts only the lease shown: 409 holder_changed when it changed, for every primitive', async () => {
    const del = (url: string) => t.app.inject({ method: 'DELETE', url, headers: ADMIN });
    type Grant = { ownerToken: string; fencingToken: number };
    // A lock: the lease an operator saw is replaced before the click.
    const name = `shown-${randomUUID().slice(0, 8)}`;
    const shown = (await post(`/v1/locks/${name}/acquire`, B, { ttlMs: 60_000, holder: 'shown' })).json<Grant>();
    expect((await post(`/v1/locks/${name}/release`, B, { ownerToken: shown.ownerToken })).statusCode).toBe(200);
    const newer = (await post(`/v1/locks/${name}/acquire`, B, { ttlMs: 60_000, holder: 'newer' })).json<Grant>();
    const changed = await del(`/v1/locks/${name}?namespace=team-b&fencingToken=${shown.fencingToken}`);
    expect(changed.statusCode, changed.body).toBe(409);
    expect(changed.headers['content-type']).toContain('application/problem+json');
    expect(changed.json()).toMatchObject({ code: 'holder_changed', status: 409 });
    expect(changed.json<{ detail: string }>().detail).toContain(String(newer.fencingToken));
    expect((await get(`/v1/locks/${name}`, B)).json()).toMatchObject({ held: true, holder: 'newer', fencingToken: newer.fencingToken });
    const evicted = await del(`/v1/locks/${name}?namespace=team-b&fencingToken=${newer.fencingToken}`);
    expect(evicted.json()).toMatchObject({ released: true, evicted: { holder: 'newer', fencingToken: newer.fencingToken } });
    expect((await del(`/v1/locks/${name}?namespace=team-b&fencingToken=${newer.fencingToken}`)).statusCode).toBe(404);
    expect((await del(`/v1/locks/${name}?namespace=team-b&fencingToken=-1`)).json()).toMatchObject({ code: 'invalid_request' });

    // A semaphore: one permit evicted by its token, the other stays; the evicted one again is a 409.
    const sem = `sem-${name}`;
    const p1 = (await post(`/v1/semaphores/${sem}/acquire`, B, { limit: 2, ttlMs: 60_000, holder: 'p1' })).json<Grant>();
    const p2 = (await post(`/v1/semaphores/${sem}/acquire`, B, { limit: 2, ttlMs: 60_000, holder: 'p2' })).json<Grant>();
    const one = await del(`/v1/semaphores/${sem}?namespace=team-b&fencingToken=${p1.fencingToken}`);
    expect(one.json()).toEqual({
      namespace: 'team-b',
      key: sem,
      released: true,
      evicted: [{ holder: 'p1', fencingToken: p1.fencingToken }],
    });
    expect((await del(`/v1/semaphores/${sem}?namespace=team-b&fencingToken=${p1.fencingToken}`)).json()).toMatchObject({
      code: 'holder_changed',
    });
    expect((await get(`/v1/semaphores/${sem}`, B)).json()).toMatchObject({
      permitsHeld: 1,
      holders: [{ holder: 'p2', fencingToken: p2.fencingToken }],
    });

    // A read/write lock: the writer shown is gone, a reader holds it now.
    const rw = `rw-${name}`;
    const w = (await post(`/v1/rwlocks/${rw}/acquire`, B, { mode: 'write', ttlMs: 60_000 })).json<Grant>();
    expect((await post(`/v1/rwlocks/${rw}/release`, B, { ownerToken: w.ownerToken })).statusCode).toBe(200);
    expect((await post(`/v1/rwlocks/${rw}/acquire`, B, { mode: 'read', ttlMs: 60_000, holder: 'reader' })).statusCode).toBe(200);
    expect((await del(`/v1/rwlocks/${rw}?namespace=team-b&fencingToken=${w.fencingToken}`)).statusCode).toBe(409);
    expect((await get(`/v1/rwlocks/${rw}`, B)).json()).toMatchObject({ holders: [{ holder: 'reader' }] });
  });
});
