import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/** Snippets and tables in docs/api.md and docs/client.md, checked against what the code answers. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

describe('docs/api.md: GET /readyz', () => {
  it('names every store kind /readyz can answer', () => {
    const spec = parse(read('openapi.yaml')) as {
      components: { schemas: { Readiness: { properties: { store: { enum: string[] } } } } };
    };
    const kinds = spec.components.schemas.Readiness.properties.store.enum;
    expect(kinds).toContain('etcd');
    const row = read('docs/api.md')
      .split('\n')
      .find((l) => l.startsWith('| `GET /readyz`'));
    expect(row).toBeDefined();
    for (const kind of kinds) expect(row, kind).toContain(`"${kind}"`);
  });
});

describe('docs/client.md: errors table', () => {
  it('lists every code the UnavailableError class stands for (TypeScript and Python map overloaded to it)', async () => {
    const { UnavailableError } = await import('../../src/client/errors.js');
    const py = read('clients/python/keyholder.py');
    expect(py).toMatch(/"overloaded": UnavailableError/);
    const row = read('docs/client.md')
      .split('\n')
      .find((l) => l.startsWith('| `UnavailableError`'));
    expect(row).toBeDefined();
    expect(String(UnavailableError)).toBeDefined();
    expect(row).toContain('`overloaded`');
  });
});

describe('docs/client.md: the Python queue snippet', () => {
  let app: TestApp;
  let base: string;
  beforeAll(async () => {
    app = await buildTestApp();
    base = await app.app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app.close();
  });

  it('works on a key nobody holds (nobody waits: an empty queue, not a KeyError)', async () => {
    const row = read('docs/client.md')
      .split('\n')
      .find((l) => l.startsWith('| who waits'));
    const expr = /`(client\.inspect\(key, queue=True\)[^`]*)`/.exec(row ?? '')?.[1];
    expect(expr).toBeDefined();
    const script = [
      'import sys',
      `sys.path.insert(0, ${JSON.stringify(join(ROOT, 'clients/python'))})`,
      'import keyholder',
      `client = keyholder.Client(${JSON.stringify(base)})`,
      'key = "docs-snippet:free"',
      `print(repr(${expr}))`,
    ].join('\n');
    const run = await promisify(execFile)('python3', ['-c', script], { encoding: 'utf8', timeout: 20_000 }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('[]');
  });
});
