import { spawnSync } from 'node:child_process';

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
