import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Long fault runs have their own script (npm run test:faults).
    exclude: ['test/faults/long/**', 'node_modules/**'],
    pool: 'forks',
    // Two cores: more parallel files than that only adds scheduling noise to timing-sensitive tests.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
