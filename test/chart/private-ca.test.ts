// A collector behind TLS with a private CA: the chart README's recipe, rendered and run as the kubelet
// would run it against an OTLP receiver over HTTPS whose certificate this test's CA signed.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADD_HOST_ARGS, bridgeAddress, docker, HOST_NAME } from '../container/docker-host';
import { sampleValue, samples, scrape } from '../support/exposition';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { deploymentWith, DOCKER_NETWORKS, FAST_EXPORT, Pods, postTraced, waitForSpan } from './docker-pod';
import { readmeYamlBlock } from './docs';
import { mainContainer, must, podSpecOf } from './helm';

const recipe = readmeYamlBlock('A collector behind a private CA') as {
  otel: { endpoint: string };
  extraVolumes: Array<{ name: string; configMap?: { name: string } }>;
  extraVolumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  extraEnv: Array<{ name: string; value: string }>;
};

const pods = new Pods();
const scratch = mkdtempSync(join(tmpdir(), 'chart-private-ca-'));
/** The files of the CA's ConfigMap, as the kubelet projects them into the volume. */
const caConfigMap = join(scratch, 'configmap');
let receiver: OtlpReceiver;
let endpoint = '';

function openssl(args: string[]): void {
  const run = spawnSync('openssl', args, { cwd: scratch, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${run.stderr}`);
}

/** `openssl req` flags for a new P-256 key, unencrypted. */
const NEW_EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A test CA, and a certificate it signs for the name containers reach the receiver by. */
function makeCertificates(): { key: Buffer; cert: Buffer; ca: Buffer } {
  openssl(['req', '-x509', ...NEW_EC_KEY, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=product-service test CA']);
  openssl(['req', ...NEW_EC_KEY, '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${HOST_NAME}`]);
  writeFileSync(join(scratch, 'server.ext'), `subjectAltName=DNS:${HOST_NAME}\nextendedKeyUsage=serverAuth\n`);
  const signedByCa = ['-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'];
  openssl(['x509', '-req', '-in', 'server.csr', ...signedByCa, '-out', 'server.crt', '-days', '1', '-extfile', 'server.ext']);
  const read = (file: string) => readFileSync(join(scratch, file));
  return { key: read('server.key'), cert: read('server.crt'), ca: read('ca.crt') };
}

beforeAll(async () => {
  pods.setUp();
  const { key, cert, ca } = makeCertificates();
  // The ConfigMap's one key, ca.crt, projected read-only (directory 0755, file 0644 as the kubelet's defaultMode).
  const volume = must(recipe.extraVolumes[0], 'the recipe volume');
  mkdirSync(caConfigMap);
  writeFileSync(join(caConfigMap, 'ca.crt'), ca, { mode: 0o644 });
  chmodSync(caConfigMap, 0o755);
  expect(volume.configMap?.name, 'the recipe mounts a ConfigMap').toBeTruthy();
  receiver = await startOtlpReceiver('ok', { host: bridgeAddress(), tls: { key, cert } });
  endpoint = `https://${HOST_NAME}:${new URL(receiver.url).port}`;
}, 120_000);

afterAll(async () => {
  pods.cleanUp();
  await receiver.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe("the chart README's private-CA recipe", () => {
  it('mounts the CA read-only and points both variables at it', () => {
    const deployment = deploymentWith(recipe);
    const container = mainContainer(deployment);
    const mount = container.volumeMounts?.find((m) => m.name === recipe.extraVolumes[0]?.name);
    expect(mount?.readOnly).toBe(true);
    const caFile = must(container.env?.find((e) => e.name === 'OTEL_EXPORTER_OTLP_CERTIFICATE')?.value, 'OTEL_EXPORTER_OTLP_CERTIFICATE');
    expect(caFile.startsWith(`${mount?.mountPath}/`)).toBe(true);
    expect(container.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value).toBe(caFile);
  });

  it('run as the kubelet would run it: spans of a traced request reach the collector over HTTPS', async () => {
    const deployment = deploymentWith({
      ...recipe,
      otel: { ...recipe.otel, endpoint },
      extraEnv: [...recipe.extraEnv, FAST_EXPORT],
      traceContextFrom: DOCKER_NETWORKS,
    });
    const pod = await pods.start(deployment, {
      podName: 'products-product-service-ca-1',
      sources: { [must(recipe.extraVolumes[0], 'volume').name]: caConfigMap },
      dockerArgs: ADD_HOST_ARGS,
    });
    const traceId = randomBytes(16).toString('hex');
    expect(await postTraced(pod.baseUrl, traceId)).toBe(201);
    await waitForSpan(receiver, traceId, pod.name);
    const metrics = await scrape(pod.metricsUrl);
    expect(sampleValue(metrics, 'otel_sdk_exporter_span_exported_total')).toBeGreaterThanOrEqual(1);
    expect(samples(metrics, 'otel_sdk_exporter_span_exported_total').filter((s) => s.labels.error_type !== undefined && s.value > 0)).toEqual([]);
  });
});

// The recipe's control. That requests are answered as usual meanwhile is the service's (test/telemetry.test.ts).
describe('without the CA', () => {
  it('the TLS failure is counted in otel_sdk_exporter_span_exported_total{error_type} and no span arrives', async () => {
    const deployment = deploymentWith({ otel: { endpoint }, extraEnv: [FAST_EXPORT] });
    expect(podSpecOf(deployment).volumes?.map((v) => v.name)).toEqual(['tmp']);
    const pod = await pods.start(deployment, { podName: 'products-product-service-noca-1', dockerArgs: ADD_HOST_ARGS });
    const traceId = randomBytes(16).toString('hex');
    for (let i = 0; i < 5; i++) expect(await postTraced(pod.baseUrl, traceId)).toBe(201);
    const failed = await vi.waitFor(
      async () => {
        const exposition = await scrape(pod.metricsUrl);
        const errors = samples(exposition, 'otel_sdk_exporter_span_exported_total').filter((s) => s.labels.error_type !== undefined && s.value > 0);
        expect(errors.length, `no failed export counted yet:\n${exposition}`).toBeGreaterThan(0);
        return errors;
      },
      { timeout: 30_000, interval: 500 },
    );
    console.log(`without the CA: ${JSON.stringify(failed)}`);
    expect(receiver.spans.filter((span) => span.traceId === traceId)).toEqual([]);
    expect(docker(['logs', pod.name]).stderr).toMatch(/certificate/i);
  });
});
