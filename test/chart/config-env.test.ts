// Runs: parseConfig from src, and the real helm over the chart.
//
// Every variable src/config.ts reads reaches operators: the chart's Deployment sets it (under one of
// the value sets), or the chart README names it, in backquotes, on a line that says how to set it
// (extraEnv). The variables are those parseConfig reads, recorded as it reads them: no list here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config';
import { deploymentWith } from './docker-pod';
import { readmeYamlBlock } from './docs';
import { chartDir, containerOf, envNames, mainContainer, valueSets, set } from './helm';

/** The variable names parseConfig reads from an empty environment (every default taken). */
function variablesConfigReads(): string[] {
  const read = new Set<string>();
  const recording = (_target: object, name: string | symbol) => {
    if (typeof name === 'string') read.add(name);
    return undefined;
  };
  parseConfig(new Proxy<Record<string, string | undefined>>({}, { get: recording }));
  return [...read];
}

/** The values whose variables the chart renders only when they are set (the value sets leave them unset). */
const OPTIONAL_VALUES = set(
  'traceQueryParams={page}',
  'trustedProxies={10.0.0.0/8}',
  'traceContextFrom={127.0.0.6/32}',
  'queueTimeHeader=X-Request-Start',
  'queueTimeFrom={10.0.0.0/8}',
  'faults.errorRatio=0',
  'faults.delaySeconds=0',
);

describe('the configuration in the chart', () => {
  it('sets every variable config.ts reads, or its README says how to set it', () => {
    const variables = variablesConfigReads();
    expect(variables).toContain('PORT');
    const rendered = new Set([...valueSets.map(({ args }) => args), OPTIONAL_VALUES].flatMap((args) => envNames(containerOf(args))));
    const readme = readFileSync(join(chartDir, 'README.md'), 'utf8').split('\n');
    const missing = variables.filter(
      (variable) => !rendered.has(variable) && !readme.some((line) => line.includes(`\`${variable}\``) && line.includes('extraEnv')),
    );
    expect(missing, 'set by no value set, and not named with extraEnv on a line of helm/product-service/README.md').toEqual([]);
  });

  it('the README\'s trust recipe ("Whom the service believes") gives the service one list per trust, as it parses them', () => {
    const container = mainContainer(deploymentWith(readmeYamlBlock('Whom the service believes') as object));
    const env = Object.fromEntries((container.env ?? []).map(({ name, value }) => [name, value]));
    const config = parseConfig(env);
    const ranges = (list: readonly { address: string; prefix: number }[]): string[] => list.map(({ address, prefix }) => `${address}/${prefix}`);
    expect(ranges(config.trustedProxies)).toEqual(['10.42.0.0/16']);
    expect(ranges(config.traceContextFrom)).toEqual(['127.0.0.6/32']);
    expect(config.queueTime?.header).toBe('x-request-start');
    expect(ranges(config.queueTime?.from ?? [])).toEqual(['10.42.0.0/16']);
  });
});
