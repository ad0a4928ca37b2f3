// Runs: remark over the repository's Markdown; src's metrics registry (no build needed).
//
// The documentation agrees with the repository: every relative link and anchor resolves, the
// README keeps its two set-up commands, and docs/observability.md names no metric the service does
// not expose (what each one counts is its HELP text, beside it in src/observability/metrics.ts).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../src/observability/metrics';
import { ROOT } from './support/paths';

describe('the Markdown', () => {
  it('has no relative link or anchor that does not resolve (remark-validate-links)', () => {
    const remark = join(ROOT, 'node_modules', 'remark-cli', 'cli.js');
    const args = ['--quiet', '--frail', '--no-stdout', '--no-color', '--ignore-path', '.gitignore', '--use', 'remark-validate-links=repository:false', '.'];
    const run = spawnSync(process.execPath, [remark, ...args], { cwd: ROOT, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('README.md keeps the two set-up commands', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('npm ci && npm start ');
    expect(readme).toContain('npm ci && npm test ');
  });
});

describe('docs/observability.md', () => {
  it('names, in its Metrics section, only metrics, labels and label values the service exposes', async () => {
    const page = readFileSync(join(ROOT, 'docs', 'observability.md'), 'utf8');
    const metricsSection = page.slice(page.indexOf('## Metrics'), page.indexOf('\n## ', page.indexOf('## Metrics') + 1));
    const named = [...new Set([...metricsSection.matchAll(/`([a-z]+_[a-z0-9_]+)[`{]/g)].map((match) => match[1] ?? ''))];
    expect(named.length).toBeGreaterThan(10);
    // Process metrics on, and a request observed with a trace id (its exemplar), so that every name can appear.
    const metrics = createMetrics({ service: { name: 'product-service', version: 'test', revision: 'test', config: 'test' }, processMetrics: true });
    metrics.observeRequest('POST', '/product', 201, 0.001, '4bf92f3577b34da6a3ce929d0e0e4736');
    const { body } = await metrics.render('application/openmetrics-text');
    expect(named.filter((name) => !new RegExp(`\\b${name}\\b`).test(body))).toEqual([]);
  });
});
