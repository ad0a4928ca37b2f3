// Runs: src in-process (test/support/in-process.ts): no build needed.
//
// The facts that live in more than one place, held to the code: what the router serves (HEAD and
// OPTIONS included, as @koa/router adds them) against openapi.yaml's operations, both ways; and the
// product id range (routes.ts's PRODUCT_ID_MIN/MAX) against every copy in the repository.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { METHODS, request } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config';
import { createRouter, PRODUCT_ID_MAX, PRODUCT_ID_MIN } from '../src/http/routes';
import { inProcessForSuite } from './support/in-process';
import { loadApiDocument, OPENAPI_METHODS } from './support/openapi';
import { ROOT } from './support/paths';

const service = inProcessForSuite();

function status(method: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(`${service.baseUrl}${path}`, { method, agent: false }, (response) => {
      response.resume().on('end', () => resolve(response.statusCode ?? 0));
    })
      .on('error', reject)
      .end();
  });
}

describe('openapi.yaml and the router', () => {
  it('document exactly the operations the router serves, HEAD and OPTIONS included', async () => {
    const paths = [...new Set(createRouter({ config: parseConfig({}), metrics: service.metrics }).stack.map((layer) => layer.path))];
    expect(paths.length).toBeGreaterThan(0);
    // Every method Node's parser accepts, on a real socket: what is not 404 or 405 is served.
    // CONNECT never reaches the router (server.ts refuses it).
    const served: string[] = [];
    for (const path of paths) {
      for (const method of METHODS.filter((m) => m !== 'CONNECT')) {
        const answer = await status(method, String(path));
        if (answer !== 404 && answer !== 405) served.push(`${method} ${String(path)}`);
      }
    }
    const { document } = await loadApiDocument();
    const documented = Object.entries(document.paths).flatMap(([path, item]) =>
      OPENAPI_METHODS.filter((method) => item[method] !== undefined).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(served.sort(), 'served by the router (left) against openapi.yaml (right)').toEqual(documented.sort());
  });
});

function repositoryTextFiles(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter(
      (file) => file !== '' && file !== 'package-lock.json' && !file.startsWith('bench/results/') && /\.(ts|mts|mjs|cjs|js|ya?ml|md|json|sh)$/.test(file),
    );
}

describe('the product id range', () => {
  it('is defined once, in routes.ts, and every copy says the same (openapi.yaml, docs, tests, chart, bench)', async () => {
    const { document } = await loadApiDocument();
    const created = Object.values(document.paths['/product']?.post?.responses['201']?.content ?? {})[0]?.schema as
      { properties: { product_id: { minimum: number; maximum: number } } } | undefined;
    expect(created?.properties.product_id).toMatchObject({ minimum: PRODUCT_ID_MIN, maximum: PRODUCT_ID_MAX });
    // Any number written near the int32 limit, however grouped, is the range's upper bound: inclusive
    // (PRODUCT_ID_MAX, also the count of ids) or exclusive (PRODUCT_ID_MAX + 1, randomInt's bound).
    // A range written as [a, b] starts at PRODUCT_ID_MIN.
    const drifted: string[] = [];
    for (const file of repositoryTextFiles()) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const match of text.matchAll(/\b2[,_]?14\d[,_]?\d{3}[,_]?\d{3}\b/g)) {
        const value = Number(match[0].replace(/[,_]/g, ''));
        if (value !== PRODUCT_ID_MAX && value !== PRODUCT_ID_MAX + 1) drifted.push(`${file}: ${match[0]}`);
      }
      for (const match of text.matchAll(/\[(\d+), ?(2[\d,_]{9,12})\]/g)) {
        if (Number(match[1]) !== PRODUCT_ID_MIN || Number(match[2]?.replace(/[,_]/g, '')) !== PRODUCT_ID_MAX) drifted.push(`${file}: ${match[0]}`);
      }
    }
    expect(drifted, `copies of the id range that differ from [${PRODUCT_ID_MIN}, ${PRODUCT_ID_MAX}]`).toEqual([]);
  });
});
