// @ts-check
/* global process */
/**
 * StrykerJS for the safety core (src/domain, src/store, every store): `npm run test:mutants` runs it, then the
 * hand-written mutants (test/mutants/run.ts). The vitest config it uses runs only the tests that
 * exercise the safety core in-process (see test/mutants/vitest.config.ts).
 *
 * The scope is run in parts (STRYKER_PART, see PARTS), each with its own report, so a slow machine
 * keeps the parts it finished; `npm run test:mutants` runs every part and sums them up.
 */
export const PARTS = {
  domain: ['src/domain/**/*.ts'],
  memory: ['src/store/*.ts', 'src/store/memory/**/*.ts', 'src/store/shared/clock.ts', 'src/store/shared/lease-port.ts'],
  // The Redis store in two parts, so that a slow machine keeps the first: the code that reads replies,
  // names keys and loads scripts (mostly killed by the unit and script tests within a second or two),
  // then everything on the store's connection path (each survivor there runs most of the Redis tests).
  'redis-codec': [
    'src/store/redis/replies.ts',
    'src/store/redis/keys.ts',
    'src/store/redis/scripts.ts',
    'src/store/redis/watch-marks.ts',
    'src/store/redis/rate-allowance.ts',
    'src/store/shared/lease-replies.ts',
  ],
  // The wait room serves Redis and etcd; its tests run against Redis.
  redis: [
    'src/store/redis/**/*.ts',
    '!src/store/redis/{replies,keys,scripts,watch-marks,rate-allowance}.ts',
    'src/store/shared/wait-room.ts',
  ],
  // The etcd store: its tests run against a real etcd cluster (one per runner, test/mutants/shared-etcd.ts).
  etcd: ['src/store/etcd/**/*.ts'],
};
const part = /** @type {keyof typeof PARTS | undefined} */ (process.env.STRYKER_PART);
const name = part ?? 'all';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'test/mutants/vitest.config.ts', related: false },
  // Each mutant runs only the tests that reached it in the first (dry) run.
  coverageAnalysis: 'perTest',
  // Mutants in module-level code (constants, the script table) would each need every test re-run with
  // fresh imports; the safety-relevant ones among them are planted by hand instead (test/mutants/mutants.ts).
  ignoreStatic: true,
  mutate: part ? PARTS[part] : Object.values(PARTS).flat(),
  // String literals here are message texts (errors, logs) and Redis key fragments: a changed message is
  // not a safety bug, and a changed key fragment breaks every store test at once. Leaving them out
  // keeps the run within its time budget on a 2-core machine.
  mutator: { excludedMutations: ['StringLiteral'] },
  // Two runners: the machine has two cores. A mutant's run costs the tests that reached it (the test
  // worker and its module cache are kept from run to run: test/mutants/keep-worker.ts); `--runners n`
  // (test/mutants/run.ts) asks for more (the Redis part's tests mostly wait), and the run's record says
  // how many ran.
  concurrency: 2,
  // Above the tests' own time-out (test/mutants/vitest.config.ts, 15 s): a hung test is then a failed
  // test (killed), not a runner StrykerJS has to kill and restart. Only a mutant that spins the event
  // loop (an endless loop) reaches this one; each such costs this long, so it is kept short.
  timeoutMS: 20_000,
  reporters: ['progress', 'clear-text', 'json', 'html'],
  jsonReporter: { fileName: `reports/mutation/stryker-${name}.json` },
  htmlReporter: { fileName: `reports/mutation/stryker-${name}.html` },
  ignorePatterns: ['dist', 'coverage', 'test-artifacts', 'reports', 'bench/results', '.tmp'],
  // `npm run test:mutants -- --incremental` reuses this file's results for mutants whose code and
  // covering tests did not change. A complement for re-runs only: the run's record says it was incremental.
  incrementalFile: `reports/mutation/stryker-incremental-${name}.json`,
  tempDirName: `.tmp/stryker-${name}`,
  cleanTempDir: true,
  thresholds: { high: 90, low: 85, break: null },
};
