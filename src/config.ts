import { BlockList, isIP } from 'node:net';
import bytes from 'bytes';

/** Everything the service reads from its environment, parsed and checked once at start-up. */
export type Config = Readonly<ReturnType<typeof parseConfig>>;
/** The game-day faults (src/http/faults.ts), also shown on /metrics. */
export type Faults = Pick<Config, 'faultErrorRatio' | 'faultDelayMs'>;

export interface AddressRange {
  readonly address: string;
  readonly prefix: number;
  readonly family: 'ipv4' | 'ipv6';
}

/** Longer than callers wait, yet a delay meant in milliseconds ("300") is refused. */
const MAX_FAULT_DELAY_S = 120;

/** What the chart's pod holds with each connection at its worst (docs/reliability.md, "Memory budget"). */
export const DEFAULT_MAX_CONNECTIONS = 2048;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export class ConfigError extends Error {
  constructor(variable: string, value: string, allowed: string) {
    super(`invalid configuration: ${variable}=${JSON.stringify(value)}: ${allowed}`);
  }
}

export type Env = Readonly<Record<string, string | undefined>>;

export function parseConfig(env: Env) {
  const port = readInteger(env, 'PORT', 8080, 0, 65535);
  const metricsPort = readInteger(env, 'METRICS_PORT', 9464, 0, 65535);
  // Unset: no probe listener (a process outside Kubernetes has no kubelet to starve).
  const probePort = readVariable(env, 'PROBE_PORT') === undefined ? undefined : readInteger(env, 'PROBE_PORT', 0, 0, 65535);
  // Two listeners on one port would make the second fail at bind time with a less helpful error.
  if (port !== 0 && port === metricsPort) {
    throw new ConfigError('METRICS_PORT', String(metricsPort), 'must differ from PORT');
  }
  if (probePort !== undefined && probePort !== 0 && (probePort === port || probePort === metricsPort)) {
    throw new ConfigError('PROBE_PORT', String(probePort), 'must differ from PORT and METRICS_PORT');
  }
  return {
    port,
    host: readHost(env),
    metricsPort,
    probePort,
    logLevel: readLogLevel(env),
    bodyLimit: readByteSize(env, 'BODY_LIMIT', '1mb'),
    maxConnections: readInteger(env, 'MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 1, 100_000),
    shutdownDelayMs: readDecimal(env, 'SHUTDOWN_DELAY', 0, 3600) * 1000,
    shutdownTimeoutMs: readDecimal(env, 'SHUTDOWN_TIMEOUT', 25, 3600) * 1000,
    buildRevision: readVariable(env, 'BUILD_REVISION') ?? 'unknown',
    configRevision: readVariable(env, 'CONFIG_REVISION') ?? 'unknown',
    traceQueryParams: readQueryParams(env, 'TRACE_QUERY_PARAMS'),
    ...readTrust(env),
    faultErrorRatio: readDecimal(env, 'FAULT_ERROR_RATIO', 0, 1, 'a ratio from 0 to 1 (e.g. 0.05 for one request in twenty)'),
    faultDelayMs: readDecimal(env, 'FAULT_DELAY', 0, MAX_FAULT_DELAY_S) * 1000,
  };
}

/** Empty means "use the default", as most twelve-factor services treat it. Every variable goes through here. */
export function readVariable(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function readInteger(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = readVariable(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(name, value, `expected a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

/** Seconds unless `allowed` says otherwise. */
function readDecimal(env: Env, name: string, fallback: number, max: number, allowed = `a number of seconds from 0 to ${max} (e.g. 5 or 0.5)`): number {
  const value = readVariable(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+(\.\d+)?$/.test(value) || Number(value) > max) throw new ConfigError(name, value, `expected ${allowed}`);
  return Number(value);
}

function readHost(env: Env): string {
  const value = readVariable(env, 'HOST');
  if (value === undefined) return '0.0.0.0';
  // A host name or an IPv4/IPv6 literal; anything with spaces, slashes or a scheme is a mistake.
  if (!/^[A-Za-z0-9.:-]+$/.test(value)) {
    throw new ConfigError('HOST', value, 'expected an IP address or host name to listen on, e.g. 0.0.0.0 or ::');
  }
  return value;
}

function readLogLevel(env: Env): LogLevel {
  const value = readVariable(env, 'LOG_LEVEL');
  if (value === undefined) return 'info';
  const level = value.toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError('LOG_LEVEL', value, `expected one of ${LOG_LEVELS.join(', ')}`);
  }
  return level as LogLevel;
}

function readByteSize(env: Env, name: string, fallback: string): number {
  const value = readVariable(env, name) ?? fallback;
  const allowed = 'expected a positive whole number of bytes, or a size with a unit: 512kb, 1mb, 1.5mb';
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(value);
  if (match === null) throw new ConfigError(name, value, allowed);
  // bytes.parse floors fractions ("1.5" would become 1 byte): the size must be whole as written.
  // Stryker disable next-line StringLiteral: equivalent, bytes.parse reads "1" as "1b" (one byte).
  const size = Number(match[1]) * (bytes.parse(`1${match[2] ?? 'b'}`) ?? Number.NaN);
  if (!Number.isSafeInteger(size) || size < 1) throw new ConfigError(name, value, allowed);
  return size;
}

function readList(env: Env, name: string): string[] {
  return (readVariable(env, name)?.split(',') ?? []).map((entry) => entry.trim());
}

function readQueryParams(env: Env, name: string): readonly string[] {
  const names = readList(env, name);
  if (names.some((param) => !/^[A-Za-z0-9._~[\]-]+$/.test(param))) {
    throw new ConfigError(
      name,
      String(readVariable(env, name)),
      'expected query parameter names separated by commas (letters, digits and . _ ~ - [ ]), e.g. page,sort',
    );
  }
  return names;
}

function readAddressRanges(env: Env, name: string): readonly AddressRange[] {
  const ranges = readList(env, name).map((entry) => {
    // Stryker disable next-line StringLiteral: split always gives a first element
    const [address = '', prefix, ...rest] = entry.split('/');
    const version = isIP(address);
    const bits = version === 6 ? 128 : 32;
    if (version === 0 || rest.length > 0 || (prefix !== undefined && (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits))) {
      throw new ConfigError(name, String(readVariable(env, name)), 'expected IP addresses or CIDR ranges separated by commas, e.g. 10.0.0.0/8,fd00::/8');
    }
    return { address, prefix: prefix === undefined ? bits : Number(prefix), family: version === 6 ? 'ipv6' : 'ipv4' } as const;
  });
  if (ranges.some(trustsEveryone)) {
    throw new ConfigError(name, String(readVariable(env, name)), "together these ranges trust every client: name the peers' own ranges, e.g. 10.0.0.0/8");
  }
  return ranges;
}

/** Where proxies, sidecars and pods live: private, loopback, link-local, shared (CGNAT) and unique-local ranges. */
const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '127.0.0.0/8', '169.254.0.0/16', '100.64.0.0/10', 'fc00::/7', 'fe80::/10', '::1/128'];

/** One list per trust: a proxy that sets X-Forwarded-For may pass a client's traceparent or queue header through untouched. */
function readTrust(env: Env) {
  const lists = {
    TRUSTED_PROXIES: readAddressRanges(env, 'TRUSTED_PROXIES'),
    TRACE_CONTEXT_FROM: readAddressRanges(env, 'TRACE_CONTEXT_FROM'),
    QUEUE_TIME_FROM: readAddressRanges(env, 'QUEUE_TIME_FROM'),
  };
  return {
    trustedProxies: lists.TRUSTED_PROXIES,
    traceContextFrom: lists.TRACE_CONTEXT_FROM,
    queueTime: readQueueTime(env, lists.QUEUE_TIME_FROM),
    trustWarnings: publicRangesIn(lists),
  };
}

/** A public range is allowed (a CDN's), but said at start: anyone there is believed. */
function publicRangesIn(lists: Readonly<Record<string, readonly AddressRange[]>>): string[] {
  const privateRanges = PRIVATE_RANGES.map((range) => {
    // Stryker disable next-line StringLiteral: split always gives a first element
    const [address = '', prefix] = range.split('/');
    return listOf({ address, prefix: Number(prefix), family: isIP(address) === 6 ? 'ipv6' : 'ipv4' });
  });
  return Object.entries(lists).flatMap(([name, ranges]) =>
    ranges
      .filter((range) => !privateRanges.some((outer) => holds(outer, range)))
      .map(({ address, prefix }) => `${name} names a public range, ${address}/${prefix}: every host there is believed`),
  );
}

function readQueueTime(env: Env, from: readonly AddressRange[]): { header: string; from: readonly AddressRange[] } | undefined {
  const header = readVariable(env, 'QUEUE_TIME_HEADER');
  if (header === undefined) return undefined;
  if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(header)) throw new ConfigError('QUEUE_TIME_HEADER', header, 'expected a header name, e.g. X-Request-Start');
  if (from.length === 0) throw new ConfigError('QUEUE_TIME_HEADER', header, 'needs QUEUE_TIME_FROM, the ranges of the proxies that set it');
  return { header: header.toLowerCase(), from };
}

/** A range's BlockList, which matches an IPv4 client also against IPv6 ranges, through its IPv4-mapped address. */
function listOf(range: AddressRange): { range: AddressRange; list: BlockList } {
  const list = new BlockList();
  list.addSubnet(range.address, range.prefix, range.family);
  return { range, list };
}

/** A range's prefix in IPv6's space, where IPv4's addresses are the last 32 bits (IPv4-mapped). */
const prefixIn6 = ({ prefix, family }: AddressRange): number => (family === 'ipv4' ? prefix + 96 : prefix);

/** CIDR ranges nest or are apart: `outer` holds `range` when it holds its first address with a prefix no longer. */
function holds(outer: { range: AddressRange; list: BlockList }, range: AddressRange): boolean {
  return outer.list.check(range.address, range.family) && prefixIn6(outer.range) <= prefixIn6(range);
}

/** A catch-all (0.0.0.0/0, ::/0, or an IPv6 range holding every IPv4-mapped address) holds both ends of IPv4's space. */
function trustsEveryone(range: AddressRange): boolean {
  const { list } = listOf(range);
  return list.check('0.0.0.0', 'ipv4') && list.check('255.255.255.255', 'ipv4');
}
