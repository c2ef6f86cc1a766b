import { afterEach, expect, it, vi } from 'vitest';
import { LeaseService } from '../../src/domain/lease-service.js';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { PermitService } from '../../src/domain/permit-service.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { pauseAfter } from '../helpers/process-pause.js';

/**
 * docs/safety.md: an answer too late to trust is refused a second time just before it is written (the
 * onSend check), because a process stopped between the store's answer and the write once delivered an
 * expired grant. A grant is then given back; a renewal is refused but its lease kept (it was the caller's
 * already: giving it back would make a paused instance cost its holder the lease). Here the process
 * "pauses" (a busy loop: what SIGSTOP or a long GC pause looks like to it) after the service answered and
 * before the answer is written. Lock sets had no such check: a set's grant was a 200 for leases that had
 * ended; a lock's late renewal at the write gave the holder's lease back.
 */
const TTL_MS = 200;
const PAUSE_MS = 260; // past the whole lease
/** A renewal late (past half its TTL) but its lease still live after the pause, for the next renewal. */
const RENEW_TTL_MS = 1_000;
const RENEW_PAUSE_MS = 600;

let t: TestApp | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await t?.close();
  t = undefined;
});

it('a lock grant that went stale before it was written is a 503, and the lock is given back', async () => {
  t = await buildTestApp();
  pauseAfter(LockService.prototype, 'acquire', PAUSE_MS);
  const res = await t.app.inject({ method: 'POST', url: '/v1/locks/a/acquire', payload: { ttlMs: TTL_MS } });
  expect(res.statusCode, res.body).toBe(503);
  expect((await t.app.inject({ method: 'GET', url: '/v1/locks/a' })).json()).toMatchObject({ held: false });
});

it('a lock set grant that went stale before it was written is a 503, and every key is given back', async () => {
  t = await buildTestApp();
  pauseAfter(LockSetService.prototype, 'acquire', PAUSE_MS);
  const res = await t.app.inject({ method: 'POST', url: '/v1/lock-sets/acquire', payload: { keys: ['a', 'b'], ttlMs: TTL_MS } });
  expect(res.statusCode, res.body).toBe(503);
  for (const key of ['a', 'b'])
    expect((await t.app.inject({ method: 'GET', url: `/v1/locks/${key}` })).json()).toMatchObject({ held: false });
});

it("a lock renewal that went stale before it was written is a 503, and the holder's lease is kept", async () => {
  t = await buildTestApp();
  const grant = (await t.app.inject({ method: 'POST', url: '/v1/locks/r/acquire', payload: { ttlMs: 5_000 } })).json<{
    ownerToken: string;
  }>();
  // (The renew route holds LockService.renew bound at registration: the pause goes one call deeper.)
  pauseAfter(LeaseService.prototype, 'renew', RENEW_PAUSE_MS);
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/locks/r/renew',
    payload: { ownerToken: grant.ownerToken, ttlMs: RENEW_TTL_MS },
  });
  expect(res.statusCode, res.body).toBe(503);
  expect(res.json()).toMatchObject({ detail: expect.stringContaining('kept') });
  // Kept to the end the renewal gave it: the holder's token still renews.
  const again = await t.app.inject({ method: 'POST', url: '/v1/locks/r/renew', payload: { ownerToken: grant.ownerToken, ttlMs: 5_000 } });
  expect(again.statusCode, again.body).toBe(200);
});

it("a lock set renewal that went stale before it was written is a 503, and the set's lease is kept", async () => {
  t = await buildTestApp();
  const keys = ['s1', 's2'];
  const grant = (await t.app.inject({ method: 'POST', url: '/v1/lock-sets/acquire', payload: { keys, ttlMs: 5_000 } })).json<{
    ownerToken: string;
  }>();
  pauseAfter(LockSetService.prototype, 'renew', RENEW_PAUSE_MS);
  const res = await t.app.inject({
    method: 'POST',
    url: '/v1/lock-sets/renew',
    payload: { keys, ownerToken: grant.ownerToken, ttlMs: RENEW_TTL_MS },
  });
  expect(res.statusCode, res.body).toBe(503);
  expect(res.json()).toMatchObject({ detail: expect.stringContaining('kept') });
  const again = await t.app.inject({
    method: 'POST',
    url: '/v1/lock-sets/renew',
    payload: { keys, ownerToken: grant.ownerToken, ttlMs: 5_000 },
  });
  expect(again.statusCode, again.body).toBe(200);
});

it("a lock grant given back at the write frees its quota slot: the namespace's cap is not eaten by leases nobody holds", async () => {
  t = await buildTestApp({ limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 1 } });
  pauseAfter(LockService.prototype, 'acquire', PAUSE_MS);
  const late = await t.app.inject({ method: 'POST', url: '/v1/locks/a/acquire', payload: { ttlMs: TTL_MS } });
  expect(late.statusCode, late.body).toBe(503);
  // The late lease was given back, and with it its unit of the cap of 1: the next lock is granted.
  const next = await t.app.inject({ method: 'POST', url: '/v1/locks/b/acquire', payload: { ttlMs: 60_000 } });
  expect(next.statusCode, next.body).toBe(200);
});

it('a semaphore grant given back at the write frees its quota slot', async () => {
  t = await buildTestApp({ limits: { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 1 } });
  pauseAfter(PermitService.prototype, 'acquire', PAUSE_MS);
  const late = await t.app.inject({ method: 'POST', url: '/v1/semaphores/a/acquire', payload: { ttlMs: TTL_MS, limit: 2 } });
  expect(late.statusCode, late.body).toBe(503);
  const next = await t.app.inject({ method: 'POST', url: '/v1/semaphores/b/acquire', payload: { ttlMs: 60_000, limit: 2 } });
  expect(next.statusCode, next.body).toBe(200);
});
