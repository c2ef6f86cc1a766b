import { afterEach, expect, it, vi } from 'vitest';
import { LockService } from '../../src/domain/lock-service.js';
import { LockSetService } from '../../src/domain/lock-sets.js';
import { MemoryLeases } from '../../src/store/memory/memory-leases.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { pauseAfter } from '../helpers/process-pause.js';

/**
 * Lease history of answers too late to trust (docs/safety.md): a grant given back just before it was
 * written ended there and then, by a release (no expiry, no lock-delay), and the key was free for the
 * next caller at once; its history says so. A renewal answered too late is refused but kept: the lease
 * lives on, and its holder's release later on is a release of a live lease (the store took it).
 */
const TTL_MS = 2_000;
/** Past half the lease (so the answer is late) but well short of its end. */
const PAUSE_MS = 1_100;

interface Event {
  type: string;
  at: string;
  holder: string | null;
  expiresAt?: string;
}

let t: TestApp | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await t?.close();
  t = undefined;
});

async function historyOf(app: TestApp, key: string): Promise<Event[]> {
  const res = await app.app.inject({ method: 'GET', url: `/v1/locks/${key}/history` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ events: Event[] }>().events;
}

/** Waits until the lease of `event` would have ended had it not been given back. */
async function pastItsEnd(event: Event | undefined): Promise<void> {
  const end = Date.parse(event?.expiresAt ?? '');
  expect(end).toBeGreaterThan(0);
  await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(end + 50), { timeout: TTL_MS * 3, interval: 50 });
}

it('a lock grant given back at the write is released in its history: no expiry, no lock-delay, no overlap with the next holder', async () => {
  t = await buildTestApp();
  pauseAfter(LockService.prototype, 'acquire', PAUSE_MS);
  const late = await t.app.inject({
    method: 'POST',
    url: '/v1/locks/late/acquire',
    payload: { ttlMs: TTL_MS, holder: 'late', lockDelayMs: 10_000 },
  });
  expect(late.statusCode, late.body).toBe(503);
  // Given back: free at once, with no lock-delay.
  const next = await t.app.inject({ method: 'POST', url: '/v1/locks/late/acquire', payload: { ttlMs: 60_000, holder: 'next' } });
  expect(next.statusCode, next.body).toBe(200);
  await pastItsEnd((await historyOf(t, 'late'))[0]);
  const events = await historyOf(t, 'late');
  expect(events.map((e) => `${e.type}:${e.holder}`)).toEqual(['granted:late', 'released:late', 'granted:next']);
});

it('a lock set grant given back at the write is released on each of its keys', async () => {
  t = await buildTestApp();
  pauseAfter(LockSetService.prototype, 'acquire', PAUSE_MS);
  const late = await t.app.inject({
    method: 'POST',
    url: '/v1/lock-sets/acquire',
    payload: { keys: ['s1', 's2'], ttlMs: TTL_MS, holder: 'late' },
  });
  expect(late.statusCode, late.body).toBe(503);
  await pastItsEnd((await historyOf(t, 's1'))[0]);
  for (const key of ['s1', 's2']) {
    const events = await historyOf(t, key);
    expect(
      events.map((e) => `${e.type}:${e.holder}`),
      key,
    ).toEqual(['granted:late', 'released:late']);
  }
});

it('a lease whose renewal was refused too late but kept, then released by its holder, is shown released, not expired', async () => {
  t = await buildTestApp();
  const grant = await t.app.inject({ method: 'POST', url: '/v1/locks/kept/acquire', payload: { ttlMs: 1_000, holder: 'kept' } });
  expect(grant.statusCode, grant.body).toBe(200);
  const { ownerToken } = grant.json<{ ownerToken: string }>();
  // The store renews it, and its answer comes back past half the new TTL: 503, the renewed lease kept.
  pauseAfter(MemoryLeases.prototype, 'renew', 2_600);
  const renewal = await t.app.inject({ method: 'POST', url: '/v1/locks/kept/renew', payload: { ownerToken, ttlMs: 5_000 } });
  expect(renewal.statusCode, renewal.body).toBe(503);
  expect(renewal.json()).toMatchObject({ detail: expect.stringContaining('kept') });
  // Past the end the grant gave it (and the clock skew allowed), the lease is still its holder's to release.
  const release = await t.app.inject({ method: 'POST', url: '/v1/locks/kept/release', payload: { ownerToken } });
  expect(release.statusCode, release.body).toBe(200);
  const events = await historyOf(t, 'kept');
  expect(events.map((e) => `${e.type}:${e.holder}`)).toEqual(['granted:kept', 'released:kept']);
});

it('a grant refused too late but kept for its Idempotency-Key, then answered to the retry, is in the history once', async () => {
  t = await buildTestApp();
  const idem = { 'idempotency-key': 'job-7' };
  pauseAfter(MemoryLeases.prototype, 'acquire', 2_600);
  const late = await t.app.inject({
    method: 'POST',
    url: '/v1/locks/idem/acquire',
    headers: idem,
    payload: { ttlMs: 5_000, holder: 'job' },
  });
  expect(late.statusCode, late.body).toBe(503);
  expect(late.json()).toMatchObject({ detail: expect.stringContaining('kept') });
  // The retry gets the lease that was kept: the key's one lease, held by 'job'.
  const retry = await t.app.inject({
    method: 'POST',
    url: '/v1/locks/idem/acquire',
    headers: idem,
    payload: { ttlMs: 5_000, holder: 'job' },
  });
  expect(retry.statusCode, retry.body).toBe(200);
  const again = await t.app.inject({
    method: 'POST',
    url: '/v1/locks/idem/acquire',
    headers: idem,
    payload: { ttlMs: 5_000, holder: 'job' },
  });
  expect(again.json<{ fencingToken: number }>().fencingToken).toBe(retry.json<{ fencingToken: number }>().fencingToken);
  const events = await historyOf(t, 'idem');
  expect(events.map((e) => `${e.type}:${e.holder}`)).toEqual(['granted:job']);
});
