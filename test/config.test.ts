import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config';
import { runServiceToExit, startService } from './support/service-process';

describe('parseConfig', () => {
  it('has the documented defaults', () => {
    expect(parseConfig({})).toEqual({
      port: 8080,
      host: '0.0.0.0',
      metricsPort: 9464,
      logLevel: 'info',
      bodyLimit: 1024 * 1024,
      shutdownDelayMs: 0,
      shutdownTimeoutMs: 25_000,
      faultErrorRatio: 0,
      faultDelayMs: 0,
    });
  });

  it('reads every variable', () => {
    expect(
      parseConfig({
        PORT: '3000',
        HOST: '::',
        METRICS_PORT: '9100',
        LOG_LEVEL: 'DEBUG',
        BODY_LIMIT: '512kb',
        SHUTDOWN_DELAY: '5',
        SHUTDOWN_TIMEOUT: '2.5',
        FAULT_ERROR_RATIO: '0.25',
        FAULT_DELAY: '1.5',
      }),
    ).toEqual({
      port: 3000,
      host: '::',
      metricsPort: 9100,
      logLevel: 'debug',
      bodyLimit: 512 * 1024,
      shutdownDelayMs: 5000,
      shutdownTimeoutMs: 2500,
      faultErrorRatio: 0.25,
      faultDelayMs: 1500,
    });
  });

  it('treats an empty value as unset', () => {
    expect(parseConfig({ PORT: '', LOG_LEVEL: ' ' }).port).toBe(8080);
  });

  it.each([
    ['BODY_LIMIT', '2048', 2048],
    ['BODY_LIMIT', '1MB', 1024 * 1024],
    ['BODY_LIMIT', '10mb', 10 * 1024 * 1024],
    ['BODY_LIMIT', '1.5mb', 1.5 * 1024 * 1024],
    ['LOG_LEVEL', 'silent', 'silent'],
  ])('accepts %s=%s', (name, value, expected) => {
    const config = parseConfig({ [name]: value }) as unknown as Record<string, unknown>;
    expect(config[name === 'BODY_LIMIT' ? 'bodyLimit' : 'logLevel']).toBe(expected);
  });

  it.each([
    ['PORT', 'abc', /PORT="abc": expected a whole number from 0 to 65535/],
    ['PORT', '70000', /PORT="70000"/],
    ['PORT', '-1', /PORT="-1"/],
    ['PORT', '80.5', /PORT="80.5"/],
    ['METRICS_PORT', 'x', /METRICS_PORT="x"/],
    ['BODY_LIMIT', '-1', /BODY_LIMIT="-1": expected a positive whole number of bytes, or a size with a unit/],
    ['BODY_LIMIT', '1.5', /BODY_LIMIT="1.5"/],
    ['BODY_LIMIT', '0.3kb', /BODY_LIMIT="0.3kb"/],
    ['BODY_LIMIT', '0', /BODY_LIMIT="0"/],
    ['BODY_LIMIT', 'lots', /BODY_LIMIT="lots"/],
    ['BODY_LIMIT', '1tb-ish', /BODY_LIMIT="1tb-ish"/],
    ['LOG_LEVEL', 'verbose', /LOG_LEVEL="verbose": expected one of fatal, error, warn, info, debug, trace, silent/],
    ['SHUTDOWN_DELAY', '-5', /SHUTDOWN_DELAY="-5": expected a number of seconds/],
    ['SHUTDOWN_TIMEOUT', '5s', /SHUTDOWN_TIMEOUT="5s"/],
    ['HOST', 'http://0.0.0.0', /HOST="http:\/\/0.0.0.0"/],
    ['FAULT_ERROR_RATIO', '50%', /FAULT_ERROR_RATIO="50%": expected a ratio from 0 to 1/],
    ['FAULT_ERROR_RATIO', '1.5', /FAULT_ERROR_RATIO="1.5"/],
    ['FAULT_ERROR_RATIO', '-0.1', /FAULT_ERROR_RATIO="-0.1"/],
    ['FAULT_ERROR_RATIO', '.5', /FAULT_ERROR_RATIO=".5"/],
    ['FAULT_DELAY', '300ms', /FAULT_DELAY="300ms": expected a number of seconds from 0 to 120/],
    ['FAULT_DELAY', '300', /FAULT_DELAY="300"/],
    ['FAULT_DELAY', '-1', /FAULT_DELAY="-1"/],
  ])('rejects %s=%s naming the variable, the value and what is allowed', (name, value, message) => {
    expect(() => parseConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => parseConfig({ [name]: value })).toThrow(message);
  });

  it('rejects METRICS_PORT equal to PORT', () => {
    expect(() => parseConfig({ PORT: '9000', METRICS_PORT: '9000' })).toThrow(/METRICS_PORT="9000": must differ from PORT/);
  });
});

describe('the entry point with a bad variable', () => {
  it.each([
    ['PORT', 'abc'],
    ['BODY_LIMIT', '-1'],
    ['LOG_LEVEL', 'loud'],
    ['SHUTDOWN_TIMEOUT', 'never'],
    ['FAULT_ERROR_RATIO', '2'],
    ['FAULT_DELAY', '1s'],
  ])('%s=%s exits 1 before listening, with one line naming it', async (name, value) => {
    const result = await runServiceToExit({ [name]: value });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${name}="${value}"`);
    expect(lines[0]).toMatch(/^product-service: invalid configuration: /);
    expect(result.stderr).not.toMatch(/at .*\.js/);
    // Nothing was logged as listening.
    expect(result.stdout).not.toContain('listening');
  });

  it('a port already in use exits 1 with a fatal log line instead of a stack trace on stderr', async () => {
    const first = await startService();
    try {
      const result = await runServiceToExit({ PORT: String(first.port) });
      expect(result.code).toBe(1);
      const fatal = JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
      expect(fatal).toMatchObject({ level: 'fatal', msg: 'cannot listen' });
      expect(JSON.stringify(fatal)).toContain('EADDRINUSE');
    } finally {
      await first.stop();
    }
  });
});
