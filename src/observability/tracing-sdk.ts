import { context, propagation, ROOT_CONTEXT, type Context, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { StoreCallResult, StoreOperation } from './instrumented-store.js';

/** The API's routes; the probes, /metrics, the docs and the console are not traced (a scrape is not a call). */
const API_PREFIX = '/v1/';

/** Milliseconds since the epoch on the same clock the SDK stamps spans with. */
const nowMs = () => performance.timeOrigin + performance.now();

/**
 * The OpenTelemetry SDK, configured by the standard OTEL_* variables (exporter, endpoint, protocol,
 * sampler, propagators, resource), with traces only: metrics stay on /metrics and the logs on stdout.
 * Loaded only when tracing is on (see tracing.ts, which holds the shape this returns; no import back
 * to it, so the two modules do not form a cycle).
 */
export function startSdkTracing(env: Readonly<Record<string, string | undefined>>) {
  const named = env.OTEL_SERVICE_NAME !== undefined && env.OTEL_SERVICE_NAME.trim() !== '';
  const sdk = new NodeSDK({
    // OTEL_SERVICE_NAME wins when set; otherwise spans say who made them.
    ...(named ? {} : { serviceName: 'keyholder' }),
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  const tracer = trace.getTracer('keyholder');
  const requests = new WeakMap<FastifyRequest, Context>();

  /** A child span of the active request's span, made after the fact from a measured duration. */
  function childSpan(name: string, kind: SpanKind, seconds: number, attributes: Record<string, string | boolean>, failed: boolean): void {
    const parent = context.active();
    // Outside a traced request (a scrape's store ping, a timer): no orphan root spans.
    if (trace.getSpan(parent) === undefined) return;
    const end = nowMs();
    const span = tracer.startSpan(name, { kind, startTime: end - seconds * 1000, attributes }, parent);
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(end);
  }

  function endRequestSpan(request: FastifyRequest, status: number | undefined): void {
    const ctx = requests.get(request);
    if (ctx === undefined) return;
    requests.delete(request);
    const span = trace.getSpan(ctx);
    if (span === undefined) return;
    if (status === undefined) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'the caller went away' });
    } else {
      span.setAttribute('http.response.status_code', status);
      // Server spans: only 5xx is the server's failure (a 409 lock_held is an answer, not an error).
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }

  return {
    traceRequests(app: FastifyInstance) {
      app.addHook('onRequest', (request, _reply, done) => {
        if (!request.url.startsWith(API_PREFIX)) return done();
        const parent = propagation.extract(ROOT_CONTEXT, request.headers);
        const route = request.routeOptions.url;
        const params = request.params as { key?: unknown } | undefined;
        const span = tracer.startSpan(
          route === undefined ? request.method : `${request.method} ${route}`,
          {
            kind: SpanKind.SERVER,
            attributes: {
              'http.request.method': request.method,
              ...(route === undefined ? {} : { 'http.route': route }),
              'url.path': request.url.split('?', 1)[0] ?? request.url,
              ...(typeof params?.key === 'string' ? { 'keyholder.key': params.key } : {}),
            },
          },
          parent,
        );
        const ctx = trace.setSpan(parent, span);
        requests.set(request, ctx);
        context.with(ctx, done);
      });
      // The body is read between onRequest and here, from the socket's stream events: enter the
      // request's context again so the handler (and the store calls it makes) run inside it whatever
      // async context the body parser finished in.
      app.addHook('preHandler', (request, _reply, done) => {
        const ctx = requests.get(request);
        if (ctx === undefined) done();
        else context.with(ctx, done);
      });
      app.addHook('onResponse', (request, reply, done) => {
        endRequestSpan(request, reply.statusCode);
        done();
      });
      app.addHook('onRequestAbort', (request, done) => {
        endRequestSpan(request, undefined);
        done();
      });
    },
    storeCall(op: StoreOperation, result: StoreCallResult, durationSeconds: number, waiting: boolean) {
      const attributes = { 'keyholder.store.operation': op, 'keyholder.store.result': result, 'keyholder.store.waiting': waiting };
      childSpan(`keyholder.store ${op}`, SpanKind.CLIENT, durationSeconds, attributes, result !== 'ok');
    },
    waited(seconds: number, granted: boolean) {
      childSpan('keyholder.wait', SpanKind.INTERNAL, seconds, { 'keyholder.wait.granted': granted }, false);
    },
    exemplar(): { trace_id: string; span_id: string } | undefined {
      const span = trace.getSpan(context.active());
      if (span === undefined) return undefined;
      const { traceId, spanId, traceFlags } = span.spanContext();
      // An exemplar must point at a trace that was kept.
      if ((traceFlags & TraceFlags.SAMPLED) === 0) return undefined;
      return { trace_id: traceId, span_id: spanId };
    },
    shutdown: (): Promise<void> => sdk.shutdown(),
  };
}
