import { createServer, connect, type Server, type Socket } from 'node:net';
import { freePort } from './redis-server.js';

/**
 * What the proxy does to traffic right now.
 * - pass: forward both ways untouched.
 * - delay: hold every chunk (both ways) for `delayMs` before forwarding, keeping byte order.
 * - delayReplies: forward requests at once (the server acts on them now), hold its replies for `delayMs`.
 * - blackhole: swallow every byte both ways; connections stay open and say nothing.
 * - dropReplies: forward requests to the server, swallow its replies.
 * - resetOnReply: forward requests; the first reply chunk that comes back after `skip` others is not
 *   forwarded, every connection is reset instead (the change was made, its answer lost), and the proxy
 *   passes traffic again.
 */
export type FaultMode =
  | { kind: 'pass' }
  | { kind: 'delay'; delayMs: number }
  | { kind: 'delayReplies'; delayMs: number }
  | { kind: 'blackhole' }
  | { kind: 'dropReplies' }
  | { kind: 'resetOnReply'; skip?: number };

interface Pipe {
  readonly client: Socket;
  readonly server: Socket;
}

/**
 * A TCP proxy on loopback between a client (a keyholder instance) and a server (Redis) that can delay,
 * black-hole, drop replies, or reset connections on demand. Faults apply to bytes that arrive while
 * the fault is on; bytes already held by a delay still go out in order afterwards.
 */
export class FaultProxy {
  private mode: FaultMode = { kind: 'pass' };
  private readonly pipes = new Set<Pipe>();
  /** Counters for the report. */
  readonly stats = { connections: 0, resets: 0, bytesDropped: 0, chunksDelayed: 0 };

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetPort: number,
  ) {}

  static async start(targetPort: number): Promise<FaultProxy> {
    const port = await freePort();
    const server = createServer();
    const proxy = new FaultProxy(server, port, targetPort);
    server.on('connection', (socket) => proxy.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get faultKind(): FaultMode['kind'] {
    return this.mode.kind;
  }

  set(mode: FaultMode): void {
    this.mode = mode;
  }

  heal(): void {
    this.mode = { kind: 'pass' };
  }

  /** Resets (TCP RST) every open connection, both sides, as a crashed middlebox would. */
  resetAll(): number {
    let count = 0;
    for (const pipe of this.pipes) {
      count++;
      pipe.client.resetAndDestroy();
      pipe.server.resetAndDestroy();
    }
    this.pipes.clear();
    this.stats.resets += count;
    return count;
  }

  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.stats.connections++;
    const server = connect(this.targetPort, '127.0.0.1');
    const pipe: Pipe = { client, server };
    this.pipes.add(pipe);
    client.setNoDelay(true);
    server.setNoDelay(true);
    const drop = () => {
      if (!this.pipes.delete(pipe)) return;
      client.destroy();
      server.destroy();
    };
    for (const socket of [client, server]) {
      socket.on('error', drop);
      socket.on('close', drop);
    }
    this.forward(client, server, 'request');
    this.forward(server, client, 'reply');
  }

  private forward(from: Socket, to: Socket, direction: 'request' | 'reply'): void {
    // Chunks held by a delay leave in arrival order: a later chunk never overtakes an earlier one. They
    // wait in one queue drained by one timer: a timer each (of different lengths, due at the same
    // moment) could fire out of order, and a reply overtaking another reads as one lost.
    const held: Array<{ readonly atMs: number; readonly chunk: Buffer }> = [];
    let timer: NodeJS.Timeout | undefined;
    const drain = () => {
      timer = undefined;
      const now = performance.now();
      while (held.length > 0 && (held[0]?.atMs ?? 0) <= now) {
        const { chunk } = held.shift() as { chunk: Buffer };
        if (!to.destroyed) to.write(chunk);
      }
      if (held.length > 0) timer = setTimeout(drain, Math.max(0, (held[0]?.atMs ?? now) - now));
    };
    from.on('data', (chunk: Buffer) => {
      const mode = this.mode;
      if (mode.kind === 'resetOnReply' && direction === 'reply' && (mode.skip ?? 0) > 0) {
        this.mode = { kind: 'resetOnReply', skip: (mode.skip ?? 0) - 1 };
      } else if (mode.kind === 'resetOnReply' && direction === 'reply') {
        this.mode = { kind: 'pass' };
        this.stats.bytesDropped += chunk.length;
        this.resetAll();
        return;
      }
      if (mode.kind === 'blackhole' || (mode.kind === 'dropReplies' && direction === 'reply')) {
        this.stats.bytesDropped += chunk.length;
        return;
      }
      const now = performance.now();
      const delayMs = mode.kind === 'delay' || (mode.kind === 'delayReplies' && direction === 'reply') ? mode.delayMs : 0;
      if (delayMs > 0 || held.length > 0) {
        held.push({ atMs: Math.max(now + delayMs, held.at(-1)?.atMs ?? 0), chunk });
        this.stats.chunksDelayed++;
        timer ??= setTimeout(drain, Math.max(0, (held[0]?.atMs ?? now) - now));
        return;
      }
      if (!to.destroyed) to.write(chunk);
    });
  }
}
