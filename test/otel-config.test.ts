// Runs: dist/main.js (test/support/service-process.ts; `npm test` builds dist/ first).
//
// OpenTelemetry variables the service cannot honour as written are reported in one line on stderr
// each (the SDK's own warnings, on by default here), and never stop the service.
import { describe, expect, it, onTestFinished } from 'vitest';
import { startOtlpReceiver } from './support/otlp-receiver';
import { startService } from './support/service-process';

async function stderrOf(env: Record<string, string>, andThen: () => Promise<unknown> = () => Promise.resolve()): Promise<string> {
  const service = await startService(env);
  try {
    expect((await fetch(`${service.baseUrl}/product`, { method: 'POST', body: '{}' })).status).toBe(201);
    await andThen();
  } finally {
    // No graceful shutdown: its span flush would wait for the unreachable endpoint.
    await service.stop('SIGKILL');
  }
  return service.stderr();
}

describe('OpenTelemetry configuration mistakes', () => {
  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not-a-url', /not-a-url/],
    ['OTEL_BSP_SCHEDULE_DELAY', 'soon', /OTEL_BSP_SCHEDULE_DELAY/],
    ['OTEL_TRACES_SAMPLER', 'sometimes', /OTEL_TRACES_SAMPLER value "sometimes"/],
    ['OTEL_PROPAGATORS', 'w3c', /Propagator "w3c"/],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http', /protocol: http\b/],
    ['OTEL_NODE_ENABLED_INSTRUMENTATIONS', 'http,kao', /instrumentation-kao/],
  ])('%s=%s is reported in one stderr line and the service still answers', async (name, value, said) => {
    const stderr = await stderrOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', [name]: value });
    const lines = stderr
      .trim()
      .split('\n')
      .filter((line) => said.test(line));
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^opentelemetry (warn|error): /);
  });

  it('each malformed OTEL_RESOURCE_ATTRIBUTES entry is left out in one line, an empty one silently, and the valid entries still apply', async () => {
    const receiver = await startOtlpReceiver();
    onTestFinished(() => receiver.close());
    // Each would make the SDK drop every entry: no key=value, a blank key, a bad percent-encoding, a key or value over 255 characters.
    const longest = 'k'.repeat(255);
    const malformed = ['broken', ' =nokey', 'tier=%E0%A4%A', `${longest}k=v`, `long=${'v'.repeat(256)}`];
    const stderr = await stderrOf(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_RESOURCE_ATTRIBUTES: ['team=shop', '', ' ', ...malformed, 'region=eu%2Dwest', `${longest}=${'v'.repeat(255)}`].join(','),
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      () => receiver.waitForSpans(() => true),
    );
    expect(stderr.trim().split('\n')).toEqual(
      malformed
        .map((entry) => JSON.stringify(entry))
        .map(
          (entry) =>
            `product-service: OTEL_RESOURCE_ATTRIBUTES entry ${entry} is not key=value (percent-encode ',' and '=', at most 255 characters): left out, the other entries apply`,
        ),
    );
    expect(receiver.spans[0]?.resource).toMatchObject({ team: 'shop', region: 'eu-west', [longest]: 'v'.repeat(255) });
  });
});
