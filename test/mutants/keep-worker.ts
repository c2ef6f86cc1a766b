import type { Worker } from 'node:worker_threads';
import { ThreadsPoolWorker } from 'vitest/node';

/**
 * One test worker thread for many runs of a StrykerJS test runner, instead of a new one per mutant.
 *
 * @stryker-mutator/vitest-runner calls Vitest's `start()` once per mutant; Vitest's pool ends its worker
 * thread at the end of every run, so each mutant paid for a new thread that imports Vitest's runtime,
 * the externalised packages (ioredis, pino, ...) and every source module again. Vitest itself reuses a
 * thread between the files of one run when `isolate` is false (the worker keeps its module cache and
 * imports only the test files and setup files again: `runBaseTests` in vitest's dist/chunks/base.*.js);
 * this keeps an idle thread between runs as well. Each run's "start" reaches the worker (it carries the
 * run's configuration: StrykerJS's test-name filter is in it); "stop" is answered here, once the thread
 * has finished the run it is on (as the worker itself does before it replies), and the thread kept.
 *
 * A thread is only handed to the next run when it is idle: not running, and released by the run before
 * (a cancelled run, StrykerJS's bail at the first failing test, may still be finishing its skipped tests
 * and afterAll hooks when the next run starts; that run then gets a new thread).
 *
 * Only for the StrykerJS runs (test/mutants/vitest.config.ts): mutants are switched on at run time
 * (`ignoreStatic`), so the cached source modules serve every mutant.
 */
interface Kept {
  readonly thread: Worker;
  /** A run or collect request is being worked on. */
  running: boolean;
  runs: number;
  /** Called when the run being worked on ends. */
  readonly onIdle: Array<() => void>;
}

/**
 * Runs one thread serves before it is ended and a new one started: whatever a mutant's run leaves
 * behind (a timer, a client reconnecting to a Redis that was stopped) lives at most this many runs.
 */
const RUNS_PER_THREAD = 25;

/**
 * How long a stop waits for the run it ends to finish before the thread is ended instead. Vitest forces
 * a stop (no "stop" message, no wait) when a run is cancelled while an earlier cancel is under way.
 */
const STOP_WAIT_MS = 500;

type Listener = (...args: unknown[]) => void;
interface PatchedWorker {
  _thread?: Worker;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  kept?: Kept;
  attached?: Array<[string, Listener]>;
}

interface WorkerMessage {
  readonly __vitest_worker_request__?: boolean;
  readonly __vitest_worker_response__?: boolean;
  readonly type?: string;
}

const isFinished = (message: WorkerMessage) => message?.__vitest_worker_response__ === true && message.type === 'testfileFinished';

/** At most one idle thread, waiting for the next run. */
let idle: Kept | undefined;

const proto = ThreadsPoolWorker.prototype as unknown as Record<string, (...args: never[]) => unknown>;
const originalStart = proto.start as (this: PatchedWorker) => Promise<void>;

function reply(thread: Worker, type: string): void {
  setImmediate(() => thread.emit('message', { type, __vitest_worker_response__: true }));
}

function track(thread: Worker): Kept {
  const k: Kept = { thread, running: false, runs: 0, onIdle: [] };
  thread.on('message', (message: WorkerMessage) => {
    if (!isFinished(message)) return;
    k.running = false;
    for (const done of k.onIdle.splice(0)) done();
  });
  thread.once('exit', () => {
    if (idle === k) idle = undefined;
  });
  // An idle thread must not keep the runner's process alive once StrykerJS disposes of it.
  thread.unref();
  return k;
}

async function untilIdle(k: Kept): Promise<void> {
  if (!k.running) return;
  let timer: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve) => {
    k.onIdle.push(resolve);
    timer = setTimeout(resolve, STOP_WAIT_MS);
  });
  clearTimeout(timer);
}

Object.assign(proto, {
  async start(this: PatchedWorker) {
    this.attached = [];
    const reuse = idle;
    idle = undefined;
    if (reuse !== undefined && !reuse.running) {
      this.kept = reuse;
      this._thread = reuse.thread;
      reuse.thread.stdout.pipe(this.stdout);
      reuse.thread.stderr.pipe(this.stderr);
      return;
    }
    if (reuse !== undefined) void reuse.thread.terminate();
    await originalStart.call(this);
    this.kept = track(this._thread as Worker);
  },
  on(this: PatchedWorker, event: string, callback: Listener) {
    this.attached?.push([event, callback]);
    (this._thread as Worker).on(event, callback);
  },
  off(this: PatchedWorker, event: string, callback: Listener) {
    (this._thread as Worker).off(event, callback);
  },
  send(this: PatchedWorker, message: WorkerMessage) {
    const k = this.kept;
    const thread = this._thread as Worker;
    if (message?.__vitest_worker_request__ && k !== undefined) {
      if (message.type === 'stop') {
        void untilIdle(k).then(() => reply(thread, 'stopped'));
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
    const k = this.kept;
    if (thread === undefined || k === undefined) return;
    for (const [event, callback] of this.attached ?? []) thread.off(event, callback);
    this.attached = [];
    thread.stdout.unpipe(this.stdout);
    thread.stderr.unpipe(this.stderr);
    this._thread = undefined;
    this.kept = undefined;
    await untilIdle(k);
    if (!k.running && k.runs < RUNS_PER_THREAD && idle === undefined) {
      idle = k;
      return;
    }
    await thread.terminate();
  },
});
