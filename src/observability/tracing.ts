import type { FastifyInstance } from 'fastify';
import type { StoreCallResult, StoreOperation } from './instrumented-store.js';

/**
 * OpenTelemetry traces, when the operator turns them on (OTEL_TRACES_EXPORTER, see config.ts). Off, nothing of
 * OpenTelemetry is loaded and no hook is registered: this module holds only the switch and the shape;
 * the SDK and the span code live in tracing-sdk.ts, imported on start.
 */
export interface Tracing {
  /** Adds the hooks that give every request a server span (parent: the caller's `traceparent`). */
  traceRequests(app: FastifyInstance): void;
  /**
   * A store call finished (after the fact: a child span of the request's span, timed as measured).
   * `waiting`: an acquire with waitMs, whose call lasts as long as its wait in the queue.
   */
  storeCall(op: StoreOperation, result: StoreCallResult, durationSeconds: number, waiting: boolean): void;
  /** A caller's wait in a key's queue ended (a child span of the request's span). */
  waited(seconds: number, granted: boolean): void;
  /** The request's trace and span ids, for an exemplar on a histogram; undefined outside a traced request. */
  exemplar(): { trace_id: string; span_id: string } | undefined;
  /** Sends the spans still buffered; called at shutdown. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK, configured by the standard OTEL_* environment, when `wanted` (see
 * Config.tracing); otherwise loads nothing and answers undefined.
 */
export async function startTracing(
  wanted: boolean,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<Tracing | undefined> {
  if (!wanted) return undefined;
  const sdk = await import('./tracing-sdk.js');
  return sdk.startSdkTracing(env);
}
