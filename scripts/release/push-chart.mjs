// Pushes a packaged chart to an OCI registry, unless that version is already there: a published
// chart version is never overwritten (a re-run release job, or a tag pushed again, must not change
// what users of that version already installed or verified).
//
// Usage: node scripts/release/push-chart.mjs --chart <tgz> --registry oci://ghcr.io/<owner>/charts
//          [--helm .tools/bin/helm] [--plain-http]
// Prints helm push's output (its "Digest: sha256:..." line); exits 1 when the version exists.
import { spawnSync } from 'node:child_process';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    chart: { type: 'string' },
    registry: { type: 'string' },
    helm: { type: 'string', default: '.tools/bin/helm' },
    'plain-http': { type: 'boolean', default: false },
  },
});
const match = /^(.+)-(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\.tgz$/.exec(basename(values.chart ?? ''));
if (match === null || !values.registry?.startsWith('oci://')) {
  console.error('usage: push-chart.mjs --chart <name>-<version>.tgz --registry oci://<host>/<path> [--helm <helm>] [--plain-http]');
  process.exit(2);
}
const [, name, version] = match;
const plain = values['plain-http'] ? ['--plain-http'] : [];
const helm = (args) => spawnSync(values.helm, [...args, ...plain], { encoding: 'utf8' });

const shown = helm(['show', 'chart', `${values.registry}/${name}`, '--version', version]);
if (shown.status === 0) {
  console.error(`push-chart: ${name} ${version} is already published at ${values.registry}: a published version is never overwritten (release a new version)`);
  process.exit(1);
}
// Anything but "not found" (an unreachable registry, a refused login) is not a reason to push.
if (!/not found|manifest unknown/i.test(shown.stderr)) {
  console.error(`push-chart: cannot tell whether ${name} ${version} is published: ${shown.stderr.trim()}`);
  process.exit(1);
}
const pushed = helm(['push', values.chart, values.registry]);
process.stdout.write(pushed.stdout + pushed.stderr);
process.exit(pushed.status ?? 1);
