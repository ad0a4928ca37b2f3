// The release workflow's steps, run the same way: scripts/release/plan.mjs on scratch git repositories, and
// scripts/release/package-chart.mjs, whose package is then used as a stranger would: copied alone into an
// empty directory and rendered with no values.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parse, parseDocument } from 'yaml';
import { ROOT } from '../support/paths';
import { freePort } from '../support/service-process';
import { chartDir, CRD_APIS, findOne, helm, helm3Bin, helmBin, mainContainer, must, ofKind, parseManifests, set, template } from './helm';

const scratch = mkdtempSync(join(tmpdir(), 'chart-release-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Files under `dir`, as helm reads the chart (stat, not lstat: a symlink would be read through). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

const node = (script: string, args: string[], cwd = ROOT) => spawnSync(process.execPath, [join(ROOT, script), ...args], { cwd, encoding: 'utf8' });

const releaseArgs = (version: string, digest: string) => [
  ...['--version', version, '--app-version', version, '--repository', 'https://github.com/Acme-Corp/product-service', '--image-digest', digest],
];

/** The path of the chart package-chart.mjs writes to `destination`, as a release does. */
function packageChart(version: string, digest: string, destination: string): string {
  const run = node('scripts/release/package-chart.mjs', [...releaseArgs(version, digest), '--destination', destination, '--helm', helmBin]);
  if (run.status !== 0) throw new Error(`package-chart failed: ${run.stderr}`);
  return run.stdout.trim();
}

describe('scripts/release/plan.mjs', () => {
  let repoCount = 0;

  /** A scratch repository: main with `versions` as successive package.json versions, a side branch, and `tags` (name -> commit index on main, or 'side'). */
  function repository(versions: string[], tags: Record<string, number | 'side'>): string {
    const dir = join(scratch, `repo-${repoCount++}`);
    const git = (...args: string[]) => {
      const run = spawnSync('git', args, { cwd: dir, encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`git ${args.join(' ')}: ${run.stderr}`);
      return run.stdout.trim();
    };
    spawnSync('git', ['init', '--quiet', '--initial-branch', 'main', dir]);
    git('config', 'user.email', 'release-test@example.com');
    git('config', 'user.name', 'release test');
    const commits = versions.map((version) => {
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'product-service', version }));
      git('add', 'package.json');
      git('commit', '--quiet', '--allow-empty', '-m', `version ${version}`);
      return git('rev-parse', 'HEAD');
    });
    git('checkout', '--quiet', '-b', 'side');
    writeFileSync(join(dir, 'side.txt'), 'not reviewed');
    git('add', 'side.txt');
    git('commit', '--quiet', '-m', 'side');
    const side = git('rev-parse', 'HEAD');
    git('checkout', '--quiet', 'main');
    for (const [name, at] of Object.entries(tags)) git('tag', name, at === 'side' ? side : must(commits[at], `commit ${at}`));
    return dir;
  }

  const plan = (dir: string, tag: string) => node('scripts/release/plan.mjs', ['--tag', tag, '--main', 'main', '--repo', dir]);
  const outputs = (stdout: string) =>
    Object.fromEntries(
      stdout
        .trim()
        .split('\n')
        .map((line) => line.split('=') as [string, string]),
    );

  it.each<{ what: string; versions: string[]; tags: Record<string, number>; tag: string; expected: Record<string, string> }>([
    {
      what: 'v1.2.3 on main with package.json 1.2.3: the image and the chart 1.2.3',
      ...{ versions: ['1.2.2', '1.2.3'], tags: { 'v1.2.2': 0, 'v1.2.3': 1 }, tag: 'v1.2.3' },
      expected: { kind: 'app', version: '1.2.3', image_version: '1.2.3', prerelease: 'false' },
    },
    {
      what: 'a pre-release tag is marked as one',
      ...{ versions: ['1.3.0-rc.1'], tags: { 'v1.3.0-rc.1': 0 }, tag: 'v1.3.0-rc.1' },
      expected: { kind: 'app', version: '1.3.0-rc.1', image_version: '1.3.0-rc.1', prerelease: 'true' },
    },
    {
      what: "chart-v1.2.4: the chart alone, running the released image of package.json's version",
      ...{ versions: ['1.2.3', '1.2.3'], tags: { 'v1.2.3': 0, 'chart-v1.2.4': 1 }, tag: 'chart-v1.2.4' },
      expected: { kind: 'chart', version: '1.2.4', image_version: '1.2.3', prerelease: 'false' },
    },
  ])('$what', ({ versions, tags, tag, expected }) => {
    const run = plan(repository(versions, tags), tag);
    expect(run.status, run.stderr).toBe(0);
    expect(outputs(run.stdout)).toEqual(expected);
  });

  it.each<{ what: string; versions: string[]; tags: Record<string, number | 'side'>; tag: string; message: RegExp }>([
    {
      what: 'a tag off main',
      versions: ['1.2.3'],
      tags: { 'v1.2.3': 'side' },
      tag: 'v1.2.3',
      message: /not on main: releases are made from main only/,
    },
    { what: 'a package.json of another version', versions: ['1.2.2'], tags: { 'v1.2.3': 0 }, tag: 'v1.2.3', message: /package.json at that commit says 1.2.2/ },
    {
      what: 'a version a chart-only release already took',
      versions: ['1.2.3', '1.2.4'],
      tags: { 'v1.2.3': 0, 'chart-v1.2.4': 0, 'v1.2.4': 1 },
      tag: 'v1.2.4',
      message: /must be greater than every earlier release, but chart-v1.2.4 exist/,
    },
    { what: 'a version below a released one', versions: ['1.2.0', '1.1.9'], tags: { 'v1.2.0': 0, 'v1.1.9': 1 }, tag: 'v1.1.9', message: /but v1.2.0 exist/ },
    {
      what: 'a chart-only release of an image never released',
      versions: ['1.2.3', '1.2.4'],
      tags: { 'v1.2.3': 0, 'chart-v1.2.5': 1 },
      tag: 'chart-v1.2.5',
      message: /would run image 1.2.4 \(package.json's version\), which no v1.2.4 tag has released/,
    },
    { what: 'a tag that is not SemVer', versions: ['1.2.0'], tags: { 'v1.2': 0 }, tag: 'v1.2', message: /is not a release tag/ },
  ])('refuses $what, in one line', ({ versions, tags, tag, message }) => {
    const run = plan(repository(versions, tags), tag);
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('scripts/release/package-chart.mjs', () => {
  const digest = `sha256:${'3c'.repeat(32)}`;
  const image = `ghcr.io/acme-corp/product-service:1.2.3@${digest}`;
  /** Every file of the source chart: a release must change none of them. */
  const source = () => filesUnder(chartDir).map((f) => [f, readFileSync(f, 'utf8')]);
  const before = source();
  const packaged = packageChart('1.2.3', digest, join(scratch, 'dist'));

  const stranger = mkdtempSync(join(scratch, 'stranger-'));
  copyFileSync(packaged, join(stranger, basename(packaged)));
  const inStranger = (args: string[]) => helm(args, stranger);

  it('writes product-service-1.2.3.tgz and leaves the source chart as it was', () => {
    expect(basename(packaged)).toBe('product-service-1.2.3.tgz');
    expect(source()).toEqual(before);
  });

  it('renders with no values, no CRDs and no repository around it, running the pushed image by digest, the helm test pod too', () => {
    const rendered = inStranger(['template', 'products', `./${basename(packaged)}`, '--namespace', 'shop']);
    expect(rendered.status, rendered.stderr).toBe(0);
    const objects = parseManifests(rendered.stdout);
    expect(mainContainer(findOne(objects, 'Deployment')).image).toBe(image);
    expect(ofKind(objects, 'Pod').map((pod) => pod.spec?.containers[0]?.image)).toEqual([image]);
    for (const obj of objects) {
      expect(obj.metadata.labels?.['helm.sh/chart'], obj.kind).toBe('product-service-1.2.3');
      expect(obj.metadata.labels?.['app.kubernetes.io/version'], obj.kind).toBe('1.2.3');
    }
    const lint = inStranger(['lint', '--strict', `./${basename(packaged)}`]);
    expect(lint.status, lint.stdout).toBe(0);
  });

  it('says where it comes from: version, appVersion, home, sources and the Artifact Hub annotations', () => {
    const show = inStranger(['show', 'chart', `./${basename(packaged)}`]);
    expect(show.status, show.stderr).toBe(0);
    const chart = parse(show.stdout) as Record<string, unknown> & { annotations: Record<string, string> };
    expect(chart).toMatchObject({
      version: '1.2.3',
      appVersion: '1.2.3',
      home: 'https://github.com/Acme-Corp/product-service',
      sources: ['https://github.com/Acme-Corp/product-service'],
    });
    expect(parse(must(chart.annotations['artifacthub.io/images'], 'images annotation'))).toEqual([{ name: 'product-service', image }]);
    expect(chart.annotations['artifacthub.io/prerelease']).toBe('false');
    expect(chart.annotations['artifacthub.io/license']).toBe('Apache-2.0');
    // CHANGELOG.md's newest entries, as Artifact Hub reads them.
    const changes = parse(must(chart.annotations['artifacthub.io/changes'], 'changes annotation')) as Array<{ kind: string; description: string }>;
    expect(changes.length).toBeGreaterThan(0);
    for (const { kind, description } of changes) {
      expect(['added', 'changed', 'deprecated', 'removed', 'fixed', 'security']).toContain(kind);
      expect(readFileSync(join(chartDir, 'CHANGELOG.md'), 'utf8').replaceAll('`', '')).toContain(`- ${description}\n`);
    }
    const links = parse(must(chart.annotations['artifacthub.io/links'], 'links annotation')) as Array<{ url: string }>;
    for (const { url } of links) expect(url).toMatch(/^https:\/\/github\.com\/Acme-Corp\/product-service(\/blob\/v1\.2\.3\/|$)/);
  });

  it("ships a README naming this repository's registry, and values showing the stamped image", () => {
    const readme = inStranger(['show', 'readme', `./${basename(packaged)}`]).stdout;
    expect(readme).not.toContain('example-org');
    expect(readme).toContain('helm install products oci://ghcr.io/acme-corp/charts/product-service --version');
    const values = parse(inStranger(['show', 'values', `./${basename(packaged)}`]).stdout) as { image: { repository: string; digest: string } };
    // The digest is the chart's (Chart.yaml), not a value a copied values file would carry to another version.
    expect(values.image).toMatchObject({ repository: 'ghcr.io/acme-corp/product-service', digest: '' });
  });

  it('refuses a missing or malformed digest, in one line naming it', () => {
    const missing = node('scripts/release/package-chart.mjs', [...releaseArgs('1.2.3', digest).slice(0, -2), '--destination', scratch]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe('package-chart: --image-digest is missing: expected the pushed image digest, sha256:<64 hex digits>\n');
    const malformed = node('scripts/release/package-chart.mjs', [...releaseArgs('1.2.3', 'sha256:abc'), '--destination', scratch]);
    expect(malformed.stderr).toBe('package-chart: --image-digest "sha256:abc": expected the pushed image digest, sha256:<64 hex digits>\n');
  });
});

describe('a released digest is only ever paired with its own version', () => {
  const digests = { '1.2.3': `sha256:${'12'.repeat(32)}`, '1.2.4': `sha256:${'34'.repeat(32)}` };
  const repository = 'ghcr.io/acme-corp/product-service';
  const old = packageChart('1.2.3', digests['1.2.3'], join(scratch, 'two-1.2.3'));
  const next = packageChart('1.2.4', digests['1.2.4'], join(scratch, 'two-1.2.4'));
  const released = (version: keyof typeof digests) => Array<string>(2).fill(`${repository}:${version}@${digests[version]}`);
  const images = (chart: string, args: string[] = []) => {
    const objects = template(args, 'products', 'shop', chart);
    return [mainContainer(findOne(objects, 'Deployment')).image, ...ofKind(objects, 'Pod').map((pod) => pod.spec?.containers[0]?.image)];
  };
  /** The newer package, unpacked into `name` with `values` as its values.yaml: what `helm upgrade --reuse-values` renders. */
  const withValues = (name: string, values: string): string => {
    const dir = join(scratch, name);
    mkdirSync(dir, { recursive: true });
    expect(spawnSync('tar', ['-xzf', next, '-C', dir]).status).toBe(0);
    writeFileSync(join(dir, 'product-service/values.yaml'), values);
    return join(dir, 'product-service');
  };
  const oldValues = join(scratch, 'values-1.2.3.yaml');
  writeFileSync(oldValues, helm(['show', 'values', old]).stdout);

  it('another image.tag is pulled by tag, without the digest of the chart version, and NOTES says so', () => {
    expect(images(old, set('image.tag=1.2.4'))).toEqual([`${repository}:1.2.4`, `${repository}:1.2.4`]);
    const install = helm(['install', 'products', old, '--dry-run=client', '--namespace', 'shop', '--set', 'image.tag=1.2.4']);
    expect(install.status, install.stderr).toBe(0);
    expect(install.stdout).toContain(
      `Image: ${repository}:1.2.4, by tag: this chart's digest is of ${repository}:1.2.3, not of the image.repository and image.tag asked for`,
    );
  });

  it("a values file copied from the older chart's `helm show values` runs the newer chart's image", () => {
    expect(images(next, ['--values', oldValues])).toEqual(released('1.2.4'));
  });

  it("--reuse-values: the newer chart rendered with the older chart's values as its defaults runs the newer image", () => {
    // helm upgrade --reuse-values renders the new chart with the old release's values in place of the
    // new chart's values.yaml (chart.Values = the old coalesced values): the same chart, rebuilt here.
    expect(images(withValues('reuse-values', readFileSync(oldValues, 'utf8')))).toEqual(released('1.2.4'));
  });

  it.each([
    ['helm 4', helmBin],
    ['helm 3', helm3Bin],
  ])(
    '%s, --reuse-values from an older release, whose values lack those added since: renders; with its PrometheusRule, refused naming --reset-then-reuse-values',
    (_name, bin) => {
      // The values of a release before these were added: top-level values, two alerts, the SLO source and a probe field.
      const added = ['global', 'deploymentAnnotations', 'revisionHistoryLimit', 'minReadySeconds', 'initContainers', 'extraContainers', 'lifecycleHooks'];
      const values = parseDocument(readFileSync(oldValues, 'utf8'));
      const rule = ['monitoring', 'prometheusRule'];
      for (const path of [
        ...added.map((key) => [key]),
        [...rule, 'alerts', 'ProductServiceQuietFailures'],
        [...rule, 'alerts', 'ProductServiceTrafficStopped'],
        [...rule, 'slo', 'source'],
        ['readinessProbe', 'successThreshold'],
      ])
        expect(values.deleteIn(path), path.join('.')).toBe(true);
      const chart = withValues(`reuse-older-values-${basename(bin)}`, values.toString());
      const run = (args: string[]) => helm(['template', 'products', chart, '--namespace', 'shop', ...CRD_APIS, ...args], undefined, bin);
      const rendered = run([]);
      expect(rendered.status, rendered.stderr).toBe(0);
      expect(findOne(parseManifests(rendered.stdout), 'Deployment').spec?.revisionHistoryLimit).toBe(5);
      const rules = set('monitoring.prometheusRule.enabled=true');
      const refused = run(rules);
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toContain(
        'monitoring.prometheusRule.alerts.ProductServiceQuietFailures is missing: these values come from an older chart version',
      );
      expect(refused.stderr).toContain('Upgrade with --reset-then-reuse-values instead');
      const lint = helm(['lint', '--strict', chart, ...rules], undefined, bin);
      expect(lint.status).not.toBe(0);
      expect(lint.stdout + lint.stderr).toContain('--reset-then-reuse-values');
    },
  );
});

describe('scripts/release/push-chart.mjs on a real registry (CNCF Distribution, scripts/ci/apt-install.sh)', () => {
  it('pushes a version once, and refuses to push it again: a published chart version is never overwritten', async () => {
    const dir = mkdtempSync(join(scratch, 'registry-'));
    const port = await freePort();
    writeFileSync(
      join(dir, 'config.yml'),
      `version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: ${join(dir, 'data')}}}\nhttp: {addr: 127.0.0.1:${port}}\n`,
    );
    const registry = spawn('docker-registry', ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
    try {
      await vi.waitFor(async () => expect((await fetch(`http://127.0.0.1:${port}/v2/`)).status).toBe(200), { timeout: 10_000, interval: 100 });
      const packaged = packageChart('1.2.3', `sha256:${'3c'.repeat(32)}`, join(dir, 'dist'));
      const push = () =>
        node('scripts/release/push-chart.mjs', ['--chart', packaged, '--registry', `oci://127.0.0.1:${port}/charts`, '--helm', helmBin, '--plain-http']);
      const first = push();
      expect(first.status, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/Digest: sha256:[0-9a-f]{64}/);
      const again = push();
      expect(again.status).toBe(1);
      expect(again.stderr).toContain('product-service 1.2.3 is already published');
      expect(again.stdout).not.toMatch(/Pushed/);
    } finally {
      registry.kill('SIGTERM');
    }
  });
});
