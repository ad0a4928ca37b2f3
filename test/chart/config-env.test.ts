// Runs: parseConfig from src, and the real helm over the chart.
//
// The chart README's trust recipe, read by the service's own parser. That every variable config.ts
// reads reaches the chart is a code contract (test/code-contracts.test.ts, in npm test).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config';
import { deploymentWith } from './docker-pod';
import { readmeYamlBlock } from './docs';
import { mainContainer } from './helm';

describe('the configuration in the chart', () => {
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
