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
type Deadlined = Pick<Command, 'isResolved' | 'reject' | 'promise'>;

/**
 * A command deadline that means "Redis did not answer in time", never "our event loop was late".
 * ioredis's own commandTimeout is a bare timer: when the process is busy (a burst of requests), it
 * fires after the reply has arrived but before the socket was read, and a healthy Redis reads as a
 * failed one. Here, when the timer fires:
 *  1. the verdict waits for setImmediate, which runs after the event loop's poll phase: a reply that
 *     already sits in the socket is read first and settles the command;
 *  2. if the check itself ran late (the timer, or that poll phase, was held up by this process's own
 *     work), the deadline moves back by that lateness (bounded, MAX_EXTENSION_FACTOR): the command was
 *     written, and its reply read, only as fast as this process let them be.
 */
export function armDeadline(command: Deadlined, timeoutMs: number): void {
  const maxExtensionMs = timeoutMs * MAX_EXTENSION_FACTOR;
  const sentAt = performance.now();
  let extendedMs = 0;
  let timer: NodeJS.Timeout | undefined;
  const judge = (): void => {
    timer = undefined;
    if (command.isResolved) return;
    setImmediate(() => {
      if (command.isResolved) return;
      const lateMs = performance.now() - (sentAt + timeoutMs + extendedMs);
      const extensionMs = Math.min(lateMs, maxExtensionMs - extendedMs);
      if (lateMs > OWN_LAG_SLACK_MS && extensionMs > 0) {
        extendedMs += extensionMs;
        timer = setTimeout(judge, extensionMs);
        return;
      }
      command.reject(new Error(COMMAND_TIMED_OUT));
    });
  };
  timer = setTimeout(judge, timeoutMs);
  const clear = (): void => {
    if (timer !== undefined) clearTimeout(timer);
  };
  command.promise.then(clear, clear);
}

/**
 * Puts every command sent through `client` under armDeadline (each command once, however often it is
 * re-sent inside the client). On a Cluster, the node connections the client opens get the same
 * deadline, for the commands sent to one node directly (WAIT, SCAN, the alignment PING).
 */
export function withCommandDeadlines<T extends Redis | Cluster>(client: T, timeoutMs: number): T {
  const armed = new WeakSet<object>();
  const wrap = (target: Redis | Cluster): void => {
    const send = target.sendCommand.bind(target) as (command: Command, ...rest: unknown[]) => unknown;
    target.sendCommand = (command: Command, ...rest: unknown[]) => {
      if (!armed.has(command)) {
        armed.add(command);
        armDeadline(command, timeoutMs);
      }
      return send(command, ...rest);
    };
  };
  wrap(client);
  if (client instanceof Cluster) client.on('+node', (node: Redis) => wrap(node));
  return client;
}
