import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const STAMP = join(ROOT, 'dist', '.build-stamp');

function newestMtimeMs(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newestMtimeMs(join(path, name))));
}

/**
 * Vitest global setup: the CLI and the `keyholder/client` package entry are tested as users run them,
 * compiled in dist/ under plain node. Builds once per run, and only when src/ changed since the last build.
 */
export default function setup(): void {
  const sources = Math.max(...['src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'].map((p) => newestMtimeMs(join(ROOT, p))));
  if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= sources) return;
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
}
