import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { HEADERS, type HeaderName, STATUS_HEADERS } from './routes/responses.js';

type TransformObject = typeof jsonSchemaTransformObject;
type Doc = Record<string, unknown> & { components?: { schemas?: Record<string, unknown> } };

/**
 * The zod provider emits every named schema twice (an `…Input` and an output variant) whether a route
 * uses it or not. Keep only the components the paths reference, and drop the `Input` suffix where the
 * plain name is free, so generated clients get one type per schema with the name the code gives it.
 */
export const openApiTransformObject: TransformObject = (input) => {
  const doc = jsonSchemaTransformObject(input) as Doc;
  const schemas = doc.components?.schemas;
  if (!schemas) return doc as ReturnType<TransformObject>;

  const refName = (name: string) => `"#/components/schemas/${name}"`;
  const withoutComponents = JSON.stringify({ ...doc, components: { ...doc.components, schemas: {} } });
  // Referenced from the paths, or (transitively) from a schema that is.
  const used = Object.keys(schemas).filter((name) => withoutComponents.includes(refName(name)));
  for (let i = 0; i < used.length; i++) {
    const text = JSON.stringify(schemas[used[i] ?? '']);
    for (const name of Object.keys(schemas)) if (!used.includes(name) && text.includes(refName(name))) used.push(name);
  }
  const renames = new Map<string, string>();
  for (const name of used) {
    const plain = name.endsWith('Input') ? name.slice(0, -'Input'.length) : name;
    renames.set(name, plain !== name && !used.includes(plain) ? plain : name);
  }
  const kept: Record<string, unknown> = {};
  for (const name of used) kept[renames.get(name) ?? name] = schemas[name];
  let text = JSON.stringify({ ...doc, components: { ...doc.components, schemas: kept } });
  for (const [from, to] of renames) if (from !== to) text = text.split(refName(from)).join(refName(to));
  return JSON.parse(text) as ReturnType<TransformObject>;
};

type Transform = typeof jsonSchemaTransform;

/**
 * The zod transform, plus each operation's security from the route's access rule: public routes say
 * `security: []`, so the document's global bearer requirement does not apply to them.
 */
export const openApiTransform: Transform = (input) => {
  const out = withCanonicalHeaderNames(jsonSchemaTransform(input));
  const isPublic = input.route.config?.access === 'public';
  // Each response's headers: those of its status, and on routes the request rate limit counts (all but
  // the public ones and those opting out, see rate-limit.ts) the limiter's, on every answer but a 401
  // (authentication runs first, and a refused caller is not counted).
  const counted = !isPublic && (input.route.config as { rateLimit?: unknown } | undefined)?.rateLimit !== false;
  const responses = (out.schema.response ?? {}) as Record<string, Record<string, unknown>>;
  const withHeaders = Object.fromEntries(
    Object.entries(responses).map(([status, response]) => {
      const names: HeaderName[] = [...(STATUS_HEADERS[status] ?? [])];
      if (counted && status !== '401') names.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset');
      if (names.length === 0) return [status, response];
      return [status, { ...response, headers: Object.fromEntries(names.map((name) => [name, HEADERS[name]])) }];
    }),
  );
  return { ...out, schema: { ...out.schema, response: withHeaders, ...(isPublic ? { security: [] } : {}) } };
};

const canonical = (name: string) => name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());

/**
 * Fastify validates headers under their lower-case names; the document names them as people write them
 * (`Idempotency-Key`), which is the same header: HTTP header names are case-insensitive.
 */
function withCanonicalHeaderNames(out: ReturnType<Transform>): ReturnType<Transform> {
  const headers = (out.schema as { headers?: { properties?: Record<string, unknown>; required?: string[] } }).headers;
  if (!headers?.properties) return out;
  const properties = Object.fromEntries(Object.entries(headers.properties).map(([name, schema]) => [canonical(name), schema]));
  const required = headers.required?.map(canonical);
  return { ...out, schema: { ...out.schema, headers: { ...headers, properties, ...(required ? { required } : {}) } } };
}
