import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HistoryRecorder, type HistoryLimits, type HistoryStore } from '../../src/domain/history.js';
import { MemoryHistory } from '../../src/store/memory/memory-history.js';
import { RedisHistory } from '../../src/store/redis/redis-history.js';
import { RedisServer } from '../helpers/redis-server.js';
import { monotonicWallClock } from '../../src/store/shared/clock.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * Lease history (HISTORY=on) over HTTP once a key's events outgrow the per-key bound: a lock with a
 * lock-delay renewed until its grant is trimmed away, then left to expire, still shows its expiry and
 * the lock-delay after it (the key was not free then), on the embedded history and on Redis.
 */
const LIMITS: HistoryLimits = { eventsPerKey: 4, keysPerNamespace: 5_000, retentionMs: 86_400_000 };
const TTL_MS = 1_000;
const LOCK_DELAY_MS = 60_000;

interface Event {
  type: string;
  at: string;
  fencingToken: number | null;
  until?: string;
}

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis?.stop();
});

const stores: [string, () => HistoryStore][] = [
  ['embedded', () => new MemoryHistory(LIMITS)],
  [
    'redis',
    () =>
      new RedisHistory({ connection: { mode: 'standalone', url: redis.url }, keyPrefix: 'kh:', commandTimeoutMs: 2_000, limits: LIMITS }),
  ],
];

describe.each(stores)('history trimmed per key (%s)', (_name, open) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ history: new HistoryRecorder(open(), { flushMs: 5, maxBuffered: 50_000 }) });
  });
  afterAll(async () => {
    await t?.close();
  });

  const post = async (url: string, payload: Record<string, unknown>) => {
    const res = await t.app.inject({ method: 'POST', url, payload });
    return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
  };
  const historyOf = async (key: string): Promise<Event[]> => {
    const res = await t.app.inject({ method: 'GET', url: `/v1/locks/${key}/history` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ events: Event[] }>().events;
  };

  it('a lock renewed past the events kept, then expired: its expiry, then its lock-delay', async () => {
    const key = 'renewed-then-crashed';
    const grant = await post(`/v1/locks/${key}/acquire`, { ttlMs: TTL_MS, holder: 'cron', lockDelayMs: LOCK_DELAY_MS });
    expect(grant.status, JSON.stringify(grant.body)).toBe(200);
    const { ownerToken, fencingToken } = grant.body as { ownerToken: string; fencingToken: number };
    let expiresAt = '';
    for (let i = 0; i < LIMITS.eventsPerKey + 2; i++) {
      const renewed = await post(`/v1/locks/${key}/renew`, { ownerToken, ttlMs: TTL_MS });
      expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
      expiresAt = (renewed.body as { expiresAt: string }).expiresAt;
      // Each renewal in a batch of its own: the store trims at every write.
      await t.history?.flush();
    }
    expect((await historyOf(key)).some((e) => e.type === 'granted')).toBe(false);
    // The holder is gone: the lease runs out, and the key stays shut for its lock-delay.
    // Past the end on this process's wall clock and on the embedded store's own (monotonic) clock, which a
    // system clock stepped while the file runs sets apart.
    const past = () => Math.min(Date.now(), monotonicWallClock());
    await vi.waitFor(() => expect(past()).toBeGreaterThan(Date.parse(expiresAt) + 50), { timeout: TTL_MS * 10, interval: 50 });
    const refused = await post(`/v1/locks/${key}/acquire`, { ttlMs: TTL_MS, holder: 'next' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    const events = (await historyOf(key)).filter((e) => e.type !== 'renewed');
    expect(events).toEqual([
      expect.objectContaining({ type: 'expired', at: expiresAt, fencingToken }),
      expect.objectContaining({
        type: 'lock_delay',
        at: expiresAt,
        fencingToken,
        until: new Date(Date.parse(expiresAt) + LOCK_DELAY_MS).toISOString(),
      }),
    ]);
  });
});
