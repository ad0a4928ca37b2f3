// Decides what a release tag publishes, and refuses a tag that must not publish anything. The
// release workflow's first job runs it; test/chart/release.test.ts runs it on scratch repositories.
//
//   node scripts/release/plan.mjs --tag v1.2.3 [--main origin/main] [--repo .]
//
// Two kinds of tag share one version sequence, so that a chart version is never published twice:
//   v1.2.3        the application: image 1.2.3 and chart 1.2.3 running it. package.json's version
//                 must be 1.2.3.
//   chart-v1.2.4  a chart-only fix: chart 1.2.4, running the image of package.json's version,
//                 which an earlier v tag must have released.
// Either way the tagged commit must be on main, and the version greater than every other release
// tag's. Prints key=value lines for $GITHUB_OUTPUT: kind, version, image_version, prerelease.
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import semver from 'semver';

const TAG = /^(chart-)?v(.+)$/;

function fail(message) {
  process.stderr.write(`release plan: ${message}\n`);
  process.exit(1);
}

let options;
try {
  ({ values: options } = parseArgs({
    options: {
      tag: { type: 'string' },
      main: { type: 'string', default: 'origin/main' },
      repo: { type: 'string', default: resolve(dirname(fileURLToPath(import.meta.url)), '..', '..') },
    },
    strict: true,
  }));
} catch (error) {
  fail(error.message);
}

function git(args) {
  const run = spawnSync('git', args, { cwd: options.repo, encoding: 'utf8' });
  if (run.error) fail(`git: ${run.error.message}`);
  return run;
}

function parseTag(name) {
  const match = TAG.exec(name);
  if (!match || semver.valid(match[2]) !== match[2]) return undefined;
  return { kind: match[1] ? 'chart' : 'app', version: match[2] };
}

const tag = options.tag;
if (tag === undefined) fail('--tag is missing: pass the release tag, such as v1.2.3 or chart-v1.2.4');
const release = parseTag(tag);
if (release === undefined) fail(`tag ${JSON.stringify(tag)} is not a release tag: expected v<SemVer> (application and chart) or chart-v<SemVer> (chart only)`);

const commit = git(['rev-parse', '--verify', '--quiet', `refs/tags/${tag}^{commit}`]).stdout.trim();
if (commit === '') fail(`tag ${tag} does not exist in ${options.repo}`);
if (git(['rev-parse', '--verify', '--quiet', options.main]).status !== 0) fail(`${options.main} does not exist: fetch main before planning a release`);
if (git(['merge-base', '--is-ancestor', commit, options.main]).status !== 0)
  fail(`tag ${tag} is on commit ${commit.slice(0, 12)}, which is not on ${options.main}: releases are made from main only`);

const others = git(['tag', '--list'])
  .stdout.split('\n')
  .filter((name) => name !== '' && name !== tag)
  .map((name) => ({ name, parsed: parseTag(name) }))
  .filter((t) => t.parsed !== undefined);
const notBelow = others.filter((t) => semver.gte(t.parsed.version, release.version));
if (notBelow.length > 0) {
  fail(
    `version ${release.version} must be greater than every earlier release, but ${notBelow.map((t) => t.name).join(', ')} exist(s): chart and application releases share one version sequence`,
  );
}

const packageJson = git(['show', `${commit}:package.json`]);
if (packageJson.status !== 0) fail(`tag ${tag}: no package.json at commit ${commit.slice(0, 12)}`);
const packageVersion = JSON.parse(packageJson.stdout).version;
let imageVersion;
if (release.kind === 'app') {
  if (packageVersion !== release.version)
    fail(`tag ${tag} releases ${release.version}, but package.json at that commit says ${packageVersion}: bump package.json first`);
  imageVersion = release.version;
} else {
  imageVersion = packageVersion;
  if (!others.some((t) => t.name === `v${imageVersion}`)) {
    fail(`chart-only release ${tag} would run image ${imageVersion} (package.json's version), which no v${imageVersion} tag has released`);
  }
}

console.log(`kind=${release.kind}`);
console.log(`version=${release.version}`);
console.log(`image_version=${imageVersion}`);
console.log(`prerelease=${semver.prerelease(release.version) !== null}`);
