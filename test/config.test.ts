// Runs: parseConfig from src, in-process; the entry point's exit on a bad variable runs dist/main.js
// (`npm run build` first; `npm test` does it).
//
// Every variable is a row of the tables below, so a new variable is a few rows here, and the
// first test fails until it has them (and until the README's configuration table lists it).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, type Config } from '../src/config';
import { ROOT } from './support/paths';
import { runServiceToExit, serviceForTest } from './support/service-process';

/** Each variable parseConfig reads: the Config field it sets and that field's value when it is unset. */
const DEFAULTS: ReadonlyArray<[variable: string, field: keyof Config, value: unknown]> = [
  ['PORT', 'port', 8080],
  ['HOST', 'host', '0.0.0.0'],
  ['METRICS_PORT', 'metricsPort', 9464],
  ['PROBE_PORT', 'probePort', undefined],
  ['LOG_LEVEL', 'logLevel', 'info'],
  ['BODY_LIMIT', 'bodyLimit', 1024 * 1024],
  ['MAX_CONNECTIONS', 'maxConnections', 2048],
  ['SHUTDOWN_DELAY', 'shutdownDelayMs', 0],
  ['SHUTDOWN_TIMEOUT', 'shutdownTimeoutMs', 25_000],
  ['BUILD_REVISION', 'buildRevision', 'unknown'],
  ['CONFIG_REVISION', 'configRevision', 'unknown'],
  ['TRACE_QUERY_PARAMS', 'traceQueryParams', []],
  ['TRUSTED_PROXIES', 'trustedProxies', []],
  ['TRACE_CONTEXT_FROM', 'traceContextFrom', []],
  ['QUEUE_TIME_HEADER', 'queueTime', undefined],
  ['QUEUE_TIME_FROM', 'queueTime', undefined],
  ['FAULT_ERROR_RATIO', 'faultErrorRatio', 0],
  ['FAULT_DELAY', 'faultDelayMs', 0],
];

const ACCEPTED: ReadonlyArray<[variable: string, value: string, expected: unknown]> = [
  ['PORT', '3000', 3000],
  ['PORT', '0', 0],
  ['HOST', '::', '::'],
  ['METRICS_PORT', '9100', 9100],
  ['PROBE_PORT', '8081', 8081],
  ['LOG_LEVEL', 'DEBUG', 'debug'],
  ['LOG_LEVEL', 'silent', 'silent'],
  ['BODY_LIMIT', '1', 1],
  ['BODY_LIMIT', '2048', 2048],
  ['BODY_LIMIT', '512kb', 512 * 1024],
  ['BODY_LIMIT', '1MB', 1024 * 1024],
  ['BODY_LIMIT', '10mb', 10 * 1024 * 1024],
  ['BODY_LIMIT', '1.5mb', 1.5 * 1024 * 1024],
  ['BODY_LIMIT', '1.25mb', 1.25 * 1024 * 1024],
  ['SHUTDOWN_DELAY', '5', 5000],
  ['SHUTDOWN_TIMEOUT', '2.5', 2500],
  ['BUILD_REVISION', ' 3ca9d93 ', '3ca9d93'],
  ['TRACE_QUERY_PARAMS', 'page, sort,filter[status]', ['page', 'sort', 'filter[status]']],
  [
    'TRUSTED_PROXIES',
    '10.0.0.0/8, 192.0.2.1,fd00::/8,::1',
    [
      { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
      { address: '192.0.2.1', prefix: 32, family: 'ipv4' },
      { address: 'fd00::', prefix: 8, family: 'ipv6' },
      { address: '::1', prefix: 128, family: 'ipv6' },
    ],
  ],
  ['TRUSTED_PROXIES', '0.0.0.0/1', [{ address: '0.0.0.0', prefix: 1, family: 'ipv4' }]],
  ['TRACE_CONTEXT_FROM', '127.0.0.6/32', [{ address: '127.0.0.6', prefix: 32, family: 'ipv4' }]],
  ['TRACE_CONTEXT_FROM', '::1/128', [{ address: '::1', prefix: 128, family: 'ipv6' }]],
  ['TRUSTED_PROXIES', '::ffff:10.0.0.0/104', [{ address: '::ffff:10.0.0.0', prefix: 104, family: 'ipv6' }]],
  ['MAX_CONNECTIONS', '1', 1],
  ['MAX_CONNECTIONS', '100000', 100_000],
  ['FAULT_ERROR_RATIO', '0.25', 0.25],
  ['FAULT_ERROR_RATIO', '1', 1],
  ['FAULT_DELAY', '1.5', 1500],
  ['FAULT_DELAY', '120', 120_000],
];

const REFUSED: ReadonlyArray<[variable: string, value: string, allowed: RegExp]> = [
  ['PORT', 'abc', /expected a whole number from 0 to 65535/],
  ['PORT', '70000', /expected a whole number/],
  ['PORT', '-1', /expected a whole number/],
  ['PORT', '80.5', /expected a whole number/],
  ['METRICS_PORT', 'x', /expected a whole number/],
  ['PROBE_PORT', '8080', /must differ from PORT and METRICS_PORT/],
  ['PROBE_PORT', '9464', /must differ from PORT and METRICS_PORT/],
  ['BODY_LIMIT', '-1', /expected a positive whole number of bytes, or a size with a unit/],
  ['BODY_LIMIT', '1.5', /expected a positive whole number of bytes/],
  ['BODY_LIMIT', '0.3kb', /expected a positive whole number of bytes/],
  ['BODY_LIMIT', '0', /expected a positive whole number of bytes/],
  ['BODY_LIMIT', 'lots', /expected a positive whole number of bytes/],
  ['BODY_LIMIT', '1tb-ish', /expected a positive whole number of bytes/],
  ['LOG_LEVEL', 'verbose', /expected one of fatal, error, warn, info, debug, trace, silent/],
  ['SHUTDOWN_DELAY', '-5', /expected a number of seconds/],
  ['SHUTDOWN_TIMEOUT', '5s', /expected a number of seconds/],
  ['HOST', 'http://0.0.0.0', /expected an IP address or host name/],
  ['TRACE_QUERY_PARAMS', 'page sort', /expected query parameter names separated by commas/],
  ['TRACE_QUERY_PARAMS', 'page,,sort', /expected query parameter names separated by commas/],
  ['TRACE_QUERY_PARAMS', 'page=1', /expected query parameter names separated by commas/],
  ['TRUSTED_PROXIES', '10.0.0.0/33', /expected IP addresses or CIDR ranges separated by commas, e.g. 10.0.0.0\/8,fd00::\/8/],
  ['TRUSTED_PROXIES', 'fd00::/129', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', 'ingress-nginx', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', '10.0.0.0/8/8', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', '10.0.0.0/', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', '10.0.0.0/x8', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', 'fd00::/8x', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', '10.0.0.0/8,', /expected IP addresses or CIDR ranges/],
  ['TRUSTED_PROXIES', '2', /expected IP addresses or CIDR ranges/],
  // A range that trusts everyone, as Node's BlockList matches it (an IPv4 client also against IPv6
  // ranges, through its IPv4-mapped address). Halves that add up to one are warned of as public.
  ...(
    [
      ['TRUSTED_PROXIES', '0.0.0.0/0'],
      ['TRUSTED_PROXIES', '10.0.0.0/8,::/0'],
      ['TRUSTED_PROXIES', '::ffff:0:0/96'],
      ['TRUSTED_PROXIES', '::ffff:0.0.0.0/96'],
      ['TRUSTED_PROXIES', '::/80'],
      ['TRACE_CONTEXT_FROM', '::/1,8000::/1'],
      ['QUEUE_TIME_FROM', '0.0.0.0/0'],
    ] as const
  ).map(([variable, value]): [string, string, RegExp] => [variable, value, /together these ranges trust every client: name the peers' own ranges/]),
  ['QUEUE_TIME_HEADER', 'X-Request-Start', /needs QUEUE_TIME_FROM/],
  ['QUEUE_TIME_HEADER', 'X Request Start', /expected a header name/],
  ['MAX_CONNECTIONS', '0', /expected a whole number from 1 to 100000/],
  ['MAX_CONNECTIONS', '100001', /expected a whole number from 1 to 100000/],
  ['MAX_CONNECTIONS', 'unlimited', /expected a whole number from 1 to 100000/],
  ['FAULT_ERROR_RATIO', '50%', /expected a ratio from 0 to 1/],
  ['FAULT_ERROR_RATIO', '1.5', /expected a ratio from 0 to 1/],
  ['FAULT_ERROR_RATIO', '-0.1', /expected a ratio from 0 to 1/],
  ['FAULT_ERROR_RATIO', '.5', /expected a ratio from 0 to 1/],
  ['FAULT_DELAY', '300ms', /expected a number of seconds from 0 to 120/],
  ['FAULT_DELAY', '300', /expected a number of seconds from 0 to 120/],
  ['FAULT_DELAY', '-1', /expected a number of seconds/],
];

const fieldOf = (variable: string): keyof Config => DEFAULTS.find(([name]) => name === variable)?.[1] ?? ('' as keyof Config);

/** The names of the variables parseConfig reads from `env`, in the order it reads them. */
function variablesRead(): string[] {
  const read: string[] = [];
  const recording = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get: (_target, name) => {
        if (typeof name === 'string') read.push(name);
        return undefined;
      },
    },
  );
  parseConfig(recording);
  return [...new Set(read)];
}

describe('parseConfig', () => {
  // The second first ticket (docs/development.md, "Adding a configuration variable"): src/config.ts,
  // this file's rows, the README's table, and the chart: values.yaml, values.schema.json and the env
  // list in templates/_helpers.tpl (6 files), or extraEnv named in the chart README. The rendered env
  // is proven on helm template (test/chart/render.test.ts).
  it('reads exactly the variables of the DEFAULTS table, each listed in the README configuration table and set by the chart or named with its extraEnv', () => {
    const variables = DEFAULTS.map(([name]) => name);
    expect(variablesRead().sort(), 'a variable parseConfig reads needs its rows in this file').toEqual([...variables].sort());
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const documented = [...readme.matchAll(/^\| `([A-Z_]+)` +\|/gm)].map((match) => match[1]);
    expect(documented.sort(), "the README's configuration table lists every variable, and only those").toEqual([...variables].sort());
    const chart = join(ROOT, 'helm/product-service');
    const templates = readdirSync(join(chart, 'templates'), { recursive: true, encoding: 'utf8' })
      .filter((file) => /\.(yaml|tpl)$/.test(file))
      .map((file) => readFileSync(join(chart, 'templates', file), 'utf8'))
      .join('\n');
    const chartReadme = readFileSync(join(chart, 'README.md'), 'utf8').split('\n');
    const missing = variables.filter(
      (variable) =>
        !new RegExp(`^\\s*- name: ${variable}$`, 'm').test(templates) &&
        !chartReadme.some((line) => line.includes(`\`${variable}\``) && line.includes('extraEnv')),
    );
    expect(missing, 'set by no template of helm/product-service, and not named with extraEnv on a line of its README.md').toEqual([]);
  });

  it.each(DEFAULTS)('%s unset: %s is %j', (_variable, field, value) => {
    expect(parseConfig({})[field]).toEqual(value);
  });

  it.each(ACCEPTED)('accepts %s=%j as %j', (variable, value, expected) => {
    expect(parseConfig({ [variable]: value })[fieldOf(variable)]).toEqual(expected);
  });

  it.each(REFUSED)('refuses %s=%j, naming the variable, the value and what is allowed', (variable, value, allowed) => {
    expect(() => parseConfig({ [variable]: value })).toThrow(ConfigError);
    expect(() => parseConfig({ [variable]: value })).toThrow(`${variable}=${JSON.stringify(value)}: `);
    expect(() => parseConfig({ [variable]: value })).toThrow(allowed);
  });

  it('accepts port 0 (any free port) for all three listeners at once', () => {
    expect(parseConfig({ PORT: '0', METRICS_PORT: '0', PROBE_PORT: '0' })).toMatchObject({ port: 0, metricsPort: 0, probePort: 0 });
  });

  it('treats an empty value as unset', () => {
    expect(parseConfig({ PORT: '', LOG_LEVEL: ' ', BUILD_REVISION: '' })).toMatchObject({ port: 8080, logLevel: 'info', buildRevision: 'unknown' });
  });

  it('reads QUEUE_TIME_HEADER (lower-cased, as Node keys headers) together with QUEUE_TIME_FROM', () => {
    expect(parseConfig({ QUEUE_TIME_HEADER: 'X-Request-Start', QUEUE_TIME_FROM: '10.0.0.0/8' }).queueTime).toEqual({
      header: 'x-request-start',
      from: [{ address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    });
  });

  it('warns of public ranges in any trust list, private ones not', () => {
    expect(parseConfig({ TRUSTED_PROXIES: '10.0.0.0/8,203.0.113.0/24', TRACE_CONTEXT_FROM: '127.0.0.6,fd00::/8,2001:db8::/32' }).trustWarnings).toEqual([
      'TRUSTED_PROXIES names a public range, 203.0.113.0/24: every host there is believed',
      'TRACE_CONTEXT_FROM names a public range, 2001:db8::/32: every host there is believed',
    ]);
    expect(parseConfig({ TRUSTED_PROXIES: '10.0.0.0/7' }).trustWarnings).toHaveLength(1);
    // An IPv4-mapped range is weighed as the IPv4 range it maps: /104 is 10.0.0.0/8, /100 is 0.0.0.0/4.
    expect(parseConfig({ TRUSTED_PROXIES: '::ffff:10.0.0.0/104' }).trustWarnings).toEqual([]);
    expect(parseConfig({ TRUSTED_PROXIES: '::ffff:10.0.0.0/100' }).trustWarnings).toHaveLength(1);
  });

  it('rejects METRICS_PORT equal to PORT', () => {
    expect(() => parseConfig({ PORT: '9000', METRICS_PORT: '9000' })).toThrow(/METRICS_PORT="9000": must differ from PORT/);
  });
});

describe('the entry point with a bad variable', () => {
  // One spawn: every variable goes through the one parseConfig call the entry point catches; each
  // refusal's message is proven in-process above (REFUSED).
  it('PORT=abc exits 1 before listening, with the one line the README shows, and no stack trace', async () => {
    const result = await runServiceToExit({ PORT: 'abc' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('product-service: invalid configuration: PORT="abc": expected a whole number from 0 to 65535\n');
    expect(result.stdout).not.toContain('listening');
  });

  it('a port already in use exits 1 with a fatal log line instead of a stack trace on stderr', async () => {
    const first = await serviceForTest();
    const result = await runServiceToExit({ PORT: String(first.port) });
    expect(result.code).toBe(1);
    const fatal = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    expect(fatal).toMatchObject({ level: 'fatal', msg: 'cannot listen' });
    expect(JSON.stringify(fatal)).toContain('EADDRINUSE');
  });

  it('BUILD_REVISION and CONFIG_REVISION reach the build-info metric (the revision the start-up line too); a public trusted range is warned of', async () => {
    const svc = await serviceForTest({ BUILD_REVISION: 'abc1234', CONFIG_REVISION: '0f1e2d3c4b5a', TRUSTED_PROXIES: '203.0.113.0/24' });
    expect(await svc.waitForLog((line) => line.msg === 'product-service listening')).toMatchObject({ revision: 'abc1234' });
    expect(await svc.waitForLog((line) => String(line.msg).startsWith('TRUSTED_PROXIES names a public range'))).toMatchObject({ level: 'warn' });
    const metrics = await (await fetch(svc.metricsUrl)).text();
    expect(metrics).toMatch(/^product_service_build_info\{[^}]*revision="abc1234"/m);
    expect(metrics).toMatch(/^product_service_build_info\{[^}]*config="0f1e2d3c4b5a"/m);
  });
});
