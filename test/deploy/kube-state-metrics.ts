// A stand-in for kube-state-metrics: the series of it that the chart's rules read. No Kubernetes
// API runs here (see the chart tests), so the test sets what it would report.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';

/** The container name the chart gives the service (its Chart.Name), which the rules select. */
const CONTAINER = 'product-service';

export interface KubeStateMetrics {
  /** host:port to scrape (path /metrics). */
  readonly target: string;
  /** kube_deployment_status_replicas_available of a Deployment. */
  setAvailableReplicas(namespace: string, deployment: string, replicas: number): void;
  /** kube_pod_container_resource_limits, and kube_pod_container_status_restarts_total at 0; called again, changes the limit. */
  addPod(namespace: string, pod: string, memoryLimit: number): void;
  close(): Promise<void>;
}

export async function startKubeStateMetrics(): Promise<KubeStateMetrics> {
  const registry = new Registry();
  // The label sets kube-state-metrics v2 exposes.
  const available = new Gauge({
    name: 'kube_deployment_status_replicas_available',
    help: 'The number of available replicas per deployment.',
    labelNames: ['namespace', 'deployment'] as const,
    registers: [registry],
  });
  const limits = new Gauge({
    name: 'kube_pod_container_resource_limits',
    help: 'The number of requested limit resource by a container.',
    labelNames: ['namespace', 'pod', 'container', 'node', 'resource', 'unit'] as const,
    registers: [registry],
  });
  const restarts = new Counter({
    name: 'kube_pod_container_status_restarts_total',
    help: 'The number of container restarts per container.',
    labelNames: ['namespace', 'pod', 'container'] as const,
    registers: [registry],
  });

  const server: Server = createServer((req, res) => {
    void registry.metrics().then((body) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(body));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    target: `127.0.0.1:${port}`,
    setAvailableReplicas: (namespace, deployment, replicas) => available.set({ namespace, deployment }, replicas),
    addPod(namespace, pod, memoryLimit) {
      limits.set({ namespace, pod, container: CONTAINER, node: 'node-a', resource: 'memory', unit: 'byte' }, memoryLimit);
      restarts.inc({ namespace, pod, container: CONTAINER }, 0);
    },
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
