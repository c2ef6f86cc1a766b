import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { launchOfflineBrowser, type OfflineBrowser } from '../helpers/offline-browser.js';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

/**
 * The operator console in a real headless Chromium against a keyholder with API keys: sign in with
 * the admin key, see every team's locks, filter, force-release one and watch it go.
 */
describe('/console in headless Chromium', () => {
  const cast = twoTeamsAndAdmin();
  let server: TestApp;
  let baseUrl = '';
  let offline: OfflineBrowser | undefined;
  const pageErrors: string[] = [];

  const api = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }));
    server = await buildTestApp({
      store,
      observer: metrics.lockObserver,
      metrics,
      logLevel: 'warn',
      auth: { mode: 'keys', keyring: cast.keys.keyring() },
    });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });

    // Team A holds two invoices and a report; team B holds a job with a caller queued behind it.
    for (const [key, holder] of [['invoice:1', 'billing-7'], ['invoice:2', 'billing-3'], ['report:daily', 'reporter']] as const) {
      expect((await api('POST', `/v1/locks/${key}/acquire`, cast.A, { ttlMs: 600_000, holder })).status).toBe(200);
    }
    expect((await api('POST', '/v1/locks/job:sync/acquire', cast.B, { ttlMs: 600_000, holder: 'sync-worker' })).status).toBe(200);
    // Queued until the app closes (then answered 503 shutting_down).
    void api('POST', '/v1/locks/job:sync/acquire', cast.B, { ttlMs: 10_000, waitMs: 60_000 }).catch(() => undefined);
    // One lease lost: released after it ran out.
    const short = await api('POST', '/v1/locks/short/acquire', cast.A, { ttlMs: 100 });
    await new Promise((r) => setTimeout(r, 250));
    expect((await api('POST', '/v1/locks/short/release', cast.A, { ownerToken: short.body.ownerToken })).status).toBe(409);

    offline = await launchOfflineBrowser(baseUrl, { viewport: { width: 1280, height: 720 } });
  });

  afterAll(async () => {
    await offline?.close();
    await server?.close();
  });

  const rowOf = (page: Page, namespace: string, key: string) => page.locator(`tr[data-namespace="${namespace}"][data-key="${key}"]`);

  it('signs in with the admin key, lists, filters and force-releases; saved as a screenshot', async () => {
    if (!offline) throw new Error('no browser');
    const page = await offline.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
    const res = await page.goto(`${baseUrl}/console`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");

    // Without a key the admin API answers 401: the page asks for one. A team key is refused (403).
    await page.locator('#api-key').waitFor();
    await page.locator('#api-key').fill(cast.keys.plain['team-a-key']!);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await expect.poll(() => page.locator('#login-error').innerText()).toContain('admin');
    await page.locator('#api-key').fill(cast.keys.plain['ops-key']!);
    await page.getByRole('button', { name: 'Use this key' }).click();

    // Every namespace's locks, with holder, token, time left and waiters.
    await rowOf(page, 'team-b', 'job:sync').waitFor();
    await expect.poll(() => page.locator('tbody tr[data-key]').count()).toBe(4);
    const jobRow = await rowOf(page, 'team-b', 'job:sync').innerText();
    expect(jobRow).toContain('sync-worker');
    await expect.poll(async () => (await rowOf(page, 'team-b', 'job:sync').locator('td').nth(5).innerText()).trim()).toBe('1');
    expect(await rowOf(page, 'team-a', 'invoice:1').innerText()).toMatch(/billing-7\s+\d{10,}\s+\d+ min \d+ s/);
    // The figures from /metrics.
    await expect.poll(() => page.locator('#store-up').innerText()).toBe('up (memory)');
    await expect.poll(() => page.locator('#lost-leases').innerText()).toBe('1');

    // Filter: team-a's invoices only.
    await page.locator('#namespace').fill('team-a');
    await page.locator('#prefix').fill('invoice:');
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    await expect.poll(() => page.locator('tbody tr[data-key]').count()).toBe(2);
    mkdirSync(ARTIFACTS, { recursive: true });
    const screenshot = join(ARTIFACTS, 'console.png');
    await page.locator('#namespace').fill('');
    await page.locator('#prefix').fill('');
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    await expect.poll(() => page.locator('tbody tr[data-key]').count()).toBe(4);

    // Force-release asks first; cancel changes nothing.
    await page.getByRole('button', { name: 'Force-release team-a/invoice:1' }).click();
    await expect.poll(() => page.locator('#confirm-holder').innerText()).toBe('billing-7');
    await page.screenshot({ path: screenshot, fullPage: true });
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await api('GET', '/v1/locks?namespace=team-a&prefix=invoice:1', cast.ADMIN)).body.locks).toHaveLength(1);

    await page.getByRole('button', { name: 'Force-release team-a/invoice:1' }).click();
    await page.locator('#confirm-release').click();
    await expect.poll(() => rowOf(page, 'team-a', 'invoice:1').count()).toBe(0);
    await expect.poll(() => page.locator('#notice').innerText()).toMatch(/^Released team-a\/invoice:1 \(fencing token \d+\)\.$/);
    expect((await api('GET', '/v1/locks?namespace=team-a&prefix=invoice:1', cast.ADMIN)).body.locks).toHaveLength(0);
    expect(await rowOf(page, 'team-a', 'invoice:2').count()).toBe(1);
    expect(server.logs.some((l) => l.includes('"audit":"force_release"') && l.includes('"actor":"ops-key"'))).toBe(true);

    // The key lives in this tab's session storage, never in a URL.
    expect(await page.evaluate(() => (globalThis as unknown as { sessionStorage: { getItem(k: string): string | null } }).sessionStorage.getItem('keyholder.adminKey'))).toBe(cast.keys.plain['ops-key']);
    for (const url of offline.requested) expect(url).not.toContain(cast.keys.plain['ops-key']!);
    expect(statSync(screenshot).size).toBeGreaterThan(10_000);
    await page.screenshot({ path: join(ARTIFACTS, 'console-after-release.png'), fullPage: true });

    expect(offline.offMachine).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
