// Runs: src in-process (test/support/in-process.ts) and the TypeScript compiler over src: no build needed.
//
// The facts that live in both the code and openapi.yaml, held to the code: what the router serves
// (HEAD and OPTIONS included, as @koa/router adds them) against openapi.yaml's operations, both
// ways; and the product id range (routes.ts's PRODUCT_ID_MIN/MAX, which the tests import).
// And two of the three first tickets at their file counts: a metric (3 files) and the id range (2);
// the third, a config variable that reaches the chart (6), is test/config.test.ts's first test.
import { readdirSync, readFileSync } from 'node:fs';
import { METHODS } from 'node:http';
import { dirname, join } from 'node:path';
import request from 'supertest';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config';
import { createRouter, PRODUCT_ID_MAX, PRODUCT_ID_MIN } from '../src/http/routes';
import { inProcessForSuite } from './support/in-process';
import { loadApiDocument, OPENAPI_METHODS } from './support/openapi';
import { ROOT, SRC } from './support/paths';

const service = inProcessForSuite();

const status = async (method: string, path: string): Promise<number> => (await request(service.baseUrl)[method.toLowerCase() as 'get'](path)).status;

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

describe('the product id range', () => {
  // Changing it is two files: routes.ts and openapi.yaml, which this test holds to it.
  it("is routes.ts's PRODUCT_ID_MIN/MAX in openapi.yaml, the range users read", async () => {
    const { document } = await loadApiDocument();
    const created = Object.values(document.paths['/product']?.post?.responses['201']?.content ?? {})[0]?.schema as
      { properties: { product_id: { minimum: number; maximum: number } } } | undefined;
    expect(created?.properties.product_id).toMatchObject({ minimum: PRODUCT_ID_MIN, maximum: PRODUCT_ID_MAX });
  });
});

/** src/'s own imports: each module (path under src/, no extension) with the modules it imports, types included. */
function sourceImports(): Map<string, string[]> {
  const modules = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.ts'));
  return new Map(
    modules.map((file) => [
      file.replace(/\.ts$/, ''),
      [...readFileSync(join(SRC, file), 'utf8').matchAll(/(?:from|require\()\s*'(\.[^']+)'/g)].map((match) => join(dirname(file), match[1] ?? '')),
    ]),
  );
}

describe('the layers of src/', () => {
  it('observability/ imports nothing from http/, and no module imports itself through others', () => {
    const imports = sourceImports();
    expect([...imports.keys()]).toContain('observability/metrics');
    const upward = [...imports].flatMap(([file, targets]) =>
      file.startsWith('observability/') ? targets.filter((t) => t.startsWith('http/')).map((t) => `${file} → ${t}`) : [],
    );
    expect(upward, 'observability/ sits below http/').toEqual([]);
    const circles: string[] = [];
    const visit = (module: string, path: string[]): void => {
      if (path.includes(module)) {
        if (module === path[0]) circles.push([...path, module].join(' → '));
        return;
      }
      for (const next of imports.get(module) ?? []) visit(next, [...path, module]);
    };
    for (const module of imports.keys()) visit(module, []);
    expect(circles).toEqual([]);
  });
});

describe('a new metric', () => {
  // The first ticket done on the real sources, in memory: a counter defined in metrics.ts with the
  // method that counts it, and the one line in routes.ts that calls it, must type-check with no other
  // file changed (a layer that restated the metrics it may use, as a Pick, would fail here). Its
  // proof is the third file: a test that reads it off /metrics (test/metrics.test.ts).
  it('is three files: its definition in observability/metrics.ts, the line that counts it, and its test', () => {
    const metricsTs = join(SRC, 'observability/metrics.ts');
    const routesTs = join(SRC, 'http/routes.ts');
    const edit = (file: string, anchor: RegExp, replacement: string): string => {
      const text = readFileSync(file, 'utf8');
      expect(text, `the recipe's anchor ${String(anchor)} is gone from ${file}: update this recipe`).toMatch(anchor);
      return text.replace(anchor, replacement);
    };
    const edited = new Map([
      [
        metricsTs,
        edit(
          metricsTs,
          /^( {2}return \{\n)/m,
          "  const tickets = new Counter({ name: 'product_service_tickets_total', help: 'A first ticket.', registers: [registry] });\n$1    countTicket: (): void => tickets.inc(),\n",
        ),
      ],
      [routesTs, edit(routesTs, /^( *)(metrics\.countProductIdIssued\(\);)$/m, '$1$2\n$1metrics.countTicket();')],
    ]);
    expect(typeErrors(edited)).toEqual([]);
  });
});

/** The type errors of src/ (tsconfig.build.json) with some files' text replaced. */
function typeErrors(edited: ReadonlyMap<string, string>): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.build.json'),
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (config === undefined) throw new Error('tsconfig.build.json did not parse');
  const host = ts.createCompilerHost(config.options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (file, language, ...rest) => {
    const text = edited.get(file);
    return text === undefined ? read(file, language, ...rest) : ts.createSourceFile(file, text, language);
  };
  const program = ts.createProgram(config.fileNames, config.options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
}
