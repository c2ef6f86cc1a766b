import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, RedisServer } from '../helpers/redis-server.js';

/**
 * `npm run redis:migrate-layout` (dist/cli/redis-migrate.js), run as the npm script runs it.
 * It rewrites a deployment's Redis data and must only run with every instance stopped
 * (docs/operations.md): asking it for help, or giving it a flag it does not know, must not run it.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'dist/cli/redis-migrate.js');

function migrate(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr })),
  );
}

describe('redis:migrate-layout', { timeout: 120_000 }, () => {
  let redis: RedisServer;
  // A lock of the layout before shards (`<prefix>{<namespace>}/<name>`, a hash), held for a while.
  const OLD_LOCK = 'keyholder:{team}/held';

  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each([['--help'], ['--dry-run'], ['-n']])('%s does not migrate anything: usage, or a refused flag', async (flag) => {
    const raw = redis.client();
    await raw.hset(OLD_LOCK, { o: 'owner-held', e: String(Date.now() + 60_000), t: '5' });
    await raw.pexpire(OLD_LOCK, 60_000);
    const result = await migrate([flag], { REDIS_URL: redis.url });
    // The old key is where it was: nothing was moved.
    expect(await raw.exists(OLD_LOCK), `"${flag}" ran the migration: ${result.stdout}`).toBe(1);
    expect(result.stdout).not.toContain('"locks"');
    if (flag === '--help') {
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/usage/i);
    } else {
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(flag);
    }
  });

  // docs/operations.md: "It prints what it moved" and the upgrade goes on (start the new version): the
  // command must end once it has, and a second run (a retried upgrade step) moves nothing more.
  it('migrates, prints the report and exits at once; run again, it moves nothing', async () => {
    const raw = redis.client();
    await raw.hset(OLD_LOCK, { o: 'owner-held', e: String(Date.now() + 60_000), t: '5' });
    await raw.pexpire(OLD_LOCK, 60_000);
    const startedAt = performance.now();
    const first = await migrate([], { REDIS_URL: redis.url });
    const tookMs = performance.now() - startedAt;
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ locks: 1 });
    expect(await raw.exists(OLD_LOCK)).toBe(0);
    // The Redis client's connection patience is 20 s with the script's 5 s command timeout.
    expect(tookMs, 'the script ended only this long after its work').toBeLessThan(15_000);
    const again = await migrate([], { REDIS_URL: redis.url });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ locks: 0, permitKeys: 0, queuesDropped: 0, quotaUnits: 0 });
  });

  it('a Redis it cannot reach, or a bad REDIS_URL: one line naming the problem, exit 1 or 2, no stack trace', async () => {
    const closed = `redis://127.0.0.1:${await freePort()}`;
    const unreachable = await migrate([], { REDIS_URL: closed });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('ECONNREFUSED');
    expect(unreachable.stderr).not.toMatch(/^\s+at /m);

    const bad = await migrate([], { REDIS_URL: 'not-a-url' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('REDIS_URL');
    expect(bad.stderr).not.toMatch(/^\s+at /m);
  });
});
