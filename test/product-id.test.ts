// Runs: src's id generator alone. That each answer carries an id in range is test/api.test.ts's.

import { describe, expect, it } from 'vitest';
import { PRODUCT_ID_MAX as MAX_ID, PRODUCT_ID_MIN as MIN_ID, randomProductId } from '../src/http/routes';

/** Pearson's chi-square statistic of `values` over `bins` equal-width bins of [MIN_ID, MAX_ID]. */
function chiSquare(values: number[], bins: number): number {
  const counts = new Array<number>(bins).fill(0);
  for (const value of values) {
    const bin = Math.floor(((value - MIN_ID) / MAX_ID) * bins);
    counts[bin] = (counts[bin] ?? 0) + 1;
  }
  const expected = values.length / bins;
  return counts.reduce((sum, observed) => sum + (observed - expected) ** 2 / expected, 0);
}

describe('product ids', () => {
  it(`a million draws never leave [${MIN_ID}, ${MAX_ID}], come within 0.01% of both ends and are uniform over 100 bins (chi-square, p = 0.001)`, () => {
    const ids = Array.from({ length: 1_000_000 }, randomProductId);
    let min = Infinity;
    let max = -Infinity;
    for (const id of ids) {
      if (id < min) min = id;
      if (id > max) max = id;
    }
    expect(min).toBeGreaterThanOrEqual(MIN_ID);
    expect(max).toBeLessThanOrEqual(MAX_ID);
    expect(min).toBeLessThan(MAX_ID * 0.0001);
    expect(max).toBeGreaterThan(MAX_ID * 0.9999);
    // 148.23: the chi-square distribution's upper-tail critical value at p = 0.001 for 99 degrees of freedom.
    expect(chiSquare(ids, 100)).toBeLessThan(148.23);
  });
});
