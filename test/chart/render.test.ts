// Renders the chart with `helm template` over the defaults and every ci/*-values.yaml, validates
// every object against its API schema, and checks the policies the chart promises.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { IPodSpec, IProbe } from 'kubernetes-models/v1';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import {
  chartDir,
  containerOf,
  containerPort,
  deploymentOf,
  envNames,
  envValue,
  findOne,
  mainContainer,
  must,
  named,
  ofKind,
  podSpecOf,
  set,
  setJson,
  template,
  templateFails,
  valueSets,
  type K8sObject,
} from './helm';
import { validateObject } from './validate';
import { DEFAULT_MAX_CONNECTIONS } from '../../src/config';

const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { version: string; appVersion: string };
const imageUid = 65532; // the image's numeric USER (Dockerfile)
const selectorKeys = ['app.kubernetes.io/instance', 'app.kubernetes.io/name'];

function podSpecs(objects: K8sObject[]): { name: string; spec: IPodSpec }[] {
  return [
    ...ofKind(objects, 'Deployment').map((d) => ({ name: `Deployment ${d.metadata?.name ?? ''}`, spec: podSpecOf(d) })),
    ...ofKind(objects, 'Pod').map((p) => ({ name: `Pod ${p.metadata?.name ?? ''}`, spec: must(p.spec, 'Pod spec') })),
  ];
}

/** How long a probe fails before it acts: periodSeconds × failureThreshold. */
const outage = (p?: IProbe) => must(p?.periodSeconds, 'periodSeconds') * must(p?.failureThreshold, 'failureThreshold');

/** The NetworkPolicies of the server pods (not the helm test pod's, a test hook). */
const serverPolicies = (objects: K8sObject[]) => ofKind(objects, 'NetworkPolicy').filter((np) => np.metadata?.annotations?.['helm.sh/hook'] === undefined);

/** Voluntary evictions a PDB allows when `pods` pods are healthy (what `kubectl drain` needs > 0). */
function allowedDisruptions(pdb: IPodDisruptionBudget, pods: number): number {
  const asCount = (v: number | string) => (typeof v === 'number' ? v : Math.ceil((pods * Number.parseInt(v, 10)) / 100)); // the API rounds up
  const spec = must(pdb.spec, 'PDB spec');
  if (spec.maxUnavailable !== undefined) return asCount(spec.maxUnavailable);
  return pods - asCount(must(spec.minAvailable, 'PDB minAvailable'));
}

describe.each(valueSets)('helm template with $name', ({ args }) => {
  const objects = template(args);
  const deployment = findOne(objects, 'Deployment');
  const container = mainContainer(deployment);
  const podSpec = podSpecOf(deployment);
  const selector = must(deployment.spec?.selector.matchLabels, 'Deployment selector');
  const services = ofKind(objects, 'Service');
  const service = named(objects, 'Service', deployment.metadata?.name ?? '');
  const metricsService = named(objects, 'Service', `${deployment.metadata?.name ?? ''}-metrics`);

  it('renders only objects valid against the Kubernetes API and CRD schemas', () => {
    expect(objects.length).toBeGreaterThan(3);
    for (const obj of objects) validateObject(obj);
  });

  it('puts the standard labels on every object and the namespace on every namespaced one', () => {
    for (const obj of objects) {
      const labels = obj.metadata.labels ?? {};
      const what = `${obj.kind} ${obj.metadata.name}`;
      for (const key of ['helm.sh/chart', 'app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by']) {
        expect(labels, `${what} label ${key}`).toHaveProperty([key]);
      }
      expect(labels['helm.sh/chart'], what).toBe(`product-service-${chart.version}`);
      if (obj.kind !== 'Pod') expect(labels['app.kubernetes.io/version'], `${what} version label`).toBeTruthy();
      expect(obj.metadata.namespace, `${what} namespace`).toBeTruthy();
    }
  });

  it('meets the restricted Pod Security Standard in every pod', () => {
    for (const { name, spec } of podSpecs(objects)) {
      expect(spec.automountServiceAccountToken, name).toBe(false);
      expect(spec.hostNetwork ?? false, name).toBe(false);
      expect(spec.hostPID ?? false, name).toBe(false);
      expect(spec.hostIPC ?? false, name).toBe(false);
      const pod = must(spec.securityContext, `${name} securityContext`);
      expect(pod.runAsNonRoot, name).toBe(true);
      expect(pod.runAsUser, name).toBe(imageUid);
      expect(pod.runAsGroup, name).toBe(imageUid);
      expect(pod.seccompProfile?.type, name).toBe('RuntimeDefault');
      for (const volume of spec.volumes ?? []) {
        const type = Object.keys(volume).find((k) => k !== 'name');
        expect(['emptyDir', 'configMap', 'secret', 'projected', 'downwardAPI', 'ephemeral', 'persistentVolumeClaim', 'csi'], name).toContain(type);
      }
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        const what = `${name} ${c.name}`;
        const sc = must(c.securityContext, `${what} securityContext`);
        expect(sc.allowPrivilegeEscalation, what).toBe(false);
        expect(sc.privileged ?? false, what).toBe(false);
        expect(sc.capabilities?.drop, what).toEqual(['ALL']);
        expect(sc.capabilities?.add ?? [], what).toEqual([]);
        expect(sc.readOnlyRootFilesystem, what).toBe(true);
        expect(sc.runAsUser ?? pod.runAsUser, what).not.toBe(0);
        for (const p of c.ports ?? []) expect(p.hostPort, `${what} hostPort`).toBeUndefined();
      }
    }
    const tmp = must(container.volumeMounts?.find((m) => m.mountPath === '/tmp')?.name, '/tmp mount');
    expect(podSpec.volumes?.find((v) => v.name === tmp)?.emptyDir).toBeDefined();
  });

  it('probes GET /health: startup and readiness on the http port, liveness on the probe port', () => {
    expect(containerPort(container, 'http')).toBe(Number(envValue(container, 'PORT')));
    expect(containerPort(container, 'metrics')).toBe(Number(envValue(container, 'METRICS_PORT')));
    expect(containerPort(container, 'probe')).toBe(Number(envValue(container, 'PROBE_PORT')));
    for (const name of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
      expect(container[name]?.httpGet, name).toEqual({ path: '/health', port: name === 'livenessProbe' ? 'probe' : 'http' });
      // A startup probe guards the slow start, so no long initial delays.
      expect(container[name]?.initialDelaySeconds ?? 0, name).toBeLessThanOrEqual(5);
    }
    expect(outage(container.startupProbe)).toBeGreaterThanOrEqual(30);
    // Liveness tolerates more than readiness: a busy pod is unrouted long before it is restarted.
    expect(outage(container.livenessProbe)).toBeGreaterThan(outage(container.readinessProbe));
  });

  it('gives the pod a grace period covering SHUTDOWN_DELAY + SHUTDOWN_TIMEOUT', () => {
    const delay = Number(envValue(container, 'SHUTDOWN_DELAY'));
    const timeout = Number(envValue(container, 'SHUTDOWN_TIMEOUT'));
    expect(delay).toBeGreaterThan(0);
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(delay + timeout);
  });

  it('uses a pinned image: a version tag or a digest, never latest', () => {
    const image = must(container.image, 'image');
    expect(image).toMatch(/^[^@]+:[^:@/]+(@sha256:[a-f0-9]{64})?$/);
    expect(image).not.toMatch(/:latest(@|$)/);
  });

  it('sets CPU and memory requests and a memory limit', () => {
    expect(container.resources?.requests?.cpu).toBeTruthy();
    expect(container.resources?.requests?.memory).toBeTruthy();
    expect(container.resources?.limits?.memory).toBeTruthy();
  });

  it('renders every env name once, and passes the OpenTelemetry resource from the downward API', () => {
    const names = envNames(container);
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
    const fields = { K8S_POD_NAME: 'metadata.name', K8S_NAMESPACE_NAME: 'metadata.namespace', K8S_NODE_NAME: 'spec.nodeName' };
    for (const [name, fieldPath] of Object.entries(fields)) {
      expect(container.env?.find((e) => e.name === name)?.valueFrom?.fieldRef?.fieldPath).toBe(fieldPath);
      // The kubelet expands $(VAR) only from variables defined earlier in the list.
      expect(names.indexOf(name)).toBeLessThan(names.indexOf('OTEL_RESOURCE_ATTRIBUTES'));
    }
    expect(envValue(container, 'OTEL_RESOURCE_ATTRIBUTES').split(',')).toEqual(
      expect.arrayContaining(['k8s.pod.name=$(K8S_POD_NAME)', 'k8s.namespace.name=$(K8S_NAMESPACE_NAME)', 'k8s.node.name=$(K8S_NODE_NAME)']),
    );
    expect(envValue(container, 'OTEL_SERVICE_NAME')).toBe('product-service');
  });

  it('selects pods by name and instance only, everywhere', () => {
    expect(Object.keys(selector).sort()).toEqual(selectorKeys);
    expect(deployment.spec?.template.metadata?.labels).toMatchObject(selector);
    expect(services).toHaveLength(2);
    for (const svc of services) expect(svc.spec?.selector).toEqual(selector);
    for (const pdb of ofKind(objects, 'PodDisruptionBudget')) expect(pdb.spec?.selector?.matchLabels).toEqual(selector);
    for (const np of serverPolicies(objects)) expect(np.spec?.podSelector.matchLabels).toEqual(selector);
    for (const pm of ofKind(objects, 'PodMonitor')) expect(pm.spec.selector.matchLabels).toEqual(selector);
    // The helm test pod must not look like a server to the Service, PDB or NetworkPolicy.
    for (const pod of ofKind(objects, 'Pod')) expect(pod.metadata?.labels).not.toMatchObject(selector);
    for (const tsc of podSpec.topologySpreadConstraints ?? []) expect(tsc.labelSelector?.matchLabels).toEqual(selector);
  });

  it('leaves replicas to the HPA when there is one', () => {
    const [hpa] = ofKind(objects, 'HorizontalPodAutoscaler');
    if (hpa) {
      expect(deployment.spec).not.toHaveProperty('replicas');
      expect(hpa.spec?.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata?.name });
    } else {
      expect(deployment.spec?.replicas).toBeGreaterThanOrEqual(1);
    }
  });

  // ci/single-replica-gateway-values.yaml: one replica, and the PDB must still allow a drain.
  it('has a PDB that never blocks a drain at the smallest replica count', () => {
    const [hpa] = ofKind(objects, 'HorizontalPodAutoscaler');
    const fewest = must(hpa ? hpa.spec?.minReplicas : deployment.spec?.replicas, 'smallest replica count');
    for (const pdb of ofKind(objects, 'PodDisruptionBudget')) {
      expect(allowedDisruptions(pdb, fewest)).toBeGreaterThanOrEqual(1);
      expect(pdb.spec?.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
    }
  });

  it('routes the Services, Ingress, HTTPRoute, ServiceMonitor and PodMonitor to ports that exist', () => {
    const servicePorts = must(service.spec?.ports, 'Service ports');
    const servicePort = (name: string) => must(servicePorts.find((p) => p.name === name)?.port, `Service port ${name}`);
    const containerPorts = (container.ports ?? []).map((c) => c.name);
    for (const svc of services) for (const p of svc.spec?.ports ?? []) expect(containerPorts).toContain(p.targetPort);
    expect(servicePorts.map((p) => p.name)).toEqual(['http']);
    expect(metricsService.spec?.type).toBe('ClusterIP');
    expect((metricsService.spec?.ports ?? []).map((p) => [p.name, p.targetPort])).toEqual([['metrics', 'metrics']]);
    for (const ingress of ofKind(objects, 'Ingress')) {
      for (const rule of ingress.spec?.rules ?? []) {
        for (const path of rule.http?.paths ?? []) {
          expect(path.backend.service?.name).toBe(service.metadata?.name);
          servicePort(must(path.backend.service?.port?.name, 'Ingress backend port name'));
        }
      }
    }
    for (const route of ofKind(objects, 'HTTPRoute')) {
      expect(route.spec.parentRefs?.length).toBeGreaterThan(0);
      for (const rule of route.spec.rules ?? []) {
        for (const ref of rule.backendRefs ?? []) {
          expect(ref.name).toBe(service.metadata?.name);
          expect(ref.port).toBe(servicePort('http'));
        }
      }
    }
    for (const sm of ofKind(objects, 'ServiceMonitor')) {
      expect(sm.spec.endpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
      const selected = services.filter((svc) => Object.entries(sm.spec.selector.matchLabels ?? {}).every(([k, v]) => svc.metadata?.labels?.[k] === v));
      expect(selected).toEqual([metricsService]);
    }
    for (const pm of ofKind(objects, 'PodMonitor')) {
      expect(pm.spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
      expect(containerPorts).toContain('metrics');
    }
    for (const np of serverPolicies(objects)) {
      const [http, metrics] = np.spec?.ingress ?? [];
      expect(http?.ports).toEqual([{ port: 'http', protocol: 'TCP' }]);
      expect(metrics?.ports).toEqual([{ port: 'metrics', protocol: 'TCP' }]);
      expect(metrics?.from?.[0]?.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name']).toBeTruthy();
      expect(np.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
      // When the http port is restricted, the release's own helm test pod is still let in.
      if (http?.from) {
        const testPodLabels = must(ofKind(objects, 'Pod')[0]?.metadata?.labels, 'helm test pod labels');
        const admitted = http.from.some(
          (peer) => !peer.namespaceSelector && Object.entries(peer.podSelector?.matchLabels ?? { none: '' }).every(([k, v]) => testPodLabels[k] === v),
        );
        expect(admitted, 'helm test pod admitted to the http port').toBe(true);
      }
    }
  });
});

describe('the metrics port', () => {
  it.each(['LoadBalancer', 'NodePort'])(
    'is not published by service.type %s: that Service carries the API alone, the metrics Service stays ClusterIP',
    (type) => {
      const services = ofKind(template(set(`service.type=${type}`)), 'Service');
      expect(services.filter((svc) => svc.spec?.type === type).map((svc) => svc.spec?.ports?.map((p) => p.name))).toEqual([['http']]);
      const metrics = services.filter((svc) => svc.spec?.ports?.some((p) => p.targetPort === 'metrics'));
      expect(metrics.map((svc) => [svc.metadata?.name, svc.spec?.type])).toEqual([['products-product-service-metrics', 'ClusterIP']]);
    },
  );

  it("takes the metrics Service's port and annotations from monitoring.service", () => {
    const args = [...set('monitoring.service.port=9100'), '--set-string', 'monitoring.service.annotations.prometheus\\.io/scrape=true'];
    const metrics = named(template(args), 'Service', 'products-product-service-metrics');
    expect(metrics.spec?.ports).toEqual([{ name: 'metrics', port: 9100, targetPort: 'metrics', protocol: 'TCP', appProtocol: 'http' }]);
    expect(metrics.metadata?.annotations).toEqual({ 'prometheus.io/scrape': 'true' });
  });
});

describe('the ci value sets', () => {
  it('together turn on every optional object', () => {
    const kinds = new Set(valueSets.flatMap(({ args }) => template(args).map((o) => o.kind)));
    for (const kind of [
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'ServiceMonitor',
      'PodMonitor',
      'PrometheusRule',
      'ConfigMap',
      'NetworkPolicy',
      'Ingress',
      'HTTPRoute',
    ]) {
      expect(kinds, kind).toContain(kind);
    }
  });
});

describe('chart defaults', () => {
  const deployment = deploymentOf([]);
  const container = mainContainer(deployment);

  it('default the image tag to the appVersion', () => {
    expect(container.image).toBe(`product-service:${chart.appVersion}`);
  });

  it('spread pods softly across zones and nodes', () => {
    const spread = podSpecOf(deployment).topologySpreadConstraints ?? [];
    expect(spread.map((c) => c.topologyKey)).toEqual(['topology.kubernetes.io/zone', 'kubernetes.io/hostname']);
    for (const c of spread) expect(c.whenUnsatisfiable).toBe('ScheduleAnyway');
  });

  it("set SHUTDOWN_DELAY to 5 s and MAX_CONNECTIONS to the service's own default (the chart's budget and the process's are one figure)", () => {
    expect(envValue(container, 'SHUTDOWN_DELAY')).toBe('5');
    expect(envValue(container, 'MAX_CONNECTIONS')).toBe(String(DEFAULT_MAX_CONNECTIONS));
  });

  it('set no OTLP endpoint, sampler, propagators, query parameters, trusted proxies or faults unless asked', () => {
    const otel = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_PROPAGATORS'];
    for (const name of [...otel, 'TRACE_QUERY_PARAMS', 'TRUSTED_PROXIES', 'FAULT_ERROR_RATIO', 'FAULT_DELAY']) expect(envNames(container)).not.toContain(name);
  });

  it.each<[string[], Record<string, string>]>([
    [set('otel.endpoint=http://collector:4318'), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }],
    [
      [...set('otel.sampler=traceidratio', 'otel.propagators=none'), '--set-string', 'otel.samplerArg=0.01'],
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01', OTEL_PROPAGATORS: 'none' },
    ],
    [set('otel.serviceName=catalogue-ids'), { OTEL_SERVICE_NAME: 'catalogue-ids' }],
    [
      set('traceQueryParams={page,sort}', 'trustedProxies={10.0.0.0/8,fd00::/8,192.0.2.1}'),
      { TRACE_QUERY_PARAMS: 'page,sort', TRUSTED_PROXIES: '10.0.0.0/8,fd00::/8,192.0.2.1' },
    ],
    [set('maxConnections=4096'), { MAX_CONNECTIONS: '4096' }],
    [set('faults.errorRatio=0.05', 'faults.delaySeconds=0.3'), { FAULT_ERROR_RATIO: '0.05', FAULT_DELAY: '0.3' }],
    // From a values file (numbers), and 0, which is set (no fault) rather than left out.
    [setJson({ faults: { errorRatio: 1, delaySeconds: 0 } }), { FAULT_ERROR_RATIO: '1', FAULT_DELAY: '0' }],
    // extraEnv naming the same variable replaces it.
    [[...set('faults.delaySeconds=1', 'extraEnv[0].name=FAULT_DELAY'), '--set-string', 'extraEnv[0].value=0'], { FAULT_DELAY: '0' }],
  ])('pass %j to the container as %j, each variable once', (args, env) => {
    const container = containerOf(args);
    for (const [name, value] of Object.entries(env)) {
      expect(envValue(container, name)).toBe(value);
      expect(envNames(container).filter((n) => n === name)).toHaveLength(1);
    }
  });

  it('keep the selector when an upgrade changes the image, labels and autoscaling', () => {
    const upgraded = deploymentOf(set('image.tag=2.0.0', 'commonLabels.team=shop', 'podLabels.tier=api', 'autoscaling.enabled=true'));
    expect(upgraded.spec?.selector).toEqual(deployment.spec?.selector);
  });
});

/** The inspector flags Node reads from NODE_OPTIONS: every one opens the inspector or sets it up. */
const INSPECTOR_FLAGS = [
  '--inspect',
  '--inspect=0.0.0.0:9229',
  '--inspect=9229',
  '--inspect-brk',
  '--inspect-brk=0.0.0.0:9229',
  '--inspect-wait',
  '--inspect-port=9229',
  '--debug-port=9229',
];
const NODE_OPTIONS_IN_EXTRA_ENV =
  /extraEnv cannot set NODE_OPTIONS: it would replace the chart's flags, --disable-sigusr1 among them\. Put Node flags in extraNodeOptions/;
const RULES = set('monitoring.prometheusRule.enabled=true');

// Values the service would refuse at start, or that would render a broken or unsafe release
// (test/chart/platform-values.test.ts holds more, refused by helm lint --strict and Helm 3 as well).
describe('helm template refuses, naming the value', () => {
  it.each<[string[], RegExp]>([
    [set('service.metricsPort=9464'), /metricsPort/],
    [
      set('monitoring.serviceMonitor.enabled=true', 'monitoring.podMonitor.enabled=true'),
      /monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled are both true/,
    ],
    [set('otel.sampler=sometimes'), /otel\/sampler/],
    [['--set-string', 'otel.samplerArg=1.5'], /otel\/samplerArg/],
    [set('otel.propagators=w3c'), /otel\/propagators/],
    [set('maxConnections=0'), /maxConnections/],
    [set('maxConnections=unlimited'), /maxConnections/],
    [set('traceQueryParams={page=1}'), /traceQueryParams/],
    [set('trustedProxies={ingress-nginx}'), /trustedProxies/],
    [set('trustedProxies={10.0.0.0/33}'), /trustedProxies/],
    // A PDB that would block every drain.
    [set('replicaCount=1', 'podDisruptionBudget.maxUnavailable=null', 'podDisruptionBudget.minAvailable=1'), /minAvailable/],
    [
      set('autoscaling.enabled=true', 'autoscaling.minReplicas=2', 'podDisruptionBudget.maxUnavailable=null', 'podDisruptionBudget.minAvailable=2'),
      /minAvailable/,
    ],
    [set('faults.errorRatio=1.5'), /faults\/errorRatio/],
    [set('faults.errorRatio=5%'), /faults\/errorRatio/],
    [set('faults.delaySeconds=300'), /faults\/delaySeconds/],
    [set('faults.delaySeconds=300ms'), /faults\/delaySeconds/],
    [set('faults.delay=1'), /additional properties 'delay' not allowed/],
    [set('httpRoute.enabled=true'), /parentRefs/],
    [set('securityContext.readOnlyRootFileSystem=true'), /at '\/securityContext': additional properties 'readOnlyRootFileSystem' not allowed/],
    [set('monitoring.serviceMonitor.enable=true'), /at '\/monitoring\/serviceMonitor': additional properties 'enable' not allowed/],
    [set('replicaCount=two'), /at '\/replicaCount': got string, want integer/],
    [set('extraEnv[0].name=FOO', 'extraEnv[0].value=a', 'extraEnv[1].name=FOO', 'extraEnv[1].value=b'), /extraEnv lists FOO twice/],
    [
      set('extraEnv[0].name=NODE_OPTIONS', 'extraEnv[0].valueFrom.configMapKeyRef.name=flags', 'extraEnv[0].valueFrom.configMapKeyRef.key=node'),
      NODE_OPTIONS_IN_EXTRA_ENV,
    ],
    [set('extraNodeOptions[0]=enable-source-maps'), /extraNodeOptions/],
    ...INSPECTOR_FLAGS.map((flag): [string[], RegExp] => [
      ['--set-string', `extraNodeOptions[0]=${flag}`],
      /extraNodeOptions\/0.*the V8 inspector stays off in the chart/,
    ]),
    // Flags smuggled into one item: a space, an underscore spelling.
    [['--set-string', 'extraNodeOptions[0]=--enable-source-maps --inspect'], /extraNodeOptions\/0/],
    [['--set-string', 'extraNodeOptions[0]=--stack-trace-limit=5 --inspect=0.0.0.0:9229'], /extraNodeOptions\/0/],
    [['--set-string', 'extraNodeOptions[0]=--inspect_brk'], /extraNodeOptions\/0/],
    [set('extraVolumeMounts[0].name=nowhere', 'extraVolumeMounts[0].mountPath=/x'), /extraVolumeMounts: nowhere names no volume \(volumes: tmp\)/],
    [set('extraVolumes[0].name=tmp', 'extraVolumes[0].emptyDir.medium=Memory'), /volume name tmp is taken/],
    [set('extraVolumeMounts[0].name=tmp'), /mountPath/],
    [set('diagnostics.heapSnapshot.enabled=true'), /diagnostics.heapSnapshot.enabled needs diagnostics.enabled/],
    [[...RULES, ...set('monitoring.prometheusRule.disabled.ProductServiceDwn=true')], /ProductServiceDwn/],
    [[...RULES, ...set('monitoring.prometheusRule.slo.latency.threshold=0.3')], /threshold/],
    [[...RULES, ...set('monitoring.prometheusRule.slo.availability.objective=100')], /objective/],
    [[...RULES, ...set('monitoring.prometheusRule.alerts.ProductServiceSpansDropped.threshold=5')], /threshold/],
    [[...RULES, ...set('monitoring.prometheusRule.alerts.ProductServiceDown.fro=1m')], /fro/],
    [[...RULES, ...set('monitoring.prometheusRule.runbookUrl=github.com/x')], /runbookUrl/],
  ])('%j', (args, message) => {
    expect(templateFails(args)).toMatch(message);
  });
});
