import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;
const depcruise = join(root, 'node_modules/.bin/depcruise');
const config = join(root, '.dependency-cruiser.cjs');

/** A tiny project laid out like src/, written to a temp directory. */
function fixture(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'kh-depcruise-'));
  const all = {
    'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true } }),
    'package.json': JSON.stringify({ name: 'fixture', type: 'module' }),
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  dirs.push(dir);
  return dir;
}
const dirs: string[] = [];

/** Runs the same command `npm run lint` runs, in `dir`; returns its exit code and report. */
async function check(dir: string): Promise<{ code: number; report: string }> {
  try {
    const { stdout } = await run(depcruise, ['src', '--config', config], { cwd: dir });
    return { code: 0, report: stdout };
  } catch (err) {
    const failed = err as { code: number; stdout: string };
    return { code: failed.code, report: failed.stdout };
  }
}

/** Each case starts dependency-cruiser (and TypeScript) once: seconds on a quiet machine, far more on a busy one. */
const CRUISE_TIMEOUT_MS = 180_000;

describe('the dependency rules in npm run lint', () => {
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'pass on a domain that imports nothing outside itself',
    async () => {
      const dir = fixture({
        'src/domain/rules.ts': 'export const rule = 1;\n',
        'src/http/routes.ts': "import { rule } from '../domain/rules.js';\nexport const route = rule;\n",
      });
      const { code, report } = await check(dir);
      expect(report).toContain('no dependency violations found');
      expect(code).toBe(0);
    },
    CRUISE_TIMEOUT_MS,
  );

  it(
    'fail on a domain module importing http, and on the folder cycle it makes',
    async () => {
      const dir = fixture({
        'src/domain/rules.ts': "import { status } from '../http/problem.js';\nexport const rule = status;\n",
        'src/http/problem.ts': "import { rule } from '../domain/rules.js';\nexport const status = 409;\nexport const used = () => rule;\n",
      });
      const { code, report } = await check(dir);
      expect(code).not.toBe(0);
      expect(report).toContain('domain-is-independent: src/domain/rules.ts → src/http/problem.ts');
      expect(report).toContain('no-folder-cycles');
    },
    CRUISE_TIMEOUT_MS,
  );

  it(
    'pass on stores that share code through store/shared, and fail on a store importing another store',
    async () => {
      const shared = {
        'src/store/shared/wait-room.ts': 'export const room = 1;\n',
        'src/store/redis/replies.ts': 'export const reply = 1;\n',
        'src/store/redis/store.ts':
          "import { room } from '../shared/wait-room.js';\nimport { reply } from './replies.js';\nexport const redis = room + reply;\n",
      };
      const clean = await check(
        fixture({ ...shared, 'src/store/etcd/store.ts': "import { room } from '../shared/wait-room.js';\nexport const etcd = room;\n" }),
      );
      expect(clean.report).toContain('no dependency violations found');
      expect(clean.code).toBe(0);

      const dir = fixture({
        ...shared,
        'src/store/etcd/store.ts': "import { reply } from '../redis/replies.js';\nexport const etcd = reply;\n",
      });
      const { code, report } = await check(dir);
      expect(code).not.toBe(0);
      expect(report).toContain('stores-are-separate: src/store/etcd/store.ts → src/store/redis/replies.ts');
    },
    CRUISE_TIMEOUT_MS,
  );

  it(
    'fail on a folder cycle that no single module cycle shows',
    async () => {
      const dir = fixture({
        'src/store/a.ts': "import { b } from '../http/b.js';\nexport const a = b;\n",
        'src/http/b.ts': 'export const b = 1;\n',
        'src/http/c.ts': "import { a } from '../store/a.js';\nexport const c = a;\n",
      });
      const { code, report } = await check(dir);
      expect(code).not.toBe(0);
      expect(report).toMatch(/no-folder-cycles: src\/(store|http) →/);
      expect(report).not.toContain('no-module-cycles');
    },
    CRUISE_TIMEOUT_MS,
  );
});
