import Fastify from 'fastify';
import { validatorCompiler as libraryCompiler } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { validatorCompiler } from '../../src/http/validator.js';

const Headers = z.object({
  'x-id': z
    .string()
    .regex(/^[a-z]{1,8}$/, 'must be 1 to 8 letters')
    .optional(),
});
const Shouted = z.object({ 'x-id': z.string().transform((s) => s.toUpperCase()) });

/** One route with a headers schema, answering what its handler sees of the headers. */
function appWith(compiler: typeof validatorCompiler, headers: z.ZodType) {
  const app = Fastify();
  app.setValidatorCompiler(compiler);
  app.get('/x', { schema: { headers } }, async (request) => ({
    id: request.headers['x-id'] ?? null,
    other: request.headers['x-other'] ?? null,
    // Left in place: the handler reads Node's own header object, not a copy made on each read.
    inPlace: request.headers === request.raw.headers,
  }));
  return app;
}

describe('request validation', () => {
  it('leaves valid headers in place, with every header the caller sent', async () => {
    const app = appWith(validatorCompiler, Headers);
    for (const headers of [{ 'x-id': 'abc', 'x-other': 'o' }, { 'x-other': 'o' }]) {
      const res = await app.inject({ method: 'GET', url: '/x', headers });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ id: headers['x-id'] ?? null, other: 'o', inPlace: true });
    }
    await app.close();
  });

  it('hands on the value of a header schema that changes it', async () => {
    const app = appWith(validatorCompiler, Shouted);
    const res = await app.inject({ method: 'GET', url: '/x', headers: { 'x-id': 'abc', 'x-other': 'o' } });
    expect(res.json()).toEqual({ id: 'ABC', other: 'o', inPlace: false });
    await app.close();
  });

  it('refuses invalid headers with the same answer as fastify-type-provider-zod', async () => {
    const ours = appWith(validatorCompiler, Headers);
    const library = appWith(libraryCompiler, Headers);
    for (const headers of [{ 'x-id': 'ABC' }, { 'x-id': 'much-too-long' }]) {
      const [a, b] = await Promise.all([ours, library].map((app) => app.inject({ method: 'GET', url: '/x', headers })));
      expect(a!.statusCode).toBe(400);
      expect(a!.body).toBe(b!.body);
    }
    await Promise.all([ours.close(), library.close()]);
  });
});
