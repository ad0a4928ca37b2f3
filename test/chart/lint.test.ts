// `helm lint --strict`, the strict values schema, NOTES.txt, a copy and a `helm package` of the chart
// (its own files end up in them).
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chartDir, CRD_APIS, helm, HELMS, must, renderNotes, set, valueSets } from './helm';

const scratch = mkdtempSync(join(tmpdir(), 'chart-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// helm lint does not report a template's `fail`, so every set is also rendered (render.test.ts checks
// what helm 4 renders).
describe.each(valueSets)('with $name', ({ args }) => {
  it.each(HELMS)('$helmName lint --strict and template pass', ({ bin }) => {
    const run = helm(['lint', '--strict', chartDir, ...args], undefined, bin);
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('0 chart(s) failed');
    const rendered = helm(['template', 'products', chartDir, '--namespace', 'shop', ...CRD_APIS, ...args], undefined, bin);
    expect(rendered.status, rendered.stderr).toBe(0);
  });
});

describe('values.schema.json', () => {
  it('makes a misspelled key fail helm lint and helm install (render.test.ts: helm template, nested keys and types too)', () => {
    const lint = helm(['lint', '--strict', chartDir, '--set', 'replicaCuont=3']);
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toMatch(/additional properties 'replicaCuont' not allowed/);
    // `helm install --dry-run=client` runs install's own checks without a cluster.
    const install = helm(['install', 'products', chartDir, '--dry-run=client', '--set', 'replicaCuont=3']);
    expect(install.status).not.toBe(0);
    expect(install.stderr).toMatch(/additional properties 'replicaCuont' not allowed/);
  });
});

describe('NOTES.txt', () => {
  it('tells how to reach the service and its metrics (helm install --dry-run=client)', () => {
    const run = helm(['install', 'products', chartDir, '--dry-run=client', '--namespace', 'shop']);
    expect(run.status, run.stderr).toBe(0);
    const notes = run.stdout.slice(run.stdout.indexOf('NOTES:'));
    expect(notes).toContain('http://products-product-service.shop.svc:8080');
    expect(notes).toContain('kubectl --namespace shop port-forward service/products-product-service 8080:8080');
    expect(notes).toContain('port-forward service/products-product-service-metrics 9464:9464');
    expect(notes).toContain('curl http://127.0.0.1:9464/metrics');
    expect(notes).toContain('helm test products --namespace shop');
    expect(notes).toContain('set monitoring.serviceMonitor.enabled=true');
    expect(notes).not.toContain('Diagnostics');
  });

  it.each(['serviceMonitor', 'podMonitor'])('with a %s, names the query that finds its targets by the job it sets', (monitor) => {
    const notes = renderNotes(set(`monitoring.${monitor}.enabled=true`));
    expect(notes).toContain('up{job="products-product-service", namespace="shop"}');
    expect(notes).toContain(`monitoring.${monitor}.labels`);
  });

  it('with diagnostics, says which signal writes what, and where the steps are', () => {
    const report = renderNotes(set('diagnostics.enabled=true'));
    expect(report).toContain('SIGUSR2: a diagnostic report in /diagnostics');
    expect(report).not.toContain('SIGURG');
    const both = renderNotes(set('diagnostics.enabled=true', 'diagnostics.heapSnapshot.enabled=true'));
    expect(both).toContain('SIGURG: a heap snapshot in /diagnostics');
    expect(both).toMatch(/treat it as a secret/);
  });
});

describe('a copy of the chart directory, and its package (helm package)', () => {
  // Copied as a GitOps repository or a vendoring tool would: symlinks kept as links, so one pointing
  // outside the chart would break the copy; packaged from that copy.
  const copy = join(scratch, 'product-service');
  cpSync(chartDir, copy, { recursive: true, verbatimSymlinks: true });
  const run = helm(['package', copy, '--destination', scratch]);
  if (run.status !== 0) throw new Error(`helm package failed: ${run.stderr}`);
  const tgz = join(
    scratch,
    must(
      readdirSync(scratch).find((f) => f.endsWith('.tgz')),
      'the package',
    ),
  );

  it('render the same manifests, rules and dashboard (from its own file) included, as the chart in the repository: it refers to nothing outside itself', () => {
    const monitoring = set('monitoring.prometheusRule.enabled=true', 'monitoring.grafanaDashboard.enabled=true');
    const args = ['--namespace', 'shop', ...CRD_APIS, ...monitoring, ...set('monitoring.serviceMonitor.enabled=true')];
    const fromRepository = helm(['template', 'products', chartDir, ...args]).stdout;
    for (const kind of ['ServiceMonitor', 'PrometheusRule', 'ConfigMap']) expect(fromRepository).toContain(`kind: ${kind}`);
    for (const chart of [copy, tgz]) {
      const rendered = helm(['template', 'products', chart, ...args]);
      expect(rendered.status, rendered.stderr).toBe(0);
      expect(rendered.stdout, chart).toBe(fromRepository);
    }
    const lint = helm(['lint', '--strict', tgz, ...monitoring]);
    expect(lint.status, lint.stdout).toBe(0);
  });
});
