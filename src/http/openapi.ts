import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { accessFor } from './auth.js';
import { HEADERS } from './routes/responses.js';

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
 * The zod transform, plus each operation's security from the access table: public routes say
 * `security: []`, so the document's global bearer requirement does not apply to them.
 */
export const openApiTransform: Transform = (input) => {
  const out = jsonSchemaTransform(input);
  const methods = Array.isArray(input.route.method) ? input.route.method : [input.route.method];
  if (methods.every((m) => accessFor(m, input.route.url) === 'public')) {
    return { ...out, schema: { ...out.schema, security: [] } };
  }
  // Routes the request rate limit counts (all but public ones and those opting out, see rate-limit.ts)
  // send its X-RateLimit-* headers on success and on 429.
  const config = input.route.config as { rateLimit?: unknown } | undefined;
  const responses = out.schema.response as Record<string, { headers?: Record<string, unknown> }> | undefined;
  if (config?.rateLimit !== false && responses) {
    const rateHeaders = {
      'X-RateLimit-Limit': HEADERS['X-RateLimit-Limit'],
      'X-RateLimit-Remaining': HEADERS['X-RateLimit-Remaining'],
      'X-RateLimit-Reset': HEADERS['X-RateLimit-Reset'],
    };
    const withHeaders = Object.fromEntries(
      Object.entries(responses).map(([status, response]) => [
        status,
        /^2\d\d$|^429$/.test(status) ? { ...response, headers: { ...response.headers, ...rateHeaders } } : response,
      ]),
    );
    return { ...out, schema: { ...out.schema, response: withHeaders } };
  }
  return out;
};
