import { performance } from 'node:perf_hooks';
import { Cluster, type Command, type Redis } from 'ioredis';

/** The message a command gets when its deadline passes; the store recognises it (and probes the connection). */
export const COMMAND_TIMED_OUT = 'Command timed out';

/**
 * 10 ms: a deadline check that runs later than this after it was due shows that this process, not
 * Redis, was busy; below it, ordinary timer jitter (about a millisecond) must not push a dead Redis's
 * verdict back again and again.
 */
const OWN_LAG_SLACK_MS = 10;

/**
 * 2: the deadline is extended by this process's own measured lateness, but by at most twice the
 * command timeout in all, so a Redis that does not answer is still given up on within three command
 * timeouts (plus one turn of the event loop) however busy the process is.
 */
const MAX_EXTENSION_FACTOR = 2;

/** What the deadline needs of an ioredis command (public fields of ioredis's Command). */
type Deadlined = Pick<Command, 'isResolved' | 'reject'>;

/**
 * 10 ms: how far apart the checks of the shared deadline timer are at least. Commands that come due
 * within this of each other are judged in one check, so under load the timer fires at most about a
 * hundred times a second whatever the command rate; a verdict comes at most this much later.
 */
const CHECK_COALESCE_MS = 10;

/**
 * The deadlines of every command sent with one timeout, under one timer. The timeout is the same for
 * all, so deadlines come due in the order the commands were sent: a queue, checked from its head.
 * A timer per command (set, then cleared when the reply came, through a promise reaction) was a
 * measurable part of each lock call; here a command costs two array pushes. Answered commands are
 * only dropped when their deadline passes, so the queue holds at most one timeout's worth of commands.
 */
class DeadlineQueue {
  private commands: Array<Deadlined | undefined> = [];
  private sentAts: number[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  /** When the pending check is due (performance.now()). */
  private checkAt = 0;

  constructor(private readonly timeoutMs: number) {}

  add(command: Deadlined): void {
    const now = performance.now();
    this.commands.push(command);
    this.sentAts.push(now);
    if (this.timer === undefined) this.schedule(now + this.timeoutMs, now);
  }

  private schedule(dueAt: number, now: number): void {
    this.checkAt = dueAt + CHECK_COALESCE_MS;
    this.timer = setTimeout(() => this.check(), Math.max(0, this.checkAt - now));
  }

  private check(): void {
    this.timer = undefined;
    const checkAt = this.checkAt;
    const now = performance.now();
    const { commands, sentAts } = this;
    while (this.head < commands.length) {
      const sentAt = sentAts[this.head] as number;
      if (sentAt + this.timeoutMs > now) break;
      const command = commands[this.head];
      commands[this.head] = undefined;
      this.head++;
      if (command !== undefined && !command.isResolved) judge(command, this.timeoutMs, sentAt, checkAt);
    }
    if (this.head === commands.length) {
      this.commands = [];
      this.sentAts = [];
      this.head = 0;
      return;
    }
    // Drop the judged part once it is most of the arrays.
    if (this.head > 1024 && this.head * 2 > commands.length) {
      this.commands = commands.slice(this.head);
      this.sentAts = sentAts.slice(this.head);
      this.head = 0;
    }
    this.schedule((this.sentAts[this.head] as number) + this.timeoutMs, now);
  }
}

/**
 * Marks a command already under a deadline: each is armed once, however often it is re-sent inside a
 * client. A property of the command, not a WeakSet of commands: a WeakSet's add and has cost ten times
 * as much per command (measured), and its entries are more work for the garbage collector.
 */
const ARMED = Symbol('keyholder.deadlineArmed');
type Armable = object & { [ARMED]?: true };

/** Marks `command` armed; false when it already was. */
function arm(command: Armable): boolean {
  if (command[ARMED] === true) return false;
  command[ARMED] = true;
  return true;
}

/** One queue per timeout (a process has one or two: the store's, the rate limiter's). */
const queues = new Map<number, DeadlineQueue>();

/**
 * The verdict on a command not answered by its deadline (`checkAt`: when the shared check was due, the
 * deadline plus the check's coalescing, which is not this process's lateness).
 */
function judge(command: Deadlined, timeoutMs: number, sentAt: number, checkAt: number): void {
  const maxExtensionMs = timeoutMs * MAX_EXTENSION_FACTOR;
  const coalescedMs = Math.max(0, checkAt - (sentAt + timeoutMs));
  let extendedMs = 0;
  const verdict = (): void => {
    if (command.isResolved) return;
    setImmediate(() => {
      if (command.isResolved) return;
      const lateMs = performance.now() - (sentAt + timeoutMs + coalescedMs + extendedMs);
      const extensionMs = Math.min(lateMs, maxExtensionMs - extendedMs);
      if (lateMs > OWN_LAG_SLACK_MS && extensionMs > 0) {
        extendedMs += extensionMs;
        setTimeout(verdict, extensionMs);
        return;
      }
      command.reject(new Error(COMMAND_TIMED_OUT));
    });
  };
  verdict();
}

/**
 * A command deadline that means "Redis did not answer in time", never "our event loop was late".
 * ioredis's own commandTimeout is a bare timer: when the process is busy (a burst of requests), it
 * fires after the reply has arrived but before the socket was read, and a healthy Redis reads as a
 * failed one. Here, when the deadline has passed (checked by one timer for all commands, see
 * DeadlineQueue):
 *  1. the verdict waits for setImmediate, which runs after the event loop's poll phase: a reply that
 *     already sits in the socket is read first and settles the command;
 *  2. if the check itself ran late (the timer, or that poll phase, was held up by this process's own
 *     work), the deadline moves back by that lateness (bounded, MAX_EXTENSION_FACTOR): the command was
 *     written, and its reply read, only as fast as this process let them be.
 */
export function armDeadline(command: Deadlined, timeoutMs: number): void {
  let queue = queues.get(timeoutMs);
  if (queue === undefined) queues.set(timeoutMs, (queue = new DeadlineQueue(timeoutMs)));
  queue.add(command);
}

/**
 * Puts every command sent through `client` under armDeadline (each command once, however often it is
 * re-sent inside the client). On a Cluster, the node connections the client opens get the same
 * deadline, for the commands sent to one node directly (WAIT, SCAN, the echo PING).
 *
 * The commands a connection sends for itself before it is ready (the ready check's INFO) get
 * `setupTimeoutMs` instead (client.ts: connectionPatienceMs). Without an offline queue nothing else can be sent then. Held to the
 * lock calls' short timeout, the ready check of a Redis just restarted (reloading its append-only file,
 * fsyncing every write for the other instances) failed again and again on a loaded host, and each
 * failure closed the connection and pushed the next attempt further back: an instance stayed
 * unavailable for seconds after Redis was back. A connection is made once per outage, so waiting a
 * little longer for its check costs nothing while Redis is healthy.
 */
export function withCommandDeadlines<T extends Redis | Cluster>(client: T, timeoutMs: number, setupTimeoutMs = timeoutMs): T {
  const wrap = (target: Redis | Cluster): void => {
    // Called with this client and the arguments as they come (a Cluster passes a node as well), not
    // through a bound function and a rest parameter: this runs for every command sent.
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with `target` below
    const send = target.sendCommand as (this: Redis | Cluster, command: Command, stream?: unknown, node?: unknown) => unknown;
    target.sendCommand = (command: Command, stream?: unknown, node?: unknown) => {
      if (arm(command)) armDeadline(command, target.status === 'ready' ? timeoutMs : setupTimeoutMs);
      return send.call(target, command, stream, node);
    };
  };
  wrap(client);
  if (client instanceof Cluster) client.on('+node', (node: Redis) => wrap(node));
  return client;
}

/**
 * Sends `command` on `client` under a deadline of its own instead of the client's (see
 * withCommandDeadlines), for the one command that must wait longer than a lock call: the probe that
 * tells a slow Redis from a lost connection.
 */
export function sendWithin<T>(client: Redis, command: Command, timeoutMs: number): Promise<T> {
  arm(command);
  armDeadline(command, timeoutMs);
  return client.sendCommand(command) as Promise<T>;
}
