import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { twoTeamsAndAdmin } from '../helpers/api-keys.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { launchOfflineBrowser, type OfflineBrowser } from '../helpers/offline-browser.js';

/**
 * The operator console in headless Chromium: cases an operator meets (a release request, a key forgotten
 * mid-listing, keyholder unreachable, filters over many pages).
 */
const cast = twoTeamsAndAdmin();
const ADMIN_KEY = cast.keys.plain['ops-key']!;

function caller(baseUrl: string) {
  return async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
}

const rowOf = (page: Page, namespace: string, key: string) => page.locator(`#leases tr[data-namespace="${namespace}"][data-key="${key}"]`);

describe('operator console', () => {
  let server: TestApp;
  let baseUrl = '';
  let offline: OfflineBrowser | undefined;
  let api: ReturnType<typeof caller>;

  beforeAll(async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    server = await buildTestApp({
      store: metrics.instrumentStore(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 })),
      observer: metrics.lockObserver,
      metrics,
      logLevel: 'warn',
      auth: { mode: 'keys', keyring: cast.keys.keyring() },
    });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
    api = caller(baseUrl);
    offline = await launchOfflineBrowser(baseUrl, { viewport: { width: 1280, height: 800 } });
  });

  afterAll(async () => {
    await offline?.close();
    await server?.close();
  });

  async function signedIn(): Promise<Page> {
    const page = await offline!.context.newPage();
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
    return page;
  }

  it('Escape on the confirm dialog cancels, even after an earlier confirmed force release', async () => {
    for (const key of ['esc-1', 'esc-2']) {
      expect((await api('POST', `/v1/locks/${key}/acquire`, cast.A, { ttlMs: 600_000, holder: `h-${key}` })).status).toBe(200);
    }
    const page = await signedIn();
    await rowOf(page, 'team-a', 'esc-2').waitFor();
    // First: a confirmed force release of esc-1.
    await page.getByRole('button', { name: /^Force-release team-a\/esc-1 / }).click();
    await page.locator('#confirm-release').click();
    await expect.poll(() => page.locator('#notice').innerText()).toMatch(/^Released team-a\/esc-1 /);
    // Then: the operator opens the dialog for esc-2 and changes their mind (Escape closes the dialog).
    await page.getByRole('button', { name: /^Force-release team-a\/esc-2 / }).click();
    await expect.poll(() => page.locator('#confirm-holder').innerText()).toBe('h-esc-2');
    await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('#confirm').evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(false);
    // Let any request the close started reach the server, then look: esc-2 must still be held.
    await page.waitForLoadState('networkidle');
    expect((await api('GET', '/v1/locks/esc-2', cast.A)).body).toMatchObject({ held: true, holder: 'h-esc-2' });
    expect(await page.locator('#notice').innerText()).not.toMatch(/esc-2/);
    await page.close();
  });

  it("a still-held lease whose holder was asked to let go shows as still held in the key's history", async () => {
    const held = await api('POST', '/v1/locks/asked/acquire', cast.A, { ttlMs: 600_000, holder: 'asked-worker' });
    expect(held.status).toBe(200);
    const asked = await api('POST', '/v1/locks/asked/release-request?namespace=team-a', cast.ADMIN, {
      fencingToken: held.body.fencingToken,
      reason: 'deploy <b>now</b>',
    });
    expect(asked.status).toBe(200);
    const page = await signedIn();
    await page.getByRole('button', { name: 'Queue and history of team-a/asked' }).click();
    const leases = page.locator('#timeline tbody tr');
    await expect.poll(() => leases.count()).toBeGreaterThan(0);
    // One lease, still held: the release request is no end of it.
    expect(await leases.count()).toBe(1);
    expect(await leases.nth(0).innerText()).toMatch(/now\s+asked-worker\s+\d+\s+granted.*still held/);
    expect(await leases.nth(0).innerText()).not.toMatch(/expired/);
    await page.close();
  });

  it('caller-controlled text (holder labels, reasons) is shown as text everywhere, never parsed as HTML', async () => {
    const label = '<img src=x id=pwn onerror="document.title=1">"\'&';
    const held = await api('POST', '/v1/locks/xss/acquire', cast.A, { ttlMs: 600_000, holder: label });
    expect(held.status).toBe(200);
    void api('POST', '/v1/locks/xss/acquire', cast.A, { ttlMs: 10_000, waitMs: 60_000, holder: label }).catch(() => undefined);
    expect(
      (
        await api('POST', '/v1/locks/xss/release-request?namespace=team-a', cast.ADMIN, {
          fencingToken: held.body.fencingToken,
          reason: label,
        })
      ).status,
    ).toBe(200);
    const page = await signedIn();
    await rowOf(page, 'team-a', 'xss').waitFor();
    expect(await rowOf(page, 'team-a', 'xss').innerText()).toContain(label);
    await page.getByRole('button', { name: 'Queue and history of team-a/xss' }).click();
    await expect.poll(() => page.locator('#queue tbody').innerText()).toContain(label);
    await expect.poll(() => page.locator('#timeline tbody').innerText()).toContain(label);
    await page.getByRole('button', { name: /^Force-release team-a\/xss / }).click();
    await expect.poll(() => page.locator('#confirm-holder').innerText()).toBe(label);
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('#pwn').count()).toBe(0);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.close();
  });

  it('a network error (keyholder unreachable) marks the rows as from the last answer, as a store outage does', async () => {
    expect((await api('POST', '/v1/locks/net-job/acquire', cast.A, { ttlMs: 600_000, holder: 'net-worker' })).status).toBe(200);
    const page = await signedIn();
    await rowOf(page, 'team-a', 'net-job').waitFor();
    const tableClass = async () => (await page.locator('#leases').getAttribute('class')) ?? '';
    expect(await tableClass()).not.toContain('stale');
    // The network between the operator and keyholder goes away: every call fails to connect.
    await page.route(/\/(v1|metrics)/, (route) => route.abort('internetdisconnected'));
    await expect.poll(() => page.locator('#list-error').innerText(), { timeout: 10_000 }).not.toBe('');
    // The rows on screen are from the last answer: they must not look current.
    expect(await tableClass()).toContain('stale');
    expect(await page.locator('#list-error').innerText()).toMatch(/could not reach keyholder/i);
    await page.unrouteAll({ behavior: 'ignoreErrors' });
    await expect.poll(tableClass, { timeout: 10_000 }).not.toContain('stale');
    await page.close();
  });

  it('a key prefix across all namespaces that matches nothing on the first page does not say nothing is held', async () => {
    // 100 of team-a's keys come first in the store's order; team-b's match is beyond the first page (100 keys).
    await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        api('POST', `/v1/locks/bulk:${String(i).padStart(3, '0')}/acquire`, cast.A, { ttlMs: 600_000, holder: 'bulk' }),
      ),
    );
    expect((await api('POST', '/v1/locks/zz-match/acquire', cast.B, { ttlMs: 600_000, holder: 'the-one' })).status).toBe(200);
    const page = await signedIn();
    await page.locator('#leases tbody tr').first().waitFor();
    await page.locator('#prefix').fill('zz-');
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    // The filter applied: none of team-a's bulk keys is listed any more.
    await expect.poll(() => page.locator('#leases tbody tr').filter({ hasText: 'bulk' }).count()).toBe(0);
    await expect.poll(() => page.locator('#page-label').innerText()).toBe('page 1');
    // team-b's zz-match is held and matches: the page must not tell the operator nothing is.
    const shown = async () => ((await rowOf(page, 'team-b', 'zz-match').count()) > 0 ? 'row' : await page.locator('#empty').innerText());
    await expect.poll(shown).not.toBe('');
    expect(await shown()).not.toMatch(/^Nothing is held/);
    await page.close();
    for (let i = 0; i < 100; i++) {
      expect((await api('DELETE', `/v1/locks/bulk:${String(i).padStart(3, '0')}?namespace=team-a`, cast.ADMIN)).status).toBe(200);
    }
  });

  it('"Forget key" while a listing is in flight: the page stays on the login form, no rows come back', async () => {
    expect((await api('POST', '/v1/locks/secret-job/acquire', cast.B, { ttlMs: 600_000, holder: 'secret-worker' })).status).toBe(200);
    const page = await signedIn();
    await page.locator('#leases tbody tr').first().waitFor();
    // The next listing of locks is slow to answer (a busy store): it is held until the key is forgotten.
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    let caught: () => void = () => undefined;
    const inFlight = new Promise<void>((resolve) => (caught = resolve));
    await page.route(/\/v1\/locks\?/, async (route) => {
      caught();
      await held;
      await route.fallback();
    });
    await inFlight;
    await page.getByRole('button', { name: 'Forget key' }).click();
    expect(await page.locator('#login').isVisible()).toBe(true);
    // The slow answer arrives after the key was forgotten: the console must not come back with it.
    const answered = page.waitForResponse(/\/v1\/locks\?/);
    letGo();
    await answered;
    const cameBack = await page
      .waitForFunction(
        () =>
          !(globalThis as unknown as { document: { getElementById(id: string): { hidden: boolean } } }).document.getElementById('main')
            .hidden,
        undefined,
        { timeout: 1_500 },
      )
      .then(
        () => true,
        () => false,
      );
    expect(cameBack).toBe(false);
    expect(await page.locator('#login').isVisible()).toBe(true);
    expect(await page.locator('#main').isHidden()).toBe(true);
    expect(await page.locator('#leases tbody tr').count()).toBe(0);
    await page.unrouteAll({ behavior: 'ignoreErrors' });
    await page.close();
  });
});
