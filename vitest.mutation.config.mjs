// What a mutation run (stryker.config.mjs) runs: the `service` project, and, of the `process`
// suites, the one that is the only proof of a file: test/shutdown.test.ts, the signal's path
// through src/shutdown.ts (Connection: close during the delay, the forced close after the timeout).
import { appendFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import base from './vitest.config.mts';

/**
 * With MUTATION_TIMINGS=<file>, each test run (one per mutant) appends a JSON line to the file:
 * its files and tests with their milliseconds, which Stryker's reports do not give.
 */
const timings = {
  onTestRunStart() {
    this.started = performance.now();
  },
  onTestRunEnd(modules) {
    const tests = modules.flatMap((module) =>
      [...module.children.allTests()].map((test) => ({
        test: `${module.moduleId.replace(/.*\/test\//, 'test/')} > ${test.fullName}`,
        ms: Math.round(test.diagnostic()?.duration ?? 0),
        state: test.result().state,
      })),
    );
    const ran = tests.filter(({ state }) => state !== 'skipped');
    appendFileSync(process.env.MUTATION_TIMINGS, `${JSON.stringify({ ms: Math.round(performance.now() - this.started), tests: ran })}\n`);
  },
};

// Every file's tests get what its beforeAll hooks reached, and spawned services report theirs (test/support/mutants.ts).
const setupFiles = ['test/support/mutants.ts'];

export default defineConfig({
  test: {
    project: ['service', 'shutdown'],
    projects: [
      ...base.test.projects.map((project) => ({ test: { ...project.test, setupFiles } })),
      { test: { name: 'shutdown', include: ['test/shutdown.test.ts'], testTimeout: 30_000, hookTimeout: 30_000, setupFiles } },
    ],
    reporters: process.env.MUTATION_TIMINGS === undefined ? ['default'] : ['default', timings],
  },
});
