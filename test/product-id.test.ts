// Runs: src in-process (test/support/in-process.ts): no build needed.

import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRODUCT_ID_MAX as MAX_ID, randomProductId } from '../src/http/routes';
import { startInProcess, type InProcessService } from './support/in-process';

/** POSTs over keep-alive connections, `concurrency` at a time, and returns the ids answered. */
async function drawIds(port: number, count: number, concurrency = 8): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const ids: number[] = [];
  const one = (): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/product', agent }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve((JSON.parse(text) as { product_id: number }).product_id));
      });
      req.on('error', reject);
      req.end();
    });
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        ids.push(await one());
      }
    }),
  );
  agent.destroy();
  return ids;
}

/** Pearson's chi-square statistic of `values` over `bins` equal-width bins of [1, MAX_ID]. */
function chiSquare(values: number[], bins: number): number {
  const counts = new Array<number>(bins).fill(0);
  for (const value of values) {
    const bin = Math.floor(((value - 1) / MAX_ID) * bins);
    counts[bin] = (counts[bin] ?? 0) + 1;
  }
  const expected = values.length / bins;
  return counts.reduce((sum, observed) => sum + (observed - expected) ** 2 / expected, 0);
}

// Critical values of the chi-square distribution at p = 0.001 (upper tail).
const CHI_SQUARE_CRITICAL_P001 = { 19: 43.82, 99: 148.23 } as const;

let service: InProcessService;
beforeAll(async () => {
  service = await startInProcess();
});
afterAll(async () => {
  await service.close();
});

describe('product ids', () => {
  it('are integers in [1, 2147483646] over thousands of draws through HTTP, and uniform (chi-square, p = 0.001)', async () => {
    const ids = await drawIds(service.port, 5000);
    expect(ids).toHaveLength(5000);
    for (const id of ids) {
      expect(Number.isInteger(id)).toBe(true);
      expect(id).toBeGreaterThanOrEqual(1);
      expect(id).toBeLessThanOrEqual(MAX_ID);
    }
    expect(chiSquare(ids, 20)).toBeLessThan(CHI_SQUARE_CRITICAL_P001[19]);
  });

  it('from the generator itself: a million draws never leave the range and are uniform over 100 bins', () => {
    const ids = Array.from({ length: 1_000_000 }, randomProductId);
    let min = Infinity;
    let max = -Infinity;
    for (const id of ids) {
      if (id < min) min = id;
      if (id > max) max = id;
    }
    expect(min).toBeGreaterThanOrEqual(1);
    expect(max).toBeLessThanOrEqual(MAX_ID);
    // Both ends are reachable in principle; a million draws come within 0.01% of each.
    expect(min).toBeLessThan(MAX_ID * 0.0001);
    expect(max).toBeGreaterThan(MAX_ID * 0.9999);
    expect(chiSquare(ids, 100)).toBeLessThan(CHI_SQUARE_CRITICAL_P001[99]);
  });

  it('the chi-square check rejects a generator that is not uniform (the test can fail)', () => {
    // Half the draws piled into the lowest tenth of the range.
    const skewed = Array.from({ length: 5000 }, (_, i) => (i % 2 === 0 ? randomProductId() : 1 + Math.floor(Math.random() * (MAX_ID / 10))));
    expect(chiSquare(skewed, 20)).toBeGreaterThan(CHI_SQUARE_CRITICAL_P001[19]);
  });
});
