// Renders the chart with `helm template` over the defaults and every ci/*-values.yaml, validates
// every object against its API schema, and checks the policies the chart promises.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { IContainer, IPodSpec, IProbe } from 'kubernetes-models/v1';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { chartDir, envNames, envValue, findOne, mainContainer, must, ofKind, podSpecOf, template, templateFails, valueSets, type K8sObject } from './helm';
import { validateObject } from './validate';
import { DEFAULT_MAX_CONNECTIONS } from '../../src/config';

const chart = parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { version: string; appVersion: string };
const imageUid = 65532; // the image's numeric USER (Dockerfile)
const selectorKeys = ['app.kubernetes.io/instance', 'app.kubernetes.io/name'];

/** Every pod spec the chart renders: the Deployment's template and the helm test pod. */
function podSpecs(objects: K8sObject[]): { name: string; spec: IPodSpec }[] {
  return [
    ...ofKind(objects, 'Deployment').map((d) => ({ name: `Deployment ${d.metadata?.name ?? ''}`, spec: podSpecOf(d) })),
    ...ofKind(objects, 'Pod').map((p) => ({ name: `Pod ${p.metadata?.name ?? ''}`, spec: must(p.spec, 'Pod spec') })),
  ];
}

function port(container: IContainer, name: string): number {
  return must(
    container.ports?.find((p) => p.name === name),
    `container port ${name}`,
  ).containerPort;
}

function probe(
  container: IContainer,
  name: 'startupProbe' | 'livenessProbe' | 'readinessProbe',
): Required<Pick<IProbe, 'periodSeconds' | 'failureThreshold'>> & IProbe {
  const p = must(container[name], name);
  return { ...p, periodSeconds: must(p.periodSeconds, `${name}.periodSeconds`), failureThreshold: must(p.failureThreshold, `${name}.failureThreshold`) };
}

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
  const serviceNamed = (name: string) =>
    must(
      services.find((svc) => svc.metadata?.name === name),
      `Service ${name}`,
    );
  // The API's Service, and the metrics port's own.
  const service = serviceNamed(must(deployment.metadata?.name, 'Deployment name'));
  const metricsService = serviceNamed(`${deployment.metadata?.name ?? ''}-metrics`);

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
    // The only writable path, /tmp, is an emptyDir.
    const tmp = must(
      container.volumeMounts?.find((m) => m.mountPath === '/tmp'),
      '/tmp mount',
    );
    expect(podSpec.volumes?.find((v) => v.name === tmp.name)?.emptyDir).toBeDefined();
  });

  it('probes GET /health on the http port: startup, liveness and readiness', () => {
    expect(port(container, 'http')).toBe(Number(envValue(container, 'PORT')));
    expect(port(container, 'metrics')).toBe(Number(envValue(container, 'METRICS_PORT')));
    for (const name of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
      const p = probe(container, name);
      expect(p.httpGet, name).toEqual({ path: '/health', port: 'http' });
      // A startup probe guards the slow start, so no long initial delays.
      expect(p.initialDelaySeconds ?? 0, name).toBeLessThanOrEqual(5);
    }
    const startup = probe(container, 'startupProbe');
    expect(startup.periodSeconds * startup.failureThreshold).toBeGreaterThanOrEqual(30);
    // Liveness tolerates more than readiness: a busy pod is unrouted long before it is restarted.
    const outage = (p: { periodSeconds: number; failureThreshold: number }) => p.periodSeconds * p.failureThreshold;
    expect(outage(probe(container, 'livenessProbe'))).toBeGreaterThan(outage(probe(container, 'readinessProbe')));
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

  it('sets CPU and memory requests and a memory limit, and sizes the Node heap from it', () => {
    expect(container.resources?.requests?.cpu).toBeTruthy();
    expect(container.resources?.requests?.memory).toBeTruthy();
    expect(container.resources?.limits?.memory).toBeTruthy();
    expect(envValue(container, 'NODE_OPTIONS')).toMatch(/^--max-old-space-size-percentage=\d+ --max-semi-space-size=16 --disable-sigusr1( |$)/);
  });

  it('passes the OpenTelemetry resource from the downward API', () => {
    const names = envNames(container);
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
    // A ServiceMonitor selects Services, not pods: the metrics Service, by its component label as well.
    for (const sm of ofKind(objects, 'ServiceMonitor')) expect(sm.spec.selector.matchLabels).toEqual({ ...selector, 'app.kubernetes.io/component': 'metrics' });
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
    const servicePort = (name: string) =>
      must(
        servicePorts.find((p) => p.name === name),
        `Service port ${name}`,
      );
    const containerPorts = (container.ports ?? []).map((c) => c.name);
    for (const svc of services) for (const p of svc.spec?.ports ?? []) expect(containerPorts).toContain(p.targetPort);
    // The API's Service publishes the API only; the metrics stay on a ClusterIP Service of their own.
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
          expect(ref.port).toBe(servicePort('http').port);
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
      const services = ofKind(template(['--set', `service.type=${type}`]), 'Service');
      expect(services.filter((svc) => svc.spec?.type === type).map((svc) => svc.spec?.ports?.map((p) => p.name))).toEqual([['http']]);
      const metrics = services.filter((svc) => svc.spec?.ports?.some((p) => p.targetPort === 'metrics'));
      expect(metrics.map((svc) => [svc.metadata?.name, svc.spec?.type])).toEqual([['products-product-service-metrics', 'ClusterIP']]);
    },
  );

  it("takes the metrics Service's port and annotations from monitoring.service", () => {
    const services = ofKind(
      template(['--set', 'monitoring.service.port=9100', '--set-string', 'monitoring.service.annotations.prometheus\\.io/scrape=true']),
      'Service',
    );
    const metrics = must(
      services.find((svc) => svc.metadata?.name === 'products-product-service-metrics'),
      'metrics Service',
    );
    expect(metrics.spec?.ports).toEqual([{ name: 'metrics', port: 9100, targetPort: 'metrics', protocol: 'TCP', appProtocol: 'http' }]);
    expect(metrics.metadata?.annotations).toEqual({ 'prometheus.io/scrape': 'true' });
  });

  it('refuses the old service.metricsPort, and a ServiceMonitor beside a PodMonitor', () => {
    expect(templateFails(['--set', 'service.metricsPort=9464'])).toMatch(/metricsPort/);
    expect(templateFails(['--set', 'monitoring.serviceMonitor.enabled=true', '--set', 'monitoring.podMonitor.enabled=true'])).toMatch(
      /monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled are both true/,
    );
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
  const objects = template([]);
  const deployment = findOne(objects, 'Deployment');
  const container = mainContainer(deployment);

  it('default the image tag to the appVersion and support a digest', () => {
    expect(container.image).toBe(`product-service:${chart.appVersion}`);
    const digest = `sha256:${'ab'.repeat(32)}`;
    const pinned = mainContainer(findOne(template(['--set', `image.tag=${chart.appVersion}`, '--set', `image.digest=${digest}`]), 'Deployment'));
    expect(pinned.image).toBe(`product-service:${chart.appVersion}@${digest}`);
  });

  it('spread pods softly across zones and nodes', () => {
    const spread = podSpecOf(deployment).topologySpreadConstraints ?? [];
    expect(spread.map((c) => c.topologyKey)).toEqual(['topology.kubernetes.io/zone', 'kubernetes.io/hostname']);
    for (const c of spread) expect(c.whenUnsatisfiable).toBe('ScheduleAnyway');
  });

  it('set SHUTDOWN_DELAY to 5 s and add no OTLP endpoint unless asked', () => {
    expect(envValue(container, 'SHUTDOWN_DELAY')).toBe('5');
    expect(envNames(container)).not.toContain('OTEL_EXPORTER_OTLP_ENDPOINT');
    const withEndpoint = mainContainer(findOne(template(['--set', 'otel.endpoint=http://collector:4318']), 'Deployment'));
    expect(envValue(withEndpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT')).toBe('http://collector:4318');
  });

  it('set no sampler or propagators unless asked, and pass the untrusted-edge settings through', () => {
    for (const name of ['OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG', 'OTEL_PROPAGATORS']) expect(envNames(container)).not.toContain(name);
    const edge = mainContainer(
      findOne(template(['--set', 'otel.sampler=traceidratio', '--set-string', 'otel.samplerArg=0.01', '--set', 'otel.propagators=none']), 'Deployment'),
    );
    expect(envValue(edge, 'OTEL_TRACES_SAMPLER')).toBe('traceidratio');
    expect(envValue(edge, 'OTEL_TRACES_SAMPLER_ARG')).toBe('0.01');
    expect(envValue(edge, 'OTEL_PROPAGATORS')).toBe('none');
  });

  it('refuse a sampler, ratio or propagator the SDK does not know', () => {
    expect(templateFails(['--set', 'otel.sampler=sometimes'])).toMatch(/otel\/sampler/);
    expect(templateFails(['--set-string', 'otel.samplerArg=1.5'])).toMatch(/otel\/samplerArg/);
    expect(templateFails(['--set', 'otel.propagators=w3c'])).toMatch(/otel\/propagators/);
  });

  it('record no query parameter and trust no proxy unless asked, and pass the lists as the service reads them', () => {
    for (const name of ['TRACE_QUERY_PARAMS', 'TRUSTED_PROXIES']) expect(envNames(container)).not.toContain(name);
    const set = mainContainer(
      findOne(template(['--set', 'traceQueryParams={page,sort}', '--set', 'trustedProxies={10.0.0.0/8,fd00::/8,192.0.2.1}']), 'Deployment'),
    );
    expect(envValue(set, 'TRACE_QUERY_PARAMS')).toBe('page,sort');
    expect(envValue(set, 'TRUSTED_PROXIES')).toBe('10.0.0.0/8,fd00::/8,192.0.2.1');
  });

  it('cap the API port at maxConnections (MAX_CONNECTIONS), and refuse a cap the service would refuse', () => {
    // The service's own default: the chart's budget and the process's are one figure.
    expect(envValue(container, 'MAX_CONNECTIONS')).toBe(String(DEFAULT_MAX_CONNECTIONS));
    expect(envValue(mainContainer(findOne(template(['--set', 'maxConnections=4096']), 'Deployment')), 'MAX_CONNECTIONS')).toBe('4096');
    expect(templateFails(['--set', 'maxConnections=0'])).toMatch(/maxConnections/);
    expect(templateFails(['--set', 'maxConnections=unlimited'])).toMatch(/maxConnections/);
  });

  it('refuse a query parameter name or a proxy address the service would refuse', () => {
    expect(templateFails(['--set', 'traceQueryParams={page=1}'])).toMatch(/traceQueryParams/);
    expect(templateFails(['--set', 'trustedProxies={ingress-nginx}'])).toMatch(/trustedProxies/);
    expect(templateFails(['--set', 'trustedProxies={10.0.0.0/33}'])).toMatch(/trustedProxies/);
  });

  it('inject no fault unless asked; pass faults.* as FAULT_ERROR_RATIO and FAULT_DELAY, decimals from --set too', () => {
    for (const name of ['FAULT_ERROR_RATIO', 'FAULT_DELAY']) expect(envNames(container)).not.toContain(name);
    const rehearsal = mainContainer(findOne(template(['--set', 'faults.errorRatio=0.05', '--set', 'faults.delaySeconds=0.3']), 'Deployment'));
    expect(envValue(rehearsal, 'FAULT_ERROR_RATIO')).toBe('0.05');
    expect(envValue(rehearsal, 'FAULT_DELAY')).toBe('0.3');
    // From a values file (numbers), and 0, which is set (no fault) rather than left out.
    const fromJson = mainContainer(findOne(template(['--set-json', 'faults={"errorRatio":1,"delaySeconds":0}']), 'Deployment'));
    expect(envValue(fromJson, 'FAULT_ERROR_RATIO')).toBe('1');
    expect(envValue(fromJson, 'FAULT_DELAY')).toBe('0');
    // extraEnv naming the same variable replaces it, once.
    const replaced = mainContainer(
      findOne(template(['--set', 'faults.delaySeconds=1', '--set', 'extraEnv[0].name=FAULT_DELAY', '--set-string', 'extraEnv[0].value=0']), 'Deployment'),
    );
    expect(envNames(replaced).filter((name) => name === 'FAULT_DELAY')).toHaveLength(1);
    expect(envValue(replaced, 'FAULT_DELAY')).toBe('0');
  });

  it('keep the selector when an upgrade changes the image, labels and autoscaling', () => {
    const upgraded = findOne(
      template(['--set', 'image.tag=2.0.0', '--set', 'commonLabels.team=shop', '--set', 'podLabels.tier=api', '--set', 'autoscaling.enabled=true']),
      'Deployment',
    );
    expect(upgraded.spec?.selector).toEqual(deployment.spec?.selector);
  });

  it('keep the PDB drainable with a single replica', () => {
    const single = template(['--set', 'replicaCount=1']);
    expect(allowedDisruptions(findOne(single, 'PodDisruptionBudget'), 1)).toBe(1);
  });
});

describe('guards that refuse unsafe values', () => {
  it('refuses the latest tag', () => {
    // The template refuses it, saying why (test/chart/platform-values.test.ts: helm lint --strict too).
    expect(templateFails(['--set', 'image.tag=latest'])).toMatch(/must not be "latest"/);
  });

  it('refuses a grace period shorter than delay + timeout', () => {
    expect(templateFails(['--set', 'terminationGracePeriodSeconds=10'])).toMatch(/terminationGracePeriodSeconds/);
  });

  it('refuses a PDB that would block every drain', () => {
    const args = ['--set', 'replicaCount=1', '--set', 'podDisruptionBudget.maxUnavailable=null', '--set', 'podDisruptionBudget.minAvailable=1'];
    expect(templateFails(args)).toMatch(/minAvailable/);
    const hpa = [
      '--set',
      'autoscaling.enabled=true',
      '--set',
      'autoscaling.minReplicas=2',
      '--set',
      'podDisruptionBudget.maxUnavailable=null',
      '--set',
      'podDisruptionBudget.minAvailable=2',
    ];
    expect(templateFails(hpa)).toMatch(/minAvailable/);
  });

  it('refuses a fault the service would refuse at start', () => {
    expect(templateFails(['--set', 'faults.errorRatio=1.5'])).toMatch(/faults\/errorRatio/);
    expect(templateFails(['--set', 'faults.errorRatio=5%'])).toMatch(/faults\/errorRatio/);
    expect(templateFails(['--set', 'faults.delaySeconds=300'])).toMatch(/faults\/delaySeconds/);
    expect(templateFails(['--set', 'faults.delaySeconds=300ms'])).toMatch(/faults\/delaySeconds/);
    expect(templateFails(['--set', 'faults.delay=1'])).toMatch(/additional properties 'delay' not allowed/);
  });

  it('refuses an HTTPRoute without a Gateway', () => {
    expect(templateFails(['--set', 'httpRoute.enabled=true'])).toMatch(/parentRefs/);
  });
});
