// @ts-check
/**
 * StrykerJS for the safety core (src/domain, src/store): `npm run test:mutants` runs it, then the
 * hand-written mutants (test/mutants/run.ts). The vitest config it uses runs only the tests that
 * exercise the safety core in-process (see test/mutants/vitest.config.ts).
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'test/mutants/vitest.config.ts', related: false },
  // Each mutant runs only the tests that reached it in the first (dry) run.
  coverageAnalysis: 'perTest',
  // Mutants in module-level code (constants, the script table) would each need every test re-run with
  // fresh imports, about half the run's time; the safety-relevant ones among them are planted by hand
  // instead (test/mutants/mutants.ts).
  ignoreStatic: true,
  mutate: ['src/domain/**/*.ts', 'src/store/**/*.ts'],
  // The safety tests mostly wait on real timers (leases of a few hundred ms), not on the CPU: four
  // runners keep two cores busy.
  concurrency: 4,
  // Above the tests' own 10 s time-out (test/mutants/vitest.config.ts): a hung test is then a failed
  // test (killed), not a runner StrykerJS has to restart.
  timeoutMS: 30_000,
  reporters: ['progress', 'clear-text', 'json', 'html'],
  jsonReporter: { fileName: 'reports/mutation/stryker.json' },
  htmlReporter: { fileName: 'reports/mutation/stryker.html' },
  ignorePatterns: ['dist', 'coverage', 'test-artifacts', 'reports', 'bench/results', '.tmp'],
  tempDirName: '.tmp/stryker',
  cleanTempDir: true,
  thresholds: { high: 90, low: 85, break: null },
};
