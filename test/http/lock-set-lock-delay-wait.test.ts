import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { threeStores } from '../helpers/three-stores.js';

/** An answer's fields, read as the API documents them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const stores = threeStores('lock-set-delay');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(stores)('a waiting lock set and lock-delay (%s)', (_name, open) => {
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
  const acquire = (key: string, body: object = { ttlMs: 10_000 }, headers?: Record<string, string>) =>
    post(`/v1/locks/${key}/acquire`, body, headers);
  const sets = (op: string, body: object) => post(`/v1/lock-sets/${op}`, body);
  const k = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

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
});
