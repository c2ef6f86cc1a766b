import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The overload burst (npm run test:overload): three keyholder processes and 1,500 callers at once. Apart
 * from `npm test` because its figures only mean something when the machine is not also running other test
 * files: on a 2-core machine at a load average of 30, an instance does not read a request for seconds,
 * and leases of a second or three run out before their renewals are read.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/load/**/*.test.ts'],
    globalSetup: ['test/helpers/build-dist.ts'],
    pool: 'forks',
    maxWorkers: 1,
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
