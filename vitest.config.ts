import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

/**
 * Files that compare latencies measured in one run against each other (a tenant's p99 alone and under
 * attack). Beside another test file on a 2-core machine, that file's bursts land in some rounds and not
 * others and decide the ratio: measured, B's watchers read 1.36x alone and 2.4x beside the rest of
 * the suite on a shared CI machine. They run one at a time, after every other file has finished.
 */
const RUN_ALONE = ['test/auth/cross-tenant.test.ts'];
// Long fault runs have their own script (npm run test:faults), the overload burst too (npm run test:overload).
const EXCLUDED = ['test/faults/long/**', 'test/load/**', 'node_modules/**'];

/**
 * Files that run in a worker shared with other files (isolate: false), their modules loaded once per
 * worker rather than once per file: starting a fresh process and importing the server for each of some
 * 220 files cost about a second of CPU apiece, the largest part of the suite's wall time on 2 cores
 * (these directories alone, 2026-12-05: test/http 122.6 -> 87.3 s, test/redis 92.5 -> 71.5 s, test/unit
 * 21.5 -> 9.7 s). These tests start their servers, stores and Redis processes per file, and
 * test/helpers/shared-worker.ts restores any spy or fake timer a file leaves. Left isolated: the CLI,
 * etcd, lint, fault and example files (each a few long runs, where sharing saves little); files that
 * mock a module (vi.mock replaces a module for its own file only, which a module already loaded in a
 * shared worker ignores); and the files that build the OpenAPI document from the route schemas, which
 * the whole suite run shared once produced differently.
 */
const SHARED = ['unit', 'domain', 'http', 'auth', 'conformance', 'clients', 'ops', 'redis'].map((dir) => `test/${dir}/**/*.test.ts`);
const OPENAPI = [
  'test/http/openapi.test.ts',
  'test/http/contract.test.ts',
  'test/http/overloaded-contract.test.ts',
  'test/auth/openapi-security.test.ts',
  'test/auth/route-access.test.ts',
  'test/ops/error-codes.test.ts',
  'test/ops/docs-snippets.test.ts',
  'test/clients/generated-clients.test.ts',
  'test/clients/typescript-client.test.ts',
];
const ISOLATED = [...OPENAPI, ...testFilesContaining('vi.mock(')];

function testFilesContaining(text: string): string[] {
  return readdirSync('test', { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts') && readFileSync(join('test', file), 'utf8').includes(text))
    .map((file) => join('test', file));
}

export default defineConfig({
  test: {
    // The CLI and the package's client entry run compiled, as users run them: build dist/ when src/ changed.
    globalSetup: ['test/helpers/build-dist.ts'],
    pool: 'forks',
    // Two cores: more parallel files than that only adds scheduling noise to timing-sensitive tests.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: SHARED,
          exclude: [...EXCLUDED, ...RUN_ALONE, ...ISOLATED],
          isolate: false,
          setupFiles: ['test/helpers/shared-worker.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          exclude: [...EXCLUDED, ...RUN_ALONE, ...SHARED, ...ISOLATED],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: 'isolated', include: ISOLATED, exclude: [...EXCLUDED, ...RUN_ALONE], sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: RUN_ALONE, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
