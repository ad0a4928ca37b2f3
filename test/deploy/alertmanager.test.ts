// The inhibit_rules shipped in deploy/alertmanager/alertmanager.yml, run in a real Alertmanager
// (Debian's prometheus-alertmanager, installed by scripts/ci/install-prometheus.sh): alerts shaped as
// the chart's rules raise them are posted to its API, and /api/v2/alerts says which are suppressed,
// and by what.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ROOT } from '../support/paths';
import { freePort } from '../support/service-process';
import { PROMETHEUS_INSTALL, alertsOf, parseRules, renderRules, requireTool, run } from './tools';

const CONFIG = join(ROOT, 'deploy', 'alertmanager', 'alertmanager.yml');
const JOB = 'products-product-service';

interface AlertStatus {
  labels: Record<string, string>;
  status: { state: 'active' | 'suppressed' | 'unprocessed'; inhibitedBy: string[] };
  fingerprint: string;
}

describe('the Alertmanager inhibit_rules shipped in deploy/alertmanager', () => {
  let child: ChildProcess;
  let url = '';
  let dir = '';
  // The severity each alert has in the chart's rules, so the posted alerts are labelled as Prometheus sends them.
  const severity = Object.fromEntries(
    alertsOf(parseRules(renderRules({ release: 'products', namespace: 'shop' }))).map((rule) => [rule.alert ?? '', rule.labels?.severity ?? '']),
  );

  beforeAll(async () => {
    const alertmanager = requireTool('prometheus-alertmanager', PROMETHEUS_INSTALL);
    const amtool = requireTool('amtool', PROMETHEUS_INSTALL);
    const check = run(amtool, ['check-config', CONFIG]);
    expect(check.status, check.stdout + check.stderr).toBe(0);
    dir = mkdtempSync(join(tmpdir(), 'alertmanager-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    child = spawn(
      alertmanager,
      [`--config.file=${CONFIG}`, `--storage.path=${dir}`, `--web.listen-address=127.0.0.1:${port}`, '--cluster.listen-address=', '--log.level=warn'],
      { stdio: 'ignore' },
    );
    await vi.waitFor(async () => expect((await fetch(`${url}/-/ready`)).status).toBe(200), { timeout: 20_000, interval: 200 });
  });

  afterAll(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const alert = (name: string, labels: Record<string, string>) => ({
    labels: { alertname: name, severity: severity[name] ?? '', ...labels },
    annotations: { summary: name },
    startsAt: new Date().toISOString(),
  });

  /** Posts `alerts` and returns what Alertmanager says of each once it has them all. */
  async function post(alerts: Array<ReturnType<typeof alert>>): Promise<AlertStatus[]> {
    const response = await fetch(`${url}/api/v2/alerts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(alerts) });
    expect(response.status).toBe(200);
    return vi.waitFor(
      async () => {
        const all = (await (await fetch(`${url}/api/v2/alerts`)).json()) as AlertStatus[];
        const mine = alerts.map((posted) => all.find((a) => Object.entries(posted.labels).every(([key, value]) => a.labels[key] === value)));
        expect(mine.every((a) => a !== undefined)).toBe(true);
        return mine as AlertStatus[];
      },
      { timeout: 10_000, interval: 200 },
    );
  }

  const state = (statuses: AlertStatus[]): Record<string, string> =>
    Object.fromEntries(
      statuses.map((s) => [
        [s.labels.alertname, s.labels.namespace, s.labels.slo, s.labels.pod].filter((part) => part !== undefined).join('/'),
        s.status.state,
      ]),
    );

  it('an outage pages once: ProductServiceDown suppresses the release’s other alerts, not another namespace’s', async () => {
    const statuses = await post([
      alert('ProductServiceDown', { job: JOB, namespace: 'shop' }),
      alert('ProductServiceTargetDown', { job: JOB, namespace: 'shop', pod: 'products-product-service-6b7f9c8d4-x2k9p' }),
      alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'shop', slo: 'availability' }),
      alert('ProductServiceTrafficStopped', { job: JOB, namespace: 'shop' }),
      alert('ProductServiceTargetDown', { job: JOB, namespace: 'staging', pod: 'products-product-service-6b7f9c8d4-m4q7z' }),
    ]);
    expect(state(statuses)).toEqual({
      'ProductServiceDown/shop': 'active',
      'ProductServiceTargetDown/shop/products-product-service-6b7f9c8d4-x2k9p': 'suppressed',
      'ProductServiceErrorBudgetBurnFast/shop/availability': 'suppressed',
      'ProductServiceTrafficStopped/shop': 'suppressed',
      'ProductServiceTargetDown/staging/products-product-service-6b7f9c8d4-m4q7z': 'active',
    });
    expect(statuses[1]?.status.inhibitedBy).toEqual([statuses[0]?.fingerprint]);
  });

  it('the fast burn suppresses the slow burn and the failure count of its own SLO only', async () => {
    const statuses = await post([
      alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'payments', slo: 'availability' }),
      alert('ProductServiceErrorBudgetBurnSlow', { job: JOB, namespace: 'payments', slo: 'availability' }),
      alert('ProductServiceQuietFailures', { job: JOB, namespace: 'payments', slo: 'availability' }),
      alert('ProductServiceErrorBudgetBurnSlow', { job: JOB, namespace: 'payments', slo: 'latency' }),
    ]);
    expect(state(statuses)).toEqual({
      'ProductServiceErrorBudgetBurnFast/payments/availability': 'active',
      'ProductServiceErrorBudgetBurnSlow/payments/availability': 'suppressed',
      'ProductServiceQuietFailures/payments/availability': 'suppressed',
      'ProductServiceErrorBudgetBurnSlow/payments/latency': 'active',
    });
  });

  it('a saturated event loop suppresses the same pod’s scrape and span warnings', async () => {
    const pod = { job: JOB, namespace: 'busy', pod: 'products-product-service-6b7f9c8d4-x2k9p' };
    const statuses = await post([
      alert('ProductServiceEventLoopSaturated', pod),
      alert('ProductServiceSpansDropped', pod),
      alert('ProductServiceSpansDropped', { ...pod, pod: 'products-product-service-6b7f9c8d4-m4q7z' }),
    ]);
    expect(statuses.map((s) => s.status.state)).toEqual(['active', 'suppressed', 'active']);
  });
});
