import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { requireTool } from '../helpers/tools.js';

/**
 * Python against a real server: a hand-written standard-library client (the API from another language
 * with no keyholder code at all), and clients/python/keyholder.py with the same lease semantics as the
 * TypeScript client.
 */
describe('Python (standard library only) against a running server', () => {
  let server: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
  });

  afterAll(async () => {
    await server?.stop();
  });

  /** Runs a script from ./python/ against the server; it prints one JSON object per step and nothing on stderr. */
  async function runScript(name: string): Promise<Array<Record<string, unknown>>> {
    const script = fileURLToPath(new URL(`./python/${name}`, import.meta.url));
    const child = spawn('python3', ['-I', script, server.url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    return stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it('a hand-written client acquires, renews, inspects, releases, and reads the errors', async () => {
    const steps = await runScript('keyholder_client.py');
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
  }, 60_000);

  it('clients/python/keyholder.py renews in a background thread, releases on exit, sets lease.lost on a force release', async () => {
    const steps = await runScript('lock_flow.py');
    const byName = Object.fromEntries(steps.map((s) => [s.step, s]));
    expect(steps.map((s) => s.step)).toEqual(['held-elsewhere', 'held', 'released', 'raised', 'waited', 'lost', 'lease-lost-error', 'end']);
    expect(byName['held-elsewhere']).toMatchObject({ code: 'lock_held', status: 409 });
    expect(byName['held-elsewhere']?.retryAfterMs).toBeGreaterThan(0);
    expect(byName.held).toMatchObject({ lost: false });
    expect(byName.held?.checks).toBeGreaterThanOrEqual(5);
    expect(byName.released).toMatchObject({ held: false });
    expect(byName.raised).toMatchObject({ error: 'boom', held: false });
    expect(byName.raised?.fencingToken).toBeGreaterThan(byName.held?.fencingToken as number);
    expect(byName.waited?.fencingToken).toBeGreaterThan(byName.waited?.previous as number);
    expect(byName.lost).toMatchObject({ set: true, reason: 'not_owner' });
    expect(byName['lease-lost-error']).toMatchObject({ reason: 'not_owner' });
    expect(byName.end).toMatchObject({ held: false });
  }, 60_000);
});
