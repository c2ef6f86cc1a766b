import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { launchOfflineBrowser, type OfflineBrowser } from '../helpers/offline-browser.js';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

/** The /docs page in a real headless Chromium, with every request off this machine refused. */
describe('/docs in headless Chromium', () => {
  let server: TestApp;
  let baseUrl = '';
  let offline: OfflineBrowser | undefined;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    server = await buildTestApp({ logLevel: 'warn' });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
    // The docs must work without internet: refuse (and record) anything not served by this keyholder.
    offline = await launchOfflineBrowser(baseUrl, { viewport: { width: 1280, height: 1400 }, allowDataUrls: true });
  });

  afterAll(async () => {
    await offline?.close();
    await server?.close();
  });

  it('renders every operation from local assets only, and is saved as a screenshot', async () => {
    if (!offline) throw new Error('no browser');
    const page = await offline.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
    const res = await page.goto(`${baseUrl}/docs`, { waitUntil: 'networkidle', timeout: 30_000 });
    expect(res?.status()).toBe(200);

    for (const operationId of ['acquireLock', 'renewLock', 'releaseLock', 'inspectLock', 'liveness', 'readiness']) {
      await page.getByText(operationId, { exact: true }).first().waitFor({ timeout: 15_000 });
    }
    const text = await page.locator('body').innerText();
    expect(text).toContain('/v1/locks/{key}/acquire');
    expect(text).toContain('Take a lock');
    expect(text).toContain('keyholder');

    mkdirSync(ARTIFACTS, { recursive: true });
    const screenshot = join(ARTIFACTS, 'docs.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    expect(statSync(screenshot).size).toBeGreaterThan(10_000);

    expect(offline.offMachine, 'the docs page asked for something off this machine').toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
