import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import type { AllowanceSource } from '../../src/http/rate-limit.js';

/**
 * Renew and release are never counted by the rate limit, except when they fail with not_owner: a
 * caller flooding them with made-up owner tokens is slowed to its limit like any other caller, while
 * a correct renewal or release, even from a caller over its limit, still succeeds.
 */
const { keys, A, B } = twoTeamsAndAdmin();
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ auth: { mode: 'keys', keyring: keys.keyring() }, rateLimit: { max: 20, windowMs: 60_000 } });
});
afterAll(async () => {
  await t.close();
});

const fakeToken = (i: number) => `fake${String(i).padStart(18, '0')}`;
const post = (url: string, headers: Record<string, string>, payload: unknown) =>
  t.app.inject({ method: 'POST', url, headers: { ...headers, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });

describe('failed ownership attempts count against the caller', () => {
  it('made-up tokens on renew and release get 429 once over the limit; a correct renewal and release never do; other teams are not charged', async () => {
    const lease = await post('/v1/locks/owned/acquire', B, { ttlMs: 30_000 });
    expect(lease.statusCode).toBe(200);
    const sem = await post('/v1/semaphores/owned-sem/acquire', B, { limit: 2, ttlMs: 30_000 });
    expect(sem.statusCode).toBe(200);
    const statuses = new Map<number, number>();
    const paths = ['/v1/locks/target/renew', '/v1/locks/target/release', '/v1/semaphores/target/release', '/v1/rwlocks/target/renew'];
    for (let i = 0; i < 200; i++) {
      const path = paths[i % paths.length] as string;
      const res = await post(path, B, path.endsWith('renew') ? { ownerToken: fakeToken(i), ttlMs: 1000 } : { ownerToken: fakeToken(i) });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      if (res.statusCode === 429) {
        expect(res.json()).toMatchObject({ code: 'rate_limited' });
        expect(res.headers['retry-after']).toBeDefined();
      }
    }
    // The two acquires above took 2 of the 20; 18 failures are answered 409, the rest 429.
    expect(Object.fromEntries(statuses)).toEqual({ 409: 18, 429: 182 });
    // B is over its limit, yet its correct renewals and releases go through.
    expect((await post('/v1/locks/owned/renew', B, { ownerToken: lease.json().ownerToken, ttlMs: 30_000 })).statusCode).toBe(200);
    expect((await post('/v1/semaphores/owned-sem/renew', B, { ownerToken: sem.json().ownerToken, ttlMs: 30_000 })).statusCode).toBe(200);
    expect((await post('/v1/locks/owned/release', B, { ownerToken: lease.json().ownerToken })).statusCode).toBe(200);
    // Team A was not charged for B's failures.
    expect((await post('/v1/locks/a-lock/acquire', A, { ttlMs: 30_000 })).statusCode).toBe(200);
  });
});

describe('while the shared rate store fails', () => {
  /** A shared rate store that is down: every batch of allowance fails, as a Redis that does not answer. */
  const down: AllowanceSource = { handOut: () => Promise.reject(new Error('rate store down')) };
  let failing: TestApp;
  beforeAll(async () => {
    failing = await buildTestApp({
      auth: { mode: 'keys', keyring: keys.keyring() },
      rateLimit: { max: 20, windowMs: 60_000, allowance: down },
    });
  });
  afterAll(async () => {
    await failing.close();
  });
  const postTo = (url: string, headers: Record<string, string>, payload: unknown) =>
    failing.app.inject({
      method: 'POST',
      url,
      headers: { ...headers, 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
    });

  it('made-up tokens are still counted (by the instance alone) and refused past the limit; real holders are not', async () => {
    // Counted routes go through uncounted while the store fails (skipOnError): a holder keeps working.
    const lease = await postTo('/v1/locks/owned/acquire', B, { ttlMs: 30_000 });
    expect(lease.statusCode).toBe(200);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 100; i++) {
      const res = await postTo(`/v1/locks/target/${i % 2 ? 'release' : 'renew'}`, B, {
        ownerToken: fakeToken(i),
        ...(i % 2 ? {} : { ttlMs: 1000 }),
      });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
    // 20 failures answered 409 (the limit), the rest 429: the flood is not free because the store is down.
    expect(Object.fromEntries(statuses)).toEqual({ 409: 20, 429: 80 });
    // B's correct renewal and release still go through; team A's failures have a count of their own.
    expect((await postTo('/v1/locks/owned/renew', B, { ownerToken: lease.json().ownerToken, ttlMs: 30_000 })).statusCode).toBe(200);
    expect((await postTo('/v1/locks/owned/release', B, { ownerToken: lease.json().ownerToken })).statusCode).toBe(200);
    expect((await postTo('/v1/locks/target/release', A, { ownerToken: fakeToken(1) })).statusCode).toBe(409);
  });
});
