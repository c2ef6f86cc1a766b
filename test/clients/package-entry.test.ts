import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

  it('works where @opentelemetry/api is not installed: the calls go through, without trace context', () => {
    // The compiled client alone, beside only its two required dependencies (and openapi-fetch's own).
    const dir = mkdtempSync(join(tmpdir(), 'keyholder-client-no-otel-'));
    try {
      cpSync(join(ROOT, 'dist/client'), join(dir, 'client'), { recursive: true });
      writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
      mkdirSync(join(dir, 'node_modules'));
      for (const dep of ['openapi-fetch', 'openapi-typescript-helpers', 'zod'])
        symlinkSync(join(ROOT, 'node_modules', dep), join(dir, 'node_modules', dep), 'dir');
      // A stand-in server answering one inspect, recording the traceparent it was sent.
      const script = `
        import { createServer } from 'node:http';
        import { KeyholderClient } from './client/index.js';
        let traceparent = 'none seen';
        const server = createServer((req, res) => {
          traceparent = req.headers.traceparent ?? null;
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"key":"k","held":false,"index":1}');
        });
        await new Promise((r) => server.listen(0, '127.0.0.1', r));
        const kh = new KeyholderClient({ baseUrl: 'http://127.0.0.1:' + server.address().port, holdSpans: true });
        const status = await kh.inspect('k');
        server.close();
        console.log(JSON.stringify({ status, traceparent }));`;
      const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
      expect(run.stderr).toBe('');
      expect(JSON.parse(run.stdout)).toEqual({ status: { key: 'k', held: false, index: 1 }, traceparent: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the keyholder bin runs from dist/ with plain node', () => {
    expect(pkg.bin.keyholder).toBe('dist/cli/keyholder.js');
    expect(readFileSync(join(ROOT, pkg.bin.keyholder ?? ''), 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    const run = spawnSync(process.execPath, [join(ROOT, pkg.bin.keyholder ?? ''), '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^usage: keyholder <command>/);
  });
});
