import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { WatchClientMessage, WatchClientReport } from './protocol.js';

/**
 * One share of the watch fan-out's watchers (forked by load-worker.ts, several at once): plain
 * keep-alive sockets, each with one blocking query, and per answer nothing but the time its first
 * bytes arrived and the index it carries. An HTTP client library would spend more per answer than
 * the server does, and a thousand answers read in one process would queue behind each other there:
 * the measurement would then be of the client.
 *
 * Sockets are read with net's `onread` (bytes straight into one buffer this process reuses, handed to a
 * callback) rather than 'data' events: no stream machinery, Buffer or string decoder per read. The
 * server and these clients share the machine's two cores, so every microsecond a client spends per
 * answer is one the server may wait for; the time taken is still that of an answer's first bytes
 * reaching this process.
 */

/** Where every socket of this process reads into: each read is consumed before the next one. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

const ABSOLUTE = () => performance.timeOrigin + performance.now();

/** One watcher: a socket, the answer being read, and when its first bytes came. */
class WatchSocket {
  private buffer = '';
  private firstByteAt = 0;
  private onAnswer: ((answer: { at: number; status: number; index: number }) => void) | undefined;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('error', () => this.finish(0, -1));
    socket.on('close', () => this.finish(0, -1));
  }

  static open(port: number): Promise<WatchSocket> {
    return new Promise((resolve, reject) => {
      let watcher: WatchSocket | undefined;
      const socket = connect(
        {
          host: '127.0.0.1',
          port,
          onread: {
            buffer: READ_BUFFER,
            callback: (bytes: number) => {
              const at = ABSOLUTE();
              watcher?.read(READ_BUFFER.toString('latin1', 0, bytes), at);
              // true: keep reading.
              return true;
            },
          },
        },
        () => resolve((watcher = new WatchSocket(socket))),
      );
      socket.once('error', reject);
    });
  }

  ask(request: string): Promise<{ at: number; status: number; index: number }> {
    return new Promise((resolve) => {
      this.buffer = '';
      this.firstByteAt = 0;
      this.onAnswer = resolve;
      this.socket.write(request);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: string, at: number): void {
    if (this.firstByteAt === 0) this.firstByteAt = at;
    this.buffer += chunk;
    const headEnd = this.buffer.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const length = Number(/content-length: *(\d+)/i.exec(this.buffer.slice(0, headEnd))?.[1] ?? NaN);
    if (this.buffer.length < headEnd + 4 + length) return;
    const status = Number(this.buffer.slice(9, 12));
    const index = Number(/"index":(\d+)/.exec(this.buffer.slice(headEnd + 4))?.[1] ?? -1);
    this.finish(status, index);
  }

  private finish(status: number, index: number): void {
    const done = this.onAnswer;
    this.onAnswer = undefined;
    done?.({ at: this.firstByteAt || ABSOLUTE(), status, index });
  }
}

let sockets: WatchSocket[] = [];
let answers: Array<Promise<{ at: number; status: number; index: number }>> = [];

process.on('message', (message: WatchClientMessage) => {
  const reply = (report: WatchClientReport) => process.send?.(report);
  void (async () => {
    switch (message.kind) {
      case 'open':
        sockets = await Promise.all(Array.from({ length: message.watchers }, () => WatchSocket.open(message.port)));
        reply({ kind: 'opened' });
        return;
      case 'ask':
        answers = sockets.map((s) => s.ask(message.request));
        reply({ kind: 'asked' });
        return;
      case 'collect': {
        const got = await Promise.all(answers);
        reply({
          kind: 'answers',
          at: got.map((a) => a.at),
          failures: got.filter((a) => a.status !== 200 || a.index === message.oldIndex).length,
          index: got.find((a) => a.status === 200 && a.index !== message.oldIndex)?.index ?? message.oldIndex,
        });
        return;
      }
      case 'close':
        for (const s of sockets) s.close();
        process.exit(0);
    }
  })().catch((err: unknown) => {
    process.stderr.write(`watch client failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
});
process.on('disconnect', () => process.exit(0));
