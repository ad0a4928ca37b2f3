// The values a platform sets (image references, labels, pod and Service fields, quantities), held to
// the Kubernetes API: what must render (valid objects) and what must be refused, by `helm template` and
// `helm lint --strict`, Helm 4 and Helm 3 alike, saying why. release.test.ts: the digest a release stamps.
import { describe, expect, it } from 'vitest';
import type { IContainer } from 'kubernetes-models/v1';
import {
  chartDir,
  CRD_APIS,
  named,
  findOne,
  helm,
  helm3Bin,
  helmBin,
  HELMS,
  mainContainer,
  must,
  ofKind,
  parseManifests,
  podSpecOf,
  template,
  valueSets,
  type K8sObject,
  set,
} from './helm';
import { validateObject } from './validate';

const digest = `sha256:${'ab'.repeat(32)}`;

function chartImages(objects: K8sObject[]): string[] {
  return [mainContainer(findOne(objects, 'Deployment')), ...ofKind(objects, 'Pod').flatMap((p) => must(p.spec, 'Pod spec').containers)].map((c) =>
    must(c.image, `${c.name} image`),
  );
}

function refusals(args: string[], bin = helmBin): { template: string; lint: string } {
  const rendered = helm(['template', 'products', chartDir, ...CRD_APIS, ...args], undefined, bin);
  const linted = helm(['lint', '--strict', chartDir, ...args], undefined, bin);
  expect(rendered.status, `helm template ${args.join(' ')} should fail`).not.toBe(0);
  expect(linted.status, `helm lint --strict ${args.join(' ')} should fail: ${linted.stdout}`).not.toBe(0);
  return { template: rendered.stderr, lint: linted.stdout + linted.stderr };
}

describe('image references', () => {
  it('global.imageRegistry replaces the registry of every image the chart renders, keeping a digest', () => {
    const mirror = set('global.imageRegistry=mirror.example.com:5000/ghcr');
    expect(chartImages(template(mirror))).toEqual(['mirror.example.com:5000/ghcr/product-service:1.0.0', 'mirror.example.com:5000/ghcr/product-service:1.0.0']);
    const pinned = template([...mirror, ...set('image.repository=ghcr.io/acme/product-service', 'image.tag=1.2.3', `image.digest=${digest}`)]);
    expect(new Set(chartImages(pinned))).toEqual(new Set([`mirror.example.com:5000/ghcr/acme/product-service:1.2.3@${digest}`]));
    // localhost and host:port are registries too (Docker's rule); a plain path is not.
    expect(chartImages(template([...mirror, ...set('image.repository=localhost/x/y')]))[0]).toBe('mirror.example.com:5000/ghcr/x/y:1.0.0');
    expect(chartImages(template([...mirror, ...set('image.repository=acme/product-service')]))[0]).toBe(
      'mirror.example.com:5000/ghcr/acme/product-service:1.0.0',
    );
  });

  it.each(HELMS)('$helmName: a digest alone pins by digest (Renovate, Flux), with a tag as tag@digest, behind a mirror too', ({ bin }) => {
    const images = (args: string[]) => {
      const run = helm(['template', 'products', chartDir, ...args], undefined, bin);
      expect(run.status, run.stderr).toBe(0);
      return chartImages(parseManifests(run.stdout));
    };
    expect(images(set(`image.digest=${digest}`))).toEqual(Array(2).fill(`product-service@${digest}`));
    expect(images(set('image.tag=1.2.3', `image.digest=${digest}`))).toEqual(Array(2).fill(`product-service:1.2.3@${digest}`));
    expect(images(set('global.imageRegistry=mirror.example.com', 'image.repository=ghcr.io/acme/x', `image.digest=${digest}`))).toEqual(
      Array(2).fill(`mirror.example.com/acme/x@${digest}`),
    );
    expect(helm(['lint', '--strict', chartDir, ...set(`image.digest=${digest}`)], undefined, bin).status).toBe(0);
  });

  it.each(HELMS)(
    "$helmName: global.imagePullSecrets (an umbrella's) then imagePullSecrets, names or {name}, once each, on the helm test pod too",
    ({ bin }) => {
      const args = ['--set-json', 'global.imagePullSecrets=["mirror",{"name":"shared"}]', '--set-json', 'imagePullSecrets=[{"name":"shared"},"own"]'];
      const run = helm(['template', 'products', chartDir, ...args], undefined, bin);
      expect(run.status, run.stderr).toBe(0);
      const objects = parseManifests(run.stdout);
      const expected = [{ name: 'mirror' }, { name: 'shared' }, { name: 'own' }];
      expect(podSpecOf(findOne(objects, 'Deployment')).imagePullSecrets).toEqual(expected);
      expect(must(findOne(objects, 'Pod').spec, 'test pod').imagePullSecrets).toEqual(expected);
      expect(helm(['lint', '--strict', chartDir, ...args], undefined, bin).status).toBe(0);
    },
  );
});

describe('labels', () => {
  const selector = { 'app.kubernetes.io/name': 'product-service', 'app.kubernetes.io/instance': 'products' };
  const everything = [
    ...must(valueSets.find((v) => v.name.includes('autoscaling-monitoring'))?.args, 'the monitoring value set'),
    '--set',
    'commonLabels.app\\.kubernetes\\.io/part-of=shop',
    '--set',
    'commonLabels.team=checkout',
    '--set',
    'commonLabels.release=from-common',
  ];

  it('commonLabels: on every object, hooks (the helm test pod and its NetworkPolicy) included, each key once, replacing chart labels', () => {
    // parseManifests refuses a duplicate mapping key, as the API server's YAML decoder does.
    const objects = template(everything);
    expect(objects.map((o) => `${o.kind}/${o.metadata.annotations?.['helm.sh/hook'] ?? ''}`)).toEqual(
      expect.arrayContaining(['Pod/test', 'NetworkPolicy/test', 'Deployment/', 'Service/', 'ServiceMonitor/', 'PrometheusRule/', 'ConfigMap/']),
    );
    for (const obj of objects) {
      expect(obj.metadata.labels, `${obj.kind} ${obj.metadata.name}`).toMatchObject({ 'app.kubernetes.io/part-of': 'shop', team: 'checkout' });
    }
    const deployment = findOne(objects, 'Deployment');
    expect(deployment.spec?.template.metadata?.labels).toMatchObject({ 'app.kubernetes.io/part-of': 'shop', team: 'checkout', ...selector });
    // An object's own labels win over commonLabels: the monitors' `release` is the one Prometheus selects.
    const monitor = findOne(objects, 'ServiceMonitor');
    expect(monitor.metadata?.labels?.release).toBe('kube-prometheus-stack');
  });

  it('podLabels and commonLabels never replace the selector labels: the Deployment still selects its pods, and the test pod is no server', () => {
    const objects = template(
      set(
        'podLabels.app\\.kubernetes\\.io/name=other',
        'podLabels.app\\.kubernetes\\.io/instance=other',
        'commonLabels.app\\.kubernetes\\.io/name=other',
        'commonLabels.app\\.kubernetes\\.io/component=backend',
        'networkPolicy.enabled=true',
      ),
    );
    const deployment = findOne(objects, 'Deployment');
    expect(deployment.spec?.selector.matchLabels).toEqual(selector);
    expect(deployment.spec?.template.metadata?.labels).toMatchObject(selector);
    const servers = objects.filter((o) => o.metadata.annotations?.['helm.sh/hook'] === undefined);
    for (const obj of servers) expect(obj.metadata.labels, obj.kind).toMatchObject(selector);
    const testPod = must(ofKind(objects, 'Pod')[0], 'helm test pod');
    expect(testPod.metadata?.labels).toMatchObject({ 'app.kubernetes.io/name': 'product-service-test', 'app.kubernetes.io/component': 'helm-test' });
    // The metrics Service keeps the component its ServiceMonitor selects.
    const metrics = named(objects, 'Service', 'products-product-service-metrics');
    expect(metrics.metadata?.labels?.['app.kubernetes.io/component']).toBe('metrics');
  });
});

/** A value set that must render: `check` reads what it set off the objects, which must all be valid. */
interface Accepted {
  what: string;
  args: string[];
  check: (objects: K8sObject[]) => void;
}

const container = (objects: K8sObject[]): IContainer => must(podSpecOf(findOne(objects, 'Deployment')).containers[0], 'server container');
const podSpec = (objects: K8sObject[]) => podSpecOf(findOne(objects, 'Deployment'));
const testPodSpec = (objects: K8sObject[]) => must(must(ofKind(objects, 'Pod')[0], 'helm test pod').spec, 'helm test pod spec');
const apiService = (objects: K8sObject[]) => named(objects, 'Service', 'products-product-service');

const accepted: Accepted[] = [
  {
    what: 'resource quantities as Kubernetes writes them: numbers, decimals, exponents, every suffix',
    args: [
      '--set-json',
      'resources={"requests":{"cpu":0.5,"memory":"1e9","ephemeral-storage":"1.5Gi"},"limits":{"cpu":"1.5","memory":"2G","ephemeral-storage":"2Ei"}}',
    ],
    check: (o) =>
      expect(container(o).resources).toEqual({
        requests: { cpu: 0.5, memory: '1e9', 'ephemeral-storage': '1.5Gi' },
        limits: { cpu: '1.5', memory: '2G', 'ephemeral-storage': '2Ei' },
      }),
  },
  {
    what: 'more quantity forms: +, a leading dot, E notation, k, P, Ki and the helm test pod',
    args: [
      '--set-json',
      'resources={"requests":{"cpu":"+.25","memory":"1.5E9"}}',
      '--set-json',
      'helmTest.resources={"requests":{"cpu":"100u","memory":"64000k"},"limits":{"memory":"1Pi"}}',
    ],
    check: (o) => {
      expect(container(o).resources?.requests).toEqual({ cpu: '+.25', memory: '1.5E9' });
      expect(testPodSpec(o).containers[0]?.resources?.limits).toEqual({ memory: '1Pi' });
    },
  },
  {
    what: 'extended resources and huge pages',
    args: [
      '--set-json',
      'resources={"requests":{"cpu":"1","memory":"1Gi","hugepages-2Mi":"128Mi"},"limits":{"memory":"1Gi","nvidia.com/gpu":1,"hugepages-2Mi":"128Mi"}}',
    ],
    check: (o) => expect(container(o).resources?.limits).toEqual({ memory: '1Gi', 'nvidia.com/gpu': 1, 'hugepages-2Mi': '128Mi' }),
  },
  {
    what: 'podDisruptionBudget.minAvailable alone: it replaces maxUnavailable, so lint and install agree',
    args: set('podDisruptionBudget.minAvailable=1'),
    check: (o) => {
      const spec = must(findOne(o, 'PodDisruptionBudget').spec, 'PDB spec');
      expect([spec.minAvailable, spec.maxUnavailable]).toEqual([1, undefined]);
    },
  },
  {
    what: 'resources=null: no resources and no heap sizing, not a nil pointer',
    args: set('resources=null'),
    check: (o) => {
      expect(container(o).resources).toBeUndefined();
      expect(container(o).env?.find((e) => e.name === 'NODE_OPTIONS')?.value).toBe('--max-semi-space-size=16 --disable-sigusr1');
    },
  },
  {
    what: 'the pod fields a platform sets, on the helm test pod too',
    args: [
      ...set('runtimeClassName=gvisor', 'dnsPolicy=None'),
      '--set-json',
      'dnsConfig={"nameservers":["10.0.0.10"],"searches":["shop.svc.cluster.local"],"options":[{"name":"ndots","value":"2"}]}',
      '--set-json',
      'hostAliases=[{"ip":"10.1.2.3","hostnames":["legacy.internal"]}]',
    ],
    check: (o) => {
      for (const spec of [podSpec(o), testPodSpec(o)]) {
        expect(spec.runtimeClassName).toBe('gvisor');
        expect(spec.dnsPolicy).toBe('None');
        expect(spec.dnsConfig?.options).toEqual([{ name: 'ndots', value: '2' }]);
        expect(spec.hostAliases).toEqual([{ ip: '10.1.2.3', hostnames: ['legacy.internal'] }]);
      }
    },
  },
  {
    what: 'lifecycle hooks, init and extra containers (restricted unless they say otherwise)',
    args: [
      '--set-json',
      'lifecycleHooks={"preStop":{"sleep":{"seconds":2}}}',
      '--set-json',
      'initContainers=[{"name":"wait","image":"busybox:1.37","command":["true"]}]',
      '--set-json',
      'extraContainers=[{"name":"proxy","image":"envoyproxy/envoy:v1.34.0","securityContext":{"runAsUser":1001}}]',
    ],
    check: (o) => {
      const spec = podSpec(o);
      expect(container(o).lifecycle).toEqual({ preStop: { sleep: { seconds: 2 } } });
      expect(spec.initContainers?.map((c) => [c.name, c.image, c.securityContext?.allowPrivilegeEscalation])).toEqual([['wait', 'busybox:1.37', false]]);
      expect(spec.containers.map((c) => c.name)).toEqual(['product-service', 'proxy']);
      expect(spec.containers[1]?.securityContext).toMatchObject({ runAsUser: 1001, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
    },
  },
  {
    what: 'Deployment fields: revisionHistoryLimit, minReadySeconds, annotations',
    args: [...set('revisionHistoryLimit=10', 'minReadySeconds=15'), '--set-string', 'deploymentAnnotations.reloader\\.stakater\\.com/auto=true'],
    check: (o) => {
      const deployment = findOne(o, 'Deployment');
      expect(deployment.spec).toMatchObject({ revisionHistoryLimit: 10, minReadySeconds: 15 });
      expect(deployment.metadata?.annotations).toEqual({ 'reloader.stakater.com/auto': 'true' });
    },
  },
  {
    what: 'Service labels, externalTrafficPolicy and loadBalancerSourceRanges on a LoadBalancer',
    args: set(
      'service.type=LoadBalancer',
      'service.externalTrafficPolicy=Local',
      'service.loadBalancerSourceRanges={10.0.0.0/8,2001:db8::/32}',
      'service.labels.exposure=public',
    ),
    check: (o) => {
      const svc = apiService(o);
      expect(svc.spec).toMatchObject({ type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.0.0.0/8', '2001:db8::/32'] });
      expect(svc.metadata?.labels?.exposure).toBe('public');
    },
  },
];

describe.each(accepted)('values that render: $what', ({ args, check }) => {
  it('render objects valid for their API, pass helm lint --strict, and say what was asked', () => {
    const objects = template(args);
    for (const obj of objects) validateObject(obj);
    check(objects);
    const lint = helm(['lint', '--strict', chartDir, ...args]);
    expect(lint.status, lint.stdout).toBe(0);
  });

  it('render the same objects with helm 3, whose lint --strict passes them too', () => {
    const rendered = helm(['template', 'products', chartDir, '--namespace', 'shop', ...CRD_APIS, ...args], undefined, helm3Bin);
    expect(rendered.status, rendered.stderr).toBe(0);
    expect(parseManifests(rendered.stdout)).toEqual(template(args));
    const lint = helm(['lint', '--strict', chartDir, ...args], undefined, helm3Bin);
    expect(lint.status, lint.stdout).toBe(0);
  });
});

const refused: [string, string[], RegExp][] = [
  ['memory in millibytes', set('resources.limits.memory=384m'), /resources.limits.memory is 384m: the suffix m, u or n means a fraction of a byte.*384Mi/],
  [
    "the helm test pod's memory in millibytes",
    set('helmTest.resources.requests.memory=64m'),
    /helmTest.resources.requests.memory is 64m: the suffix m, u or n means a fraction of a byte/,
  ],
  [
    'NODE_OPTIONS in extraEnv',
    set('extraEnv[0].name=NODE_OPTIONS', 'extraEnv[0].value=--max-old-space-size=200'),
    /extraEnv cannot set NODE_OPTIONS: it would replace the chart's flags/,
  ],
  ['a Node flag off the allowlist: SIGUSR1 back on', ['--set-string', 'extraNodeOptions[0]=--no-disable-sigusr1'], /extraNodeOptions\/0|extraNodeOptions\.0/],
  [
    'a Node flag off the allowlist: the lenient HTTP parser',
    ['--set-string', 'extraNodeOptions[0]=--insecure-http-parser'],
    /extraNodeOptions\/0|extraNodeOptions\.0/,
  ],
  ['the latest tag', set('image.tag=latest'), /image.tag must not be "latest": pin a version/],
  ['a grace period shorter than the drain', set('terminationGracePeriodSeconds=10'), /terminationGracePeriodSeconds \(10\) must be at least/],
  [
    'externalTrafficPolicy on a ClusterIP Service',
    set('service.externalTrafficPolicy=Local'),
    /service.externalTrafficPolicy \(Local\) needs service.type NodePort or LoadBalancer, not ClusterIP/,
  ],
  [
    'loadBalancerSourceRanges on a NodePort Service',
    set('service.type=NodePort', 'service.loadBalancerSourceRanges={10.0.0.0/8}'),
    /service.loadBalancerSourceRanges needs service.type LoadBalancer, not NodePort/,
  ],
  ['dnsPolicy None without nameservers', set('dnsPolicy=None'), /dnsPolicy None needs dnsConfig.nameservers/],
  [
    "an extra container named like the chart's",
    set('extraContainers[0].name=product-service', 'extraContainers[0].image=x:1'),
    /the container name product-service is taken/,
  ],
  [
    'an HPA whose minReplicas exceeds its maxReplicas',
    set('autoscaling.enabled=true', 'autoscaling.minReplicas=5', 'autoscaling.maxReplicas=2'),
    /autoscaling.minReplicas must not exceed autoscaling.maxReplicas/,
  ],
];

describe.each(refused)('values refused: %s', (_what, args, message) => {
  it.each(HELMS)('by $helmName template and lint --strict, saying why', ({ bin }) => {
    const { template: t, lint } = refusals(args, bin);
    expect(t).toMatch(message);
    expect(lint).toMatch(message);
  });
});
