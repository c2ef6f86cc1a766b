import type { FastifyReply } from 'fastify';
import type { z } from 'zod';

/**
 * One serialized body for every blocking query a change answers. A change wakes all watchers of a key
 * with the SAME view object (src/domain/watch.ts); validating and stringifying the answer once for
 * that view, instead of once per watcher, takes the response schema's work out of the per-watcher path
 * (with a thousand watchers it was a good part of the time between the change and the last answer).
 * The body is checked against the route's response schema when it is made, as the serializer would.
 */
export class SharedAnswers<S extends z.ZodType> {
  private readonly bodies = new WeakMap<object, { key: string; json: string }>();

  constructor(private readonly schema: S) {}

  /**
   * Sends the answer for `view` on `reply`: made by `build` the first time this view is answered for
   * `key`, then reused. `view` must be the object the watch handed out, never a copy.
   */
  send(reply: FastifyReply, view: object, key: string, build: () => z.input<S>): FastifyReply {
    let body = this.bodies.get(view);
    if (body === undefined || body.key !== key) {
      body = { key, json: JSON.stringify(this.schema.parse(build())) };
      this.bodies.set(view, body);
    }
    // A string with a JSON content type is sent as it is (Fastify's serializer is skipped).
    return reply.type('application/json; charset=utf-8').send(body.json);
  }
}
