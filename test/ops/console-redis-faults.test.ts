import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { RedisServer } from '../helpers/redis-server.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { launchOfflineBrowser, type OfflineBrowser } from '../helpers/offline-browser.js';

/**
 * The console over Redis: a listing page (SCAN) can hold no live lock and still not be the last (a
 * released key's record stays for its fencing grace, and SCAN walks it). The console must not say that
 * nothing is held then.
 */
const cast = twoTeamsAndAdmin();
const ADMIN_KEY = cast.keys.plain['ops-key']!;

describe('/console over Redis, with many recently released keys', () => {
  let redis: RedisServer;
  let server: TestApp;
  let baseUrl = '';
  let offline: OfflineBrowser | undefined;
  let heldKey = '';
  const call = async (method: string, url: string, headers: Record<string, string>, payload?: object) => {
    const res = await server.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) });
    return { status: res.statusCode, body: res.json<Record<string, unknown>>() };
  };

  beforeAll(async () => {
    redis = await RedisServer.startShared();
    const store = new RedisStore({
      url: redis.url,
      keyPrefix: `console-${process.pid}-${Date.now()}:`,
      commandTimeoutMs: 2_000,
      fenceGraceMs: 600_000,
    });
    await vi.waitFor(() => store.ping(), { timeout: 5_000, interval: 20 });
    const metrics = createMetrics({ defaultMetrics: false });
    server = await buildTestApp({
      store: metrics.instrumentStore(store),
      observer: metrics.lockObserver,
      metrics,
      logLevel: 'warn',
      auth: { mode: 'keys', keyring: cast.keys.keyring() },
    });
    // 1,000 keys taken and given back: each leaves its record (its last fencing token) for the grace.
    for (let i = 0; i < 1_000; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const key = `done:${i + j}`;
          const got = await call('POST', `/v1/locks/${key}/acquire`, cast.A, { ttlMs: 60_000 });
          expect((await call('POST', `/v1/locks/${key}/release`, cast.A, { ownerToken: got.body.ownerToken })).status).toBe(200);
        }),
      );
    }
    // One lock held, beyond the store's first page of 100 (where SCAN happens to put it).
    for (let n = 0; ; n++) {
      const key = `held:${n}`;
      const got = await call('POST', `/v1/locks/${key}/acquire`, cast.B, { ttlMs: 600_000, holder: 'still-here' });
      expect(got.status).toBe(200);
      const first = await call('GET', '/v1/locks?limit=100', cast.ADMIN);
      if ((first.body.locks as unknown[]).length === 0 && first.body.nextCursor !== null) {
        heldKey = key;
        break;
      }
      await call('POST', `/v1/locks/${key}/release`, cast.B, { ownerToken: got.body.ownerToken });
      expect(n).toBeLessThan(50);
    }
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
    offline = await launchOfflineBrowser(baseUrl, { viewport: { width: 1280, height: 800 } });
  }, 120_000);

  afterAll(async () => {
    await offline?.close();
    await server?.close();
    await redis?.stop();
  });

  it('the first page does not say "Nothing is held" while a lock is held', async () => {
    const page: Page = await offline!.context.newPage();
    await page.goto(`${baseUrl}/console`);
    await page.evaluate(
      (key) =>
        (globalThis as unknown as { sessionStorage: { setItem(k: string, v: string): void } }).sessionStorage.setItem(
          'keyholder.adminKey',
          key,
        ),
      ADMIN_KEY,
    );
    await page.reload();
    await expect.poll(() => page.locator('#status').innerText(), { timeout: 10_000 }).toMatch(/^updated/);
    const row = page.locator(`#leases tr[data-namespace="team-b"][data-key="${heldKey}"]`);
    const empty = (await row.count()) > 0 ? '' : await page.locator('#empty').innerText();
    expect(empty).not.toMatch(/^Nothing is held/);
    await page.close();
  });
});
