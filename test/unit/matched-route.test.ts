import Fastify, { type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { matchedRoute, type MatchedRoute } from '../../src/http/matched-route.js';

const apps: Array<ReturnType<typeof Fastify>> = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** Counts reads of Fastify's routeOptions getter on `request` (an own getter in front of the prototype's). */
function countRouteOptionReads(request: FastifyRequest, count: () => void): void {
  let proto: object | null = Object.getPrototypeOf(request) as object | null;
  while (proto !== null && Object.getOwnPropertyDescriptor(proto, 'routeOptions') === undefined)
    proto = Object.getPrototypeOf(proto) as object | null;
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the request below
  const get = proto === null ? undefined : Object.getOwnPropertyDescriptor(proto, 'routeOptions')?.get;
  if (get === undefined) throw new Error("no routeOptions getter on Fastify's request");
  Object.defineProperty(request, 'routeOptions', {
    get(this: FastifyRequest) {
      count();
      return get.call(this) as unknown;
    },
  });
}

describe('matchedRoute', () => {
  it("reads each request's route once, and never another request's", async () => {
    const app = Fastify();
    apps.push(app);
    let reads = 0;
    const seen: Array<{ first: MatchedRoute; again: MatchedRoute; readsForRequest: number }> = [];
    app.addHook('onRequest', (request, _reply, done) => {
      countRouteOptionReads(request, () => reads++);
      const before = reads;
      const first = matchedRoute(request);
      const again = matchedRoute(request);
      seen.push({ first, again, readsForRequest: reads - before });
      done();
    });
    app.get('/a', { config: { access: 'locks' } }, async () => ({ ok: true }));
    app.get('/b', { config: { access: 'admin' } }, async () => ({ ok: true }));
    for (const url of ['/a', '/b', '/missing', '/a']) await app.inject({ method: 'GET', url });
    expect(seen.map((s) => s.first.url)).toEqual(['/a', '/b', undefined, '/a']);
    expect(seen.map((s) => s.first.config.access)).toEqual(['locks', 'admin', undefined, 'locks']);
    for (const s of seen) {
      expect(s.again).toBe(s.first);
      expect(s.readsForRequest).toBe(1);
    }
  });
});
