// The image a build wrote as an OCI archive (BuildKit's `type=oci` output: every platform, with the
// SBOM and provenance attestations, under one image index), published as it is: the digest that was
// scanned and tested is the digest that is pushed and signed. image.yml runs it; so do the container
// tests (test/container/image-archive.test.ts), against a registry of their own.
//
//   node scripts/release/image-archive.mjs digest --archive image.tar
//       prints the digest of the archive's image index (sha256:...)
//   node scripts/release/image-archive.mjs split --archive image.tar --out DIR
//       writes one single-platform OCI archive per platform of the index (DIR/linux-amd64.tar, ...),
//       each holding that platform's manifest unchanged, for a scanner that reads one image at a
//       time; prints their paths
//   node scripts/release/image-archive.mjs push --archive image.tar --digest sha256:... \
//       --to ghcr.io/acme/product-service:1.2.3 [--to ...] [--plain-http]
//       pushes the archive, if its digest is the one given (the one scanned), unchanged under each
//       reference, reads each back and checks its digest; prints `digest=sha256:...`.
//       --plain-http: a registry without TLS (a test registry on the loopback interface).
//   node scripts/release/image-archive.mjs load --archive image.tar --digest sha256:... \
//       --platform linux/amd64 --tag product-service:test
//       copies that platform's image of the archive with the given digest into the Docker engine
//       under the tag and checks the engine holds exactly it: the container tests run what is pushed.
//   node scripts/release/image-archive.mjs published --reference ghcr.io/acme/product-service:1.2.3 [--plain-http]
//       prints `digest=sha256:...` when the registry serves the reference, `digest=` when it does
//       not, and fails on any other answer (unreachable, refused login).
//
// Needs tar and skopeo (scripts/ci/apt-install.sh skopeo); registry credentials are skopeo's
// (docker login writes them where it reads them).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const INDEX_TYPES = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);
const DIGEST = /^sha256:[0-9a-f]{64}$/;

function fail(message) {
  process.stderr.write(`image-archive: ${message}\n`);
  process.exit(1);
}

function run(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error) fail(`${command}: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} ${args.join(' ')} failed: ${String(result.stderr).trim()}`);
  return result.stdout;
}

function archiveJson(archive, path) {
  const text = run('tar', ['-xOf', archive, path]);
  try {
    return JSON.parse(text);
  } catch {
    return fail(`${archive}: ${path} is not JSON`);
  }
}

function imageIndex(archive) {
  const layout = archiveJson(archive, 'index.json');
  const [descriptor, ...others] = layout.manifests ?? [];
  if (descriptor === undefined || others.length > 0) fail(`${archive} holds ${layout.manifests?.length ?? 0} images, not one`);
  if (!INDEX_TYPES.has(descriptor.mediaType)) fail(`${archive} holds a single-platform image (${descriptor.mediaType}), not an image index`);
  if (!DIGEST.test(descriptor.digest ?? '')) fail(`${archive}: malformed digest ${descriptor.digest}`);
  return { digest: descriptor.digest, index: archiveJson(archive, `blobs/sha256/${descriptor.digest.slice('sha256:'.length)}`) };
}

/** The platforms of the index: what runs, not the attestations BuildKit files under unknown/unknown. */
function platforms(index) {
  return (index.manifests ?? [])
    .filter((m) => m.platform !== undefined && m.platform.os !== 'unknown' && m.platform.architecture !== 'unknown')
    .map((m) => ({ digest: m.digest, ...m.platform }));
}

function override(platform) {
  return ['--override-os', platform.os, '--override-arch', platform.architecture, ...(platform.variant ? ['--override-variant', platform.variant] : [])];
}

function split(archive, out) {
  const { index } = imageIndex(archive);
  const found = platforms(index);
  if (found.length === 0) fail(`${archive}: the index names no platform`);
  mkdirSync(out, { recursive: true });
  for (const platform of found) {
    const name = [platform.os, platform.architecture, platform.variant].filter(Boolean).join('-');
    const file = join(out, `${name}.tar`);
    run('skopeo', ['copy', '--quiet', '--preserve-digests', ...override(platform), `oci-archive:${archive}`, `oci-archive:${file}`]);
    const [copied] = archiveJson(file, 'index.json').manifests ?? [];
    if (copied?.digest !== platform.digest) fail(`${file} holds ${copied?.digest}, not the ${name} manifest ${platform.digest}`);
    console.log(file);
  }
}

function served(reference, plainHttp) {
  const tls = plainHttp ? ['--tls-verify=false'] : [];
  const result = spawnSync('skopeo', ['inspect', '--raw', ...tls, `docker://${reference}`], { maxBuffer: 64 * 1024 * 1024 });
  if (result.error) fail(`skopeo: ${result.error.message}`);
  if (result.status !== 0) {
    const stderr = String(result.stderr);
    if (/manifest unknown|not found/i.test(stderr)) return undefined;
    fail(`cannot tell whether ${reference} is published: ${stderr.trim().replace(/\s+/g, ' ')}`);
  }
  return `sha256:${createHash('sha256').update(result.stdout).digest('hex')}`;
}

function checkReference(reference) {
  if (!/^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)+:[\w][\w.-]{0,127}$/.test(reference)) fail(`${reference} is not registry/path:tag`);
}

function checkArchive(archive, expected, what) {
  if (!DIGEST.test(expected ?? '')) fail(`--digest must be sha256:<64 hex>, got ${expected ?? 'nothing'}`);
  const found = imageIndex(archive);
  if (found.digest !== expected) fail(`${archive} holds ${found.digest}, not the ${expected} ${what}`);
  return found;
}

function load(archive, expected, wanted, tag) {
  const { index } = checkArchive(archive, expected, 'that is pushed: nothing loaded');
  const platform = platforms(index).find((p) => [p.os, p.architecture, p.variant].filter(Boolean).join('/') === wanted);
  if (platform === undefined)
    fail(
      `${archive} has no ${wanted} image (it has ${platforms(index)
        .map((p) => `${p.os}/${p.architecture}`)
        .join(', ')})`,
    );
  if (!/^[a-z0-9./:_-]+$/.test(tag ?? '')) fail(`--tag ${tag ?? '(none)'} is not an image name`);
  run('skopeo', ['copy', '--quiet', ...override(platform), `oci-archive:${archive}`, `docker-daemon:${tag}`]);
  // The engine's image must be the archive's: the same config, byte for byte, which names its layers
  // by content (the engine checks them on load). Read back through skopeo, whatever the engine's
  // image store makes its image id.
  const manifest = archiveJson(archive, `blobs/sha256/${platform.digest.slice('sha256:'.length)}`);
  const config = `sha256:${createHash('sha256')
    .update(run('skopeo', ['inspect', '--config', '--raw', `docker-daemon:${tag}`]))
    .digest('hex')}`;
  if (config !== manifest.config.digest) fail(`the engine's ${tag} has the config ${config}, not the archive's ${wanted} config ${manifest.config.digest}`);
  console.error(`image-archive: loaded ${wanted} of ${expected} as ${tag} (config ${config})`);
}

function push(archive, expected, references, plainHttp) {
  if (references.length === 0) fail('no --to reference to push to');
  for (const reference of references) checkReference(reference);
  const { digest } = checkArchive(archive, expected, 'that was scanned and tested: nothing pushed');
  const tls = plainHttp ? ['--dest-tls-verify=false'] : [];
  for (const reference of references) {
    run('skopeo', ['copy', '--quiet', '--all', '--preserve-digests', ...tls, `oci-archive:${archive}`, `docker://${reference}`]);
  }
  // What the registry now serves under each reference, byte for byte.
  for (const reference of references) {
    const now = served(reference, plainHttp);
    if (now !== digest) fail(`${reference} serves ${now ?? 'nothing'}, not ${digest}`);
    console.error(`image-archive: pushed ${reference} (${digest})`);
  }
  console.log(`digest=${digest}`);
}

const [command, ...rest] = process.argv.slice(2);
let values;
try {
  ({ values } = parseArgs({
    args: rest,
    options: {
      archive: { type: 'string' },
      out: { type: 'string' },
      digest: { type: 'string' },
      to: { type: 'string', multiple: true },
      'plain-http': { type: 'boolean' },
      platform: { type: 'string' },
      tag: { type: 'string' },
      reference: { type: 'string' },
    },
  }));
} catch (err) {
  fail(err.message);
}
if (command === 'published') {
  checkReference(values.reference ?? fail('published needs --reference'));
  console.log(`digest=${served(values.reference, values['plain-http'] ?? false) ?? ''}`);
  process.exit(0);
}
if (values.archive === undefined) fail('--archive is required');
if (command === 'digest') console.log(imageIndex(values.archive).digest);
else if (command === 'split') split(values.archive, values.out ?? fail('split needs --out'));
else if (command === 'push') push(values.archive, values.digest, values.to ?? [], values['plain-http'] ?? false);
else if (command === 'load') load(values.archive, values.digest, values.platform ?? fail('load needs --platform, such as linux/amd64'), values.tag);
else fail(`unknown command ${command ?? '(none)'}: digest, split, push, load or published`);
