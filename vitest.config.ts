import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Long fault runs have their own script (npm run test:faults), the overload burst too (npm run test:overload).
    exclude: ['test/faults/long/**', 'test/load/**', 'node_modules/**'],
    // The CLI and the package's client entry run compiled, as users run them: build dist/ when src/ changed.
    globalSetup: ['test/helpers/build-dist.ts'],
    pool: 'forks',
    // Two cores: more parallel files than that only adds scheduling noise to timing-sensitive tests.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
