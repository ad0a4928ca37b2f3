// scripts/release/image-archive.mjs, image.yml's publishing step, run on real tools: skopeo and a registry
// (CNCF Distribution) of the test's own on loopback (scripts/ci/apt-install.sh). The archive has
// BuildKit's OCI shape (an index of two platforms and an attestation manifest); the host's platform image
// holds the host's /bin/sh and its libraries, so that it runs once loaded into Docker, as image.yml loads it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { ROOT } from '../support/paths';
import { freePort } from '../support/service-process';
import { DOCKER, requireDockerEngine } from './docker-host';

const SCRIPT = join(ROOT, 'scripts/release/image-archive.mjs');
const INSTALL = 'sh scripts/ci/apt-install.sh skopeo docker-registry (as root)';
const OCI = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
};

const scratch = mkdtempSync(join(tmpdir(), 'image-archive-'));
let registry: ChildProcess | undefined;
let host = '';

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string };
  annotations?: Record<string, string>;
}

/** An OCI image layout, written blob by blob. */
class Layout {
  constructor(readonly dir: string) {
    mkdirSync(join(dir, 'blobs/sha256'), { recursive: true });
  }

  blob(mediaType: string, content: Buffer | object, extra: Partial<Descriptor> = {}): Descriptor {
    const bytes = Buffer.isBuffer(content) ? content : Buffer.from(JSON.stringify(content));
    const hex = createHash('sha256').update(bytes).digest('hex');
    writeFileSync(join(this.dir, 'blobs/sha256', hex), bytes);
    return { mediaType, digest: `sha256:${hex}`, size: bytes.length, ...extra };
  }

  /** A one-layer image for a platform: the layer holds a file naming it; on the host's platform, also a shell that prints it. */
  image(os: string, architecture: string): Descriptor {
    const runnable = os === 'linux' && architecture === HOST_ARCH;
    const tar = tarOf({ 'built-for': `built for ${os}/${architecture}\n`, ...(runnable ? shellFiles() : {}) });
    const layer = this.blob(OCI.layer, gzipSync(tar));
    const diffId = `sha256:${createHash('sha256').update(tar).digest('hex')}`;
    const run = runnable ? { Entrypoint: ['/bin/sh', '-c', 'read -r line < /built-for && echo "$line"'] } : {};
    const config = this.blob(OCI.config, { architecture, os, rootfs: { type: 'layers', diff_ids: [diffId] }, config: run });
    return this.blob(OCI.manifest, { schemaVersion: 2, mediaType: OCI.manifest, config, layers: [layer] }, { platform: { os, architecture } });
  }

  /** As BuildKit files provenance: an in-toto layer, under the platform unknown/unknown, referring to the image it describes. */
  attestation(subject: Descriptor): Descriptor {
    const statement = this.blob('application/vnd.in-toto+json', { _type: 'https://in-toto.io/Statement/v0.1', subject: [{ digest: subject.digest }] });
    const config = this.blob(OCI.config, { architecture: 'unknown', os: 'unknown', rootfs: { type: 'layers', diff_ids: [statement.digest] }, config: {} });
    return this.blob(
      OCI.manifest,
      { schemaVersion: 2, mediaType: OCI.manifest, config, layers: [statement] },
      {
        platform: { os: 'unknown', architecture: 'unknown' },
        annotations: { 'vnd.docker.reference.digest': subject.digest, 'vnd.docker.reference.type': 'attestation-manifest' },
      },
    );
  }

  archive(top: Descriptor, archive: string): void {
    writeFileSync(join(this.dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    writeFileSync(join(this.dir, 'index.json'), JSON.stringify({ schemaVersion: 2, mediaType: OCI.index, manifests: [top] }));
    must(spawnSync('tar', ['-cf', archive, '-C', this.dir, 'oci-layout', 'index.json', 'blobs']), 'tar -cf');
  }
}

const HOST_ARCH = process.arch === 'x64' ? 'amd64' : process.arch;

/** The host's /bin/sh and what ldd says it loads, by path in the image: host file to copy, read through symlinks. */
function shellFiles(): Record<string, { from: string }> {
  const ldd = must(spawnSync('ldd', ['/bin/sh'], { encoding: 'utf8' }), 'ldd /bin/sh');
  const libraries = [...ldd.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1] ?? '');
  const files: Record<string, { from: string }> = { 'bin/sh': { from: '/bin/sh' } };
  for (const path of libraries) files[path.slice(1)] = { from: realpathSync(path) };
  return files;
}

/** A layer's tar, written by tar itself: files by path, each a text or a host file to copy. */
function tarOf(files: Record<string, string | { from: string }>): Buffer {
  const dir = mkdtempSync(join(scratch, 'layer-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, 'root', path)), { recursive: true });
    if (typeof content === 'string') writeFileSync(join(dir, 'root', path), content);
    else {
      copyFileSync(content.from, join(dir, 'root', path));
      chmodSync(join(dir, 'root', path), 0o755);
    }
  }
  must(spawnSync('tar', ['-cf', join(dir, 'layer.tar'), '-C', join(dir, 'root'), ...Object.keys(files)]), 'tar -cf');
  return readFileSync(join(dir, 'layer.tar'));
}

function must(run: ReturnType<typeof spawnSync>, what: string): string {
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`${what} failed: ${String(run.stderr)}`);
  return String(run.stdout);
}

function tool(name: string): void {
  if (spawnSync('sh', ['-c', `command -v ${name}`]).status !== 0) throw new Error(`${name} is not installed; run ${INSTALL}`);
}

const script = (...args: string[]) => spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });

/** The sha256 of what the registry serves for `reference`. */
function served(reference: string): string {
  const raw = spawnSync('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${reference}`]);
  must(raw, `skopeo inspect ${reference}`);
  return `sha256:${createHash('sha256').update(raw.stdout).digest('hex')}`;
}

const layout = new Layout(join(scratch, 'layout'));
const amd64 = layout.image('linux', 'amd64');
const arm64 = layout.image('linux', 'arm64');
const provenance = layout.attestation(amd64);
const index = layout.blob(OCI.index, { schemaVersion: 2, mediaType: OCI.index, manifests: [amd64, arm64, provenance] });
const archive = join(scratch, 'image.tar');
layout.archive(index, archive);

const loadedTag = (platform: string) => `image-archive-test:${platform.replace('/', '-')}-${process.pid}`;
const loaded: string[] = [];

beforeAll(async () => {
  requireDockerEngine();
  tool('skopeo');
  tool('docker-registry');
  const port = await freePort();
  host = `127.0.0.1:${port}`;
  const config = join(scratch, 'registry.yml');
  writeFileSync(
    config,
    stringify({ version: 0.1, log: { level: 'warn' }, storage: { filesystem: { rootdirectory: join(scratch, 'registry') } }, http: { addr: host } }),
  );
  registry = spawn('docker-registry', ['serve', config], { stdio: 'ignore' });
  await vi.waitFor(async () => expect((await fetch(`http://${host}/v2/`)).status).toBe(200), { timeout: 10_000, interval: 100 });
});

afterAll(async () => {
  if (loaded.length > 0) spawnSync(DOCKER, ['image', 'rm', '--force', ...loaded]);
  if (registry && registry.exitCode === null) {
    registry.kill('SIGTERM');
    await once(registry, 'exit');
  }
  rmSync(scratch, { recursive: true, force: true });
});

describe('scripts/release/image-archive.mjs', () => {
  it("digest: names the archive's image index", () => {
    const run = script('digest', '--archive', archive);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(index.digest);
  });

  it("split: one archive per platform, each holding that platform's manifest unchanged, none for the attestation", () => {
    const out = join(scratch, 'scan');
    const run = script('split', '--archive', archive, '--out', out);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n')).toEqual([join(out, 'linux-amd64.tar'), join(out, 'linux-arm64.tar')]);
    for (const [file, manifest] of [
      ['linux-amd64.tar', amd64],
      ['linux-arm64.tar', arm64],
    ] as const) {
      const inner = JSON.parse(must(spawnSync('tar', ['-xOf', join(out, file), 'index.json']), `tar ${file}`)) as { manifests: Descriptor[] };
      expect(inner.manifests.map((m) => m.digest)).toEqual([manifest.digest]);
    }
  });

  it('push: the registry serves the scanned index under every tag, with both platforms and the attestation', () => {
    const repository = `${host}/shop/product-service`;
    const run = script('push', '--archive', archive, '--digest', index.digest, '--to', `${repository}:1.2.3`, '--to', `${repository}:1.2`, '--plain-http');
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(`digest=${index.digest}`);
    expect(served(`${repository}:1.2.3`)).toBe(index.digest);
    expect(served(`${repository}:1.2`)).toBe(index.digest);
    for (const manifest of [amd64, arm64, provenance]) expect(served(`${repository}@${manifest.digest}`)).toBe(manifest.digest);
  });

  it('push: refuses an archive that is not the one scanned, and pushes nothing', () => {
    const other = `sha256:${'0'.repeat(64)}`;
    const run = script('push', '--archive', archive, '--digest', other, '--to', `${host}/shop/refused:1.0.0`, '--plain-http');
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`image-archive: ${archive} holds ${index.digest}, not the ${other} that was scanned and tested: nothing pushed\n`);
    expect(spawnSync('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${host}/shop/refused:1.0.0`]).status).not.toBe(0);
  });

  it.each(['amd64', 'arm64'])("load: the engine holds the index's linux/%s image, config and layers, as that platform; the host's runs", (arch) => {
    const tag = loadedTag(`linux/${arch}`);
    loaded.push(tag);
    const run = script('load', '--archive', archive, '--digest', index.digest, '--platform', `linux/${arch}`, '--tag', tag);
    expect(run.status, run.stderr).toBe(0);
    const [inspected] = JSON.parse(must(spawnSync(DOCKER, ['image', 'inspect', tag], { encoding: 'utf8' }), 'docker image inspect')) as unknown[];
    const manifest = arch === 'amd64' ? amd64 : arm64;
    const config = (JSON.parse(readFileSync(join(layout.dir, 'blobs/sha256', manifest.digest.slice(7)), 'utf8')) as { config: Descriptor }).config;
    expect(inspected).toMatchObject({ Id: config.digest, Os: 'linux', Architecture: arch });
    if (arch !== HOST_ARCH) return;
    expect(must(spawnSync(DOCKER, ['run', '--rm', '--network', 'none', tag], { encoding: 'utf8' }), 'docker run')).toBe(`built for linux/${HOST_ARCH}\n`);
  });

  it('load: refuses an archive that is not the one pushed, or a platform it lacks, and loads nothing', () => {
    const tag = loadedTag('refused');
    loaded.push(tag);
    const other = `sha256:${'0'.repeat(64)}`;
    const wrong = script('load', '--archive', archive, '--digest', other, '--platform', `linux/${HOST_ARCH}`, '--tag', tag);
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toBe(`image-archive: ${archive} holds ${index.digest}, not the ${other} that is pushed: nothing loaded\n`);
    const absent = script('load', '--archive', archive, '--digest', index.digest, '--platform', 'linux/s390x', '--tag', tag);
    expect(absent.status).toBe(1);
    expect(absent.stderr).toBe(`image-archive: ${archive} has no linux/s390x image (it has linux/amd64, linux/arm64)\n`);
    expect(spawnSync(DOCKER, ['image', 'inspect', tag]).status).not.toBe(0);
  });

  it('published: nothing before a push, then the digest the registry serves; fails on a registry that does not answer', async () => {
    const reference = `${host}/shop/rerun:2.0.0`;
    const before = script('published', '--reference', reference, '--plain-http');
    expect(before.status, before.stderr).toBe(0);
    expect(before.stdout).toBe('digest=\n');
    expect(script('push', '--archive', archive, '--digest', index.digest, '--to', reference, '--plain-http').status).toBe(0);
    const after = script('published', '--reference', reference, '--plain-http');
    expect(after.status, after.stderr).toBe(0);
    expect(after.stdout).toBe(`digest=${index.digest}\n`);
    const down = script('published', '--reference', `127.0.0.1:${await freePort()}/shop/rerun:2.0.0`, '--plain-http');
    expect(down.status).toBe(1);
    expect(down.stderr).toMatch(/^image-archive: cannot tell whether 127\.0\.0\.1:\d+\/shop\/rerun:2\.0\.0 is published: .*connection refused/);
    expect(down.stderr.trim().split('\n')).toHaveLength(1);
  });

  it.each([
    [['push', '--archive', archive, '--digest', 'sha256:abc', '--to', 'r/x:1'], /--digest must be sha256:<64 hex>/],
    [['push', '--archive', archive, '--digest', `sha256:${'a'.repeat(64)}`], /no --to reference/],
    [['push', '--archive', archive, '--digest', `sha256:${'a'.repeat(64)}`, '--to', 'ghcr.io/Acme/x'], /is not registry\/path:tag/],
    [['publish', '--archive', archive], /unknown command publish/],
    [['published'], /published needs --reference/],
    [['load', '--archive', archive, '--digest', `sha256:${'a'.repeat(64)}`], /load needs --platform/],
    [['digest'], /--archive is required/],
  ])('refuses %j in one line', (args, message) => {
    const run = script(...args);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(message);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
