// Runs: src in-process (test/support/in-process.ts): no build needed.
//
// What an API consumer runs: a client typed by openapi-typescript from openapi.yaml
// (test/support/openapi-types.d.ts, `npm run api:types`) and openapi-fetch, against the service.
// The type assertions are checked by `npm run typecheck`: a document whose types do not describe
// the answers fails there, the answers themselves fail here.
import createClient from 'openapi-fetch';
import { beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { inProcessForSuite } from './support/in-process';
import type { paths } from './support/openapi-types';
import { PRODUCT_ID_MAX } from '../src/http/routes';

const service = inProcessForSuite({ bodyLimit: 64 });
let client: ReturnType<typeof createClient<paths>>;
beforeAll(() => {
  client = createClient<paths>({ baseUrl: service.baseUrl });
});

describe('a client generated from openapi.yaml', () => {
  it('creates a product id, sending any body', async () => {
    const { data, error, response } = await client.POST('/product', { body: { name: 'chair' } });
    expectTypeOf(data).toEqualTypeOf<{ product_id: number } | undefined>();
    expect(error).toBeUndefined();
    expect(response.status).toBe(201);
    expect(data?.product_id).toBeGreaterThanOrEqual(1);
    expect(data?.product_id).toBeLessThanOrEqual(PRODUCT_ID_MAX);
  });

  it('reads a problem as the typed error', async () => {
    const { data, error, response } = await client.POST('/product', { body: 'x'.repeat(65), bodySerializer: (body) => String(body) });
    expectTypeOf(error).toEqualTypeOf<{ type: 'about:blank'; title: string; status: number; detail?: string; trace_id: string } | undefined>();
    expect(data).toBeUndefined();
    expect(response.status).toBe(413);
    expect(error).toEqual({
      type: 'about:blank',
      title: 'Payload Too Large',
      status: 413,
      detail: 'The request body is larger than the limit of 64 bytes.',
      trace_id: expect.stringMatching(/^[0-9a-f]{32}$/) as unknown,
    });
    expect(response.headers.get('traceresponse')).toContain(`-${error?.trace_id ?? 'none'}-`);
  });

  it('asks for health, as text', async () => {
    const { data, response } = await client.GET('/health', { parseAs: 'text' });
    expect(response.status).toBe(200);
    expect(data).toBe('ok');
  });

  it('asks for health with HEAD: no body', async () => {
    const { data, response } = await client.HEAD('/health');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(data).toBeUndefined();
  });

  it('asks which methods a path serves', async () => {
    const { response } = await client.OPTIONS('/product');
    expect(response.status).toBe(200);
    expect(response.headers.get('allow')).toBe('POST');
  });
});
