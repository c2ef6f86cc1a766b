import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../../helpers/test-app.js';
import { threeStores } from '../../helpers/three-stores.js';

/** An answer's fields, read as the API documents them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const stores = threeStores('lock-sets');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(stores)('lock sets, lock-delay, idempotency (%s)', (_name, open) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ store: await open(), logLevel: 'silent', history: null });
  }, 30_000);
  afterAll(async () => {
    await t?.close();
  });

  const post = async (url: string, body: object, headers: Record<string, string> = {}) => {
    const res = await t.app.inject({ method: 'POST', url, payload: body, headers });
    return { status: res.statusCode, body: res.json<Record<string, Json>>(), headers: res.headers };
  };
  const get = async (key: string) => (await t.app.inject({ method: 'GET', url: `/v1/locks/${key}` })).json<Record<string, Json>>();
  const del = async (key: string) => (await t.app.inject({ method: 'DELETE', url: `/v1/locks/${key}?namespace=default` })).statusCode;
  const acquire = (key: string, body: object = { ttlMs: 10_000 }, headers?: Record<string, string>) =>
    post(`/v1/locks/${key}/acquire`, body, headers);
  const sets = (op: string, body: object) => post(`/v1/lock-sets/${op}`, body);
  const k = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

  it('set fencing tokens: above earlier single-lock tokens per key, and later single locks are above the set', async () => {
    const [a, b] = [k('ft-a'), k('ft-b')];
    const single = await acquire(a);
    expect(single.status).toBe(200);
    await post(`/v1/locks/${a}/release`, { ownerToken: single.body.ownerToken });
    const set = await sets('acquire', { keys: [a, b], ttlMs: 10_000 });
    expect(set.status).toBe(200);
    const [ta, tb] = set.body.locks.map((l: { fencingToken: number }) => l.fencingToken);
    expect(ta).toBeGreaterThan(single.body.fencingToken);
    await sets('release', { ownerToken: set.body.ownerToken, keys: [a, b] });
    const after = await acquire(b);
    expect(after.body.fencingToken).toBeGreaterThan(tb);
    const afterA = await acquire(a);
    expect(afterA.body.fencingToken).toBeGreaterThan(ta);
  });

  it('partial release frees only the named keys; renewing the whole set then fails; releasing the rest works', async () => {
    const [a, b, c] = [k('pr-a'), k('pr-b'), k('pr-c')];
    const set = await sets('acquire', { keys: [a, b, c], ttlMs: 10_000, holder: 'h' });
    expect(set.status).toBe(200);
    const ownerToken = set.body.ownerToken;
    expect((await sets('release', { ownerToken, keys: [b] })).status).toBe(200);
    expect((await get(b)).held).toBe(false);
    expect((await get(a)).held).toBe(true);
    expect((await sets('renew', { ownerToken, keys: [a, b, c], ttlMs: 10_000 })).status).toBe(409);
    expect((await sets('renew', { ownerToken, keys: [a, c], ttlMs: 10_000 })).status).toBe(200);
    expect((await sets('release', { ownerToken, keys: [a, b, c] })).status).toBe(200);
    expect((await get(a)).held).toBe(false);
    expect((await get(c)).held).toBe(false);
  });

  it('single-lock routes on a set key: renew and release work for that key only', async () => {
    const [a, b] = [k('sl-a'), k('sl-b')];
    const set = await sets('acquire', { keys: [a, b], ttlMs: 10_000 });
    const ownerToken = set.body.ownerToken;
    const r = await post(`/v1/locks/${a}/renew`, { ownerToken, ttlMs: 300 });
    expect(r.status).toBe(200);
    expect(r.body.fencingToken).toBe(set.body.locks[0].fencingToken);
    await sleep(450);
    expect((await get(a)).held).toBe(false);
    expect((await sets('renew', { ownerToken, keys: [a, b], ttlMs: 10_000 })).status).toBe(409);
    expect((await get(b)).held).toBe(true);
    expect((await post(`/v1/locks/${b}/release`, { ownerToken })).status).toBe(200);
    expect((await get(b)).held).toBe(false);
  });

  it('a set with waitMs wakes when the busy key is released', async () => {
    const [a, b] = [k('w-a'), k('w-b')];
    const single = await acquire(b, { ttlMs: 20_000 });
    const began = performance.now();
    const waiting = sets('acquire', { keys: [a, b], ttlMs: 10_000, waitMs: 15_000 });
    await sleep(300);
    await post(`/v1/locks/${b}/release`, { ownerToken: single.body.ownerToken });
    const got = await waiting;
    expect(got.status).toBe(200);
    expect(performance.now() - began).toBeLessThan(5_000);
  });

  it('a set with waitMs is granted when the busy key expires', async () => {
    const [a, b] = [k('we-a'), k('we-b')];
    await acquire(b, { ttlMs: 600 });
    const began = performance.now();
    const got = await sets('acquire', { keys: [a, b], ttlMs: 10_000, waitMs: 8_000 });
    expect(got.status).toBe(200);
    expect(performance.now() - began).toBeLessThan(3_000);
  });

  it('a set with waitMs is granted when a busy key’s lock-delay ends (not before, not never)', async () => {
    const [a, b] = [k('wd-a'), k('wd-b')];
    await acquire(b, { ttlMs: 200, lockDelayMs: 1_500 });
    await sleep(350);
    const began = performance.now();
    const got = await sets('acquire', { keys: [a, b], ttlMs: 10_000, waitMs: 8_000 });
    expect(got.status).toBe(200);
    const took = performance.now() - began;
    expect(took).toBeGreaterThan(1_000);
    expect(took).toBeLessThan(4_000);
  });

  it('a set whose second key is busy longer waits for both', async () => {
    const [a, b] = [k('wb-a'), k('wb-b')];
    await acquire(a, { ttlMs: 300 });
    await acquire(b, { ttlMs: 1_200 });
    const began = performance.now();
    const got = await sets('acquire', { keys: [a, b], ttlMs: 10_000, waitMs: 8_000 });
    expect(got.status).toBe(200);
    expect(performance.now() - began).toBeLessThan(4_000);
  });

  it("a set waiting on a key in its lock-delay wakes when the delay ends, then on the other busy key's release", async () => {
    const stem = k('wdl');
    const [a, b] = [`${stem}-a`, `${stem}-b`];
    // a (first in key order) expires at once into a 1.2 s lock-delay; b is held for 20 s and released after 2 s.
    await acquire(a, { ttlMs: 150, lockDelayMs: 1_200 });
    const heldB = await acquire(b, { ttlMs: 20_000 });
    await sleep(250);
    const began = performance.now();
    const waiting = sets('acquire', { keys: [a, b], ttlMs: 10_000, waitMs: 8_000 });
    await sleep(2_000);
    expect((await post(`/v1/locks/${b}/release`, { ownerToken: heldB.body.ownerToken })).status).toBe(200);
    const got = await waiting;
    expect(got.status).toBe(200);
    // Free from about 2 s on: granted then, not when waitMs runs out (8 s) or b's old lease would have ended (20 s).
    expect(performance.now() - began).toBeLessThan(4_500);
  }, 20_000);

  it('a set acquired with lockDelayMs: expiry keeps every key in its delay; release does not', async () => {
    const [a, b] = [k('sd-a'), k('sd-b')];
    const set = await sets('acquire', { keys: [a, b], ttlMs: 200, lockDelayMs: 3_000 });
    expect(set.status).toBe(200);
    await sleep(350);
    expect((await acquire(a)).status).toBe(409);
    expect((await acquire(b)).status).toBe(409);
    expect((await get(b)).lockDelayUntil).toBeDefined();
    const [c, d] = [k('sd-c'), k('sd-d')];
    const set2 = await sets('acquire', { keys: [c, d], ttlMs: 5_000, lockDelayMs: 3_000 });
    await sets('release', { ownerToken: set2.body.ownerToken, keys: [c, d] });
    expect((await acquire(c)).status).toBe(200);
    expect((await acquire(d)).status).toBe(200);
  });

  it('lock-delay: force release of the live lease ends it at once; force release during the delay is 404 and the delay runs', async () => {
    const a = k('fd');
    await acquire(a, { ttlMs: 5_000, lockDelayMs: 3_000 });
    expect(await del(a)).toBe(200);
    const next = await acquire(a, { ttlMs: 200, lockDelayMs: 2_000 });
    expect(next.status).toBe(200);
    await sleep(350);
    expect(await del(a)).toBe(404);
    expect((await acquire(a)).status).toBe(409);
  });

  it('lock-delay then a queued waiter: granted when the delay ends', async () => {
    const a = k('dq');
    await acquire(a, { ttlMs: 300, lockDelayMs: 1_500 });
    const began = performance.now();
    const got = await acquire(a, { ttlMs: 5_000, waitMs: 8_000 });
    expect(got.status).toBe(200);
    const took = performance.now() - began;
    expect(took).toBeGreaterThan(1_500);
    expect(took).toBeLessThan(4_500);
  });

  it('lock-delay: a waiter queued before the expiry is granted when the delay ends', async () => {
    const a = k('dq2');
    await acquire(a, { ttlMs: 500, lockDelayMs: 1_000 });
    const began = performance.now();
    const got = await acquire(a, { ttlMs: 5_000, waitMs: 8_000 });
    expect(got.status).toBe(200);
    const took = performance.now() - began;
    expect(took).toBeGreaterThan(1_300);
    expect(took).toBeLessThan(4_500);
  });

  it('idempotency: after release / force release / expiry the same key takes a new lease', async () => {
    const a = k('ir');
    const idem = { 'idempotency-key': randomUUID() };
    const first = await acquire(a, { ttlMs: 10_000 }, idem);
    expect((await acquire(a, { ttlMs: 10_000 }, idem)).body).toEqual(first.body);
    await post(`/v1/locks/${a}/release`, { ownerToken: first.body.ownerToken });
    const second = await acquire(a, { ttlMs: 10_000 }, idem);
    expect(second.status).toBe(200);
    expect(second.body.ownerToken).not.toBe(first.body.ownerToken);
    expect(second.body.fencingToken).toBeGreaterThan(first.body.fencingToken);
    expect(await del(a)).toBe(200);
    const third = await acquire(a, { ttlMs: 300 }, idem);
    // force-released: a new lease, not the evicted one
    expect(third.status).toBe(200);
    expect(third.body.ownerToken).not.toBe(second.body.ownerToken);
    await sleep(450);
    const fourth = await acquire(a, { ttlMs: 300 }, idem);
    expect(fourth.status).toBe(200);
    expect(fourth.body.ownerToken).not.toBe(third.body.ownerToken);
    expect(fourth.body.fencingToken).toBeGreaterThan(third.body.fencingToken);
  });

  it('idempotency: a set holding the key does not answer a keyed acquire; a waited grant keeps no key', async () => {
    const a = k('iw');
    const idem = { 'idempotency-key': randomUUID() };
    const holder = await acquire(a, { ttlMs: 300 });
    const waited = await acquire(a, { ttlMs: 10_000, waitMs: 5_000 }, idem);
    expect(waited.status).toBe(200);
    expect(waited.body.fencingToken).toBeGreaterThan(holder.body.fencingToken);
    const retry = await acquire(a, { ttlMs: 10_000 }, idem);
    // documented: a lease handed after waiting keeps no key → refused as anyone
    expect(retry.status).toBe(409);
  });

  it('idempotency: replay with waitMs and while others queue; 422 on another body; the waiter behind is untouched', async () => {
    const a = k('iq');
    const idem = { 'idempotency-key': randomUUID() };
    const body = { ttlMs: 1_500, holder: 'w', lockDelayMs: 500 };
    const first = await acquire(a, body, idem);
    expect(first.status).toBe(200);
    const queued = acquire(a, { ttlMs: 5_000, waitMs: 8_000 });
    await sleep(200);
    const replay = await acquire(a, { ...body, waitMs: 3_000 }, idem);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expect((await acquire(a, { ...body, holder: 'x' }, idem)).status).toBe(422);
    expect((await acquire(a, { ...body, waitMs: 100, ttlMs: 2_000 }, idem)).status).toBe(422);
    const got = await queued;
    expect(got.status).toBe(200);
    expect(got.body.fencingToken).toBeGreaterThan(first.body.fencingToken);
    // the key went with its lease: now held by the waiter, the retry is just another caller
    expect((await acquire(a, body, idem)).status).toBe(409);
  }, 20_000);
});
