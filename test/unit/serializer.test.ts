import Fastify from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { directionalPart, serializerCompiler } from '../../src/http/serializer.js';
import { buildTestApp } from '../helpers/test-app.js';

/** Answers are checked against their zod schema with parse; schemas where that differs from encode are refused. */
function appWith(response: z.ZodType, body: unknown) {
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.get(
    '/x',
    { schema: { response: { 200: { description: 'x', content: { 'application/json': { schema: response } } } } } },
    async () => body,
  );
  return app;
}

describe('response serializer', () => {
  it('writes a body that matches its schema, leaving out what the schema does not name', async () => {
    const app = appWith(z.object({ a: z.string(), n: z.number().nullable() }), { a: 'x', n: null, secret: 's' });
    const res = await app.inject({ method: 'GET', url: '/x' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{"a":"x","n":null}');
    await app.close();
  });

  it('answers 500 instead of a body that does not match its schema', async () => {
    const app = appWith(z.object({ a: z.string(), n: z.int() }), { a: 'x', n: 1.5 });
    const res = await app.inject({ method: 'GET', url: '/x' });
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toContain('1.5');
    await app.close();
  });

  it('refuses at start-up a response schema whose parse and encode differ', async () => {
    for (const schema of [
      z.object({ a: z.string().default('x') }),
      z.object({ a: z.array(z.string().transform((s) => s.length)) }),
      z.object({ a: z.codec(z.string(), z.number(), { decode: Number, encode: String }) }),
    ]) {
      const app = appWith(schema, { a: 'x' });
      await expect(app.ready()).rejects.toThrow(/would need zod's encode/);
      await app.close().catch(() => undefined);
    }
  });

  it('finds the parts whose parse and encode differ, however deep; none in plain, nullable, union or recursive schemas', () => {
    expect(directionalPart(z.object({ a: z.union([z.string(), z.number().catch(0)]) }))).toBe('catch');
    expect(directionalPart(z.object({ a: z.record(z.string(), z.string().prefault('x')) }))).toBe('prefault');
    const tree: z.ZodType = z.lazy(() => z.object({ name: z.string(), kids: z.array(tree) }));
    expect(directionalPart(tree)).toBeNull();
    expect(
      directionalPart(z.object({ a: z.string().nullable().optional(), b: z.union([z.literal(true), z.int()]), c: z.iso.datetime() })),
    ).toBeNull();
  });

  it('every route of the app compiles with it (none has a directional response schema)', async () => {
    const test = await buildTestApp();
    expect(test.app.printRoutes().length).toBeGreaterThan(0);
    await test.close();
  });
});
