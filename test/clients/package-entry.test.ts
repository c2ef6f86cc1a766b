import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, { types: string; default: string }>;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
};

/** Every module specifier a compiled ES module imports (static and dynamic). */
function importsOf(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  return [
    ...source.matchAll(
      /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm,
    ),
  ].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
}

/** The module specifiers a compiled ES module imports dynamically (`import('…')`). */
function dynamicImportsOf(file: string): string[] {
  return [...readFileSync(file, 'utf8').matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? '');
}

/**
 * The client as an application gets it: `keyholder/client` through the package's exports, compiled,
 * under plain node (vitest's global setup builds dist/).
 */
describe('the keyholder/client package entry', () => {
  it('resolves through package.json exports to dist/, with its type declarations', () => {
    const entry = pkg.exports['./client'];
    expect(entry).toEqual({ types: './dist/client/index.d.ts', default: './dist/client/index.js' });
    expect(existsSync(join(ROOT, entry?.types ?? ''))).toBe(true);
    const script = `const m = await import('${pkg.name}/client'); console.log(JSON.stringify([typeof m.KeyholderClient, typeof m.LockHeldError, import.meta.resolve('${pkg.name}/client')]));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(run.stderr).toBe('');
    const [client, error, resolved] = JSON.parse(run.stdout) as [string, string, string];
    expect([client, error]).toEqual(['function', 'function']);
    expect(relative(ROOT, fileURLToPath(resolved))).toBe('dist/client/index.js');
  });

  it('pulls in no server code and no Fastify: only its own files, node: built-ins, openapi-fetch and zod', () => {
    const seen = new Set<string>();
    const external = new Set<string>();
    const dynamic = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of importsOf(file)) {
        if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
        else external.add(spec);
      }
      for (const spec of dynamicImportsOf(file)) dynamic.add(spec);
    };
    visit(join(ROOT, 'dist/client/index.js'));
    const files = [...seen].map((f) => relative(ROOT, f));
    expect(
      files.every((f) => f.startsWith('dist/client/')),
      files.join(', '),
    ).toBe(true);
    const builtins = new Set(builtinModules.map((m) => `node:${m}`));
    // zod checks the server's answers before the client takes them (src/client/schemas.ts).
    // @opentelemetry/api only by a dynamic import whose failure is caught (trace context when the application has it).
    expect([...external].filter((spec) => !builtins.has(spec)).sort()).toEqual(['@opentelemetry/api', 'openapi-fetch', 'zod']);
    expect([...dynamic]).toEqual(['@opentelemetry/api']);
    // Both are runtime dependencies, so an install without dev dependencies still has them.
    expect(pkg.dependencies['openapi-fetch']).toBeDefined();
    expect(pkg.dependencies.zod).toBeDefined();
  });

  it('the keyholder bin runs from dist/ with plain node', () => {
    expect(pkg.bin.keyholder).toBe('dist/cli/keyholder.js');
    expect(readFileSync(join(ROOT, pkg.bin.keyholder ?? ''), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    const run = spawnSync(process.execPath, [join(ROOT, pkg.bin.keyholder ?? ''), '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^usage: keyholder <command>/);
  });
});
