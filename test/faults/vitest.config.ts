import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The full fault run (npm run test:faults): the checker's own tests and every fault scenario at length.
 * Kept apart from vitest.config.ts so `npm test` stays short.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/faults/checker.test.ts', 'test/faults/long/**/*.test.ts'],
    pool: 'forks',
    // One file at a time: the scenarios kill and pause processes and measure recovery.
    maxWorkers: 1,
    testTimeout: 180_000,
    hookTimeout: 90_000,
  },
});
