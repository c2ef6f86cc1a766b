import { spawn, spawnSync } from 'node:child_process';

/**
 * Fails (never skips) when a system tool a test drives is missing, saying which Debian package brings
 * it. .ci/run installs them all; see docs/development.md "Test prerequisites".
 */
export function requireTool(command: string, debianPackage: string, versionArgs: string[] = ['--version']): void {
  const probe = spawnSync(command, versionArgs, { encoding: 'utf8', timeout: 30_000 });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `${command} is not installed, and this test needs the real one. Install it with ` +
        `\`sudo apt-get update && sudo apt-get install -y ${debianPackage}\` (Debian/Ubuntu), or run .ci/run.`,
    );
  }
}

/** What a finished child process left: exit status (null if a signal ended it), stdout and stderr. */
export interface ProcessOutput {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end without blocking the event loop (unlike spawnSync), so a server running in
 * the test's own process can answer it. `input` is written to its stdin; without it stdin is closed.
 */
export function runProcess(
  command: string,
  args: string[],
  options: { input?: Buffer; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<ProcessOutput> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(options.input);
  });
}
