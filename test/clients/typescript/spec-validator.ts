import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { Middleware } from 'openapi-fetch';
import { parse } from 'yaml';

interface OpenApiDoc {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>;
  components: { schemas: Record<string, unknown> };
}

// ajv-formats is CommonJS with a default export; under NodeNext the callable sits on .default.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

/**
 * Checks every response a client receives against openapi.yaml: the status must be declared for that
 * operation, the content type must be the declared one, and the body must match the declared schema,
 * with no property the schema does not name. Any difference fails the call, so a test that drives the
 * API through this middleware fails whenever the server and the document disagree.
 */
export class SpecValidator {
  readonly doc: OpenApiDoc;
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(openApiPath: string) {
    this.doc = parse(readFileSync(openApiPath, 'utf8')) as OpenApiDoc;
    addFormats(this.ajv);
    const defs = JSON.stringify(closeObjects(this.doc.components.schemas)).split('"#/components/schemas/').join('"components.json#/$defs/');
    this.ajv.addSchema({ $id: 'components.json', $defs: JSON.parse(defs) as object });
  }

  /** A validator for a component schema by name, e.g. `Problem`. */
  component(name: string): ValidateFunction {
    return this.compile(`component:${name}`, { $ref: `components.json#/$defs/${name}` });
  }

  middleware(): Middleware {
    return {
      onResponse: async ({ request, response, schemaPath }) => {
        const method = request.method.toLowerCase();
        const operation = this.doc.paths[schemaPath]?.[method];
        if (!operation) throw new Error(`${method.toUpperCase()} ${schemaPath} is not in openapi.yaml`);
        const declared = operation.responses[String(response.status)] ?? operation.responses.default;
        if (!declared) {
          throw new Error(`${method.toUpperCase()} ${schemaPath} answered ${response.status}, which openapi.yaml does not declare`);
        }
        const contentType = (response.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
        const media = declared.content?.[contentType];
        if (!media) {
          throw new Error(
            `${method.toUpperCase()} ${schemaPath} ${response.status} came as "${contentType}"; openapi.yaml declares ` +
              JSON.stringify(Object.keys(declared.content ?? {})),
          );
        }
        const validate = this.compile(`${method} ${schemaPath} ${response.status} ${contentType}`, media.schema);
        const body: unknown = await response.clone().json();
        if (!validate(body)) {
          throw new Error(
            `${method.toUpperCase()} ${schemaPath} ${response.status} body does not match openapi.yaml: ` +
              `${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`,
          );
        }
        return response;
      },
    };
  }

  private compile(cacheKey: string, schema: unknown): ValidateFunction {
    let validate = this.cache.get(cacheKey);
    if (!validate) {
      const text = JSON.stringify(closeObjects(schema)).split('"#/components/schemas/').join('"components.json#/$defs/');
      validate = this.ajv.compile(JSON.parse(text) as object);
      this.cache.set(cacheKey, validate);
    }
    return validate;
  }
}

/** Adds `additionalProperties: false` to every object schema that lists properties and says nothing else. */
function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'examples' ? v : closeObjects(v);
  if ('properties' in out && !('additionalProperties' in out)) out.additionalProperties = false;
  return out;
}
