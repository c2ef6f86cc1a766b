import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The keyholder command's flag checks against docs/cli.md: "A missing or malformed flag is named
 * in the message and exits 2". No server is needed: each is refused before any call (or should be).
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'dist/cli/keyholder.js');

function cli(args: string[], env: Record<string, string> = {}) {
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

/** A JavaScript stack trace's frame line. */
const STACK_FRAME = /^\s+at /m;

describe('keyholder flags', { timeout: 120_000 }, () => {
  it('a --wait-ms too large for a timer: named, exit 2, no stack trace', async () => {
    // Nothing listens on port 1: the flag must be refused before any call is made.
    const result = await cli(['acquire', '--key', 'k', '--ttl-ms', '5000', '--wait-ms', '5000000000', '--url', 'http://127.0.0.1:1']);
    expect(result.stderr).not.toMatch(STACK_FRAME);
    expect(result.stderr).toContain('--wait-ms');
    expect(result.code).toBe(2);
  });

  it('a malformed --url (not a URL at all): named, exit 2, refused before any retrying', async () => {
    const startedAt = performance.now();
    const result = await cli(['run', '--key', 'k', '--ttl-ms', '5000', '--url', 'http://[::1', '--', 'true']);
    const tookMs = performance.now() - startedAt;
    expect(result.stderr).toContain('--url');
    expect(result.code).toBe(2);
    // Not the 15 s of retries of a server that does not answer.
    expect(tookMs).toBeLessThan(12_000);
  });
});
