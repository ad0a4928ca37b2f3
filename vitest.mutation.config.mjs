// What a mutation run (stryker.config.mjs) runs: the `service` project but for its code contracts
// (they read src/, which Stryker rewrote), and the `process` suites that are the only proof of a
// file: the signal's path through src/shutdown.ts, the SDK's set-up (telemetry.ts, diagnostics.ts),
// the log stream (logger.ts, stdout.test.ts too), hostile HTTP (connections.ts), npm's stop (main.ts's
// npm-parent watcher). The dev loop stays out: it proves tooling.
import { appendFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';
import { BaseSequencer } from 'vitest/node';
import base from './vitest.config.mts';

/**
 * With MUTATION_TIMINGS=<file>, each test run (one per mutant) appends a JSON line to the file:
 * its files (with the time each spent before its tests) and tests with their milliseconds, which Stryker's reports do not give.
 */
const timings = {
  onTestRunStart(specifications) {
    this.started = performance.now();
    this.running = new Set(specifications.map(({ moduleId }) => moduleId));
  },
  onTestRunEnd(known) {
    // vitest also hands back the files of earlier runs (Stryker reuses one instance), with their old results.
    const modules = known.filter(({ moduleId }) => this.running.has(moduleId));
    const tests = modules.flatMap((module) =>
      [...module.children.allTests()].map((test) => ({
        test: `${module.moduleId.replace(/.*\/test\//, 'test/')} > ${test.fullName}`,
        ms: Math.round(test.diagnostic()?.duration ?? 0),
        state: test.result().state,
      })),
    );
    const ran = tests.filter(({ state }) => state !== 'skipped');
    // Per file, what the run spent before its tests: starting the worker, the setup files, importing the file.
    const files = modules.map((module) => {
      const { prepareDuration, setupDuration, collectDuration, duration } = module.diagnostic();
      return {
        file: module.moduleId.replace(/.*\/test\//, 'test/'),
        prepare: Math.round(prepareDuration),
        setup: Math.round(setupDuration),
        collect: Math.round(collectDuration),
        run: Math.round(duration),
      };
    });
    appendFileSync(process.env.MUTATION_TIMINGS, `${JSON.stringify({ ms: Math.round(performance.now() - this.started), files, tests: ran })}\n`);
  },
};

// Every file's tests get what its beforeAll hooks reached, and spawned services report theirs (test/support/mutants.ts).
const setupFiles = ['test/support/mutants.ts'];
const processProject = base.test.projects.find((project) => project.test.name === 'process');
// In this order, the stuck-stdout suite (minutes) last: a killed mutant's run stops at its first failure, and
// vitest's own order (the slowest file first) spent minutes on stdout.test before the SDK's suites could fail.
const PROCESS_SUITES = ['otel-config', 'telemetry', 'logging', 'shutdown', 'hostile-http', 'npm-stop', 'stdout'].map((name) => `test/${name}.test.ts`);

class ProcessSuitesInOrder extends BaseSequencer {
  async sort(files) {
    const sorted = await super.sort(files);
    const rank = (file) => PROCESS_SUITES.findIndex((suite) => file.moduleId.endsWith(suite));
    const suites = sorted.filter((file) => file.project.name === 'process-suites').sort((a, b) => rank(a) - rank(b));
    return [...sorted.filter((file) => file.project.name !== 'process-suites'), ...suites];
  }
}

export default defineConfig({
  test: {
    project: ['service', 'process-suites'],
    projects: [
      ...base.test.projects.map((project) => ({
        // Group 1, not vitest's default 0: with Stryker's one worker, vitest runs a group-0 project's
        // files in a group of their own after every numbered group, so the process suites would run first.
        test: { ...project.test, setupFiles, exclude: [...(project.test.exclude ?? []), 'test/code-contracts.test.ts'], sequence: { groupOrder: 1 } },
      })),
      // The process project's settings (its timeouts), narrowed to those suites, run after the
      // in-process ones: a mutant's run stops at its first failing test (vitest's bail skips the
      // groups after it), and those fail in milliseconds.
      // One test at a time (npm-stop's are concurrent): a spawned service's coverage is given to the test running then.
      {
        test: { ...processProject.test, name: 'process-suites', include: PROCESS_SUITES, setupFiles, sequence: { groupOrder: 2 }, maxConcurrency: 1 },
      },
    ],
    sequence: { sequencer: ProcessSuitesInOrder },
    reporters: process.env.MUTATION_TIMINGS === undefined ? ['default'] : ['default', timings],
  },
});
