// Runs the image as the rendered Deployment describes it (pod-to-docker.ts), probes it as the kubelet would
// and runs the rendered `helm test` pod against it, with the defaults and with otel.endpoint. What the service
// does with its variables (answers, connection budget, shutdown, faults, telemetry) is proven on the process
// (test/*.test.ts); here, what the pod spec changes.
// Needs a Docker engine and the image product-service:test (docker-pod.ts).
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADD_HOST_ARGS, bridgeAddress, docker, HOST_NAME } from '../container/docker-host';
import { startOtlpReceiver } from '../support/otlp-receiver';
import { deploymentWith, DOCKER_NETWORKS, IMAGE, IMAGE_VALUES, NAMESPACE, Pods, postTraced, RELEASE, waitForSpan, type RunningPod } from './docker-pod';
import { containerPort, findOne, mainContainer, must, named, ofKind, podSpecOf, template } from './helm';
import { bytes, commandArgs, probeOnce, translatePod } from './pod-to-docker';

const objects = template(IMAGE_VALUES, RELEASE, NAMESPACE);
const deployment = findOne(objects, 'Deployment');
const deploymentName = must(deployment.metadata?.name, 'Deployment name');
const service = named(objects, 'Service', deploymentName);
const [testPod] = ofKind(objects, 'Pod').filter((o) => o.metadata?.annotations?.['helm.sh/hook'] === 'test');
const podSpec = podSpecOf(deployment);
const container = mainContainer(deployment);
const startupProbe = must(container.startupProbe, 'startupProbe');
const podName = `${deploymentName}-5d8f9c7b6-x2k4q`;
const uid = must(podSpec.securityContext?.runAsUser, 'runAsUser');
const gid = must(podSpec.securityContext?.runAsGroup, 'runAsGroup');

const pods = new Pods();
let server: RunningPod;

beforeAll(async () => {
  pods.setUp();
  server = await pods.start(deployment, { podName, alias: deploymentName });
}, 180_000);

afterAll(() => pods.cleanUp());

describe('the rendered Deployment, run as a container', () => {
  it('passes its startup probe within the probe budget, then readiness and liveness', async () => {
    const budget = must(startupProbe.periodSeconds, 'period') * must(startupProbe.failureThreshold, 'failureThreshold');
    console.log(`startup probe passed after ${server.secondsToStart} s (budget ${budget} s)`);
    expect(server.secondsToStart).toBeLessThan(budget);
    for (const name of ['readinessProbe', 'livenessProbe'] as const) {
      const probe = must(container[name], name);
      for (let i = 0; i < 3; i++) {
        const result = await probeOnce(probe, server.portUrls);
        expect(result.ok, `${name}: ${result.detail}`).toBe(true);
      }
    }
  });

  it('runs Node as PID 1 with the uid/gid, capabilities, no_new_privs and seccomp the pod spec asks for', () => {
    const pid = docker(['inspect', '--format', '{{.State.Pid}}', server.name]).stdout.trim();
    // Read by the host kernel, not by anything inside the container.
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, 'm').exec(status)?.[1]?.split(/\s+/);
    expect(field('Uid')).toEqual(Array<string>(4).fill(String(uid)));
    expect(field('Gid')).toEqual(Array<string>(4).fill(String(gid)));
    expect(field('CapEff')).toEqual(['0000000000000000']);
    expect(field('CapPrm')).toEqual(['0000000000000000']);
    expect(field('NoNewPrivs')).toEqual(['1']);
    expect(field('Seccomp')).toEqual(['2']); // 2 = filter mode: the runtime's default profile
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]).toMatch(/node$/);
  });

  it('can write /tmp and nothing else on its read-only root filesystem', () => {
    const script = `
      const fs = require('node:fs');
      fs.writeFileSync('/tmp/probe', 'ok');
      for (const path of ['/app/probe', '/probe', '/home/nonroot/probe']) {
        try { fs.writeFileSync(path, 'x'); console.log('WROTE ' + path); } catch (e) { console.log(e.code + ' ' + path); }
      }`;
    const out = docker(['exec', server.name, '/nodejs/bin/node', '-e', script]).stdout;
    expect(out).not.toContain('WROTE');
    expect(out).toContain('EROFS /app/probe');
  });

  it('sizes the Node heap from the memory limit, below it', () => {
    const limit = bytes(must(container.resources?.limits?.memory, 'memory limit'));
    // docker exec inherits the container's environment (NODE_OPTIONS) and cgroup.
    const out = docker([
      'exec',
      server.name,
      '/nodejs/bin/node',
      '-p',
      'JSON.stringify([process.constrainedMemory(), require("v8").getHeapStatistics().heap_size_limit])',
    ]).stdout;
    const [constrained, heapLimit] = JSON.parse(out) as [number, number];
    expect(constrained).toBe(limit);
    expect(heapLimit).toBeLessThan(limit * 0.8);
    expect(heapLimit).toBeGreaterThan(limit * 0.4);
  });

  it('passes the rendered helm test pod, run with its own restricted settings', () => {
    const testSpec = must(testPod?.spec, 'helm test pod spec');
    const testContainer = must(testSpec.containers[0], 'helm test container');
    // The test pod reaches the Service port; in this network the alias points at the container port.
    expect(service.spec?.ports?.find((p) => p.name === 'http')?.port).toBe(containerPort(container, 'http'));
    const translated = translatePod(testSpec, testContainer.name, {
      podName: must(testPod?.metadata?.name, 'test pod name'),
      namespace: NAMESPACE,
      nodeName: 'node-a',
    });
    const name = pods.containerName('helm-test');
    const run = docker(['run', '--name', name, '--network', pods.network, ...translated.args, IMAGE, ...commandArgs(testSpec, testContainer.name)], true);
    expect(run.status, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('ok GET /health 200');
    expect(run.stdout).toContain('ok POST /product 201');
  });
});

describe('the rendered Deployment with otel.endpoint set', () => {
  it('exports the server span of a request with the resource the chart sets (service.name, k8s.* from the downward API)', async () => {
    const receiver = await startOtlpReceiver('ok', { host: bridgeAddress() });
    try {
      const endpoint = `http://${HOST_NAME}:${new URL(receiver.url).port}`;
      // traceContextFrom: the test's traceparent is believed, so the span is found by its trace id.
      const traced = deploymentWith({ otel: { endpoint }, traceContextFrom: DOCKER_NETWORKS });
      const main = mainContainer(traced);
      const pod = { podName: `${deploymentName}-7c9d8f6b5-t7r2m`, nodeName: 'node-b' };
      // HOST_NAME resolves to the Docker host, as cluster DNS would resolve a collector's Service name.
      const { name, baseUrl, translation } = await pods.start(traced, { ...pod, dockerArgs: ADD_HOST_ARGS });
      const traceId = randomBytes(16).toString('hex');
      expect(await postTraced(baseUrl, traceId)).toBe(201);
      await waitForSpan(receiver, traceId, name);
      const spans = receiver.spans.filter((s) => s.traceId === traceId);
      expect(spans).toHaveLength(1);
      // What the chart decides. The span's own shape, its log line and what traceQueryParams, trustedProxies and
      // traceContextFrom change are the service's (test/telemetry.test.ts); the values' variables, render.test.ts's.
      // The rendered OTEL_RESOURCE_ATTRIBUTES after the kubelet's expansion, with the downward API's values.
      const rendered = Object.fromEntries(
        must(translation.env.get('OTEL_RESOURCE_ATTRIBUTES'), 'OTEL_RESOURCE_ATTRIBUTES')
          .split(',')
          .map((pair) => pair.split('=') as [string, string]),
      );
      expect(spans[0]?.resource).toMatchObject(rendered);
      expect(spans[0]?.resource).toMatchObject({
        'service.name': 'product-service',
        'k8s.pod.name': pod.podName,
        'k8s.pod.uid': must(translation.env.get('K8S_POD_UID'), 'K8S_POD_UID'),
        'k8s.namespace.name': NAMESPACE,
        'k8s.node.name': pod.nodeName,
        'k8s.deployment.name': deploymentName,
        'k8s.container.name': main.name,
      });
    } finally {
      await receiver.close();
    }
  });
});
