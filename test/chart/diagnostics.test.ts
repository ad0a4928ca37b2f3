// Diagnostics on demand, as docs/diagnostics.md tells an SRE to take them: an ephemeral container from that
// page's profile shares the pod's process and network namespaces (`kubectl debug --target`), sends the signals
// and copies the files out; the image's own Node stands in for busybox (nothing can be pulled here).
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sampleValue, scrape } from '../support/exposition';
import { docker } from '../container/docker-host';
import { deploymentWith, IMAGE, logsOf, Pods, type RunningPod } from './docker-pod';
import { DIAGNOSTICS_DOC, firstBlock } from './docs';
import { mainContainer, must, podSpecOf } from './helm';

/** A credential the pod holds, as the OTLP headers' API key would be. */
const SECRET = `api-key=diag-${randomBytes(12).toString('hex')}`;
const HEAP_SNAPSHOTS = { diagnostics: { enabled: true, heapSnapshot: { enabled: true } }, extraEnv: [{ name: 'OTEL_EXPORTER_OTLP_HEADERS', value: SECRET }] };

const pods = new Pods();
beforeAll(() => pods.setUp(), 60_000);
afterAll(() => pods.cleanUp());

/** The container profile docs/diagnostics.md gives `kubectl debug --custom`. */
const profile = firstBlock(DIAGNOSTICS_DOC, 'Take a report or a heap snapshot', 'json') as {
  securityContext: { runAsUser: number; runAsGroup: number };
  volumeMounts: Array<{ name: string; mountPath: string }>;
};
const [profileMount] = profile.volumeMounts;

/** The ephemeral container of each pod, started once, as `kubectl debug ... -- sleep` leaves one running. */
const ephemeral = new Map<string, string>();

/** Runs `script` in Node in the ephemeral container of `pod` (`kubectl exec -c diagnostics`), where the service is PID 1. */
function debugContainer(pod: RunningPod, script: string): string {
  let name = ephemeral.get(pod.name);
  if (name === undefined) {
    name = pods.containerName(`${pod.name}-diagnostics`);
    const { runAsUser, runAsGroup } = profile.securityContext;
    // The profile's volume, where the pod has it: the same directory on the node.
    const volume = pod.translation.args.find(
      (arg) => arg.includes(`destination=${profileMount?.mountPath},`) || arg.endsWith(`destination=${profileMount?.mountPath}`),
    );
    const namespaces = [`--pid=container:${pod.name}`, `--network=container:${pod.name}`];
    const restricted = ['--user', `${runAsUser}:${runAsGroup}`, '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--read-only'];
    const mount = volume === undefined ? [] : ['--mount', volume];
    docker([
      'run',
      '--detach',
      '--name',
      name,
      ...namespaces,
      ...restricted,
      ...mount,
      '--entrypoint',
      '/nodejs/bin/node',
      IMAGE,
      '-e',
      'setInterval(() => {}, 3600_000)',
    ]);
    ephemeral.set(pod.name, name);
  }
  return docker(['exec', name, '/nodejs/bin/node', '-e', script]).stdout;
}

const kill = (pod: RunningPod, signal: string) => debugContainer(pod, `process.kill(1, ${JSON.stringify(signal)})`);
const listDiagnostics = (pod: RunningPod): string[] =>
  JSON.parse(debugContainer(pod, `console.log(JSON.stringify(require('fs').readdirSync('/diagnostics')))`)) as string[];
const hostDiagnosticsDir = (pod: RunningPod): string => {
  const mount = pod.translation.args.find((arg) => arg.includes('destination=/diagnostics'));
  return must(/source=([^,]+)/.exec(mount ?? '')?.[1], 'diagnostics host directory');
};

/** The service process's peak resident memory so far (VmHWM), read by the host kernel. */
function peakRss(pod: RunningPod): number {
  const pid = docker(['inspect', '--format', '{{.State.Pid}}', pod.name]).stdout.trim();
  const kb = must(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1], 'VmHWM');
  return Number(kb) * 1024;
}

async function stillServing(pod: RunningPod): Promise<void> {
  expect((await fetch(`${pod.baseUrl}/health`)).status).toBe(200);
  const res = await fetch(`${pod.baseUrl}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  expect(res.status).toBe(201);
  expect(docker(['inspect', '--format', '{{.State.Running}} {{.RestartCount}} {{.State.OOMKilled}}', pod.name]).stdout.trim()).toBe('true 0 false');
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

describe('diagnostics.enabled with diagnostics.heapSnapshot.enabled', () => {
  let pod: RunningPod;
  beforeAll(async () => {
    const deployment = deploymentWith(HEAP_SNAPSHOTS);
    expect(podSpecOf(deployment).volumes?.map((v) => v.name)).toContain(profileMount?.name);
    expect(mainContainer(deployment).volumeMounts).toContainEqual({ name: profileMount?.name, mountPath: profileMount?.mountPath });
    pod = await pods.start(deployment, { podName: 'products-product-service-diag-1' });
  }, 120_000);

  it('SIGUSR2 writes a report to /diagnostics, without the environment (no secret) or the network interfaces; the service keeps answering', async () => {
    kill(pod, 'SIGUSR2');
    const name = await vi.waitFor(
      () => {
        const found = listDiagnostics(pod).find((f) => /^report\..*\.json$/.test(f));
        if (found === undefined) throw new Error(`no report yet; logs:\n${logsOf(pod.name)}`);
        return found;
      },
      { timeout: 15_000, interval: 250 },
    );
    // Copied out as docs/diagnostics.md does it: cat through the ephemeral container.
    const text = debugContainer(pod, `process.stdout.write(require('fs').readFileSync('/diagnostics/${name}'))`);
    expect(text).toBe(readFileSync(join(hostDiagnosticsDir(pod), name), 'utf8'));
    const report = JSON.parse(text) as { header: Record<string, unknown>; environmentVariables?: unknown; javascriptHeap?: unknown };
    expect(report.header.event).toBe('SIGUSR2');
    expect(report.header.networkInterfaces).toBeUndefined();
    expect(report.environmentVariables).toBeUndefined();
    expect(report.javascriptHeap).toBeDefined();
    expect(text).not.toContain(SECRET);
    await stillServing(pod);
  });

  it('SIGURG writes a heap snapshot (mode 0600) to /diagnostics; the service keeps answering', async () => {
    const heapUsed = must(sampleValue(await scrape(pod.metricsUrl), 'nodejs_heap_size_used_bytes'), 'nodejs_heap_size_used_bytes');
    const rssBefore = peakRss(pod);
    const dir = hostDiagnosticsDir(pod);
    const started = performance.now();
    kill(pod, 'SIGURG');
    // The snapshot is written on the event loop: /health waits for it.
    const healthDuring = fetch(`${pod.baseUrl}/health`).then((res) => ({ status: res.status, seconds: (performance.now() - started) / 1000 }));
    // Complete once it parses: V8 writes it as it walks the heap. Read as the service's user (the
    // file is the user's alone), from the ephemeral container.
    const complete = `const fs = require('fs');
      const name = fs.readdirSync('/diagnostics').find((f) => f.endsWith('.heapsnapshot'));
      JSON.parse(fs.readFileSync('/diagnostics/' + name, 'utf8'));
      console.log(name);`;
    const name = await vi.waitFor(() => debugContainer(pod, complete).trim(), { timeout: 60_000, interval: 100 });
    const seconds = (performance.now() - started) / 1000;
    const size = statSync(join(dir, name)).size;
    const health = await healthDuring;
    console.log(
      `heap snapshot: ${mb(size)} file for ${mb(heapUsed)} of heap in use, complete ${seconds.toFixed(1)} s after the signal; ` +
        `/health sent just after the signal answered ${health.status} after ${health.seconds.toFixed(1)} s; peak RSS ${mb(rssBefore)} before, ${mb(peakRss(pod))} after`,
    );
    expect(health.status).toBe(200);
    expect(listDiagnostics(pod)).toContain(name);
    expect(statSync(join(dir, name)).mode & 0o777).toBe(0o600);
    // Copied out as the page says (cat through the ephemeral container): the whole file.
    const copy = debugContainer(pod, `process.stdout.write(require('fs').readFileSync('/diagnostics/${name}'))`);
    expect(Buffer.byteLength(copy)).toBe(size);
    expect(copy.startsWith('{"snapshot":{"meta":')).toBe(true);
    // And deleted as the page says.
    debugContainer(pod, `require('fs').rmSync('/diagnostics/${name}')`);
    expect(readdirSync(dir)).not.toContain(name);
    await stillServing(pod);
  });
});
