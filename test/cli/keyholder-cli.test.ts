import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The compiled CLI, run with plain node as the package's `bin` is (vitest's global setup builds dist/). */
const BIN = join(ROOT, 'dist/cli/keyholder.js');

interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Starts `keyholder ...args`; `done` resolves when it exits. */
function start(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const done = new Promise<Finished>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

/** A process is gone, or a zombie nobody has reaped yet (it runs nothing either way). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

// Every command is a node start-up: seconds each on a starved machine, so the budgets are generous.
describe('keyholder CLI against a real server', { timeout: 120_000 }, () => {
  let server: KeyholderProcess;
  let dir: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => start(args, env).done;
  const key = (name: string) => `cli-${randomUUID().slice(0, 8)}-${name}`;
  const file = (name: string) => join(dir, `${randomUUID().slice(0, 8)}-${name}`);
  const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').filter(Boolean) : []);

  beforeAll(async () => {
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });
    dir = mkdtempSync(join(tmpdir(), 'keyholder-cli-'));
    env = { KEYHOLDER_URL: server.url };
  });

  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('two runs of the same job at once: exactly one command runs, the other exits 75', async () => {
    const k = key('once');
    const log = file('log');
    const go = file('go');
    const job = `echo "$KEYHOLDER_KEY $KEYHOLDER_FENCING_TOKEN" >> ${log}; while [ ! -e ${go} ]; do sleep 0.05; done`;
    const a = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    const b = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    // One of them finds the lock held and gives up while the other's command is still running.
    const first = await Promise.race([a.done, b.done]);
    expect(first.code).toBe(75);
    expect(first.stderr).toContain('held by someone else');
    await vi.waitFor(() => expect(lines(log)).toHaveLength(1), { timeout: 20_000 });
    writeFileSync(go, '');
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect([ra.code, rb.code].sort()).toEqual([0, 75]);
    expect(lines(log)).toHaveLength(1);
    expect(lines(log)[0]).toMatch(new RegExp(`^${k} \\d+$`));
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
  });

  it('with --wait-ms they run one after the other, with increasing fencing tokens', async () => {
    const k = key('queue');
    const log = file('log');
    const job = `echo "start $KEYHOLDER_FENCING_TOKEN" >> ${log}; sleep 0.3; echo "end $KEYHOLDER_FENCING_TOKEN" >> ${log}`;
    const runs = [0, 1].map(() => start(['run', '--key', k, '--ttl-ms', '15000', '--wait-ms', '30000', '--', 'sh', '-c', job], env));
    const results = await Promise.all(runs.map((r) => r.done));
    expect(results.map((r) => r.code)).toEqual([0, 0]);
    const entries = lines(log).map((l) => l.split(' '));
    expect(entries.map(([what]) => what)).toEqual(['start', 'end', 'start', 'end']);
    const tokens = entries.map(([, token]) => Number(token));
    expect(tokens[0]).toBe(tokens[1]);
    expect(tokens[2]).toBe(tokens[3]);
    expect(tokens[2]).toBeGreaterThan(tokens[0] ?? Infinity);
  });

  it('a force release stops the whole process group (a grandchild that ignores SIGTERM too) and exits 76', async () => {
    const k = key('forced');
    const pidFile = file('grandchild');
    // The grandchild ignores SIGTERM, so only the SIGKILL after --kill-grace-ms stops it.
    const job = `sh -c 'trap "" TERM; while true; do sleep 0.05; done' & echo $! > ${pidFile}; wait`;
    const run = start(['run', '--key', k, '--ttl-ms', '6000', '--kill-grace-ms', '500', '--', 'sh', '-c', job], env);
    await vi.waitFor(() => expect(lines(pidFile)).toHaveLength(1), { timeout: 20_000 });
    const grandchild = Number(lines(pidFile)[0]);
    expect(gone(grandchild)).toBe(false);
    const forced = await call(server.url, 'DELETE', `/v1/locks/${k}?namespace=default`);
    expect(forced.status).toBe(200);
    const result = await run.done;
    expect(result.code).toBe(76);
    expect(result.stderr).toContain('not_owner');
    expect(gone(grandchild)).toBe(true);
  });

  it('passes the command\'s exit status through, and 127 for a command that does not exist', async () => {
    expect((await cli('run', '--key', key('status'), '--ttl-ms', '5000', '--', 'sh', '-c', 'exit 7')).code).toBe(7);
    const missing = await cli('run', '--key', key('missing'), '--ttl-ms', '5000', '--', 'no-such-command-here');
    expect(missing.code).toBe(127);
  });

  it('--keep leaves the lock held after the command, until its TTL; without it the lock is released', async () => {
    const kept = key('kept');
    const released = key('released');
    expect((await cli('run', '--key', kept, '--ttl-ms', '60000', '--keep', '--', 'true')).code).toBe(0);
    expect((await cli('run', '--key', released, '--ttl-ms', '60000', '--', 'true')).code).toBe(0);
    const keptState = (await call(server.url, 'GET', `/v1/locks/${kept}`)).body as { held: boolean; ttlRemainingMs: number };
    expect(keptState.held).toBe(true);
    // Not renewed after the command ended: what is left is what the one grant gave.
    expect(keptState.ttlRemainingMs).toBeLessThanOrEqual(60_000);
    expect((await call(server.url, 'GET', `/v1/locks/${released}`)).body).toMatchObject({ held: false });
    // The same tick started again finds its key taken and does not run.
    expect((await cli('run', '--key', kept, '--ttl-ms', '60000', '--keep', '--', 'true')).code).toBe(75);
  });

  it('SIGTERM to keyholder run is passed to the command, and the lock is released', async () => {
    const k = key('sigterm');
    const out = file('out');
    const job = `trap 'echo got-term >> ${out}; exit 3' TERM; echo started >> ${out}; while true; do sleep 0.05; done`;
    const run = start(['run', '--key', k, '--ttl-ms', '15000', '--', 'sh', '-c', job], env);
    await vi.waitFor(() => expect(lines(out)).toEqual(['started']), { timeout: 20_000 });
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: true });
    run.child.kill('SIGTERM');
    const result = await run.done;
    expect(lines(out)).toEqual(['started', 'got-term']);
    expect(result.code).toBe(3);
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
  });

  it('acquire, inspect, renew, release, ls: JSON on stdout, problems on stderr, exit 0 / 75 / 1', async () => {
    const k = key('shell');
    // Long leases: each command is a node start-up, which takes seconds on a loaded machine.
    const acquired = await cli('acquire', '--key', k, '--ttl-ms', '120000', '--holder', 'script');
    expect(acquired.code).toBe(0);
    const grant = JSON.parse(acquired.stdout) as { ownerToken: string; fencingToken: number };
    expect(grant).toMatchObject({ key: k, holder: 'script' });

    const held = await cli('acquire', '--key', k, '--ttl-ms', '5000');
    expect(held.code).toBe(75);
    expect(held.stdout).toBe('');
    expect(JSON.parse(held.stderr)).toMatchObject({ code: 'lock_held', status: 409 });

    const inspected = await cli('inspect', '--key', k);
    expect(JSON.parse(inspected.stdout)).toMatchObject({ held: true, holder: 'script', fencingToken: grant.fencingToken });

    const renewed = await cli('renew', '--key', k, '--owner-token', grant.ownerToken, '--ttl-ms', '180000');
    expect(renewed.code).toBe(0);
    expect(JSON.parse(renewed.stdout)).toMatchObject({ fencingToken: grant.fencingToken, ttlMs: 180000 });

    const listed = await cli('ls', '--namespace', 'default', '--prefix', k);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { locks: Array<{ key: string }> }).locks.map((l) => l.key)).toEqual([k]);

    expect((await cli('release', '--key', k, '--owner-token', grant.ownerToken)).code).toBe(0);
    const again = await cli('release', '--key', k, '--owner-token', grant.ownerToken);
    expect(again.code).toBe(75);
    expect(JSON.parse(again.stderr)).toMatchObject({ code: 'not_owner' });

    const badTtl = await cli('acquire', '--key', k, '--ttl-ms', '1');
    expect(badTtl.code).toBe(1);
    expect(JSON.parse(badTtl.stderr)).toMatchObject({ code: 'invalid_request' });

    const unreachable = await start(['inspect', '--key', k, '--url', 'http://127.0.0.1:1', '--retry-ms', '0'], {}).done;
    expect(unreachable.code).toBe(1);
    expect(JSON.parse(unreachable.stderr)).toMatchObject({ code: 'unreachable' });
  }, 240_000);

  it('--help on every command; bad flags are named, exit 2', async () => {
    for (const command of ['run', 'acquire', 'renew', 'release', 'inspect', 'ls', 'keys']) {
      const help = await cli(command, '--help');
      expect(help.code, command).toBe(0);
      expect(help.stdout, command).toMatch(new RegExp(`^usage: keyholder ${command}`));
    }
    const top = await cli('--help');
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('run');

    const typo = await cli('acquire', '--key', 'k', '--tll-ms', '5000');
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('--tll-ms');
    const notANumber = await cli('run', '--key', 'k', '--ttl-ms', 'soon', '--', 'true');
    expect(notANumber.code).toBe(2);
    expect(notANumber.stderr).toContain('--ttl-ms must be a whole number');
    const missing = await cli('renew', '--key', 'k', '--ttl-ms', '5000');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--owner-token is required');
    const noCommand = await cli('run', '--key', 'k', '--ttl-ms', '5000');
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain('--');
    expect((await cli('frobnicate')).code).toBe(2);

    const minted = await cli('keys', 'new', '--id', 'team-a', '--namespace', 'team-a', '--scopes', 'locks,admin');
    expect(minted.code).toBe(0);
    expect(minted.stdout).toMatch(/\bkh_[A-Za-z0-9_-]{43}\b/);
    expect(minted.stdout).toContain('hash:');
    const badScope = await cli('keys', 'new', '--id', 'team-a', '--namespace', 'team-a', '--scopes', 'root');
    expect(badScope.code).toBe(2);
    expect(badScope.stderr).toContain('--scopes');
    expect((await cli('keys', 'old')).code).toBe(2);
  }, 240_000);
});
