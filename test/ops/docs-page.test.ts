import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { requireTool } from '../helpers/tools.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

/** The /docs page in a real headless Chromium, with every request off this machine refused. */
describe('/docs in headless Chromium', () => {
  let server: TestApp;
  let baseUrl = '';
  let profileDir = '';
  let browser: BrowserContext | undefined;
  const offMachine: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    requireTool(CHROMIUM, 'chromium');
    server = await buildTestApp({ logLevel: 'warn' });
    baseUrl = await server.app.listen({ port: 0, host: '127.0.0.1' });
    profileDir = mkdtempSync(join(tmpdir(), 'keyholder-chromium-'));
    browser = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
      viewport: { width: 1280, height: 1400 },
    });
    // The docs must work without internet: refuse (and record) anything not served by this keyholder.
    await browser.route('**/*', async (route) => {
      const url = route.request().url();
      if (url.startsWith(`${baseUrl}/`) || url.startsWith('data:')) return route.continue();
      offMachine.push(url);
      return route.abort();
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  });

  it('renders every operation from local assets only, and is saved as a screenshot', async () => {
    if (!browser) throw new Error('no browser');
    const page = await browser.newPage();
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

    expect(offMachine, 'the docs page asked for something off this machine').toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
