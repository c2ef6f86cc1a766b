import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { isDomainError, PrimitiveRefusal } from '../../src/domain/errors.js';
import { registerErrorHandling } from '../../src/http/error-handler.js';

/** A primitive without an error class of its own refuses with PrimitiveRefusal: answered as its code's row says. */
describe('PrimitiveRefusal', () => {
  it('is answered with its code, status and Retry-After, as a refusal with a class of its own is', async () => {
    const app = Fastify();
    registerErrorHandling(app);
    app.get('/refuse', async () => {
      throw new PrimitiveRefusal('rwlock_held', 'k', 1_500, 'key "k" has no room for this weight');
    });
    const res = await app.inject({ method: 'GET', url: '/refuse' });
    await app.close();
    expect(res.statusCode).toBe(409);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.headers['retry-after']).toBe('2');
    expect(res.json()).toMatchObject({
      code: 'rwlock_held',
      status: 409,
      retryAfterMs: 1_500,
      detail: 'key "k" has no room for this weight',
    });
    const err = new PrimitiveRefusal('semaphore_full', 'k', 1, 'full');
    expect(isDomainError(err)).toBe(true);
    expect(err).toMatchObject({ key: 'k', name: 'PrimitiveRefusal' });
  });
});
