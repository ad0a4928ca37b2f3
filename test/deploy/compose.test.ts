import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseDocument } from 'yaml';
import { ROOT } from '../support/paths';
import { COMPOSE, DASHBOARD, DEPLOY_RULES, PROMETHEUS_INSTALL, alertsOf, readRules, requireTool, run } from './tools';

// No image can be pulled on these machines, so the local stack is proven without running it.

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  tmpfs?: string[];
}

const DEPLOY = join(ROOT, 'deploy');
const CHART_DASHBOARDS = join(ROOT, 'helm', 'product-service', 'files', 'dashboards');
const filesUnder = (path: string): string[] => (statSync(path).isDirectory() ? readdirSync(path).flatMap((name) => filesUnder(join(path, name))) : [path]);

/** Parses YAML strictly: any error or warning (duplicate keys, bad indentation) fails. */
function parseYamlFile(path: string): unknown {
  const doc = parseDocument(readFileSync(path, 'utf8'), { uniqueKeys: true });
  expect([...doc.errors, ...doc.warnings].map(String), relative(ROOT, path)).toEqual([]);
  return doc.toJS() as unknown;
}

describe('local stack (deploy/compose.yaml)', () => {
  let services: Record<string, ComposeService> = {};
  const mounts = (service: string): Array<{ source: string; target: string }> =>
    (services[service]?.volumes ?? []).map((volume) => {
      const [source = '', target = ''] = volume.split(':');
      return { source, target };
    });
  const mountedFile = (service: string, target: string): string => {
    const mount = mounts(service).find((m) => m.target === target);
    if (!mount) throw new Error(`${service} mounts nothing at ${target}`);
    return mount.source;
  };

  beforeAll(() => {
    const compose = requireTool('docker-compose', 'sh scripts/ci/apt-install.sh docker-compose (as root)');
    // `config` validates the file against Compose's schema and prints it resolved (absolute paths).
    const result = run(compose, ['-f', COMPOSE, 'config']);
    if (result.status !== 0) throw new Error(`docker-compose config failed: ${result.stderr}`);
    services = (parse(result.stdout) as { services: Record<string, ComposeService> }).services;
  });

  it('has the service, a collector, a trace backend, Prometheus and Grafana', () => {
    expect(Object.keys(services).sort()).toEqual(['grafana', 'otel-collector', 'product-service', 'prometheus', 'tempo']);
    for (const [name, service] of Object.entries(services)) {
      if (name !== 'product-service') expect(service.image, name).toMatch(/:[0-9v][\w.-]*$/); // pinned versions
      for (const port of service.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/);
    }
  });

  it('builds the service from the repository Dockerfile and sends its traces to the collector', () => {
    const app = services['product-service'];
    expect(app?.build?.context).toBe(ROOT);
    expect(existsSync(join(ROOT, app?.build?.dockerfile ?? 'missing'))).toBe(true);
    expect(app?.environment?.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://otel-collector:4318');
    expect(app?.environment?.OTEL_SERVICE_NAME).toBe('product-service');
    // Game-day faults come from the caller's shell; unset, they are empty, which the service reads as none.
    expect([app?.environment?.FAULT_ERROR_RATIO, app?.environment?.FAULT_DELAY]).toEqual(['', '']);
  });

  it("mounts only files of deploy/ and the chart's dashboards, that exist and parse", () => {
    const mounted = Object.keys(services).flatMap((name) => mounts(name).map((m) => m.source));
    expect(mounted.length).toBeGreaterThanOrEqual(6);
    for (const source of mounted) {
      expect(source.startsWith(DEPLOY + '/') || source === CHART_DASHBOARDS, source).toBe(true);
      expect(existsSync(source), source).toBe(true);
      for (const file of filesUnder(source)) {
        if (file.endsWith('.json')) expect(() => JSON.parse(readFileSync(file, 'utf8')) as unknown, file).not.toThrow();
        else if (/\.ya?ml$/.test(file)) parseYamlFile(file);
        else throw new Error(`unexpected mounted file type: ${file}`);
      }
    }
  });

  it('Prometheus: promtool accepts its config, which loads the rules rendered from the chart, with exemplar storage on', () => {
    const promtool = requireTool('promtool', PROMETHEUS_INSTALL);
    const config = mountedFile('prometheus', '/etc/prometheus/prometheus.yml');
    const check = run(promtool, ['check', 'config', config]);
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const parsed = parseYamlFile(config) as { rule_files: string[]; scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }> };
    // The rules directory is mounted beside the config, so the relative paths resolve in both places.
    expect(mountedFile('prometheus', '/etc/prometheus/rules')).toBe(join(DEPLOY, 'prometheus', 'rules'));
    expect(parsed.rule_files.map((file) => basename(file))).toEqual([basename(DEPLOY_RULES)]);
    expect(readdirSync(join(DEPLOY, 'prometheus', 'rules'))).toEqual([basename(DEPLOY_RULES)]);
    expect(services.prometheus?.command).toContain('--enable-feature=exemplar-storage');
    expect(services.prometheus?.command).toContain('--config.file=/etc/prometheus/prometheus.yml');
    const job = parsed.scrape_configs.find((scrape) => scrape.job_name === 'product-service') as
      { job_name: string; static_configs: Array<{ targets: string[]; labels: Record<string, string> }> } | undefined;
    expect(job?.static_configs[0]?.targets).toEqual(['product-service:9464']);
    const selector = `job="${job?.job_name ?? ''}", namespace="${job?.static_configs[0]?.labels.namespace ?? ''}"`;
    for (const rule of alertsOf(readRules(DEPLOY_RULES)).filter((r) => r.expr.includes('up{'))) expect(rule.expr, rule.alert).toContain(`up{${selector}}`);
  });

  it("the alerts link to the local Grafana's dashboard, which is the chart's file", () => {
    const { uid } = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { uid: string };
    expect(mountedFile('grafana', '/var/lib/grafana/dashboards')).toBe(CHART_DASHBOARDS);
    for (const rule of alertsOf(readRules(DEPLOY_RULES))) {
      expect(rule.annotations?.dashboard_url, rule.alert).toBe(`http://localhost:3000/d/${uid}?var-job=product-service&var-namespace=local`);
    }
  });

  it('the collector receives OTLP/HTTP on 4318 and exports traces to Tempo', () => {
    const config = parseYamlFile(mountedFile('otel-collector', '/etc/otelcol/config.yaml')) as {
      receivers: { otlp: { protocols: { http: { endpoint: string } } } };
      exporters: Record<string, { endpoint: string }>;
      service: { pipelines: { traces: { receivers: string[]; exporters: string[] } } };
    };
    expect(services['otel-collector']?.command).toEqual(['--config=/etc/otelcol/config.yaml']);
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(config.service.pipelines.traces.receivers).toContain('otlp');
    const exporters = config.service.pipelines.traces.exporters.map((name) => config.exporters[name]?.endpoint);
    expect(exporters).toEqual(['tempo:4317']);
  });

  it('Tempo receives OTLP/gRPC on 4317, serves its API on 3200, and stores traces in its tmpfs', () => {
    const config = parseYamlFile(mountedFile('tempo', '/etc/tempo/tempo.yaml')) as {
      server: { http_listen_port: number };
      distributor: { receivers: { otlp: { protocols: { grpc: { endpoint: string } } } } };
      storage: { trace: { wal: { path: string }; local: { path: string } } };
    };
    expect(services.tempo?.command).toEqual(['-config.file=/etc/tempo/tempo.yaml']);
    expect(config.distributor.receivers.otlp.protocols.grpc.endpoint).toBe('0.0.0.0:4317');
    expect(config.server.http_listen_port).toBe(3200);
    const tmpfs = (services.tempo?.tmpfs ?? []).map((entry) => entry.split(':')[0]);
    for (const path of [config.storage.trace.wal.path, config.storage.trace.local.path]) {
      expect(
        tmpfs.some((mount) => mount !== undefined && path.startsWith(mount + '/')),
        path,
      ).toBe(true);
    }
  });

  it('Grafana gets both data sources, exemplars linked to Tempo, and the dashboard', () => {
    const provisioning = mountedFile('grafana', '/etc/grafana/provisioning');
    const datasources = (
      parseYamlFile(join(provisioning, 'datasources', 'datasources.yaml')) as {
        datasources: Array<{
          type: string;
          uid: string;
          url: string;
          jsonData?: { exemplarTraceIdDestinations?: Array<{ name: string; datasourceUid: string }> };
        }>;
      }
    ).datasources;
    const prometheus = datasources.find((ds) => ds.type === 'prometheus');
    const tempo = datasources.find((ds) => ds.type === 'tempo');
    expect(prometheus?.url).toBe('http://prometheus:9090');
    expect(tempo?.url).toBe('http://tempo:3200');
    expect(prometheus?.jsonData?.exemplarTraceIdDestinations).toEqual([
      { name: 'trace_id', datasourceUid: tempo?.uid, urlDisplayLabel: 'Open trace in Tempo' },
    ]);

    const providers = (parseYamlFile(join(provisioning, 'dashboards', 'dashboards.yaml')) as { providers: Array<{ options: { path: string } }> }).providers;
    const dashboards = mountedFile('grafana', providers[0]?.options.path ?? 'missing');
    expect(dashboards).toBe(CHART_DASHBOARDS);
    expect(readdirSync(dashboards)).toContain('product-service.json');
    expect(services.grafana?.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(`${providers[0]?.options.path ?? ''}/product-service.json`);
  });
});
