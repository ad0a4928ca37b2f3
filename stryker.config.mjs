// Mutation testing: `npm run test:mutation` (docs/development.md, "Mutation score"). Stryker mutates
// src/ and runs, for each mutant, the tests that cover it: the `service` project's and seven
// `process` suites' (vitest.mutation.config.mjs).
// Suites that spawn dist/ run a build of the mutated sources made in Stryker's sandbox
// (buildCommand); the child is told the active mutant and reports what it covers
// (test/support/mutants.ts).
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: ['src/**/*.ts'],
  testRunner: 'vitest',
  // Not only the tests that import the mutated file: the spawning ones reach src/ through dist/.
  // Forks, not worker threads: in a thread the stuck-stdout suite's FIFO aborts the test runner.
  vitest: { configFile: 'vitest.mutation.config.mjs', related: false, pool: 'forks' },
  plugins: ['@stryker-mutator/vitest-runner', './scripts/mutation-score.mjs'],
  // Stryker links node_modules into its sandbox only after the build command, which needs it first;
  // the command is run without a shell, its words split at unescaped spaces.
  symlinkNodeModules: false,
  // Built there from the mutated sources, not copied.
  ignorePatterns: ['/dist', '/dist-dev'],
  buildCommand: String.raw`sh -c ln\ -s\ ../../node_modules\ node_modules\ &&\ npm\ run\ build`,
  coverageAnalysis: 'perTest',
  // A mutant's tests get this much more than they took in the dry run before the mutant counts as
  // timed out (killed): the spawned services' start-up varies by seconds with the machine's load.
  timeoutMS: 60_000,
  // The initial run is every test once (about 3 min alone, over 6 beside other work on 2 cores).
  dryRunTimeoutMinutes: 30,
  // A mutant of code that runs only while modules load (a constant's value) needs the whole suite
  // rerun with it (minutes each on 2 cores); it is reported as ignored, not counted.
  ignoreStatic: true,
  // One test process: the machine this runs on has 2 cores (`--concurrency N` to use more).
  concurrency: 1,
  // A second run reuses the first's results for the mutants and tests that did not change. The file
  // stays out of git (reports/ is ignored): it changes with every commit to src/ or test/.
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['progress', 'clear-text', 'json', 'html', 'mutation-score'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  cleanTempDir: 'always',
};
