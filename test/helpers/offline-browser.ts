import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { requireTool } from './tools.js';

/** The system Chromium (Debian's package): playwright-core drives it and downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

export interface OfflineBrowser {
  readonly context: BrowserContext;
  /** Every URL the pages asked for, in order. */
  readonly requested: string[];
  /** Every request the page made for something not served by `baseUrl` (each was refused). */
  readonly offMachine: string[];
  close(): Promise<void>;
}

/**
 * Headless Chromium with a throw-away profile in which the pages under test must work without the
 * internet: every request not served by `baseUrl` (nor a `data:` URL, when allowed) is refused and
 * recorded, so a test can assert that nothing left this machine.
 */
export async function launchOfflineBrowser(
  baseUrl: string,
  options: { readonly viewport: { width: number; height: number }; readonly allowDataUrls?: boolean },
): Promise<OfflineBrowser> {
  requireTool(CHROMIUM, 'chromium');
  const profileDir = mkdtempSync(join(tmpdir(), 'keyholder-chromium-'));
  const offMachine: string[] = [];
  const requested: string[] = [];
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profileDir, {
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
      viewport: options.viewport,
    });
  } catch (err) {
    rmSync(profileDir, { recursive: true, force: true });
    throw err;
  }
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    requested.push(url);
    if (url.startsWith(`${baseUrl}/`) || (options.allowDataUrls === true && url.startsWith('data:'))) return route.continue();
    offMachine.push(url);
    return route.abort();
  });
  return {
    context,
    requested,
    offMachine,
    async close() {
      await context.close();
      rmSync(profileDir, { recursive: true, force: true });
    },
  };
}
