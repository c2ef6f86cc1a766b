import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const LOGGER = fileURLToPath(new URL('../../src/observability/logger.ts', import.meta.url));

/**
 * Runs a process that logs through createLogger's stdout destination, then blocks its event loop for
 * BLOCK_MS (no timer can fire, but the write already handed to libuv still completes) and exits.
 * Returns each stdout line with whether it arrived before the end of the block (marked on stderr).
 */
const BLOCK_MS = 2000;
function run(body: string): Promise<Array<{ line: string; beforeBlockEnded: boolean }>> {
  const script = `
    const { createLogger, requestLineLogger } = await import(${JSON.stringify(LOGGER)});
    const logger = createLogger('info');
    ${body}
    const until = Date.now() + ${BLOCK_MS};
    while (Date.now() < until) {}
    process.stderr.write('block ended\\n');
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: Array<{ line: string; beforeBlockEnded: boolean }> = [];
    let ended = false;
    let partial = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) if (line.trim()) lines.push({ line, beforeBlockEnded: !ended });
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('block ended')) ended = true;
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(lines) : reject(new Error(`exited ${code}`))));
  });
}

describe('log lines on stdout', () => {
  it('a warning (any line but a request line) is written at once, before the process does anything else', async () => {
    const lines = await run(`logger.warn({ what: 'now' }, 'written at once');`);
    expect(lines.find((l) => l.line.includes('written at once'))).toMatchObject({ beforeBlockEnded: true });
  });

  it('request lines wait for their batch, and the ones still waiting are written at exit', async () => {
    const lines = await run(`requestLineLogger(logger).info({ key: 'k' }, 'request');`);
    expect(lines.find((l) => l.line.includes('"msg":"request"'))).toMatchObject({ beforeBlockEnded: false });
  });

  it('a request line waiting in the batch goes out with the next other line', async () => {
    const lines = await run(`requestLineLogger(logger).info({ key: 'k' }, 'request'); logger.error('then an error');`);
    expect(lines.find((l) => l.line.includes('"msg":"request"'))).toMatchObject({ beforeBlockEnded: true });
    expect(lines.find((l) => l.line.includes('then an error'))).toMatchObject({ beforeBlockEnded: true });
  });
});
