/** Steps with their timings, shell commands, and waiting on a condition, for scripts/test-image.ts. */
import { spawnSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';

export interface ShellOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** A failing command is returned, not thrown. */
  allowFailure?: boolean;
  timeoutMs?: number;
}

export interface ShellResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

let logFile: string | undefined;

/** Every command and all it printed go to this file; the console gets the steps only. */
export function logTo(path: string): void {
  logFile = path;
}

function log(text: string): void {
  if (logFile !== undefined) appendFileSync(logFile, text.endsWith('\n') ? text : `${text}\n`);
}

/** Runs a bash command; throws with its output when it fails (unless allowFailure). */
export function sh(command: string, options: ShellOptions = {}): ShellResult {
  log(`$ ${command}${options.cwd ? `   (in ${options.cwd})` : ''}`);
  const result = spawnSync('bash', ['-c', command], {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: 'utf8',
    timeout: options.timeoutMs ?? 900_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  const out: ShellResult = { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
  log(out.stdout + out.stderr + `[exit ${String(out.status)}${result.error ? `, ${result.error.message}` : ''}]`);
  if (out.status !== 0 && !options.allowFailure) {
    const tail = (out.stdout + out.stderr).split('\n').slice(-40).join('\n');
    throw new Error(`\`${command}\` failed (exit ${String(out.status)}):\n${tail}`);
  }
  return out;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Retries `check` until it returns without throwing, or throws its last error after `timeoutMs`.
 * The budgets are generous (containers start slowly on a busy machine); the wait ends as soon as the
 * condition holds.
 */
export async function waitFor<T>(what: string, check: () => Promise<T> | T, timeoutMs: number, intervalMs = 500): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(`${what}: not within ${timeoutMs / 1000} s: ${error instanceof Error ? error.message : String(error)}`, {
          cause: error,
        });
      }
    }
    await sleep(intervalMs);
  }
}

const timings: Array<{ name: string; seconds: number }> = [];

/** Runs one named step, printing it with its duration; a failing step ends the run. */
export async function step(name: string, body: () => Promise<void> | void): Promise<void> {
  const started = Date.now();
  process.stdout.write(`- ${name} ... `);
  log(`\n=== ${name}`);
  try {
    await body();
  } catch (error) {
    process.stdout.write(`FAILED after ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    throw error;
  }
  const seconds = (Date.now() - started) / 1000;
  timings.push({ name, seconds });
  process.stdout.write(`ok (${seconds.toFixed(1)} s)\n`);
}

export function totalSeconds(): number {
  return timings.reduce((sum, t) => sum + t.seconds, 0);
}
