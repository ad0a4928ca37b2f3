import { defineConfig } from 'vitest/config';

// One project per proof that needs different machinery, so that `npm test` (the README's
// command) runs on a fresh machine with nothing but `npm ci`, and .ci/run adds the rest
// after installing Docker, helm and Prometheus.
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'service', include: ['test/*.test.ts'], testTimeout: 30_000, hookTimeout: 30_000 } },
      { test: { name: 'container', include: ['test/container/**/*.test.ts'], testTimeout: 600_000, hookTimeout: 900_000 } },
      { test: { name: 'chart', include: ['test/chart/**/*.test.ts'], testTimeout: 120_000, hookTimeout: 300_000 } },
      // The live-alert suite runs its scenarios side by side (it.concurrent), more than vitest's default of 5.
      { test: { name: 'deploy', include: ['test/deploy/**/*.test.ts'], testTimeout: 180_000, hookTimeout: 300_000, maxConcurrency: 16 } },
    ],
  },
});
