// Every kubectl and helm command the chart README, docs/diagnostics.md and docs/runbook.md show names what
// the chart renders for release `products` in namespace `shop`, so that a command copied from the docs never
// meets a drifted name, and the real kubectl accepts each (no API server runs here: it stops at the connection).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../support/paths';
import { CHART_README, codeBlocks, DIAGNOSTICS_DOC, section } from './docs';
import { findOne, mainContainer, ofKind, template, type K8sObject, set } from './helm';

const RELEASE = 'products';
const NAMESPACE = 'shop';
const RUNBOOK = join(ROOT, 'docs/runbook.md');
const DOCS = [CHART_README, DIAGNOSTICS_DOC, RUNBOOK];
/** The runbook's NS=, JOB=, RELEASE=, POD= block, which its commands read as "$NS" and so on. */
const NAMES = Object.fromEntries(
  [...(codeBlocks(section(RUNBOOK, 'The names in the commands'), 'sh')[0] ?? '').matchAll(/^(\w+)=(\S+)/gm)].map(([, name = '', value = '']) => [name, value]),
);

const objects = template(set('diagnostics.enabled=true', 'networkPolicy.enabled=true', 'monitoring.serviceMonitor.enabled=true'), RELEASE, NAMESPACE);
const deployment = findOne(objects, 'Deployment');
const podLabels = deployment.spec?.template.metadata?.labels ?? {};
const containers = new Set([mainContainer(deployment).name]);
const servicePorts = new Map(ofKind(objects, 'Service').map((svc) => [svc.metadata?.name, new Set((svc.spec?.ports ?? []).map((p) => String(p.port)))]));

/** kubectl's short and plural names for the kinds the docs refer to. */
const KINDS: Record<string, string> = {
  deployment: 'Deployment',
  deploy: 'Deployment',
  service: 'Service',
  svc: 'Service',
  configmap: 'ConfigMap',
  networkpolicy: 'NetworkPolicy',
  hpa: 'HorizontalPodAutoscaler',
  horizontalpodautoscaler: 'HorizontalPodAutoscaler',
  pdb: 'PodDisruptionBudget',
  servicemonitor: 'ServiceMonitor',
};

/** The kubectl and helm commands of a Markdown file: shell blocks (continuation lines joined) and inline code, the runbook's names filled in, without a trailing `&` or comment. */
function commands(file: string): string[] {
  const markdown = readFileSync(file, 'utf8');
  const fromBlocks = codeBlocks(markdown, 'sh').flatMap((block) => block.replace(/\\\n\s*/g, ' ').split('\n'));
  const inline = [...markdown.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
  return [...fromBlocks, ...inline]
    .map((line) => line.replace(/"\$(\w+)"|\$(\w+)/g, (whole, quoted?: string, bare?: string) => NAMES[quoted ?? bare ?? ''] ?? whole))
    .map((line) => line.replace(/(\s*&)?(\s+#.*)?$/, '').trim())
    .filter((line) => /^(kubectl|helm) /.test(line));
}

/** What a command names that the chart must have rendered; returns the problems. */
function problems(command: string, declaredContainers: Set<string>): string[] {
  const words = command.split(/\s+/);
  const found: string[] = [];
  const value = (i: number, word: string) => (word.includes('=') ? word.slice(word.indexOf('=') + 1) : (words[i + 1] ?? ''));
  words.forEach((word, i) => {
    const flag = word.split('=')[0] ?? '';
    if ((flag === '--namespace' || flag === '-n') && value(i, word) !== NAMESPACE) found.push(`namespace ${value(i, word)}`);
    if (flag === '-l' || flag === '--selector') {
      for (const pair of value(i, word).split(',')) {
        const [key = '', expected] = pair.split('=');
        if (podLabels[key] !== expected) found.push(`selector ${pair} matches no server pod (labels ${JSON.stringify(podLabels)})`);
      }
    }
    if ((flag === '-c' || flag === '--target') && !containers.has(value(i, word)) && !declaredContainers.has(value(i, word))) {
      found.push(`container ${value(i, word)}`);
    }
    const ref = /^([a-z]+)\/([a-z0-9.-]+)$/.exec(word);
    if (ref && KINDS[ref[1] ?? ''] !== undefined) {
      const kind = KINDS[ref[1] ?? ''];
      if (!objects.some((o: K8sObject) => o.kind === kind && o.metadata.name === ref[2])) found.push(`${word}: no ${kind} of that name`);
      const forwarded = words[i + 1];
      const ports = servicePorts.get(ref[2]);
      if (words.includes('port-forward') && kind === 'Service' && forwarded !== undefined && /^\d+:\d+$/.test(forwarded)) {
        if (!ports?.has(forwarded.split(':')[1] ?? '')) found.push(`port-forward to port ${forwarded}, not a port of that Service`);
      }
    }
  });
  // `kubectl get deployment products-product-service`: kind and name as two words after the verb.
  const verb = words.findIndex((w) => ['get', 'describe', 'scale', 'delete', 'edit'].includes(w));
  const [kindWord = '', name = ''] = verb === -1 ? [] : words.slice(verb + 1, verb + 3);
  const kind = KINDS[kindWord];
  if (words[0] === 'kubectl' && kind !== undefined && name !== '' && !name.startsWith('-')) {
    if (!objects.some((o) => o.kind === kind && o.metadata.name === name)) found.push(`${kindWord} ${name}: no ${kind} of that name`);
  }
  // A release name, when there is one (prose mentions `helm test` or `helm upgrade --server-side=true`).
  const release = words[2];
  const named = release !== undefined && !release.startsWith('-');
  if (words[0] === 'helm' && ['install', 'upgrade', 'test', 'template', 'uninstall', 'rollback'].includes(words[1] ?? '') && named && release !== RELEASE) {
    found.push(`helm ${words[1]} of release ${words[2]}`);
  }
  return found;
}

/** The Kubernetes objects a Markdown file shows: YAML blocks with a kind, and the YAML a shell block feeds kubectl through a here-document. */
interface Manifest {
  kind?: unknown;
  metadata?: { name?: string; namespace?: string };
  spec?: { selector?: { matchLabels?: Record<string, string> } };
}

function manifests(file: string): Manifest[] {
  const markdown = readFileSync(file, 'utf8');
  const heredocs = codeBlocks(markdown, 'sh').flatMap((block) => [...block.matchAll(/<<'(\w+)'\n([\s\S]*?)^\1$/gm)].map((m) => m[2] ?? ''));
  return [...codeBlocks(markdown, 'yaml'), ...heredocs]
    .map((text) => parse(text) as Manifest | null)
    .filter((doc): doc is Manifest => typeof doc?.kind === 'string');
}

// A cluster no one serves: kubectl parses the command, then fails to connect.
const kubeHome = mkdtempSync(join(tmpdir(), 'docs-kubectl-'));
const cluster = { name: 'none', cluster: { server: 'http://127.0.0.1:1' } };
const kubeconfig = {
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [cluster],
  users: [{ name: 'none', user: {} }],
  contexts: [{ name: 'none', context: { cluster: 'none', user: 'none' } }],
};
writeFileSync(join(kubeHome, 'config'), JSON.stringify({ ...kubeconfig, 'current-context': 'none' }));
afterAll(() => rmSync(kubeHome, { recursive: true, force: true }));

describe.each(DOCS)('the commands of %s', (file) => {
  const all = commands(file);
  // Containers a `kubectl debug --container=NAME` of the same page adds (the ephemeral one).
  const declared = new Set(all.flatMap((c) => [...c.matchAll(/--container[= ](\S+)/g)].map((m) => m[1] ?? '')));

  it('are there to check', () => {
    expect(all.length).toBeGreaterThan(3);
  });

  it('name the objects, labels, containers, ports and release the chart renders', () => {
    const wrong = all.flatMap((command) => problems(command, declared).map((problem) => `${problem}\n    in: ${command}`));
    expect(wrong).toEqual([]);
  });

  it('show manifests in the namespace, naming the Deployment and selecting the pods the chart renders', () => {
    for (const manifest of manifests(file)) {
      const what = `${String(manifest.kind)} ${manifest.metadata?.name ?? ''}`;
      if (manifest.metadata?.namespace !== undefined) expect(manifest.metadata.namespace, what).toBe(NAMESPACE);
      if (manifest.kind === 'Deployment') expect(manifest.metadata?.name, what).toBe(deployment.metadata?.name);
      const selector = manifest.spec?.selector?.matchLabels;
      if (selector !== undefined) expect(podLabels, what).toMatchObject(selector);
    }
  });
});

// The README's and diagnostics.md's commands read files and variables of their own steps: the runbook's, its names alone.
describe("the runbook's kubectl commands", () => {
  const runbook = commands(RUNBOOK).filter((command) => command.startsWith('kubectl ') && command.split(/\s+/).length > 2);

  it('are accepted by the real kubectl: flags, verbs and arguments', () => {
    expect(runbook.length).toBeGreaterThan(10);
    const env = { PATH: `${join(ROOT, '.tools/bin')}:${process.env.PATH ?? ''}`, HOME: kubeHome, KUBECONFIG: join(kubeHome, 'config') };
    for (const command of runbook) {
      const filled = command.replace('<trace_id>', '0'.repeat(32)).replace('<n>', '2').replace('<node>', 'node-1');
      const run = spawnSync('sh', ['-c', filled], { env, encoding: 'utf8', timeout: 30_000 });
      expect(run.stderr, command).not.toMatch(/unknown (flag|command|shorthand)|invalid argument|Usage:|See 'kubectl|error: /);
      expect(run.stderr, command).toMatch(/127\.0\.0\.1:1/);
    }
  });
});
