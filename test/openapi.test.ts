// Runs: no service; openapi.yaml itself.
//
// The API's contract is a valid OpenAPI 3.1 document and its examples hold to its own schemas.
// Whether the service answers as it says: test/contract.test.ts.
import Ajv2020 from 'ajv/dist/2020';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadApiDocument, type ApiDocument } from './support/openapi';
import { VERSION } from './support/service-process';

let loaded: Awaited<ReturnType<typeof loadApiDocument>>;
beforeAll(async () => {
  loaded = await loadApiDocument();
});

/** Every [where, example, schema] pair of a media type in the document's responses. */
function examples(document: ApiDocument): Array<[string, unknown, object]> {
  const pairs: Array<[string, unknown, object]> = [];
  const responses = [
    ...Object.entries(document.components.responses),
    ...Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, operation]) =>
        Object.entries(operation.responses).map(([status, response]) => [`${method} ${path} ${status}`, response] as const),
      ),
    ),
  ];
  for (const [where, response] of responses) {
    for (const [mediaType, media] of Object.entries(response.content ?? {})) {
      if (media.example !== undefined && media.schema !== undefined) pairs.push([`${where} ${mediaType}`, media.example, media.schema]);
    }
  }
  return pairs;
}

describe('openapi.yaml', () => {
  it('is a valid OpenAPI 3.1 document, every $ref resolved', () => {
    expect(loaded.validation).toEqual({ valid: true });
    expect(loaded.version).toBe('3.1');
  });

  it("carries the package's version", () => {
    expect(loaded.document.info.version).toBe(VERSION);
  });

  it('has an example for every JSON answer, and each holds to its schema', () => {
    const pairs = examples(loaded.document);
    expect(pairs.length).toBeGreaterThanOrEqual(10);
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    for (const [where, example, schema] of pairs) {
      const validate = ajv.compile(schema);
      expect(validate(example), `${where}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });
});
