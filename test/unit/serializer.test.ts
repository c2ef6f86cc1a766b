import fc from 'fast-check';
import Fastify from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { safeParse } from 'zod/v4/core';
import { AcquireResponse } from '../../src/http/schemas/locks.js';
import { directionalPart, QUICK_ANSWERS, serializerCompiler } from '../../src/http/serializer.js';
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

  const grant = {
    key: 'k',
    ownerToken: 'q3HbVfYJm3cS1kQxv7x8XA',
    fencingToken: 17,
    ttlMs: 30_000,
    expiresAt: '2026-11-30T10:00:30.000Z',
    holder: null,
  };

  it('writes a lock grant the quick check accepts byte for byte as zod would, and nothing zod refuses', () => {
    const quick = QUICK_ANSWERS.get(AcquireResponse)!;
    expect(quick(grant)).toBe(true);
    const valueOf = fc.oneof(
      fc.constantFrom(
        ...Object.values(grant),
        'q3HbVfYJm3cS1kQ+',
        '2026-02-30T10:00:30.000Z',
        '2026-11-30T10:00:30Z',
        '2026-11-30 10:00:30',
      ),
      fc.constantFrom(0, -0, -1, 1.5, 2 ** 53, Number.NaN, Number.MAX_SAFE_INTEGER, '17', 'w', undefined, true, {}),
      fc.stringMatching(/^[A-Za-z0-9_\-+]{14,130}$/),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      fc
        .date({ noInvalidDate: true })
        .map((d) => d.toISOString().replace(/(\d\d)T/, (_m, day: string) => `${String(Number(day) + 3).padStart(2, '0')}T`)),
      fc.integer(),
      fc.string(),
    );
    const fields = Object.keys(grant);
    // The grant with some fields changed, dropped, added or moved.
    const bodies = fc
      .tuple(
        fc.dictionary(fc.constantFrom(...fields), valueOf, { maxKeys: 3 }),
        fc.subarray(fields, { minLength: 5 }),
        fc.option(fc.constantFrom('extra', 'key'), { nil: undefined }),
        fc.boolean(),
      )
      .map(([changed, kept, added, reversed]) => {
        const order = reversed ? [...kept].reverse() : kept;
        const body: Record<string, unknown> = {};
        for (const field of order) body[field] = field in changed ? changed[field] : grant[field as keyof typeof grant];
        if (added !== undefined) body[added] = 'x';
        return body;
      });
    let accepted = 0;
    fc.assert(
      fc.property(bodies, (body) => {
        if (!quick(body)) return;
        accepted++;
        const parsed = safeParse(AcquireResponse, body);
        expect(parsed.success, JSON.stringify(body)).toBe(true);
        expect(JSON.stringify(body)).toBe(JSON.stringify(parsed.data));
      }),
      { numRuns: 5000 },
    );
    expect(accepted).toBeGreaterThan(50);
  });

  it("the acquire route's answers pass the quick check", async () => {
    const check = QUICK_ANSWERS.get(AcquireResponse)!;
    let calls = 0;
    QUICK_ANSWERS.set(AcquireResponse, (data) => (calls++, check(data)));
    try {
      const test = await buildTestApp();
      const res = await test.app.inject({ method: 'POST', url: '/v1/locks/q/acquire', payload: { ttlMs: 30_000 } });
      expect(res.statusCode).toBe(200);
      expect(calls).toBe(1);
      expect(check(res.json())).toBe(true);
      await test.close();
    } finally {
      QUICK_ANSWERS.set(AcquireResponse, check);
    }
  });
});
