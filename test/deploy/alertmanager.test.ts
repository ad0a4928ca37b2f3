// The inhibit_rules shipped in deploy/alertmanager/alertmanager.yml, run in a real Alertmanager
// (Debian's prometheus-alertmanager, installed by scripts/ci/apt-install.sh).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ALERTMANAGER_CONFIG, startAlertmanager } from './alertmanager';
import { PROBE_RULE_VALUES, alertsOf, parseRules, renderRules, type Daemon } from './tools';

const JOB = 'products-product-service';

interface AlertStatus {
  labels: Record<string, string>;
  status: { state: 'active' | 'suppressed' | 'unprocessed'; inhibitedBy: string[] };
  fingerprint: string;
}

describe('the Alertmanager inhibit_rules shipped in deploy/alertmanager', () => {
  let alertmanager: Daemon;
  let url = '';
  let dir = '';
  // The severity each alert has in the chart's rules (the probe's alert included), so the posted alerts are labelled as Prometheus sends them.
  const severity = Object.fromEntries(
    alertsOf(parseRules(renderRules({ release: 'products', namespace: 'shop', values: [PROBE_RULE_VALUES] }))).map((rule) => [
      rule.alert ?? '',
      rule.labels?.severity ?? '',
    ]),
  );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'alertmanager-'));
    alertmanager = await startAlertmanager(dir, ALERTMANAGER_CONFIG);
    url = `http://${alertmanager.address}`;
  });

  afterAll(async () => {
    await alertmanager.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const alert = (name: string, labels: Record<string, string>) => ({
    labels: { alertname: name, severity: severity[name] ?? '', ...labels },
    annotations: { summary: name },
    startsAt: new Date().toISOString(),
  });

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

  const key = (labels: Record<string, string>): string =>
    [labels.alertname, labels.namespace, labels.slo, labels.pod].filter((part) => part !== undefined).join('/');
  const pod = { job: JOB, namespace: 'busy', pod: 'products-product-service-6b7f9c8d4-x2k9p' };

  it.each([
    [
      'an outage pages once: ProductServiceDown suppresses the release’s other alerts, not another namespace’s',
      [
        alert('ProductServiceDown', { job: JOB, namespace: 'shop' }),
        alert('ProductServiceTargetDown', { job: JOB, namespace: 'shop', pod: 'products-product-service-6b7f9c8d4-x2k9p' }),
        alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'shop', slo: 'availability' }),
        alert('ProductServiceTrafficStopped', { job: JOB, namespace: 'shop' }),
        alert('ProductServiceTargetDown', { job: JOB, namespace: 'staging', pod: 'products-product-service-6b7f9c8d4-m4q7z' }),
      ],
      ['active', 'suppressed', 'suppressed', 'suppressed', 'active'],
    ],
    [
      'no available replica suppresses the probe, the replica count and the traffic stop of its own release only',
      [
        alert('ProductServiceNoReplicaAvailable', { job: JOB, namespace: 'catalog' }),
        alert('ProductServiceProbeFailing', { job: JOB, namespace: 'catalog' }),
        alert('ProductServiceReplicasMismatch', { job: JOB, namespace: 'catalog' }),
        alert('ProductServiceTrafficStopped', { job: JOB, namespace: 'catalog' }),
        alert('ProductServiceTargetDown', { job: JOB, namespace: 'catalog', pod: 'products-product-service-6b7f9c8d4-x2k9p' }),
        alert('ProductServiceReplicasMismatch', { job: JOB, namespace: 'staging' }),
      ],
      ['active', 'suppressed', 'suppressed', 'suppressed', 'active', 'active'],
    ],
    [
      'the fast burn suppresses the slow burn and the failure count of its own SLO only',
      [
        alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'payments', slo: 'availability' }),
        alert('ProductServiceErrorBudgetBurnSlow', { job: JOB, namespace: 'payments', slo: 'availability' }),
        alert('ProductServiceQuietFailures', { job: JOB, namespace: 'payments', slo: 'availability' }),
        alert('ProductServiceErrorBudgetBurnSlow', { job: JOB, namespace: 'payments', slo: 'latency' }),
      ],
      ['active', 'suppressed', 'suppressed', 'active'],
    ],
    [
      'the availability page suppresses NoIdsIssued, the latency page does not',
      [
        alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'orders', slo: 'availability', long: '1h', short: '5m' }),
        alert('ProductServiceNoIdsIssued', { job: JOB, namespace: 'orders' }),
        alert('ProductServiceErrorBudgetBurnFast', { job: JOB, namespace: 'billing', slo: 'latency', long: '1h', short: '5m' }),
        alert('ProductServiceNoIdsIssued', { job: JOB, namespace: 'billing' }),
      ],
      ['active', 'suppressed', 'active', 'active'],
    ],
    [
      'a saturated event loop suppresses the same pod’s scrape and span warnings',
      [
        alert('ProductServiceEventLoopSaturated', pod),
        alert('ProductServiceSpansDropped', pod),
        alert('ProductServiceSpansDropped', { ...pod, pod: 'products-product-service-6b7f9c8d4-m4q7z' }),
      ],
      ['active', 'suppressed', 'active'],
    ],
  ])('%s', async (_name, alerts, states) => {
    const statuses = await post(alerts);
    expect(Object.fromEntries(statuses.map((s) => [key(s.labels), s.status.state]))).toEqual(
      Object.fromEntries(alerts.map((posted, i) => [key(posted.labels), states[i]])),
    );
    // What suppresses an alert is the first alert of its case.
    for (const [i, s] of statuses.entries()) if (states[i] === 'suppressed') expect(s.status.inhibitedBy, key(s.labels)).toEqual([statuses[0]?.fingerprint]);
  });
});
