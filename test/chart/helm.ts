// Runs the real helm binary (installed by scripts/ci/install-helm.sh) over the chart.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { IContainer } from 'kubernetes-models/v1';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { Kinds } from './validate';
import { ROOT } from '../support/paths';

export const chartDir = join(ROOT, 'helm/product-service');
export const helmBin = join(ROOT, '.tools/bin/helm');
/** Helm 3, which platforms still run: the chart is held to it where the two differ (platform-values.test.ts). */
export const helm3Bin = join(ROOT, '.tools/bin/helm3');
/** Helm 4 and Helm 3: platforms run both, and their lint differs (neither fails on a template's `fail` alone). */
export const HELMS = [
  { helmName: 'helm 4', bin: helmBin },
  { helmName: 'helm 3', bin: helm3Bin },
];

/** `--api-versions` of a cluster with the CRDs the value sets need: without them the chart refuses to render those objects. */
export const CRD_APIS: string[] = readFileSync(join(ROOT, 'scripts/ci/chart-api-versions.txt'), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '' && !line.startsWith('#'))
  .flatMap((api) => ['--api-versions', api.trim()]);

/** Runs helm 4, or the helm binary given (helm3Bin); fails the test, never skips it, when helm is not installed. */
export function helm(args: string[], cwd = ROOT, bin = helmBin): { status: number | null; stdout: string; stderr: string } {
  if (!existsSync(bin)) throw new Error(`helm is missing at ${bin}. Install it with: sh scripts/ci/install-helm.sh`);
  const run = spawnSync(bin, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.error) throw run.error;
  return run;
}

export const set = (...pairs: string[]): string[] => pairs.flatMap((pair) => ['--set', pair]);
export const setJson = (values: Record<string, unknown>): string[] =>
  Object.entries(values).flatMap(([key, value]) => ['--set-json', `${key}=${JSON.stringify(value)}`]);

export const valueSets: { name: string; args: string[] }[] = [
  { name: 'chart defaults', args: [] },
  ...readdirSync(join(chartDir, 'ci'))
    .filter((f) => f.endsWith('-values.yaml'))
    .sort()
    .map((f) => ({ name: `ci/${f}`, args: ['--values', join(chartDir, 'ci', f)] })),
];

/** What every rendered object has; its kind's full type comes from `ofKind` (after validation). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: NonNullable<IDeployment['metadata']> & { name: string };
}

export function byName(name: string) {
  return (item: { name: string }): boolean => item.name === name;
}

export function must<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw new Error(`missing: ${what}`);
  return value;
}

export function ofKind<K extends keyof Kinds>(objects: K8sObject[], kind: K): Kinds[K][] {
  return objects.filter((o) => o.kind === kind) as unknown as Kinds[K][];
}

/** `helm template` of `chart` (the source directory or a packaged .tgz) for a cluster that serves CRD_APIS. */
export function template(args: string[], release = 'products', namespace = 'shop', chart = chartDir): K8sObject[] {
  const run = helm(['template', release, chart, '--namespace', namespace, ...CRD_APIS, ...args]);
  if (run.status !== 0) throw new Error(`helm template failed (${run.status}): ${run.stderr}`);
  return parseManifests(run.stdout);
}

/** NOTES.txt as `helm install` prints it: `helm install --dry-run=client` has no --api-versions, `helm template` skips NOTES. */
export function renderNotes(args: string[], release = 'products', namespace = 'shop'): string {
  const copy = mkdtempSync(join(tmpdir(), 'chart-notes-'));
  try {
    cpSync(chartDir, copy, { recursive: true, dereference: true });
    const notes = readFileSync(join(chartDir, 'templates/NOTES.txt'), 'utf8');
    const harness = `{{- define "notes-under-test" -}}\n${notes}\n{{- end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: notes-under-test
data:
  notes: {{ include "notes-under-test" . | toJson }}
`;
    writeFileSync(join(copy, 'templates/notes-under-test.yaml'), harness);
    const run = helm(['template', release, copy, '--namespace', namespace, ...CRD_APIS, '--show-only', 'templates/notes-under-test.yaml', ...args]);
    if (run.status !== 0) throw new Error(`helm template failed (${run.status}): ${run.stderr}`);
    const [configMap] = ofKind(parseManifests(run.stdout), 'ConfigMap');
    return must(configMap?.data?.notes, 'rendered NOTES.txt');
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

export function parseManifests(manifests: string): K8sObject[] {
  return parseAllDocuments(manifests)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`helm rendered invalid YAML: ${doc.errors[0]?.message}`);
      return doc.toJS() as K8sObject | null;
    })
    .filter((obj): obj is K8sObject => obj !== null);
}

export function named<K extends keyof Kinds>(objects: K8sObject[], kind: K, name: string): Kinds[K] {
  return must(objects.find((o) => o.kind === kind && o.metadata.name === name) as Kinds[K] | undefined, `${kind} ${name}`);
}

export function findOne<K extends keyof Kinds>(objects: K8sObject[], kind: K): Kinds[K] {
  const found = ofKind(objects, kind);
  const [first] = found;
  if (found.length !== 1 || first === undefined) throw new Error(`expected one ${kind}, rendered ${found.length}`);
  return first;
}

export function podSpecOf(deployment: IDeployment) {
  return must(deployment.spec?.template.spec, 'Deployment pod spec');
}

/** The container's literal value of variable `name`. */
export function envValue(container: IContainer, name: string): string {
  return must(container.env?.find((e) => e.name === name)?.value, `env ${name}`);
}

export function envNames(container: IContainer): string[] {
  return (container.env ?? []).map((e) => e.name);
}

export function templateFails(args: string[]): string {
  const run = helm(['template', 'products', chartDir, ...CRD_APIS, ...args]);
  if (run.status === 0) throw new Error(`helm template ${args.join(' ')} should have failed`);
  return run.stderr;
}

/** The server Deployment's only container. */
export function mainContainer(deployment: IDeployment): IContainer {
  const containers = podSpecOf(deployment).containers;
  const [first] = containers;
  if (containers.length !== 1 || first === undefined) throw new Error(`expected one container, found ${containers.length}`);
  return first;
}

export const containerPort = (container: IContainer, name: string): number =>
  must(container.ports?.find((p) => p.name === name)?.containerPort, `port ${name}`);
export const deploymentOf = (args: string[]) => findOne(template(args), 'Deployment');
export const containerOf = (args: string[]) => mainContainer(deploymentOf(args));
