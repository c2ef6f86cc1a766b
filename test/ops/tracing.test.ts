import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyholderClient } from '../../src/client/index.js';
import { KeyholderProcess } from '../helpers/keyholder-process.js';

/** A span as OTLP/HTTP JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
}

interface OtlpExport {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: { stringValue?: string } }> };
    scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
  }>;
}

const SERVER = 2;
const CLIENT = 3;

/** An OTLP/HTTP receiver (JSON encoding) on a free loopback port: it keeps every span it is sent. */
class OtlpReceiver {
  readonly spans: OtlpSpan[] = [];
  readonly services = new Set<string>();
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/v1/traces' && req.method === 'POST') {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport;
          for (const rs of body.resourceSpans ?? []) {
            const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue;
            if (service) this.services.add(service);
            for (const ss of rs.scopeSpans ?? []) this.spans.push(...(ss.spans ?? []));
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server?.address() as AddressInfo).port}`;
  }

  inTrace(traceId: string): OtlpSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  async close(): Promise<void> {
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A caller's span context, as W3C traceparent sends it (sampled). */
function callerSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

async function post(url: string, body: unknown, traceparent?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(traceparent ? { traceparent } : {}) },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * A Python that can import opentelemetry (its API is enough): KEYHOLDER_TEST_PYTHON, else python3. The
 * Python client's trace context is tested only where one is installed (opentelemetry is optional for it).
 */
const PYTHON_WITH_OTEL = [process.env.KEYHOLDER_TEST_PYTHON, 'python3'].find(
  (python) => python !== undefined && spawnSync(python, ['-I', '-c', 'import opentelemetry.propagate'], { timeout: 30_000 }).status === 0,
);

const attribute = (span: OtlpSpan, key: string) => span.attributes?.find((a) => a.key === key)?.value;

let callerSetup: { exporter: InMemorySpanExporter; tracer: ReturnType<BasicTracerProvider['getTracer']> } | undefined;

/** The caller's own OpenTelemetry setup, in this process, registered globally once (as an application does). */
function callerTracing() {
  if (callerSetup) return callerSetup;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  callerSetup = { exporter, tracer: provider.getTracer('caller') };
  return callerSetup;
}

/** A fetch that keeps the traceparent header of each request it sends, by path. */
function headerRecordingFetch() {
  const sent: Array<{ path: string; traceparent: string | null }> = [];
  const fetchImpl = (request: Request) => {
    sent.push({ path: new URL(request.url).pathname, traceparent: request.headers.get('traceparent') });
    return fetch(request);
  };
  return { sent, fetch: fetchImpl };
}

describe('tracing (OTEL_TRACES_EXPORTER=otlp) against an OTLP receiver', () => {
  const receiver = new OtlpReceiver();
  let keyholder: KeyholderProcess;

  beforeAll(async () => {
    const endpoint = await receiver.start();
    keyholder = await KeyholderProcess.start({
      env: {
        LOG_LEVEL: 'warn',
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        // Export within 100 ms instead of the SDK's 5 s, so the test waits on spans, not a timer.
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
    });
  });

  afterAll(async () => {
    await keyholder?.stop();
    await receiver.close();
  });

  /** The spans of one trace once its server span has arrived. */
  async function traceOf(traceId: string, expectedSpans: number): Promise<OtlpSpan[]> {
    await vi.waitFor(
      () => {
        if (receiver.inTrace(traceId).length < expectedSpans)
          throw new Error(
            `trace ${traceId}: ${receiver
              .inTrace(traceId)
              .map((s) => s.name)
              .join(', ')}`,
          );
      },
      { timeout: 20_000, interval: 50 },
    );
    return receiver.inTrace(traceId);
  }

  it("gives each call one server span under the caller's trace, with the store call as its child", async () => {
    const caller = callerSpan();
    const key = `traced-${hex(4)}`;
    const granted = await post(`${keyholder.url}/v1/locks/${key}/acquire`, { ttlMs: 10_000 }, caller.traceparent);
    expect(granted.status).toBe(200);

    const spans = await traceOf(caller.traceId, 2);
    const servers = spans.filter((s) => s.kind === SERVER);
    expect(servers).toHaveLength(1);
    const server = servers[0]!;
    expect(server.parentSpanId).toBe(caller.spanId);
    expect(server.name).toBe('POST /v1/locks/:key/acquire');
    expect(attribute(server, 'http.response.status_code')).toEqual({ intValue: 200 });
    expect(attribute(server, 'keyholder.key')).toEqual({ stringValue: key });
    const store = spans.find((s) => s.name === 'keyholder.store acquire');
    expect(store?.kind).toBe(CLIENT);
    expect(store?.parentSpanId).toBe(server.spanId);
    expect(receiver.services).toContain('keyholder');

    const release = callerSpan();
    expect(
      (await post(`${keyholder.url}/v1/locks/${key}/release`, { ownerToken: granted.body.ownerToken }, release.traceparent)).status,
    ).toBe(200);
    const released = await traceOf(release.traceId, 2);
    expect(released.filter((s) => s.kind === SERVER).map((s) => s.name)).toEqual(['POST /v1/locks/:key/release']);
    expect(released.find((s) => s.name === 'keyholder.store release')?.parentSpanId).toBe(released.find((s) => s.kind === SERVER)?.spanId);
  });

  it("shows a waiting acquire's time in the queue as a wait span, and links the wait histogram to it", async () => {
    const key = `waited-${hex(4)}`;
    const first = await post(`${keyholder.url}/v1/locks/${key}/acquire`, { ttlMs: 10_000 });
    expect(first.status).toBe(200);

    const waiter = callerSpan();
    const waiting = post(`${keyholder.url}/v1/locks/${key}/acquire`, { ttlMs: 10_000, waitMs: 10_000 }, waiter.traceparent);
    // Released once the second caller is queued: its wait is real.
    await vi.waitFor(
      async () => {
        const res = await fetch(`${keyholder.url}/metrics`);
        if (!/^keyholder_waiting_callers 1$/m.test(await res.text())) throw new Error('not waiting yet');
      },
      { timeout: 10_000, interval: 20 },
    );
    expect((await post(`${keyholder.url}/v1/locks/${key}/release`, { ownerToken: first.body.ownerToken })).status).toBe(200);
    expect((await waiting).status).toBe(200);

    const spans = await traceOf(waiter.traceId, 3);
    const server = spans.find((s) => s.kind === SERVER);
    expect(server?.parentSpanId).toBe(waiter.spanId);
    const wait = spans.find((s) => s.name === 'keyholder.wait');
    expect(wait?.parentSpanId).toBe(server?.spanId);
    expect(attribute(wait!, 'keyholder.wait.granted')).toEqual({ boolValue: true });
    const store = spans.find((s) => s.name === 'keyholder.store acquire');
    expect(store?.parentSpanId).toBe(server?.spanId);
    expect(attribute(store!, 'keyholder.store.waiting')).toEqual({ boolValue: true });

    // Exemplars: the wait histogram's bucket points at this trace (OpenMetrics exposition).
    const metrics = await fetch(`${keyholder.url}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect(metrics.headers.get('content-type')).toContain('application/openmetrics-text');
    const text = await metrics.text();
    expect(text).toMatch(
      new RegExp(
        `^keyholder_lock_wait_seconds_bucket\\{[^}]*outcome="granted"[^}]*\\} \\d+ # \\{trace_id="${waiter.traceId}",span_id="${server?.spanId}"\\}`,
        'm',
      ),
    );
  });

  it('starts a trace of its own for a call without traceparent', async () => {
    const before = new Set(receiver.spans.map((s) => s.traceId));
    const key = `untraced-${hex(4)}`;
    expect((await post(`${keyholder.url}/v1/locks/${key}/acquire`, { ttlMs: 10_000 })).status).toBe(200);
    await vi.waitFor(
      () => {
        const root = receiver.spans.find(
          (s) => s.kind === SERVER && !before.has(s.traceId) && attribute(s, 'keyholder.key')?.stringValue === key,
        );
        if (!root) throw new Error('no server span yet');
        expect(root.parentSpanId ?? '').toBe('');
      },
      { timeout: 20_000, interval: 50 },
    );
  });

  it("joins the trace of a TypeScript client's caller (headers option) and shows its hold as a span (wrapHold)", async () => {
    const { exporter, tracer } = callerTracing();
    const client = new KeyholderClient({
      baseUrl: keyholder.url,
      // The trace context by hand (propagateTrace off), as before the client sent it of its own accord.
      propagateTrace: false,
      headers: () => {
        const headers: Record<string, string> = {};
        propagation.inject(context.active(), headers);
        return headers;
      },
      wrapHold: (key, hold) => tracer.startActiveSpan(`hold ${key}`, (span) => hold().finally(() => span.end())),
    });
    const key = `client-${hex(4)}`;
    await tracer.startActiveSpan('job', async (job) => {
      await client.withLock(key, { ttlMs: 10_000 }, () => 'done');
      job.end();
    });

    const callerSpans = exporter.getFinishedSpans();
    const job = callerSpans.find((s) => s.name === 'job')!.spanContext();
    const hold = callerSpans.find((s) => s.name === `hold ${key}`);
    expect(hold?.spanContext().traceId).toBe(job.traceId);
    expect(hold?.parentSpanContext?.spanId).toBe(job.spanId);

    const spans = await traceOf(job.traceId, 4);
    const server = (route: string) => spans.find((s) => s.kind === SERVER && s.name === `POST /v1/locks/:key/${route}`);
    // The acquire is sent from the job's span; the release from the hold's, inside it.
    expect(server('acquire')?.parentSpanId).toBe(job.spanId);
    expect(server('release')?.parentSpanId).toBe(hold?.spanContext().spanId);
  });

  it("propagates the caller's trace context by itself, and wraps withLock in a keyholder.hold span (holdSpans)", async () => {
    const { exporter, tracer } = callerTracing();
    const recorded = headerRecordingFetch();
    const client = new KeyholderClient({ baseUrl: keyholder.url, holdSpans: true, fetch: recorded.fetch });
    const key = `hold-span-${hex(4)}`;
    const fencingToken = await tracer.startActiveSpan(`job ${key}`, async (job) => {
      // A 1 s lease held for long enough that it renews at least once, inside the hold's span.
      const token = await client.withLock(key, { ttlMs: 1_000, holder: 'traced' }, async (lease) => {
        await vi.waitFor(() => expect(recorded.sent.filter((r) => r.path.endsWith('/renew')).length).toBeGreaterThan(0), {
          timeout: 20_000,
          interval: 20,
        });
        return lease.fencingToken;
      });
      job.end();
      return token;
    });

    const callerSpans = exporter.getFinishedSpans();
    const job = callerSpans.find((s) => s.name === `job ${key}`)!.spanContext();
    const hold = callerSpans.find((s) => s.name === 'keyholder.hold' && s.attributes['keyholder.key'] === key);
    expect(hold?.spanContext().traceId).toBe(job.traceId);
    expect(hold?.parentSpanContext?.spanId).toBe(job.spanId);
    expect(hold?.attributes).toMatchObject({ 'keyholder.key': key, 'keyholder.holder': 'traced', 'keyholder.fencing_token': fencingToken });
    const holdId = hold!.spanContext().spanId;
    // Every request of the hold (acquire, renewals, release) named the hold's span as its parent.
    expect(recorded.sent.length).toBeGreaterThanOrEqual(3);
    for (const r of recorded.sent) expect(r.traceparent, r.path).toBe(`00-${job.traceId}-${holdId}-01`);

    // The server's spans carry the caller's trace id, one per request, each a child of the hold's span.
    await vi.waitFor(() => expect(receiver.inTrace(job.traceId).filter((s) => s.kind === SERVER).length).toBe(recorded.sent.length), {
      timeout: 20_000,
      interval: 50,
    });
    const servers = receiver.inTrace(job.traceId).filter((s) => s.kind === SERVER);
    for (const route of ['acquire', 'renew', 'release'])
      expect(servers.find((s) => s.name === `POST /v1/locks/:key/${route}`)?.parentSpanId, route).toBe(holdId);
    expect(servers.every((s) => s.parentSpanId === holdId)).toBe(true);
  });

  it("marks the hold's span as failed when fn throws, and sends no trace context outside a span or with propagateTrace off", async () => {
    const { exporter, tracer } = callerTracing();
    const recorded = headerRecordingFetch();
    const client = new KeyholderClient({ baseUrl: keyholder.url, holdSpans: true, fetch: recorded.fetch });
    const key = `hold-fails-${hex(4)}`;
    await expect(client.withLock(key, { ttlMs: 10_000 }, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    const hold = exporter.getFinishedSpans().find((s) => s.name === 'keyholder.hold' && s.attributes['keyholder.key'] === key);
    expect(hold?.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(hold?.events.map((e) => e.name)).toContain('exception');

    // Outside any span of the caller's, and with propagateTrace off inside one: no traceparent at all.
    const plain = headerRecordingFetch();
    await new KeyholderClient({ baseUrl: keyholder.url, fetch: plain.fetch }).inspect(key);
    const off = headerRecordingFetch();
    await tracer.startActiveSpan('job-off', async (span) => {
      await new KeyholderClient({ baseUrl: keyholder.url, fetch: off.fetch, propagateTrace: false }).inspect(key);
      span.end();
    });
    expect([...plain.sent, ...off.sent].map((r) => r.traceparent)).toEqual([null, null]);
  });

  it.skipIf(PYTHON_WITH_OTEL === undefined)(
    "the Python client sends the caller's trace context (opentelemetry importable): acquire, renewal, release",
    async () => {
      const caller = callerSpan();
      const script = fileURLToPath(new URL('../clients/python/traced.py', import.meta.url));
      const run = spawnSync(
        PYTHON_WITH_OTEL ?? 'python3',
        ['-I', script, JSON.stringify({ url: keyholder.url, traceId: caller.traceId, spanId: caller.spanId })],
        { encoding: 'utf8', timeout: 60_000 },
      );
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      const { key } = JSON.parse(run.stdout) as { key: string };
      await vi.waitFor(
        () => {
          const routes = receiver
            .inTrace(caller.traceId)
            .filter((s) => s.kind === SERVER && attribute(s, 'keyholder.key')?.stringValue === key)
            .map((s) => s.name);
          for (const route of ['acquire', 'renew', 'release']) expect(routes).toContain(`POST /v1/locks/:key/${route}`);
        },
        { timeout: 20_000, interval: 50 },
      );
      const servers = receiver.inTrace(caller.traceId).filter((s) => s.kind === SERVER);
      expect(servers.every((s) => s.parentSpanId === caller.spanId)).toBe(true);
    },
  );
});
