// Renders the chart's alert and recording rules (helm/product-service/templates/prometheusrule.yaml,
// their one source) as a plain Prometheus rule file: the PrometheusRule's `spec`, `groups:` at the top.
//
//   node scripts/render-rules.mjs           writes deploy/prometheus/rules/product-service.yaml, the
//                                           compose stack's rules, with deploy/prometheus/chart-values.yaml
//   node scripts/render-rules.mjs --check [--file F]
//                                           fails (exit 1) if that file (or F) differs from what the chart renders
//
// Needs helm in .tools/bin (sh scripts/ci/install-helm.sh).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const helm = join(root, '.tools/bin/helm');
const chart = join(root, 'helm/product-service');
const DEPLOY_VALUES = join(root, 'deploy/prometheus/chart-values.yaml');
const DEPLOY_RULES = join(root, 'deploy/prometheus/rules/product-service.yaml');
// The compose stack's scrape job is the full name of a release called product-service.
const DEPLOY_RELEASE = { release: 'product-service', namespace: 'local' };
// The CRD APIs of a cluster, as every `helm template` here is given them: the PrometheusRule and its Probe alert need theirs.
const API_VERSIONS = readFileSync(join(root, 'scripts/ci/chart-api-versions.txt'), 'utf8').match(/^[^#\s]\S*/gm);

const args = process.argv.slice(2);
const option = (name) => args.flatMap((arg, i) => (arg === name && args[i + 1] !== undefined ? [args[i + 1]] : []));

function render({ release, namespace, values }) {
  const run = spawnSync(
    helm,
    [
      'template',
      release,
      chart,
      '--namespace',
      namespace,
      ...API_VERSIONS.flatMap((api) => ['--api-versions', api]),
      '--set',
      'monitoring.prometheusRule.enabled=true',
      ...values.flatMap((file) => ['--values', file]),
      '--show-only',
      'templates/prometheusrule.yaml',
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  if (run.error) throw new Error(`${helm}: ${run.error.message} (install it with: sh scripts/ci/install-helm.sh)`);
  if (run.status !== 0) throw new Error(`helm template failed: ${run.stderr}`);
  const { spec } = parse(run.stdout);
  // Each rule's keys in the order people write them, rather than Helm's alphabetical one.
  const order = ['alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations'];
  const sorted = (object, keys) =>
    Object.fromEntries([...keys.filter((key) => key in object), ...Object.keys(object).filter((key) => !keys.includes(key))].map((key) => [key, object[key]]));
  // A group's name first, then its interval.
  const groups = spec.groups.map((group) => ({
    name: group.name,
    ...group,
    rules: group.rules.map((rule) => {
      const ordered = sorted(rule, order);
      if (rule.annotations) ordered.annotations = sorted(rule.annotations, ['summary', 'description']);
      return ordered;
    }),
  }));
  return stringify({ groups }, { lineWidth: 0 });
}

const header =
  `# Generated from helm/product-service/templates/prometheusrule.yaml with ${relative(root, DEPLOY_VALUES)}\n` +
  `# (release ${DEPLOY_RELEASE.release}, namespace ${DEPLOY_RELEASE.namespace}) by \`npm run deploy:rules\`: edit the chart, not this file.\n`;
const rendered = header + render({ ...DEPLOY_RELEASE, values: [DEPLOY_VALUES] });
if (args.includes('--check')) {
  const [file = DEPLOY_RULES] = option('--file');
  if (readFileSync(file, 'utf8') !== rendered) {
    console.error(`${relative(root, file)} differs from what the chart renders. Run: npm run deploy:rules`);
    process.exit(1);
  }
  console.log(`${relative(root, file)} is what the chart renders`);
} else {
  writeFileSync(DEPLOY_RULES, rendered);
  console.log(`wrote ${relative(root, DEPLOY_RULES)}`);
}
