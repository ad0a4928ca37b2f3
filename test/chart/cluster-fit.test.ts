// What a platform team's cluster asks of the chart, proven on what `helm template` renders;
// private-ca.test.ts and diagnostics.test.ts run the image with these settings.
import { describe, expect, it } from 'vitest';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import {
  chartDir,
  containerOf,
  deploymentOf,
  envNames,
  envValue,
  findOne,
  helm,
  mainContainer,
  must,
  ofKind,
  podSpecOf,
  set,
  template,
  templateFails,
  type K8sObject,
} from './helm';
import { validateObject } from './validate';

const nodeOptions = (args: string[]) => envValue(containerOf(args), 'NODE_OPTIONS').split(' ');

function policies(objects: K8sObject[]): { server: INetworkPolicy; test: INetworkPolicy } {
  const isTest = (np: INetworkPolicy) => np.metadata?.annotations?.['helm.sh/hook'] === 'test';
  const [test] = ofKind(objects, 'NetworkPolicy').filter(isTest);
  const [server] = ofKind(objects, 'NetworkPolicy').filter((np) => !isTest(np));
  return { server: must(server, 'server NetworkPolicy'), test: must(test, 'helm test NetworkPolicy') };
}

describe('extraEnv and extraNodeOptions', () => {
  it("replace the chart's variable of the same name in place, and add the others after the chart's", () => {
    const defaults = envNames(containerOf([]));
    const container = containerOf([
      ...set('extraEnv[0].name=LOG_LEVEL', 'extraEnv[0].value=debug', 'extraEnv[1].name=OTEL_BSP_SCHEDULE_DELAY', 'extraEnv[2].name=K8S_POD_NAME'),
      ...['--set-string', 'extraEnv[1].value=1000', ...set('extraEnv[2].value=fixed')],
    ]);
    const names = envNames(container);
    // Replaced where the chart had them, so $(K8S_POD_NAME) in OTEL_RESOURCE_ATTRIBUTES still refers to an earlier variable;
    // CONFIG_REVISION, the checksum of all the others, stays last.
    const chartNames = defaults.filter((name) => name !== 'CONFIG_REVISION');
    expect(names).toEqual([...chartNames, 'OTEL_BSP_SCHEDULE_DELAY', 'CONFIG_REVISION']);
    expect(envValue(container, 'LOG_LEVEL')).toBe('debug');
    expect(container.env?.find((e) => e.name === 'K8S_POD_NAME')).toEqual({ name: 'K8S_POD_NAME', value: 'fixed' });
    expect(envValue(container, 'OTEL_BSP_SCHEDULE_DELAY')).toBe('1000');
  });

  it("extraNodeOptions: added after the chart's own flags in NODE_OPTIONS (render.test.ts: only flags, never the inspector's)", () => {
    const flags = nodeOptions(set('extraNodeOptions[0]=--enable-source-maps', 'extraNodeOptions[1]=--stack-trace-limit=50'));
    expect(flags).toEqual([...nodeOptions([]), '--enable-source-maps', '--stack-trace-limit=50']);
  });

  it('always turn off the SIGUSR1 inspector, and nothing else by default', () => {
    expect(nodeOptions([])).toEqual(['--max-old-space-size-percentage=60', '--max-semi-space-size=16', '--disable-sigusr1']);
  });
});

describe('extraVolumes and extraVolumeMounts', () => {
  const ca = set(
    'extraVolumes[0].name=otel-ca',
    'extraVolumes[0].secret.secretName=collector-ca',
    'extraVolumeMounts[0].name=otel-ca',
    'extraVolumeMounts[0].mountPath=/etc/otel-ca',
    'extraVolumeMounts[0].readOnly=true',
  );

  it("add the pod's volumes and the container's mounts after the chart's own", () => {
    const deployment = deploymentOf(ca);
    validateObject(deployment);
    expect(podSpecOf(deployment).volumes?.map((v) => v.name)).toEqual(['tmp', 'otel-ca']);
    expect(podSpecOf(deployment).volumes?.[1]).toEqual({ name: 'otel-ca', secret: { secretName: 'collector-ca' } });
    expect(mainContainer(deployment).volumeMounts).toEqual([
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'otel-ca', mountPath: '/etc/otel-ca', readOnly: true },
    ]);
  });
});

describe('diagnostics', () => {
  it('enabled: a report on SIGUSR2 into /diagnostics without environment or network interfaces, on a disk emptyDir of diagnostics.sizeLimit; no heap snapshot', () => {
    const args = set('diagnostics.enabled=true', 'diagnostics.sizeLimit=512Mi');
    const deployment = deploymentOf(args);
    validateObject(deployment);
    const flags = nodeOptions(args);
    expect(flags).toEqual(
      expect.arrayContaining([
        '--disable-sigusr1',
        '--report-on-signal',
        '--report-signal=SIGUSR2',
        '--report-directory=/diagnostics',
        '--report-exclude-env',
        '--report-exclude-network',
      ]),
    );
    expect(flags.filter((flag) => flag.startsWith('--heapsnapshot'))).toEqual([]);
    expect(mainContainer(deployment).volumeMounts).toContainEqual({ name: 'diagnostics', mountPath: '/diagnostics' });
    // On the node's disk (no medium: Memory), so a snapshot never counts against the memory limit.
    expect(podSpecOf(deployment).volumes?.find((v) => v.name === 'diagnostics')).toEqual({ name: 'diagnostics', emptyDir: { sizeLimit: '512Mi' } });
  });

  it('heapSnapshot.enabled adds the heap snapshot on SIGURG into the same directory', () => {
    const flags = nodeOptions(set('diagnostics.enabled=true', 'diagnostics.heapSnapshot.enabled=true'));
    expect(flags).toEqual(expect.arrayContaining(['--heapsnapshot-signal=SIGURG', '--diagnostic-dir=/diagnostics', '--report-signal=SIGUSR2']));
  });
});

describe('NetworkPolicy', () => {
  const enabled = set('networkPolicy.enabled=true');
  const restricted = [
    ...set('networkPolicy.enabled=true', 'networkPolicy.allowExternalEgress=false'),
    ...set('networkPolicy.collectorTo[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability'),
    ...set('networkPolicy.extraEgress[0].to[0].ipBlock.cidr=10.0.0.0/8', 'networkPolicy.extraEgress[0].ports[0].port=5432'),
  ];

  it('by default lets egress reach DNS only (the collector once collectorTo names it), and admits the monitoring namespace to the metrics port; allowExternalEgress opens it', () => {
    const { server } = policies(template(enabled));
    expect(server.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(server.spec?.egress?.map((rule) => rule.ports?.map((p) => p.port))).toEqual([[53, 53]]);
    expect(policies(template([...enabled, ...set('networkPolicy.allowExternalEgress=true')])).server.spec?.egress).toEqual([{}]);
    expect(server.spec?.ingress?.[1]).toEqual({
      ports: [{ port: 'metrics', protocol: 'TCP' }],
      from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
    });
  });

  it('restricted egress: DNS (anywhere on port 53 unless dnsTo), the collector on its ports, and the extra rules; nothing else', () => {
    const { server } = policies(template(restricted));
    validateObject(server);
    expect(server.spec?.egress).toEqual([
      {
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      },
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } } }],
        ports: [
          { port: 4317, protocol: 'TCP' },
          { port: 4318, protocol: 'TCP' },
        ],
      },
      { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }], ports: [{ port: 5432 }] },
    ]);
    const dnsTo = set('networkPolicy.dnsTo[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=kube-system');
    const narrowed = policies(template([...restricted, ...dnsTo])).server;
    expect(narrowed.spec?.egress?.[0]?.to).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }]);
  });

  it('metrics from several peers, or from anywhere with an empty list; the probe port from the peers probeFrom names (the nodes, for the kubelet); extra ingress rules after the chart ones', () => {
    const several = policies(
      template([
        ...set('networkPolicy.enabled=true', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=a'),
        ...set('networkPolicy.metricsFrom[1].namespaceSelector.matchLabels.team=b', 'networkPolicy.extraIngress[0].from[0].ipBlock.cidr=192.168.0.0/16'),
        ...set('networkPolicy.extraIngress[0].ports[0].port=http', 'networkPolicy.probeFrom[0].ipBlock.cidr=10.0.0.0/16'),
      ]),
    ).server;
    expect(several.spec?.ingress?.[1]?.from).toHaveLength(2);
    expect(several.spec?.ingress?.[2]).toEqual({ from: [{ ipBlock: { cidr: '10.0.0.0/16' } }], ports: [{ port: 'probe', protocol: 'TCP' }] });
    expect(several.spec?.ingress?.[3]).toEqual({ from: [{ ipBlock: { cidr: '192.168.0.0/16' } }], ports: [{ port: 'http' }] });
    const anywhere = policies(template(set('networkPolicy.enabled=true', 'networkPolicy.metricsFrom=null'))).server;
    expect(anywhere.spec?.ingress?.[1]).toEqual({ ports: [{ port: 'metrics', protocol: 'TCP' }] });
    expect(anywhere.spec?.ingress?.[2]).toEqual({ ports: [{ port: 'probe', protocol: 'TCP' }] });
  });

  it('gives the helm test pod its own policy, a test hook created before it: DNS and the server pods’ http container port', () => {
    const objects = template(restricted);
    const { test } = policies(objects);
    validateObject(test);
    const testPod = must(ofKind(objects, 'Pod')[0], 'helm test pod');
    const deployment = findOne(objects, 'Deployment');
    expect(test.metadata?.annotations).toMatchObject({ 'helm.sh/hook': 'test', 'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded' });
    expect(Number(test.metadata?.annotations?.['helm.sh/hook-weight'])).toBeLessThan(Number(testPod.metadata?.annotations?.['helm.sh/hook-weight'] ?? 0));
    expect(testPod.metadata?.labels).toMatchObject(must(test.spec?.podSelector.matchLabels, 'test policy selector'));
    expect(deployment.spec?.template.metadata?.labels).not.toMatchObject(must(test.spec?.podSelector.matchLabels, 'test policy selector'));
    expect(test.spec?.policyTypes).toEqual(['Egress']);
    const [dns, api] = test.spec?.egress ?? [];
    expect(dns?.ports?.map((p) => p.port)).toEqual([53, 53]);
    expect(api?.to).toEqual([{ podSelector: { matchLabels: deployment.spec?.selector.matchLabels } }]);
    expect(api?.ports).toEqual([{ port: mainContainer(deployment).ports?.find((p) => p.name === 'http')?.containerPort, protocol: 'TCP' }]);
  });

  it('renders neither policy when off', () => {
    expect(ofKind(template([]), 'NetworkPolicy')).toEqual([]);
  });

  // Spans would be dropped without a word: both helm lint and helm template refuse it, naming the value.
  it('restricted egress with otel.endpoint set and no collectorTo: refused by helm lint --strict and helm template alike', () => {
    const noEndpoint = set('networkPolicy.enabled=true', 'networkPolicy.allowExternalEgress=false');
    const values = [...noEndpoint, ...set('otel.endpoint=http://otel-collector.observability:4318')];
    const lint = helm(['lint', '--strict', chartDir, ...values]);
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toMatch(/\/networkPolicy\/collectorTo': minItems: got 0, want 1/);
    expect(templateFails(values)).toMatch(/\/networkPolicy\/collectorTo': minItems: got 0, want 1/);
    const collector = set('networkPolicy.collectorTo[0].podSelector.matchLabels.app=otel-collector');
    expect(policies(template([...values, ...collector])).server.spec?.egress?.[1]?.to).toEqual([{ podSelector: { matchLabels: { app: 'otel-collector' } } }]);
    expect(helm(['lint', '--strict', chartDir, ...values, ...collector]).status).toBe(0);
    expect(policies(template(noEndpoint)).server.spec?.egress?.map((rule) => rule.ports?.[0]?.port)).toEqual([53]);
  });

  const istiod = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'istio-system' } }, podSelector: { matchLabels: { app: 'istiod' } } };
  const hbone = { ports: [{ port: 15008, protocol: 'TCP' }] };

  it('Istio sidecar: the server and helm test pods may reach istiod on 15012 when egress is restricted', () => {
    const { server, test } = policies(template([...restricted, ...set('networkPolicy.istio.sidecar=true')]));
    for (const policy of [server, test]) {
      validateObject(policy);
      expect(policy.spec?.egress).toContainEqual({ to: [istiod], ports: [{ port: 15012, protocol: 'TCP' }] });
      expect(policy.spec?.egress).not.toContainEqual(hbone);
    }
    // Open egress already covers istiod.
    expect(
      policies(template(set('networkPolicy.enabled=true', 'networkPolicy.allowExternalEgress=true', 'networkPolicy.istio.sidecar=true'))).server.spec?.egress,
    ).toEqual([{}]);
  });

  it('Istio ambient: HBONE (15008) in and out, and the probes ztunnel sends from 169.254.7.127', () => {
    const { server, test } = policies(template([...restricted, ...set('networkPolicy.istio.ambient=true')]));
    for (const policy of [server, test]) {
      validateObject(policy);
      expect(policy.spec?.egress).toContainEqual(hbone);
      expect(JSON.stringify(policy.spec?.egress)).not.toContain('15012');
    }
    expect(server.spec?.ingress).toContainEqual(hbone);
    expect(server.spec?.ingress).toContainEqual({
      from: [{ ipBlock: { cidr: '169.254.7.127/32' } }],
      ports: [
        { port: 'http', protocol: 'TCP' },
        { port: 'probe', protocol: 'TCP' },
      ],
    });
    expect(JSON.stringify(policies(template(restricted)))).not.toMatch(/15008|15012|169\.254/);
  });

  it("takes extra ingress and egress rules for the helm test pod's policy", () => {
    const { test } = policies(
      template([
        ...restricted,
        ...set('networkPolicy.helmTest.extraEgress[0].to[0].ipBlock.cidr=10.1.0.0/16', 'networkPolicy.helmTest.extraEgress[0].ports[0].port=15021'),
        ...set('networkPolicy.helmTest.extraIngress[0].ports[0].port=15020'),
      ]),
    );
    validateObject(test);
    expect(test.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(test.spec?.ingress).toEqual([{ ports: [{ port: 15020 }] }]);
    expect(test.spec?.egress?.at(-1)).toEqual({ to: [{ ipBlock: { cidr: '10.1.0.0/16' } }], ports: [{ port: 15021 }] });
  });
});

describe('autoscaling.containerMetrics', () => {
  it("makes the HPA measure the service's container alone (ContainerResource), not the pod with its sidecars", () => {
    const args = set('autoscaling.enabled=true', 'autoscaling.targetMemoryUtilizationPercentage=80');
    const pod = findOne(template(args), 'HorizontalPodAutoscaler');
    expect(pod.spec?.metrics?.map((metric) => [metric.type, metric.resource?.name])).toEqual([
      ['Resource', 'cpu'],
      ['Resource', 'memory'],
    ]);
    const objects = template([...args, ...set('autoscaling.containerMetrics=true')]);
    const hpa = findOne(objects, 'HorizontalPodAutoscaler');
    validateObject(hpa);
    const container = mainContainer(findOne(objects, 'Deployment')).name;
    expect(hpa.spec?.metrics).toEqual([
      { type: 'ContainerResource', containerResource: { name: 'cpu', container, target: { type: 'Utilization', averageUtilization: 60 } } },
      { type: 'ContainerResource', containerResource: { name: 'memory', container, target: { type: 'Utilization', averageUtilization: 80 } } },
    ]);
  });
});

describe('helmTest.podAnnotations', () => {
  it('annotate the helm test pod (for a mesh) and keep its hook annotations', () => {
    const pod = must(ofKind(template(['--set-string', 'helmTest.podAnnotations.sidecar\\.istio\\.io/inject=false']), 'Pod')[0], 'helm test pod');
    expect(pod.metadata?.annotations).toMatchObject({ 'sidecar.istio.io/inject': 'false', 'helm.sh/hook': 'test' });
  });
});

describe('updateStrategy', () => {
  it('type=Recreate renders without rollingUpdate (the API server refuses both), and is a valid Deployment', () => {
    const deployment = deploymentOf(set('updateStrategy.type=Recreate'));
    expect(deployment.spec?.strategy).toEqual({ type: 'Recreate' });
    validateObject(deployment);
    expect(deploymentOf([]).spec?.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });
});

describe('custom resources whose API the cluster does not serve', () => {
  it.each([
    { value: 'monitoring.serviceMonitor.enabled', api: 'monitoring.coreos.com/v1/ServiceMonitor', kind: 'ServiceMonitor', extra: [] },
    { value: 'monitoring.podMonitor.enabled', api: 'monitoring.coreos.com/v1/PodMonitor', kind: 'PodMonitor', extra: [] },
    { value: 'httpRoute.enabled', api: 'gateway.networking.k8s.io/v1/HTTPRoute', kind: 'HTTPRoute', extra: set('httpRoute.parentRefs[0].name=public') },
  ])('$value: refused with the value and the API named, rendered with --api-versions $api', ({ value, api, kind, extra }) => {
    const without = helm(['template', 'products', chartDir, '--set', `${value}=true`, ...extra]);
    expect(without.status).not.toBe(0);
    expect(without.stderr).toContain(`${value} is true, but the cluster does not serve ${api}`);
    expect(without.stderr).toContain(`pass --api-versions ${api}`);
    const rendered = helm(['template', 'products', chartDir, '--api-versions', api, '--set', `${value}=true`, ...extra]);
    expect(rendered.status, rendered.stderr).toBe(0);
    expect(rendered.stdout).toContain(`kind: ${kind}`);
  });
});
