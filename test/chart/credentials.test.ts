// Credentials from Secrets: the chart README's recipe (otel.headersSecret) hands the header to the
// container through a secretKeyRef, and every export request carries it once run.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADD_HOST_ARGS, bridgeAddress, HOST_NAME } from '../container/docker-host';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { deploymentWith, DOCKER_NETWORKS, FAST_EXPORT, IMAGE_VALUES, NAMESPACE, Pods, postTraced, RELEASE, waitForSpan } from './docker-pod';
import { CHART_README, codeBlocks, readmeYamlBlock, section } from './docs';
import { chartDir, CRD_APIS, helm, mainContainer, must, renderNotes, set, setJson } from './helm';

const TITLE = 'Credentials for the collector';
const recipe = readmeYamlBlock(TITLE) as { otel: { endpoint: string; headersSecret: { name: string; key: string } } };
/** The Secret the recipe's kubectl command creates: its name, key and value (with a <token> placeholder). */
const [, secretName = '', secretKey = '', secretTemplate = ''] =
  /create secret generic (\S+) --from-literal=(\w+)='([^']*)'/.exec(
    codeBlocks(section(CHART_README, TITLE), 'sh')
      .join('\n')
      .replace(/\\\n\s*/g, ''),
  ) ?? [];
const pods = new Pods();
let receiver: OtlpReceiver | undefined;

const templateValues = (values: Record<string, unknown>) =>
  helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...CRD_APIS, ...IMAGE_VALUES, ...setJson(values)]);

afterAll(async () => {
  pods.cleanUp();
  await receiver?.close();
});

describe("the chart README's recipe for the exporter's credentials", () => {
  it('creates the Secret and key the values name, in the header format the exporter reads', () => {
    expect(secretName).toBe(recipe.otel.headersSecret.name);
    expect(secretKey).toBe(recipe.otel.headersSecret.key);
    expect(secretTemplate).toMatch(/^authorization=Bearer%20<token>$/);
  });

  it('hands the Secret key to the container as a secretKeyRef: no rendered object holds a header value', () => {
    const container = mainContainer(deploymentWith(recipe));
    const headers = container.env?.filter((e) => e.name === 'OTEL_EXPORTER_OTLP_HEADERS');
    expect(headers).toEqual([{ name: 'OTEL_EXPORTER_OTLP_HEADERS', valueFrom: { secretKeyRef: { name: secretName, key: secretKey } } }]);
    expect(templateValues(recipe).stdout).not.toMatch(/authorization|Bearer/i);
  });

  describe('run as the kubelet would run it', () => {
    const token = randomBytes(12).toString('hex');
    let endpoint = '';

    beforeAll(async () => {
      pods.setUp();
      receiver = await startOtlpReceiver('ok', { host: bridgeAddress() });
      endpoint = `http://${HOST_NAME}:${new URL(receiver.url).port}`;
    }, 60_000);

    it('every export request the collector receives carries the header from the Secret, decoded', async () => {
      const deployment = deploymentWith({ otel: { ...recipe.otel, endpoint }, extraEnv: [FAST_EXPORT], traceContextFrom: DOCKER_NETWORKS });
      const secretValue = secretTemplate.replace('<token>', token);
      const pod = await pods.start(deployment, {
        podName: 'products-product-service-creds-1',
        dockerArgs: ADD_HOST_ARGS,
        secrets: { [secretName]: { [secretKey]: secretValue } },
      });
      const traceId = randomBytes(16).toString('hex');
      expect(await postTraced(pod.baseUrl, traceId)).toBe(201);
      const collector = must(receiver, 'receiver');
      await waitForSpan(collector, traceId, pod.name);
      // %20 in the Secret is a space on the wire (the exporter URL-decodes each value).
      expect(collector.requests.length).toBeGreaterThan(0);
      expect(new Set(collector.requests.map((request) => request.headers.authorization))).toEqual(new Set([`Bearer ${token}`]));
    });
  });
});

describe('NOTES.txt on the credentials', () => {
  const warnings = (args: string[]) =>
    renderNotes(args)
      .split('\n')
      .filter((line) => line.startsWith('WARNING'));
  const secret = set(`otel.headersSecret.name=${secretName}`);

  it('warns that headers to an http:// endpoint travel in clear text, and not for https://', () => {
    expect(warnings([...secret, ...set('otel.endpoint=http://otel-collector.observability:4318')])).toEqual([
      'WARNING: the OTLP headers (OTEL_EXPORTER_OTLP_HEADERS) are sent in clear text to http://otel-collector.observability:4318. Use an https:// endpoint, unless a mesh encrypts that hop.',
    ]);
    expect(warnings([...secret, ...set('otel.endpoint=https://otel-collector.observability:4318')])).toEqual([]);
    expect(warnings(set('otel.endpoint=http://otel-collector.observability:4318'))).toEqual([]);
  });

  it('warns about headers in plain text in extraEnv, and sees a signal endpoint given there', () => {
    const plain = set(
      'otel.endpoint=https://otel-collector.observability:4318',
      'extraEnv[0].name=OTEL_EXPORTER_OTLP_TRACES_HEADERS',
      'extraEnv[0].value=x-api-key=abc',
    );
    expect(warnings(plain)).toEqual([
      'WARNING: OTEL_EXPORTER_OTLP_TRACES_HEADERS is set in plain text in extraEnv: anyone who can read the Deployment or the release reads it. Put it in a Secret (otel.headersSecret).',
    ]);
    const clear = [...secret, ...set('extraEnv[0].name=OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'extraEnv[0].value=http://tempo:4318/v1/traces')];
    expect(warnings(clear)).toEqual([expect.stringContaining('are sent in clear text to http://tempo:4318/v1/traces')]);
  });
});
