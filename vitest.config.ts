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
        test: { name: 'parallel', include: ['test/**/*.test.ts'], exclude: [...EXCLUDED, ...RUN_ALONE], sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: RUN_ALONE, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
