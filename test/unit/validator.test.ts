import fc from 'fast-check';
import Fastify from 'fastify';
import { validatorCompiler as libraryCompiler } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { safeParse, type $ZodType } from 'zod/v4/core';
import { AcquireHeaders, AcquireRequest, LockKeyParams, MAX_DURATION_MS, NoQuery, ReleaseRequest } from '../../src/http/schemas/locks.js';
import { QUICK_ACCEPT, validatorCompiler } from '../../src/http/validator.js';

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

describe('quick acceptance of the lock pair requests', () => {
  const valueOf = fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9._\-:@]{0,260}$/),
    fc.stringMatching(/^[A-Za-z0-9_-]{14,130}$/),
    fc.stringMatching(/^[A-Za-z0-9_\-+/=.]{14,130}$/),
    fc.string(),
    fc.constantFrom(0, -0, 1, 1.5, 99, MAX_DURATION_MS, MAX_DURATION_MS + 1, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53),
    fc.integer({ min: -10, max: MAX_DURATION_MS + 10 }),
    fc.double(),
    fc.constantFrom(null, true, undefined, [], {}, ['x'], '30000'),
  );
  const fieldOf = fc.constantFrom(
    'key',
    'namespace',
    'ttlMs',
    'ownerToken',
    'holder',
    'waitMs',
    'lockDelayMs',
    'idempotency-key',
    'host',
    '__proto__x',
  );
  /** Parts of every shape, and many of the one shape a quick check looks for (`field` alone, or with one more). */
  const partOf = (field: string) =>
    fc.oneof(
      { weight: 4, arbitrary: fc.dictionary(fieldOf, valueOf, { maxKeys: 3 }) },
      { weight: 4, arbitrary: valueOf.map((value) => ({ [field]: value })) },
      { weight: 2, arbitrary: fc.tuple(valueOf, fieldOf, valueOf).map(([value, other, more]) => ({ [field]: value, [other]: more })) },
      { weight: 1, arbitrary: fc.oneof(valueOf, fc.array(valueOf)) },
    );
  const schemas: Array<[string, $ZodType, string]> = [
    ['params', LockKeyParams, 'key'],
    ['headers', AcquireHeaders, 'host'],
    ['acquire body', AcquireRequest, 'ttlMs'],
    ['query of the lease changes', NoQuery, 'namespace'],
    ['release body', ReleaseRequest, 'ownerToken'],
  ];

  it('accepts only what zod accepts, with the value zod would hand on', () => {
    expect([...QUICK_ACCEPT.keys()]).toEqual(schemas.map(([, schema]) => schema));
    for (const [part, schema, field] of schemas) {
      const quick = QUICK_ACCEPT.get(schema)!;
      let accepted = 0;
      fc.assert(
        fc.property(partOf(field), (data) => {
          if (!quick(data)) return;
          accepted++;
          const parsed = safeParse(schema, data);
          expect(parsed.success, `${part}: ${JSON.stringify(data)}`).toBe(true);
          const value = parsed.data as Record<string, unknown>;
          // Every field zod hands on is the one sent; only headers drop the fields they do not name.
          for (const name in value) expect(value[name]).toBe((data as Record<string, unknown>)[name]);
          if (part !== 'headers') expect(Object.keys(data as object)).toEqual(Object.keys(value));
        }),
        { numRuns: 5000 },
      );
      // The generated parts reach the quick path, not only zod.
      expect(accepted, part).toBeGreaterThan(20);
    }
  });

  it('takes the quick path for the requests of a lock pair, and leaves anything else to zod', () => {
    const quick = (schema: $ZodType, data: unknown) => QUICK_ACCEPT.get(schema)!(data);
    expect(quick(LockKeyParams, { key: 'bench-pair:42' })).toBe(true);
    expect(quick(AcquireHeaders, { host: 'x', authorization: 'Bearer k' })).toBe(true);
    expect(quick(AcquireRequest, { ttlMs: 30_000 })).toBe(true);
    expect(quick(NoQuery, {})).toBe(true);
    expect(quick(NoQuery, { namespace: 'other' })).toBe(false);
    expect(quick(ReleaseRequest, { ownerToken: 'q3HbVfYJm3cS1kQxv7x8XA' })).toBe(true);
    expect(quick(AcquireHeaders, { 'idempotency-key': 'k' })).toBe(false);
    expect(quick(AcquireRequest, { ttlMs: 30_000, holder: 'w' })).toBe(false);
    expect(quick(AcquireRequest, { ttlMs: 0 })).toBe(false);
    expect(quick(ReleaseRequest, { ownerToken: 'short' })).toBe(false);
    expect(quick(LockKeyParams, { key: 'a b' })).toBe(false);
  });
});
