// Packages the Helm chart as a release publishes it: helm/product-service as packaged, stamped with
// the release's version and the image it pushed (by digest), then
// `helm package`d. The release workflow runs it, and so do the chart tests (test/chart/release.test.ts),
// which install nothing but render the package as a stranger would.
//
//   node scripts/release/package-chart.mjs --version 1.2.3 --app-version 1.2.3 \
//     --repository https://github.com/acme/product-service \
//     --image-digest sha256:<64 hex> --destination dist/chart [--tag v1.2.3] [--helm .tools/bin/helm]
//
// Prints the package's path, once the package rendered with no values runs exactly that image.
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import semver from 'semver';
import { parseAllDocuments, parseDocument, stringify } from 'yaml';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHART = join(ROOT, 'helm/product-service');

/** @typedef {{ version: string, appVersion: string, tag: string, repositoryUrl: string, registry: string, imageRepository: string, imageDigest: string, image: string, changes: Array<{ kind: string, description: string }> }} Release */

/** @type {Array<[file: string, path: string[], value: (release: Release) => unknown]>} */
const FIELDS = [
  ['Chart.yaml', ['version'], (r) => r.version],
  ['Chart.yaml', ['appVersion'], (r) => r.appVersion],
  // The chart pulls its image by this digest (the product-service.imageDigest helper), not by a value:
  // values travel to other chart versions (--reuse-values, a copied values file), Chart.yaml does not.
  ['Chart.yaml', ['annotations', 'artifacthub.io/images'], (r) => stringify([{ name: 'product-service', image: r.image }])],
  ['Chart.yaml', ['annotations', 'artifacthub.io/prerelease'], (r) => String(semver.prerelease(r.version) !== null)],
  // Artifact Hub shows a version's changes from this annotation only: CHANGELOG.md's newest section.
  ['Chart.yaml', ['annotations', 'artifacthub.io/changes'], (r) => stringify(r.changes)],
  ['values.yaml', ['image', 'repository'], (r) => r.imageRepository],
];

/** Replaced in every text file of the package. @type {Array<[placeholder: string, value: (release: Release) => string]>} */
const PLACEHOLDERS = [
  // Links to files of the repository point at the release's own tag.
  ['https://github.com/example-org/product-service/blob/main/', (r) => `${r.repositoryUrl}/blob/${r.tag}/`],
  ['https://github.com/example-org/product-service', (r) => r.repositoryUrl],
  ['ghcr.io/example-org/', (r) => `${r.registry}/`],
];

function fail(message) {
  process.stderr.write(`package-chart: ${message}\n`);
  process.exit(1);
}

function release() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        version: { type: 'string' },
        'app-version': { type: 'string' },
        tag: { type: 'string' },
        repository: { type: 'string' },
        'image-digest': { type: 'string' },
        destination: { type: 'string' },
        helm: { type: 'string', default: join(ROOT, '.tools/bin/helm') },
      },
      strict: true,
    }));
  } catch (error) {
    fail(error.message);
  }
  const need = (name, valid, allowed) => {
    const value = values[name];
    if (value === undefined || !valid(value)) fail(`--${name} ${value === undefined ? 'is missing' : JSON.stringify(value)}: expected ${allowed}`);
    return value;
  };
  const version = need('version', (v) => semver.valid(v) === v, 'a SemVer version such as 1.2.3');
  const appVersion = need('app-version', (v) => semver.valid(v) === v, 'the SemVer version of the image, such as 1.2.3');
  const repositoryUrl = need('repository', (v) => /^https:\/\/[^/\s]+\/[^/\s]+\/[^/\s]+$/.test(v), 'the repository URL, https://github.com/<owner>/<name>');
  const imageDigest = need('image-digest', (v) => /^sha256:[0-9a-f]{64}$/.test(v), 'the pushed image digest, sha256:<64 hex digits>');
  const destination = need('destination', (v) => v !== '', 'a directory for the package');
  const owner = repositoryUrl.split('/')[3].toLowerCase();
  const registry = `ghcr.io/${owner}`;
  const imageRepository = `${registry}/product-service`;
  return {
    release: {
      version,
      appVersion,
      tag: values.tag ?? `v${version}`,
      repositoryUrl,
      registry,
      imageRepository,
      imageDigest,
      image: `${imageRepository}:${appVersion}@${imageDigest}`,
      changes: newestChanges(),
    },
    destination: resolve(destination),
    helm: values.helm,
  };
}

/** The entries of CHANGELOG.md's newest section (`### Added` ...) as Artifact Hub's `kind`/`description`. */
function newestChanges() {
  const newest = readFileSync(join(CHART, 'CHANGELOG.md'), 'utf8').split(/^## /m)[1] ?? '';
  const changes = newest
    .split(/^### /m)
    .slice(1)
    .flatMap((section) => {
      const [heading, ...lines] = section.split('\n');
      return lines
        .filter((line) => line.startsWith('- '))
        .map((line) => ({ kind: heading.trim().toLowerCase(), description: line.slice(2).replaceAll('`', '') }));
    });
  if (changes.length === 0) fail('CHANGELOG.md: no entry in its newest section');
  return changes;
}

function filesUnder(dir) {
  return readdirSync(dir, { recursive: true })
    .map((name) => join(dir, String(name)))
    .filter((path) => lstatSync(path).isFile());
}

/**
 * The chart as `helm package` stores it (symlinked files as their contents, .helmignore applied),
 * unpacked into `work` and stamped there. Never a copy of the source directory: a copied symlink
 * would let the stamping write through it into the repository.
 */
function stamp(work, r, helm) {
  const out = run(helm, ['package', CHART, '--destination', work]);
  const sourceTgz = /Successfully packaged chart and saved it to: (.+\.tgz)/.exec(out)?.[1];
  if (sourceTgz === undefined) fail(`helm package said: ${out.trim()}`);
  run('tar', ['-xzf', sourceTgz, '-C', work]);
  rmSync(sourceTgz);
  const copy = join(work, 'product-service');
  for (const path of filesUnder(copy)) {
    const text = readFileSync(path, 'utf8');
    const stamped = PLACEHOLDERS.reduce((out, [placeholder, value]) => out.replaceAll(placeholder, value(r)), text);
    if (stamped !== text) writeFileSync(path, stamped);
  }
  for (const file of new Set(FIELDS.map(([f]) => f))) {
    const path = join(copy, file);
    const doc = parseDocument(readFileSync(path, 'utf8'));
    for (const [, fieldPath, value] of FIELDS.filter(([f]) => f === file)) doc.setIn(fieldPath, value(r));
    writeFileSync(path, doc.toString({ lineWidth: 0 }));
  }
  return copy;
}

function run(command, args) {
  const result = spawnSync(command, args, { cwd: ROOT, encoding: 'utf8' });
  if (result.error) fail(`${command}: ${result.error.message}`);
  if (result.status !== 0) fail(`${command} ${args.join(' ')} failed: ${result.stderr.trim().split('\n').at(-1)}`);
  return result.stdout;
}

const { release: r, destination, helm } = release();
const work = mkdtempSync(join(tmpdir(), 'package-chart-'));
try {
  const copy = stamp(work, r, helm);
  mkdirSync(destination, { recursive: true });
  const out = run(helm, ['package', copy, '--destination', destination]);
  const tgz = /Successfully packaged chart and saved it to: (.+\.tgz)/.exec(out)?.[1];
  if (tgz === undefined) fail(`helm package said: ${out.trim()}`);
  // The package, with no values, must run exactly the pushed image.
  const rendered = parseAllDocuments(run(helm, ['template', 'release-check', tgz])).map((doc) => doc.toJS());
  const images = rendered.filter((o) => o?.kind === 'Deployment').flatMap((d) => d.spec.template.spec.containers.map((c) => c.image));
  if (images.length !== 1 || images[0] !== r.image) fail(`the packaged chart runs ${JSON.stringify(images)}, not ${r.image}`);
  console.log(tgz);
} finally {
  rmSync(work, { recursive: true, force: true });
}
