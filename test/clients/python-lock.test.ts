import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyholderProcess } from '../helpers/keyholder-process.js';
import { requireTool } from '../helpers/tools.js';

const SCRIPT = fileURLToPath(new URL('./python/lock_flow.py', import.meta.url));

/** clients/python/keyholder.py (standard library only) against a real server: the same lease semantics. */
describe('Python client (clients/python/keyholder.py) against a running server', () => {
  let server: KeyholderProcess;

  beforeAll(async () => {
    requireTool('python3', 'python3');
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('renews in a background thread, releases on exit, sets lease.lost on a force release', async () => {
    const child = spawn('python3', ['-I', SCRIPT, server.url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const steps = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
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
