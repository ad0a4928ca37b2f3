import { defineConfig } from 'vitest/config';

// One project per proof that needs different machinery, so that `npm test` (the README's
// command) runs on a fresh machine with nothing but `npm ci`, and .ci/run adds the rest
// after installing Docker, helm and Prometheus.
//
// `service` is the inner loop: src in-process, and the few spawns of dist/ that take a second.
// `process` holds the suites that run whole processes for tens of seconds (telemetry export,
// stuck stdout, shutdown deadlines, the dev loop, stopping through npm) and the hostile clients'
// floods (pipelining, 20 MB bodies).
const PROCESS_SUITES = [
  'test/telemetry.test.ts',
  'test/stdout.test.ts',
  'test/shutdown.test.ts',
  'test/logging.test.ts',
  'test/otel-config.test.ts',
  'test/dev-loop.test.ts',
  'test/npm-stop.test.ts',
  'test/hostile-http.test.ts',
];

export default defineConfig({
  test: {
    // A plain `vitest` (or `npx vitest`) runs the inner loop; `--project NAME` picks any other.
    // @ts-expect-error -- `project` is the CLI's --project, which vitest also reads from the config.
    project: ['service'],
    projects: [
      { test: { name: 'service', include: ['test/*.test.ts'], exclude: PROCESS_SUITES, testTimeout: 30_000, hookTimeout: 30_000 } },
      { test: { name: 'process', include: PROCESS_SUITES, testTimeout: 30_000, hookTimeout: 30_000 } },
      { test: { name: 'container', include: ['test/container/**/*.test.ts'], testTimeout: 600_000, hookTimeout: 900_000 } },
      { test: { name: 'chart', include: ['test/chart/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 300_000 } },
      // The live-alert suite runs its scenarios side by side (it.concurrent), more than vitest's default of 5;
      // its failures print whole (which alerts fired), as CI's summary keeps only a message's first line.
      {
        test: {
          name: 'deploy',
          include: ['test/deploy/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 300_000,
          maxConcurrency: 16,
          chaiConfig: { truncateThreshold: 0 },
        },
      },
    ],
  },
});
