// Runs: no service: the README's table against the id range in src/http/routes.ts.
//
// product_id is random, not unique: the README's table of how soon ids repeat is computed here from
// the birthday problem, so the table can never drift from the id range the service draws from.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './support/paths';
import { PRODUCT_ID_MAX, PRODUCT_ID_MIN } from '../src/http/routes';

const ID_VALUES = PRODUCT_ID_MAX - PRODUCT_ID_MIN + 1;

/** The exact chance that `n` independent uniform draws from `values` values hold at least one repeat. */
function chanceOfRepeat(n: number, values = ID_VALUES): number {
  let logAllDistinct = 0;
  for (let i = 1; i < n; i += 1) logAllDistinct += Math.log1p(-i / values);
  return Math.abs(Math.expm1(logAllDistinct));
}

/** The fewest ids after which a repeat is at least as likely as not. */
function evenOdds(): number {
  let low = 1;
  let high = 1_000_000;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (chanceOfRepeat(middle) >= 0.5) high = middle;
    else low = middle + 1;
  }
  return low;
}

function percent(chance: number): string {
  if (chance > 0.9999) return '> 99.99 %';
  const digits = chance < 0.01 ? 3 : chance < 0.1 ? 2 : 1;
  return `${(chance * 100).toFixed(digits)} %`;
}

function repeatsTable(): string {
  const rows = [1_000, 10_000, evenOdds(), 100_000, 200_000, 1_000_000].map((n) => `| ${n.toLocaleString('en-US')} | ${percent(chanceOfRepeat(n))} |`);
  return ['| ids issued | chance that at least two are equal |', '|---|---|', ...rows].join('\n');
}

describe('the README on repeated ids', () => {
  it('holds the table of repeat chances computed from the birthday problem', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const between = /<!-- product-id-repeats:start -->\n([\s\S]*?)\n<!-- product-id-repeats:end -->/.exec(readme)?.[1];
    expect(between, 'README.md must hold the table between the product-id-repeats markers').toBe(repeatsTable());
  });

  it('computes known values of the birthday problem', () => {
    // 23 people, 365 days: the textbook just-over-even odds.
    expect(chanceOfRepeat(23, 365)).toBeCloseTo(0.5073, 4);
    expect(chanceOfRepeat(1)).toBe(0);
    expect(evenOdds()).toBe(54_563);
  });
});
