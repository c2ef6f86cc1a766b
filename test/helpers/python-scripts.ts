import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

/** A step a client script printed: one JSON object per line. */
export type Step = Record<string, unknown>;

/**
 * Runs a script from test/clients/python/ with one argument (python3 -I, the standard library alone);
 * it prints one JSON object per step and nothing on stderr, and exits 0.
 */
export async function runPythonScript(name: string, arg: string): Promise<Step[]> {
  const script = fileURLToPath(new URL(`../clients/python/${name}`, import.meta.url));
  const child = spawn('python3', ['-I', script, arg], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  expect(stderr).toBe('');
  expect(code).toBe(0);
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Step);
}

/** The steps by the value of their `field` (each script names its steps or cases uniquely). */
export const byName = (steps: Step[], field: string): Record<string, Step | undefined> =>
  Object.fromEntries(steps.map((s) => [String(s[field]), s]));
