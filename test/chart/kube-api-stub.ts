// A stand-in for a Kubernetes API server, on loopback, for running documented commands with the real
// kubectl: discovery and minimal objects of one release (as the chart renders them), each pod's whole
// log, and a record of every request kubectl sends for the test to check.
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface KubeRequest {
  method: string;
  path: string;
  query: Record<string, string>;
}

export interface KubeApiStub {
  /** A directory with `kubeconfig` (pointing at the stub) to use as HOME and KUBECONFIG. */
  readonly home: string;
  readonly kubeconfig: string;
  readonly requests: KubeRequest[];
  /** Brings deleted pods back: each command meets the same release. */
  reset(): void;
  close(): Promise<void>;
}

export interface StubRelease {
  namespace: string;
  /** The Deployment's and the Services' name (the release's full name). */
  name: string;
  services: Record<string, Array<{ name?: string; port: number; targetPort?: number | string }>>;
  /** The pods' labels, which the Deployment and the Service select. */
  podLabels: Record<string, string>;
  container: string;
  /** The container's ports, as the chart renders them (a Service's targetPort names one). */
  containerPorts: Array<{ name?: string; containerPort: number }>;
  pods: string[];
  /** The lines of each pod's log, oldest first. */
  logLines: (pod: string) => string[];
}

const VERBS = ['get', 'list', 'delete', 'patch', 'update', 'watch'];
/** A discovery entry; kubectl resolves `deploy/x` and `svc/x` through shortNames. */
const resource = (name: string, kind: string, shortNames: string[] = [], namespaced = true, verbs = VERBS) => ({
  name,
  singularName: name.includes('/') ? '' : kind.toLowerCase(),
  kind,
  namespaced,
  verbs,
  shortNames,
});

const DISCOVERY: Record<string, unknown> = {
  '/api': { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] },
  '/apis': {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: ['apps/v1', 'monitoring.coreos.com/v1'].map((groupVersion) => {
      const [name = '', version = ''] = groupVersion.split('/');
      return { name, versions: [{ groupVersion, version }], preferredVersion: { groupVersion, version } };
    }),
  },
  '/api/v1': {
    kind: 'APIResourceList',
    groupVersion: 'v1',
    resources: [
      resource('pods', 'Pod', ['po']),
      resource('pods/log', 'Pod', [], true, ['get']),
      resource('pods/portforward', 'PodPortForwardOptions', [], true, ['create', 'get']),
      resource('services', 'Service', ['svc']),
      resource('endpoints', 'Endpoints', ['ep']),
      resource('events', 'Event', ['ev']),
      resource('nodes', 'Node', ['no'], false),
      resource('namespaces', 'Namespace', ['ns'], false),
    ],
  },
  '/apis/apps/v1': {
    kind: 'APIResourceList',
    groupVersion: 'apps/v1',
    resources: [
      resource('deployments', 'Deployment', ['deploy']),
      resource('deployments/scale', 'Scale', [], true, ['get', 'patch', 'update']),
      resource('replicasets', 'ReplicaSet', ['rs']),
    ],
  },
  '/apis/monitoring.coreos.com/v1': {
    kind: 'APIResourceList',
    groupVersion: 'monitoring.coreos.com/v1',
    resources: [resource('servicemonitors', 'ServiceMonitor')],
  },
};

export async function startKubeApiStub(release: StubRelease): Promise<KubeApiStub> {
  const requests: KubeRequest[] = [];
  const deleted = new Set<string>();
  const { namespace: ns, name, podLabels: labels, container } = release;
  const meta = (objectName: string, extra: object = {}) => ({
    name: objectName,
    namespace: ns,
    uid: `uid-${objectName}`,
    resourceVersion: '1',
    labels,
    ...extra,
  });
  const pod = (podName: string) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta(podName, { creationTimestamp: '2026-01-01T00:00:00Z' }),
    spec: { nodeName: 'node-1', containers: [{ name: container, image: 'product-service', ports: release.containerPorts }] },
    status: {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: [{ name: container, ready: true, restartCount: 0, image: 'product-service', imageID: '', started: true, state: { running: {} } }],
    },
  });
  const list = (kind: string, items: unknown[]) => ({ apiVersion: 'v1', kind: `${kind}List`, metadata: { resourceVersion: '1' }, items });
  const service = (serviceName: string, ports: unknown[]) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(serviceName),
    spec: { type: 'ClusterIP', clusterIP: '10.0.0.10', selector: labels, ports },
  });
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(name, { generation: 1, annotations: { 'deployment.kubernetes.io/revision': '1' } }),
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: container, image: 'product-service' }] } },
    },
    status: { replicas: 2, readyReplicas: 2, availableReplicas: 2, updatedReplicas: 2, observedGeneration: 1 },
  };
  const scale = { apiVersion: 'autoscaling/v1', kind: 'Scale', metadata: meta(name), spec: { replicas: 2 }, status: { replicas: 2 } };

  function answer(method: string, path: string, query: Record<string, string>, res: ServerResponse): void {
    const json = (body: unknown, status = 200): void => void res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
    const notFound = (): void =>
      json({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${path} not found` }, 404);
    if (DISCOVERY[path] !== undefined) return json(DISCOVERY[path]);
    const inNs = `/namespaces/${ns}`;
    if (path === `/api/v1${inNs}`)
      return json({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, uid: `uid-${ns}`, resourceVersion: '1' }, status: { phase: 'Active' } });
    const podMatch = new RegExp(`^/api/v1${inNs}/pods(?:/([^/]+))?(?:/(log|portforward))?$`).exec(path);
    if (podMatch !== null) {
      const [, podName, sub] = podMatch;
      if (podName === undefined) {
        // The stub holds the release's pods only: a selector of other labels is a mistake in the command.
        const selector = query.labelSelector?.split(',') ?? [];
        if (!selector.every((pair) => labels[pair.split('=')[0] ?? ''] === pair.split('=')[1])) {
          return json(
            { kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 400, message: `no pod of the release has the labels ${query.labelSelector}` },
            400,
          );
        }
        const named = /^metadata\.name=(.+)$/.exec(query.fieldSelector ?? '')?.[1];
        const pods = release.pods.filter((p) => !deleted.has(p) && (named === undefined || p === named));
        return json(list('Pod', pods.map(pod)));
      }
      if (!release.pods.includes(podName) || deleted.has(podName)) return notFound();
      if (sub === 'log') return void res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`${release.logLines(podName).join('\n')}\n`);
      if (sub === 'portforward') return json({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 400, message: 'the stub does not stream' }, 400);
      if (method === 'DELETE') deleted.add(podName);
      return json(pod(podName));
    }
    const serviceName = new RegExp(`^/api/v1${inNs}/services/([^/]+)$`).exec(path)?.[1] ?? '';
    const ports = release.services[serviceName];
    if (ports !== undefined) return json(service(serviceName, ports));
    if (path === `/api/v1${inNs}/endpoints/${name}`) {
      const addresses = release.pods
        .filter((p) => !deleted.has(p))
        .map((p, i) => ({ ip: `10.1.0.${i + 1}`, targetRef: { kind: 'Pod', namespace: ns, name: p } }));
      return json({ apiVersion: 'v1', kind: 'Endpoints', metadata: meta(name), subsets: [{ addresses, ports: [{ name: 'http', port: 8080 }] }] });
    }
    if (path === `/api/v1${inNs}/events` || path === '/api/v1/events') return json(list('Event', []));
    if (path === `/apis/apps/v1${inNs}/deployments/${name}`) return json(deployment);
    if (path === `/apis/apps/v1${inNs}/deployments/${name}/scale`) return json(scale);
    if (path === `/apis/apps/v1${inNs}/replicasets`) return json({ ...list('ReplicaSet', []), apiVersion: 'apps/v1' });
    if (path === `/apis/monitoring.coreos.com/v1${inNs}/servicemonitors/${name}`)
      return json({ apiVersion: 'monitoring.coreos.com/v1', kind: 'ServiceMonitor', metadata: meta(name), spec: { selector: { matchLabels: labels } } });
    const node = /^\/api\/v1\/nodes\/([^/]+)$/.exec(path)?.[1];
    if (node !== undefined) return json({ apiVersion: 'v1', kind: 'Node', metadata: { name: node, uid: 'uid-node', resourceVersion: '1' }, status: {} });
    if (path === '/api/v1/pods') return json(list('Pod', []));
    return notFound();
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stub');
    const query = Object.fromEntries(url.searchParams);
    requests.push({ method: req.method ?? 'GET', path: url.pathname, query });
    req.resume();
    req.on('end', () => answer(req.method ?? 'GET', url.pathname, query, res));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  const home = mkdtempSync(join(tmpdir(), 'kube-api-stub-'));
  const kubeconfig = join(home, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stub', cluster: { server: `http://127.0.0.1:${port}` } }],
      users: [{ name: 'stub', user: {} }],
      contexts: [{ name: 'stub', context: { cluster: 'stub', user: 'stub' } }],
      'current-context': 'stub',
    }),
  );
  return {
    home,
    kubeconfig,
    requests,
    reset: () => deleted.clear(),
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
      rmSync(home, { recursive: true, force: true });
    },
  };
}
