// Runs: remark over the repository's Markdown; src in-process for the metrics (no build needed).
//
// The documentation agrees with the repository: every relative link and anchor resolves, the
// README keeps its two set-up commands, and the metrics table of docs/observability.md lists
// exactly the metrics the service exposes.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inProcessForTest } from './support/in-process';
import { ROOT } from './support/paths';

describe('the Markdown', () => {
  it('has no relative link or anchor that does not resolve (remark-validate-links)', () => {
    const remark = join(ROOT, 'node_modules', 'remark-cli', 'cli.js');
    // Every Markdown file but what git ignores; links to other sites are not followed.
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
  it('lists every metric the service exposes, and none it does not', async () => {
    const page = readFileSync(join(ROOT, 'docs', 'observability.md'), 'utf8');
    const metricsSection = page.slice(page.indexOf('## Metrics'), page.indexOf('\n## ', page.indexOf('## Metrics') + 1));
    const documented = [...metricsSection.matchAll(/^\| `([a-z_*]+)`/gm)].map((match) => match[1] ?? '');
    const exposition = await (await fetch((await inProcessForTest()).metricsUrl)).text();
    const exposed = [...exposition.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1] ?? '');
    // Process metrics (prom-client's defaults) are one row, `process_*`, `nodejs_*`; the in-process service has none.
    const named = documented.filter((name) => !name.endsWith('*'));
    expect(exposed.filter((name) => !named.includes(name)).sort(), 'exposed but not in the table').toEqual([]);
    expect(named.filter((name) => !exposed.includes(name)).sort(), 'in the table but not exposed').toEqual([]);
  });
});
