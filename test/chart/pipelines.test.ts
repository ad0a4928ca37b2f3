// The chart as platforms ship it: a dependency of an umbrella chart (the packaged .tgz), synced by a
// GitOps tool that compares what it renders with what the API server stores, released chart-only, and
// admitted by policies of Kyverno's library. release.test.ts: upgrades with --reuse-values.
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { chartDir, CRD_APIS, findOne, helm, HELMS, must, ofKind, parseManifests, podSpecOf, set, template } from './helm';
import { validateObject } from './validate';

const scratch = mkdtempSync(join(tmpdir(), 'chart-pipelines-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** `helm package` of the chart, as `version` (same appVersion), into a directory of its own. */
function packaged(version: string): string {
  const dir = join(scratch, `package-${version}`);
  const run = helm(['package', chartDir, '--version', version, '--destination', dir]);
  if (run.status !== 0) throw new Error(`helm package failed: ${run.stderr}`);
  return join(dir, must(readdirSync(dir)[0], 'the package'));
}

describe('a dependency of an umbrella chart, vendored as the packaged .tgz, with a condition and tags', () => {
  const umbrella = join(scratch, 'shop');
  for (const dir of ['charts', 'templates']) mkdirSync(join(umbrella, dir), { recursive: true });
  cpSync(packaged('1.2.3'), join(umbrella, 'charts/product-service-1.2.3.tgz'));
  const dependency = {
    name: 'product-service',
    version: '1.2.3',
    repository: 'file://../product-service',
    condition: 'product-service.enabled',
    tags: ['backend'],
  };
  writeFileSync(join(umbrella, 'Chart.yaml'), stringify({ apiVersion: 'v2', name: 'shop', version: '0.1.0', dependencies: [dependency] }));
  writeFileSync(
    join(umbrella, 'values.yaml'),
    stringify({
      global: { imageRegistry: 'mirror.example.com', imagePullSecrets: ['mirror-pull'] },
      'product-service': { image: { repository: 'ghcr.io/acme/product-service' }, imagePullSecrets: [{ name: 'own-pull' }] },
    }),
  );

  describe.each(HELMS)('$helmName', ({ bin }) => {
    const render = (args: string[] = []) => {
      const run = helm(['template', 'shop', umbrella, '--namespace', 'shop', ...CRD_APIS, ...args], undefined, bin);
      expect(run.status, run.stderr).toBe(0);
      return parseManifests(run.stdout);
    };

    it("passes helm lint --strict and renders the chart with the umbrella's global registry and pull secrets", () => {
      const enabled = set('product-service.enabled=true');
      const lint = helm(['lint', '--strict', umbrella, ...enabled], undefined, bin);
      expect(lint.status, lint.stdout + lint.stderr).toBe(0);
      const spec = podSpecOf(findOne(render(enabled), 'Deployment'));
      expect(spec.containers[0]?.image).toBe('mirror.example.com/acme/product-service:1.0.0');
      expect(spec.imagePullSecrets).toEqual([{ name: 'mirror-pull' }, { name: 'own-pull' }]);
    });

    it('renders nothing of it when its condition or its tag turns it off', () => {
      expect(render(set('product-service.enabled=false'))).toEqual([]);
      // Without the `enabled` value, the tag decides.
      expect(render(set('tags.backend=false'))).toEqual([]);
      expect(render()).not.toEqual([]);
    });
  });
});

describe('a chart-only release (1.2.3 then 1.2.4, same image and values)', () => {
  it('leaves the pod template as it was, so no pod restarts; the objects still carry the chart version', () => {
    const [before, after] = ['1.2.3', '1.2.4'].map((version) => findOne(template([], 'products', 'shop', packaged(version)), 'Deployment'));
    expect(after?.spec?.template).toEqual(before?.spec?.template);
    expect(after?.metadata?.labels?.['helm.sh/chart']).toBe('product-service-1.2.4');
  });
});

describe('the HTTPRoute, round-tripped through the Gateway API CRD schema (@kubernetes-models/gateway-api)', () => {
  // The CRD's structural schema with its defaults, as the API server applies them before it stores the object.
  const source = readFileSync(createRequire(__filename).resolve('@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute'), 'utf8');
  const start = source.indexOf('const schema = ') + 'const schema = '.length;
  const crd = JSON.parse(source.slice(start, source.indexOf('\n};\n', start) + 2)) as { properties: { spec: object } };
  const withDefaults = new Ajv({ useDefaults: true, strict: false, validateFormats: false, logger: false }).compile(crd.properties.spec);

  it.each([
    ['the default match', set('httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=public')],
    [
      'a namespaced listener, a hostname, header and path matches',
      [
        ...set('httpRoute.enabled=true', 'httpRoute.hostnames[0]=shop.example.com'),
        '--set-json',
        'httpRoute.parentRefs=[{"name":"public","namespace":"infra","sectionName":"https"}]',
        '--set-json',
        'httpRoute.matches=[{"path":{"value":"/product"},"headers":[{"name":"x-tenant","value":"a"}]}]',
      ],
    ],
  ])('with %s: renders what the API server stores', (_what, args) => {
    const route = findOne(template(args), 'HTTPRoute');
    validateObject(route);
    const stored = structuredClone(route.spec);
    expect(withDefaults(stored), JSON.stringify(withDefaults.errors)).toBe(true);
    expect(route.spec).toEqual(stored);
  });
});

describe("Kyverno's require-pod-probes (best-practices): every container has a liveness, readiness or startup probe", () => {
  it('holds for the server pods and the helm test pod', () => {
    const objects = template(set('networkPolicy.enabled=true'));
    const specs = [podSpecOf(findOne(objects, 'Deployment')), ...ofKind(objects, 'Pod').map((pod) => must(pod.spec, 'Pod spec'))];
    expect(specs).toHaveLength(2);
    for (const container of specs.flatMap((spec) => spec.containers)) {
      expect(
        ['livenessProbe', 'readinessProbe', 'startupProbe'].some((probe) => probe in container),
        container.name,
      ).toBe(true);
    }
  });
});
