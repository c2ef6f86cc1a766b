import type { Worker } from 'node:worker_threads';
import { ThreadsPoolWorker } from 'vitest/node';

/**
 * One test worker thread for every run of a StrykerJS test runner, instead of a new one per mutant.
 *
 * @stryker-mutator/vitest-runner calls Vitest's `start()` once per mutant; Vitest's pool ends its
 * worker thread at the end of every run, so each mutant paid for a new thread that imports Vitest's
 * runtime and the externalised packages (ioredis, Fastify's dependencies) again. Vitest itself reuses
 * a thread between the files of one run when `isolate` is false (the worker keeps its module cache
 * and re-imports only the test files and setup files: base.js `runBaseTests`); this keeps the thread
 * between runs as well. The worker is told "start" once; later "start" and every "stop" are answered
 * here, "stop" only once the worker has finished the run it is on (as the worker itself does).
 *
 * Only for the StrykerJS runs (test/mutants/vitest.config.ts): mutants are switched on at run time
 * (`ignoreStatic`), so the cached source modules serve every mutant.
 */
interface Kept {
  readonly thread: Worker;
  /** A run or collect request is being worked on. */
  running: boolean;
  /** The worker was told "start" (once per thread). */
  started: boolean;
  runs: number;
}

/**
 * Runs one thread serves before it is ended and a new one started: what a mutant's run leaves behind
 * (a timer, a client reconnecting to a Redis that was stopped) then lives at most this many runs.
 */
const RUNS_PER_THREAD = 25;

type Listener = (...args: unknown[]) => void;
interface PatchedWorker {
  _thread?: Worker;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  attached?: Array<[string, Listener]>;
}

interface WorkerMessage {
  readonly __vitest_worker_request__?: boolean;
  readonly __vitest_worker_response__?: boolean;
  readonly type?: string;
}

let kept: Kept | undefined;

const proto = ThreadsPoolWorker.prototype as unknown as Record<string, (...args: never[]) => unknown>;
const original = { start: proto.start, send: proto.send, on: proto.on, off: proto.off };

function reply(thread: Worker, type: string): void {
  setImmediate(() => thread.emit('message', { type, __vitest_worker_response__: true }));
}

function keep(thread: Worker): Kept {
  const k: Kept = { thread, running: false, started: false, runs: 0 };
  thread.on('message', (message: WorkerMessage) => {
    if (message?.__vitest_worker_response__ && message.type === 'testfileFinished') k.running = false;
  });
  thread.once('exit', () => {
    if (kept === k) kept = undefined;
  });
  // The thread must not keep the runner's process alive once StrykerJS disposes of it.
  thread.unref();
  return k;
}

Object.assign(proto, {
  async start(this: PatchedWorker) {
    this.attached = [];
    if (kept === undefined) {
      await (original.start as (this: PatchedWorker) => Promise<void>).call(this);
      kept = keep(this._thread as Worker);
      return;
    }
    this._thread = kept.thread;
    this._thread.stdout.pipe(this.stdout);
    this._thread.stderr.pipe(this.stderr);
  },
  on(this: PatchedWorker, event: string, callback: Listener) {
    this.attached?.push([event, callback]);
    (this._thread as Worker).on(event, callback);
  },
  off(this: PatchedWorker, event: string, callback: Listener) {
    (this._thread as Worker).off(event, callback);
  },
  send(this: PatchedWorker, message: WorkerMessage) {
    const k = kept;
    const thread = this._thread as Worker;
    if (message?.__vitest_worker_request__ && k?.thread === thread) {
      if (message.type === 'start') {
        if (k.started) return reply(thread, 'started');
        k.started = true;
      } else if (message.type === 'stop') {
        if (!k.running) return reply(thread, 'stopped');
        const whenDone = (m: WorkerMessage) => {
          if (!(m?.__vitest_worker_response__ && m.type === 'testfileFinished')) return;
          thread.off('message', whenDone);
          reply(thread, 'stopped');
        };
        thread.on('message', whenDone);
        return;
      } else if (message.type === 'run' || message.type === 'collect') {
        k.running = true;
        k.runs++;
      }
    }
    thread.postMessage(message);
  },
  async stop(this: PatchedWorker) {
    const thread = this._thread;
    if (thread === undefined) return;
    for (const [event, callback] of this.attached ?? []) thread.off(event, callback);
    this.attached = [];
    thread.stdout.unpipe(this.stdout);
    thread.stderr.unpipe(this.stderr);
    this._thread = undefined;
    if (kept?.thread === thread && kept.runs < RUNS_PER_THREAD) return;
    if (kept?.thread === thread) kept = undefined;
    await thread.terminate();
  },
});
