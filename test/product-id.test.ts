// Runs: src in-process (test/support/in-process.ts): no build needed.

import { describe, expect, it } from 'vitest';
import { PRODUCT_ID_MAX as MAX_ID, PRODUCT_ID_MIN, randomProductId } from '../src/http/routes';
import { inProcessForSuite } from './support/in-process';

/** POSTs (fetch keeps its connections alive), `concurrency` at a time, and returns the ids answered. */
async function drawIds(baseUrl: string, count: number, concurrency = 8): Promise<number[]> {
  const ids: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next += 1;
        ids.push(((await (await fetch(`${baseUrl}/product`, { method: 'POST' })).json()) as { product_id: number }).product_id);
      }
    }),
  );
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

const service = inProcessForSuite();

describe('product ids', () => {
  it(`are integers in [${PRODUCT_ID_MIN}, ${MAX_ID}] over thousands of draws through HTTP, and uniform (chi-square, p = 0.001)`, async () => {
    const ids = await drawIds(service.baseUrl, 5000);
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
