// Runs: src in-process (test/support/in-process.ts): no build needed.
//
// The service holds to openapi.yaml: every operation the document lists is asked once with no
// body (so a new route needs no request here), the requests below provoke the other answers, and
// each answer's status, headers, content type and body must be what the document says.
import { STATUS_CODES } from 'node:http';
import Ajv2020 from 'ajv/dist/2020';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInProcess, type InProcessService } from './support/in-process';
import { loadApiDocument, OPENAPI_METHODS, type ApiDocument, type Response } from './support/openapi';
import { parseResponse, rawExchange, type ParsedResponse } from './support/raw-http';

const ajv = new Ajv2020({ strict: true, allErrors: true });
let document: ApiDocument;
/** The service with production's limits and timeouts. */
let service: InProcessService;
/** The same service with timeouts short enough to see a 408; only the 408 row asks it, so a loaded machine cannot turn another answer into a 408. */
let impatient: InProcessService;
/** The same service, whose id source fails: the 500 answer. */
let failing: InProcessService;
/** `operation status` (or the component's name) of every answer checked so far. */
const answered = new Set<string>();

beforeAll(async () => {
  document = (await loadApiDocument()).document;
  service = await startInProcess();
  impatient = await startInProcess({}, { timeouts: { keepAliveTimeout: 5000, headersTimeout: 300, requestTimeout: 600, connectionsCheckingInterval: 100 } });
  failing = await startInProcess({
    issueProductId: () => {
      throw new Error('the id source failed');
    },
  });
});
afterAll(async () => {
  await Promise.all([service.close(), impatient.close(), failing.close()]);
});

/** What the document says `method` on `path` may answer, and under which name (undefined path: a CONNECT, no path at all). */
function documented(method: string, path: string | undefined): { name: string; responses: Record<string, Response | undefined> } {
  const { NotFound, MethodNotAllowed } = document.components.responses;
  const item = path === undefined ? undefined : document.paths[path];
  if (path !== undefined && item === undefined) return { name: 'NotFound', responses: { '404': NotFound } };
  const operation = item?.[method.toLowerCase()];
  if (operation === undefined) return { name: 'MethodNotAllowed', responses: { '405': MethodNotAllowed } };
  return { name: `${method} ${path ?? ''}`, responses: operation.responses };
}

function expectValid(schema: object, value: unknown, what: string): void {
  const validate = ajv.compile(schema);
  expect(validate(value), `${what}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`).toBe(true);
}

function expectDocumented(method: string, path: string | undefined, answer: ParsedResponse): void {
  const { name, responses } = documented(method, path);
  const response = responses[String(answer.status)];
  if (response === undefined)
    throw new Error(`${name} answered ${answer.status}, which openapi.yaml does not list (it lists ${Object.keys(responses).join(', ')})`);
  const where = `${name} ${answer.status}`;
  for (const [header, spec] of Object.entries(response.headers ?? {})) {
    const value = answer.headers[header.toLowerCase()];
    if (value === undefined) expect(spec.required, `${where}: the required header ${header} is missing`).not.toBe(true);
    else expectValid(spec.schema, value, `${where}: header ${header}`);
  }
  const content = response.content;
  if (content === undefined) {
    expect(answer.body, `${where}: openapi.yaml documents no body`).toBe('');
  } else {
    const contentType = answer.headers['content-type'];
    const mediaType = Object.keys(content).find((documentedType) => documentedType.toLowerCase() === contentType?.toLowerCase());
    expect(mediaType, `${where}: Content-Type ${contentType} is not one of ${Object.keys(content).join(', ')}`).toBeDefined();
    // A HEAD answer has GET's headers and no body.
    if (method !== 'HEAD' && mediaType !== undefined) {
      const body: unknown = mediaType.includes('json') ? JSON.parse(answer.body) : answer.body;
      expectValid(content[mediaType]?.schema ?? {}, body, `${where}: body`);
      // RFC 9457: the problem's status is the answer's, and with type about:blank its title is the status phrase.
      if (mediaType === 'application/problem+json') expect(body).toMatchObject({ status: answer.status, title: STATUS_CODES[answer.status] });
    }
  }
  answered.add(name === 'NotFound' || name === 'MethodNotAllowed' ? name : where);
}

async function exchange(target: InProcessService, payload: string): Promise<ParsedResponse> {
  return parseResponse(await rawExchange(target.port, payload));
}

/** Requests beyond each operation's plain one (the first test): [method, path, what is sent, the request]. */
const REQUESTS: Array<[method: string, path: string, what: string, payload: string]> = [
  [
    'POST',
    '/product',
    'a JSON body',
    'POST /product HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{"name":"chair"}',
  ],
  ['POST', '/product', 'a chunked body', 'POST /product HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n'],
  ['POST', '/product', 'a Content-Length over the limit', `POST /product HTTP/1.1\r\nHost: x\r\nContent-Length: ${1024 * 1024 + 1}\r\n\r\n`],
  ['GET', '/nowhere', 'an unknown path', 'GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
  ['POST', '/products', 'an unknown path', 'POST /products HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
  ['GET', '/metrics', 'the metrics path, on the API port', 'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
  ['GET', '/product', 'a method the path does not serve', 'GET /product HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
  ['HEAD', '/product', 'a method the path does not serve', 'HEAD /product HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
  ['DELETE', '/health', 'a method the path does not serve', 'DELETE /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
];

/** Requests any path refuses, by the status they get. */
const REFUSALS: Array<[status: number, provoke: (method: string, path: string) => string]> = [
  [400, (method, path) => `${method} ${path} HTTP/1.1\r\n\r\n`],
  [400, (method, path) => `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
  [400, (method, path) => `${method} ${path} HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
  [408, (method, path) => `${method} ${path} HTTP/1.1\r\nHost: x\r\n`],
  [417, (method, path) => `${method} ${path} HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\n\r\n`],
  [431, (method, path) => `${method} ${path} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`],
  [505, (method, path) => `${method} ${path} HTTP/2.0\r\nHost: x\r\n\r\n`],
];

const operations = (): Array<[string, string]> =>
  Object.entries(document.paths).flatMap(([path, item]) =>
    OPENAPI_METHODS.filter((method) => item[method] !== undefined).map((method) => [method.toUpperCase(), path] as [string, string]),
  );

describe('the service answers as openapi.yaml says', () => {
  it('every documented operation, asked with no body', async () => {
    await Promise.all(
      operations().map(async ([method, path]) =>
        expectDocumented(method, path, await exchange(service, `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)),
      ),
    );
  });

  it.each(REQUESTS)('%s %s with %s', async (method, path, _what, payload) => {
    expectDocumented(method, path, await exchange(service, payload));
  });

  it('CONNECT (no path: this is not a proxy)', async () => {
    expectDocumented('CONNECT', undefined, await exchange(service, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
  });

  it('an unexpected failure', async () => {
    expectDocumented('POST', '/product', await exchange(failing, 'POST /product HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  });

  it.each(REFUSALS.map(([status, provoke], index) => [status, index, provoke] as const))(
    'refusals before the application (%i, case %i), on every documented operation',
    async (status, _index, provoke) => {
      await Promise.all(
        operations().map(async ([method, path]) => {
          const answer = await exchange(status === 408 ? impatient : service, provoke(method, path));
          expect(answer.status, `${method} ${path}`).toBe(status);
          expectDocumented(method, path, answer);
        }),
      );
    },
  );

  it('every answer the document lists was provoked above', () => {
    const listed = [
      'NotFound',
      'MethodNotAllowed',
      ...Object.entries(document.paths).flatMap(([path, item]) =>
        OPENAPI_METHODS.flatMap((method) => Object.keys(item[method]?.responses ?? {}).map((status) => `${method.toUpperCase()} ${path} ${status}`)),
      ),
    ];
    expect(listed.filter((answer) => !answered.has(answer))).toEqual([]);
  });
});
