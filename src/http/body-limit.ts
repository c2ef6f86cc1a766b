import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * How a body over the limit gets its 413 instead of a connection reset.
 *
 * Closing a socket while the client's bytes are still unread makes the kernel send a TCP reset, and a
 * client still uploading then sees ECONNRESET or EPIPE instead of the answer waiting in its receive
 * buffer. So the unread rest of a refused body is read and thrown away (up to DRAIN_MAX_BYTES) and the
 * connection stays open for the next request; a client announcing more than that gets the 413 and a
 * close, and whatever it still sends is its own problem.
 */

/**
 * 8 MiB: four times the largest upload seen from a misconfigured client (2 MiB), read and discarded at
 * memory speed; HTTP_REQUEST_TIMEOUT_MS bounds how long a slow client may take to send it.
 */
export const DRAIN_MAX_BYTES = 8 * 1024 * 1024;

/**
 * `Expect: 100-continue` with a Content-Length over the limit: the client is waiting for permission to
 * send, so refuse before `100 Continue` (Node would send it unasked). The request then goes through the
 * app as usual and gets its 413 problem before any byte of the body is read; the connection closes
 * after the answer, since the client may still send the body (RFC 9110 lets it), and those bytes must
 * not be read as the next request.
 */
export function refuseOversizedExpectations(server: Server, bodyLimitBytes: number): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > bodyLimitBytes) {
      res.setHeader('connection', 'close');
    } else {
      res.writeContinue();
    }
    server.emit('request', req, res);
  });
}

/**
 * Called before a request is answered with its body unread (413 on the Content-Length, 415): Fastify
 * asks for `Connection: close`, which would reset the connection under a client still sending. Instead
 * the rest of the body is read into nothing first (resolving when it has all arrived), and the answer
 * keeps the connection open unless the client asked to close it; so a client that sends its whole body before it reads (urllib, curl) reads
 * the 413 and can reuse the connection. Skipped, with the close kept, when the client was told not to
 * send the body (a refused expectation, see above) or announces more than DRAIN_MAX_BYTES; a body that
 * turns out longer than that ends the connection.
 */
export function drainUnreadBody(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const raw = request.raw;
  if (reply.raw.getHeader('connection') === 'close' || raw.destroyed) return Promise.resolve();
  const declared = Number(raw.headers['content-length']);
  if (Number.isFinite(declared) && declared > DRAIN_MAX_BYTES) return Promise.resolve();
  // Replace Fastify's `close` with what the connection would have had. Not removeHeader: removing the
  // header tells Node to send no Connection header at all, and then a client that asked for `close`
  // gets none, reads the connection as reusable, and its next request meets a socket Node has closed.
  reply.header('connection', reply.raw.shouldKeepAlive ? 'keep-alive' : 'close');
  if (raw.complete) return Promise.resolve();
  return new Promise((resolve) => {
    let drained = 0;
    const done = () => {
      raw.off('data', onData);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_MAX_BYTES) raw.socket.destroy();
    };
    raw.on('data', onData);
    raw.once('end', done);
    raw.once('close', done);
    raw.once('error', done);
    raw.resume();
  });
}
