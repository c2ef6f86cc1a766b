import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { requireTool } from '../helpers/tools.js';

const SCRIPT = fileURLToPath(new URL('./python/keyholder_client.py', import.meta.url));

/** The API from another language with no keyholder code at all: Python's standard library only. */
describe('Python (standard library only) client against a running server', () => {
  let server: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('acquires, renews, inspects, releases, and reads the errors', () => {
    const run = spawnSync('python3', ['-I', SCRIPT, server.url], { encoding: 'utf8', timeout: 30_000 });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const steps = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(steps.map((s) => s.step)).toEqual([
      'acquire',
      'renew',
      'inspect',
      'acquire-held',
      'renew-bad-ttl',
      'release',
      'release-again',
      'inspect-free',
    ]);
    const [acquire, renew, inspect] = steps;
    expect(renew?.fencingToken).toBe(acquire?.fencingToken);
    expect(inspect?.fencingToken).toBe(acquire?.fencingToken);
    expect(steps[3]).toMatchObject({ status: 409, code: 'lock_held' });
    expect(Number(steps[3]?.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(steps[4]).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(steps[6]).toMatchObject({ status: 409, code: 'not_owner' });
  });
});
