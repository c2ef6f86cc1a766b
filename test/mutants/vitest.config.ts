import { defineConfig } from 'vitest/config';

/**
 * The tests StrykerJS runs against each mutant of src/domain and src/store: only files that drive the
 * store and the lock service in this process (a mutant is switched on inside the test process, so
 * tests that spawn keyholder processes could never see it). Kept to the safety core so that
 * `npm run test:mutants` stays well under 30 minutes on a 2-core machine.
 */
export default defineConfig({
  test: {
    include: [
      'test/conformance/**/*.test.ts',
      'test/domain/**/*.test.ts',
      'test/unit/random.test.ts',
      'test/http/locks.test.ts',
      'test/http/waiting.test.ts',
      'test/faults/reply-drop.test.ts',
      'test/redis/late-reply.test.ts',
    ],
    // StrykerJS switches mutants on at run time (static mutants are ignored), so the files need no fresh
    // module cache each: sharing one saves re-importing Fastify and ioredis for every file of every run.
    // (A plain `vitest run` with this config then does not exit by itself; StrykerJS keeps it running.)
    isolate: false,
    // A mutant that makes a wait hang fails its test here, before StrykerJS's own timeout would
    // have to kill and restart the whole runner.
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
