import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The tests StrykerJS runs against each mutant of src/domain and src/store: only files that drive the
 * store and the lock service in this process (a mutant is switched on inside the test process, so
 * tests that spawn keyholder processes could never see it). Kept to the safety core so that
 * `npm run test:mutants` stays well under 30 minutes on a 2-core machine.
 *
 * Left out although in-process: the differential test (one 19 s test that reaches nearly every line
 * of both stores, so every mutant would run it first; the conformance contract covers the same rules
 * per store), the Sentinel contract (the same RedisStore code as the plain Redis contract, behind a
 * Sentinel) and the etcd contract (src/store/etcd is outside the StrykerJS scope, see docs/testing.md).
 */
/**
 * Fastest first: StrykerJS stops a mutant's run at its first failing test, so a mutant the unit tests
 * kill never waits on the slower contract and HTTP tests (vitest's own order runs the longest first).
 */
const FILES = [
  'test/unit/safety-core.test.ts',
  'test/unit/memory-store-clock.test.ts',
  'test/unit/memory-store-rules.test.ts',
  'test/unit/redis-keys.test.ts',
  'test/unit/redis-replies.test.ts',
  'test/unit/random.test.ts',
  'test/redis/scripts.test.ts',
  'test/redis/store-state.test.ts',
  'test/domain/lock-service.test.ts',
  'test/conformance/memory-store.test.ts',
  'test/conformance/redis-store.test.ts',
  'test/http/locks.test.ts',
  'test/http/waiting.test.ts',
  'test/redis/late-reply.test.ts',
  'test/faults/reply-drop.test.ts',
];

class FastestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => FILES.indexOf(relative(spec.project.config.root, spec.moduleId));
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: FILES,
    sequence: { sequencer: FastestFirst },
    // StrykerJS switches mutants on at run time (static mutants are ignored), so the files need no fresh
    // module cache each: sharing one saves re-importing Fastify and ioredis for every file of every run.
    // (A plain `vitest run` with this config then does not exit by itself; StrykerJS keeps it running.)
    isolate: false,
    // A mutant that makes a wait hang fails its test here (killed), before StrykerJS's own timeout
    // (stryker.config.mjs timeoutMS) has to kill and restart the whole runner. The slowest test here
    // takes about 4 s at a load average of 15 on 2 cores.
    testTimeout: 15_000,
    hookTimeout: 30_000,
  },
});
