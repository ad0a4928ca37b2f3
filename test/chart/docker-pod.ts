// A stand-in for a Kubernetes node (scripts/ci/README.md): runs pods of the rendered chart on Docker
// as the kubelet would (pod-to-docker.ts). Each test file makes one Pods: its own network (where the
// Service name resolves to the pod), its containers and volumes' host directories, removed by cleanUp().
// Needs a Docker engine (scripts/ci/docker-engine.sh) and the image product-service:test, built by the
// container tests (`npm run test:container`, which .ci/run runs first), or the one PRODUCT_SERVICE_IMAGE names.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { stringify } from 'yaml';
import { docker, requireDockerEngine } from '../container/docker-host';
import type { OtlpReceiver } from '../support/otlp-receiver';
import { findOne, mainContainer, must, podSpecOf, set, template } from './helm';
import { commandArgs, probeUntil, translatePod, type PodInputs, type Translation } from './pod-to-docker';

export const IMAGE = process.env.PRODUCT_SERVICE_IMAGE ?? 'product-service:test';
export const IMAGE_VALUES = set('image.repository=product-service', 'image.tag=test', 'image.pullPolicy=Never');
export const RELEASE = 'products';
export const NAMESPACE = 'shop';
/** Docker's private networks, which the test's requests come from: named in traceContextFrom, their traceparent is believed. */
export const DOCKER_NETWORKS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.0/8'];
/** Spans leave every 200 ms instead of every second. */
export const FAST_EXPORT = { name: 'OTEL_BSP_SCHEDULE_DELAY', value: '200' };

/** The Deployment rendered to run the image with `values`, given in a values file as a user gives them. */
export function deploymentWith(values: object): IDeployment {
  const dir = mkdtempSync(join(tmpdir(), 'chart-values-'));
  try {
    writeFileSync(join(dir, 'values.yaml'), stringify(values));
    return findOne(template([...IMAGE_VALUES, '--values', join(dir, 'values.yaml')], RELEASE, NAMESPACE), 'Deployment');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function postTraced(baseUrl: string, traceId: string): Promise<number> {
  const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
  const res = await fetch(`${baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent }, body: '{}' });
  await res.arrayBuffer();
  return res.status;
}

export async function waitForSpan(receiver: OtlpReceiver, traceId: string, name: string): Promise<void> {
  try {
    await receiver.waitForSpans((span) => span.traceId === traceId, 1, 20_000);
  } catch (err) {
    throw new Error(`${String(err)}\ncontainer logs:\n${logsOf(name)}`, { cause: err });
  }
}

export function logsOf(name: string): string {
  const run = docker(['logs', name], true);
  return `${run.stdout}${run.stderr}`.slice(-4000);
}

function hostPort(name: string, containerPort: number): string {
  const [first = ''] = docker(['port', name, `${containerPort}/tcp`])
    .stdout.trim()
    .split('\n');
  return first.replace('0.0.0.0', '127.0.0.1');
}

export interface RunningPod {
  name: string;
  baseUrl: string;
  metricsUrl: string;
  /** The base URL of each named container port (http, metrics, probe), for its probes. */
  portUrls: Readonly<Record<string, string>>;
  translation: Translation;
  secondsToStart: number;
}

export interface PodOptions extends Pick<PodInputs, 'sources' | 'secrets'> {
  podName: string;
  nodeName?: string;
  dockerArgs?: readonly string[];
  /** A name that resolves to this pod on the network, as a Service name does. */
  alias?: string;
}

export class Pods {
  readonly network = `chart-test-${randomBytes(4).toString('hex')}`;
  private readonly containers: string[] = [];
  private readonly volumeRoots: string[] = [];

  /** Checks the engine and the image (failing, never skipping, when either is missing) and creates the network. */
  setUp(): void {
    requireDockerEngine();
    if (docker(['image', 'inspect', IMAGE], true).status !== 0) {
      throw new Error(`Image ${IMAGE} is missing. Build it with the container tests first: npm run test:container`);
    }
    docker(['network', 'create', this.network]);
  }

  /** A fresh name for a container this object removes in cleanup(). */
  containerName(role: string): string {
    const name = `${this.network}-${role}`;
    this.containers.push(name);
    return name;
  }

  /** Starts the Deployment's pod and waits for its startup probe, as the kubelet would. */
  async start(deployment: IDeployment, options: PodOptions): Promise<RunningPod> {
    const container = mainContainer(deployment);
    const podSpec = podSpecOf(deployment);
    const emptyDirRoot = mkdtempSync(join(tmpdir(), 'chart-pod-volumes-'));
    this.volumeRoots.push(emptyDirRoot);
    const identity = { podName: options.podName, namespace: NAMESPACE, nodeName: options.nodeName ?? 'node-a' };
    const translation = translatePod(podSpec, container.name, identity, { emptyDirRoot, sources: options.sources, secrets: options.secrets });
    const name = this.containerName(options.podName);
    const network = ['--network', this.network, ...(options.alias === undefined ? [] : ['--network-alias', options.alias]), ...(options.dockerArgs ?? [])];
    docker(['run', '--detach', '--name', name, ...network, ...translation.args, IMAGE, ...commandArgs(podSpec, container.name)]);
    const portUrls = Object.fromEntries((container.ports ?? []).map((p) => [p.name ?? '', `http://${hostPort(name, p.containerPort)}`]));
    const baseUrl = must(portUrls.http, 'http port');
    const metricsUrl = `${must(portUrls.metrics, 'metrics port')}/metrics`;
    try {
      const secondsToStart = await probeUntil('startupProbe', must(container.startupProbe, 'startupProbe'), portUrls);
      return { name, baseUrl, metricsUrl, portUrls, translation, secondsToStart };
    } catch (err) {
      throw new Error(`${String(err)}\ncontainer logs:\n${logsOf(name)}`, { cause: err });
    }
  }

  cleanUp(): void {
    for (const name of this.containers) docker(['rm', '--force', name], true);
    docker(['network', 'rm', this.network], true);
    for (const root of this.volumeRoots) rmSync(root, { recursive: true, force: true });
  }
}
