import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, KeyholderProcess } from '../helpers/keyholder-process.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * `keyholder run` against what docs/cli.md promises.
 * A real keyholder server over a real redis-server; the compiled CLI run with plain node, as users run it.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'dist/cli/keyholder.js');

interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

function start(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let finished: Finished | undefined;
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const done = new Promise<Finished>((resolve) =>
    child.once('close', (code, signal) => {
      finished = { code, signal, stdout, stderr };
      resolve(finished);
    }),
  );
  return { child, done, finished: () => finished };
}

/** A process runs (it exists and is not a zombie). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

describe('keyholder run', { timeout: 180_000 }, () => {
  let redis: RedisServer;
  let server: KeyholderProcess;
  let dir: string;
  let env: Record<string, string>;
  const key = (name: string) => `run-${randomUUID().slice(0, 8)}-${name}`;
  const file = (name: string) => join(dir, `${randomUUID().slice(0, 8)}-${name}`);
  const lines = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').filter(Boolean) : []);
  const leftRunning: number[] = [];

  beforeAll(async () => {
    redis = await RedisServer.start();
    server = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', REDIS_URL: redis.url } });
    dir = mkdtempSync(join(tmpdir(), 'keyholder-run-cli-'));
    env = { KEYHOLDER_URL: server.url };
  });

  afterAll(async () => {
    for (const pid of leftRunning) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await server?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // docs/cli.md: "The command never outlives its lease. It runs in its own process group [...] The guardian
  // stops the whole process group (grandchildren too)". A command that leaves a background process behind
  // (a script that starts a worker and exits without `wait`) must not have it run on after the lock is
  // given back: a second run of the same key would then run beside it.
  it('a process the command left running in its group is gone by the time the lock is given back', async () => {
    const k = key('background');
    const pidFile = file('bg');
    const run = start(
      [
        'run',
        '--key',
        k,
        '--ttl-ms',
        '10000',
        '--kill-grace-ms',
        '500',
        '--',
        'sh',
        '-c',
        `sleep 120 </dev/null >/dev/null 2>&1 & echo $! > ${pidFile}; exit 0`,
      ],
      env,
    );
    const result = await run.done;
    expect(result.stderr).toBe('');
    const background = Number(lines(pidFile)[0]);
    expect(background).toBeGreaterThan(0);
    if (running(background)) leftRunning.push(background);
    // keyholder run has exited and released the lock...
    expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ held: false });
    // ...so nothing of its command may still run.
    expect(running(background), 'the background process of the command still runs after the lock was released').toBe(false);
    // The command's own status is kept.
    expect(result.code).toBe(0);
  });

  // docs/cli.md's own example: "deploys queue up for up to 10 minutes instead of failing"
  //   keyholder run --key deploy:prod --ttl-ms 30000 --wait-ms 600000 -- ./deploy.sh
  // against a server with the default configuration (LOCK_MAX_WAIT_MS 60000).
  it('the documented --wait-ms 600000 example queues behind the holder and runs once the lock is free', async () => {
    const k = key('deploy');
    const out = file('out');
    const holder = await call(server.url, 'POST', `/v1/locks/${k}/acquire`, { ttlMs: 60_000 });
    expect(holder.status).toBe(200);
    const run = start(['run', '--key', k, '--ttl-ms', '30000', '--wait-ms', '600000', '--', 'sh', '-c', `echo ran > ${out}`], env);
    // Queued behind the holder (or, on the code before, already given up).
    await vi.waitFor(
      async () => {
        if (run.finished()) return;
        expect((await call(server.url, 'GET', `/v1/locks/${k}`)).body).toMatchObject({ waiters: 1 });
      },
      { timeout: 120_000, interval: 100 },
    );
    expect(
      (await call(server.url, 'POST', `/v1/locks/${k}/release`, { ownerToken: (holder.body as { ownerToken: string }).ownerToken })).status,
    ).toBe(200);
    const result = await run.done;
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(lines(out)).toEqual(['ran']);
  });

  // docs/cli.md: "--retry-ms (how long to keep retrying 503, 429, 408 and lost connections; default 15000)".
  // The server goes away as the command finishes: the release at the end is retried for as long as
  // --retry-ms says, then keyholder run exits with the command's status (the lease ends by its TTL).
  // On the code before it retried until the lease's own end, here most of a minute after the command.
  it('the release after the command is retried for --retry-ms, not until the lease would end', { timeout: 240_000 }, async () => {
    const own = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', REDIS_URL: redis.url } });
    try {
      const k = key('release-unreachable');
      const ttlMs = 60_000;
      // The command stops the server (a process this test started) and exits 0.
      const run = start(
        ['run', '--key', k, '--ttl-ms', String(ttlMs), '--retry-ms', '1000', '--', 'sh', '-c', `kill -KILL ${own.pid}; exit 0`],
        { KEYHOLDER_URL: own.url },
      );
      await vi.waitFor(() => expect(own.exit).toBeDefined(), { timeout: 120_000, interval: 50 });
      const serverGoneAt = performance.now();
      const result = await run.done;
      const tookMs = performance.now() - serverGoneAt;
      expect(result.code).toBe(0);
      // 1 s of retries, and a node exit; far below the ~58 s left of the lease.
      expect(tookMs, `keyholder run exited ${tookMs.toFixed(0)} ms after the server went away`).toBeLessThan(20_000);
    } finally {
      await own.stop();
    }
  });
});
