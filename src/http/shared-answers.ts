import type { FastifyReply } from 'fastify';
import type { z } from 'zod';

const CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * 256 KiB of answers waiting in this process for one watcher's socket: over that, the watcher is not
 * reading and its connection is closed instead of queuing more. A watch answer is at most ~20 KB (100
 * holders shown), and a reading client drains it at once; 200 watchers that never read once queued
 * 125 MB after one release, now at most 200 x 256 KiB beyond what the kernel buffers.
 */
export const WATCHER_BACKLOG_MAX_BYTES = 256 * 1024;

/**
 * One answer for every blocking query a change answers. A change wakes all watchers of a key with the
 * SAME view object (src/domain/watch.ts); the body is validated against the route's response schema
 * and stringified once for that view, as the serializer would, and encoded to bytes once.
 *
 * Each answer is then written straight to the response (`reply.hijack()`, then Node's `writeHead` and
 * `end`), not through `reply.send()`: with a thousand watchers on one key, the last answer waits for
 * every answer before it, and Fastify's send path (its onSend hook chain, payload checks and header
 * bookkeeping, a few microtask hops each) was a good part of the time per answer. What the answer
 * carries is the same: status 200, the headers set on the reply before it (the rate limiter's
 * x-ratelimit-*), content-type and content-length, and Node's own date and keep-alive headers. The
 * routes' only onSend hook (fresh-answers.ts) concerns grants, never a blocking query. Fastify's
 * response listeners still run when the answer is written, so the onResponse hooks (metrics) and the
 * request log see every answer.
 */
export class SharedAnswers<S extends z.ZodType> {
  private readonly answers = new WeakMap<object, { key: string; body: Buffer; length: string }>();

  constructor(private readonly schema: S) {}

  /**
   * Answers `reply` for `view`: the body made by `build` the first time this view is answered for
   * `key`, then reused. `view` must be the object the watch handed out, never a copy.
   */
  send(reply: FastifyReply, view: object, key: string, build: () => z.input<S>): FastifyReply {
    let answer = this.answers.get(view);
    if (answer === undefined || answer.key !== key) {
      // Encoded once: a string body would be encoded to UTF-8 again for every watcher's socket (a
      // thousand watchers of a semaphore's ~11 KB view: 11 MB of encoding in one pass).
      const body = Buffer.from(JSON.stringify(this.schema.parse(build())));
      answer = { key, body, length: String(body.length) };
      this.answers.set(view, answer);
    }
    const headers: string[] = [];
    const own = reply.getHeaders();
    for (const name in own) {
      const value = own[name];
      if (value === undefined || name === 'content-type' || name === 'content-length') continue;
      if (Array.isArray(value)) for (const v of value) headers.push(name, v);
      else headers.push(name, String(value));
    }
    headers.push('content-type', CONTENT_TYPE, 'content-length', answer.length);
    reply.hijack();
    const socket = reply.raw.socket;
    if (socket !== null && socket.writableLength > WATCHER_BACKLOG_MAX_BYTES) {
      // Earlier answers are still unsent: a watcher that does not read is dropped, not buffered for.
      socket.destroy();
      return reply;
    }
    // A HEAD request gets the headers only: Node leaves the body out.
    reply.raw.writeHead(200, headers);
    reply.raw.end(answer.body);
    if (socket !== null && socket.writableLength > WATCHER_BACKLOG_MAX_BYTES) socket.destroy();
    return reply;
  }
}
