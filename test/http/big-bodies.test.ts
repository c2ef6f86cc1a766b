import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { requireTool, runProcess } from '../helpers/tools.js';

/**
 * A 2 MiB body gets its 413 problem, never a connection reset: 20 in a row, on one keep-alive
 * connection and on new connections, with and without `Expect: 100-continue`, from Node's http client,
 * fetch (undici, buffered and streamed), curl and Python's urllib. After each series a valid request
 * is served.
 */
const ROUNDS = 20;
const BIG = Buffer.alloc(2 * 1024 * 1024, 'x');
const PATH = '/v1/locks/big-body/acquire';

let t: TestApp;
let port: number;
let base: string;
beforeAll(async () => {
  t = await buildTestApp({ logLevel: 'warn' });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await t.close();
});

interface Answer {
  status: number;
  contentType: string;
  code: unknown;
  continued: boolean;
  reusedSocket: boolean;
  /** The answer's Connection header ('' when it has none). */
  connection: string;
}

/** One POST with node:http; with `expect`, the body is sent only after `100 Continue`. */
function post(agent: Agent | false, expectContinue: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': BIG.length };
    if (expectContinue) headers.expect = '100-continue';
    if (agent === false) headers.connection = 'close';
    let continued = false;
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: PATH, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(answer(res.statusCode ?? 0, res.headers, Buffer.concat(chunks), continued, req.reusedSocket)));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (expectContinue) {
      req.on('continue', () => {
        continued = true;
        req.end(BIG);
      });
    } else {
      req.end(BIG);
    }
  });
}

function answer(status: number, headers: IncomingHttpHeaders, body: Buffer, continued: boolean, reusedSocket: boolean): Answer {
  let code: unknown;
  try {
    code = (JSON.parse(body.toString('utf8')) as { code?: unknown }).code;
  } catch {
    code = undefined;
  }
  return {
    status,
    contentType: String(headers['content-type'] ?? ''),
    code,
    continued,
    reusedSocket,
    connection: String(headers.connection ?? ''),
  };
}

function expectAll413(answers: Array<Pick<Answer, 'status' | 'contentType' | 'code'>>): void {
  expect(answers).toHaveLength(ROUNDS);
  for (const a of answers) {
    expect({ status: a.status, code: a.code }).toEqual({ status: 413, code: 'payload_too_large' });
    expect(a.contentType).toMatch(/^application\/problem\+json/);
  }
}

let served = 0;
async function stillServes(): Promise<void> {
  const res = await fetch(`${base}/v1/locks/after-big-bodies-${++served}/acquire`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ttlMs: 1000 }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

async function series(send: () => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let i = 0; i < ROUNDS; i++) answers.push(await send());
  return answers;
}

describe('2 MiB bodies get 413 problem+json', () => {
  it('node:http on one keep-alive connection, without Expect: the connection is kept and reused', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const answers = await series(() => post(agent, false));
      expectAll413(answers);
      expect(answers.filter((a) => a.reusedSocket)).toHaveLength(ROUNDS - 1);
    } finally {
      agent.destroy();
    }
    await stillServes();
  });

  it('node:http on new connections, without Expect: each answer says Connection: close, as the request asked', async () => {
    const answers = await series(() => post(false, false));
    expectAll413(answers);
    // Without the header a client may take the socket for reusable and send its next request into a
    // connection the server is closing (curl then fails with a broken pipe).
    expect(answers.map((a) => a.connection)).toEqual(answers.map(() => 'close'));
    await stillServes();
  });

  it('node:http with Expect: 100-continue, keep-alive asked for: refused before 100 Continue, the body never sent', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const answers = await series(() => post(agent, true));
      expectAll413(answers);
      expect(answers.filter((a) => a.continued)).toEqual([]);
    } finally {
      agent.destroy();
    }
    await stillServes();
  });

  it('node:http with Expect: 100-continue on new connections', async () => {
    const answers = await series(() => post(false, true));
    expectAll413(answers);
    expect(answers.filter((a) => a.continued)).toEqual([]);
    await stillServes();
  });

  it('fetch (undici), buffered and streamed bodies, on its keep-alive pool', async () => {
    for (const streamed of [false, true]) {
      const answers: Answer[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        const body = streamed
          ? new ReadableStream<Uint8Array>({
              start(controller) {
                for (let at = 0; at < BIG.length; at += 64 * 1024) controller.enqueue(BIG.subarray(at, at + 64 * 1024));
                controller.close();
              },
            })
          : BIG;
        const res = await fetch(`${base}${PATH}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          ...(streamed ? { duplex: 'half' } : {}),
        });
        const text = await res.text();
        answers.push({ ...answer(res.status, Object.fromEntries(res.headers), Buffer.from(text), false, false) });
      }
      expectAll413(answers);
    }
    await stillServes();
  });

  it('curl: one keep-alive connection and new connections, with its automatic Expect: 100-continue and without', async () => {
    requireTool('curl', 'curl');
    const urls = Array.from({ length: ROUNDS }, () => `${base}${PATH}`);
    const variants: Array<{ name: string; args: string[]; reused: boolean }> = [
      // curl asks for 100-continue by itself for bodies over 1 MiB.
      { name: 'keep-alive, Expect', args: [], reused: false },
      { name: 'keep-alive, no Expect', args: ['-H', 'Expect:'], reused: true },
      { name: 'new connections, Expect', args: ['-H', 'Connection: close'], reused: false },
      { name: 'new connections, no Expect', args: ['-H', 'Connection: close', '-H', 'Expect:'], reused: false },
    ];
    for (const v of variants) {
      const out = await runProcess(
        'curl',
        [
          '-sS',
          '-H',
          'Content-Type: application/json',
          '--data-binary',
          '@-',
          ...v.args,
          '-w',
          '\\n%{http_code} %{num_connects} %{content_type}\\n',
          ...urls,
        ],
        { input: BIG },
      );
      expect(out.stderr, v.name).toBe('');
      expect(out.status, v.name).toBe(0);
      const lines = out.stdout.trim().split('\n');
      const answers = [];
      for (let i = 0; i < lines.length; i += 2) {
        const [status, connects, contentType] = (lines[i + 1] ?? '').split(' ');
        answers.push({
          status: Number(status),
          connects: Number(connects),
          contentType: contentType ?? '',
          code: (JSON.parse(lines[i] ?? '{}') as { code?: unknown }).code,
        });
      }
      expectAll413(answers);
      // Without Expect the connection is kept: one connect for all 20.
      if (v.reused)
        expect(
          answers.slice(1).every((a) => a.connects === 0),
          v.name,
        ).toBe(true);
    }
    await stillServes();
  });

  it("Python's urllib (a new connection each time)", async () => {
    requireTool('python3', 'python3');
    const script = `
import json, sys, urllib.request, urllib.error
body = b"x" * (2 * 1024 * 1024)
for _ in range(${ROUNDS}):
    req = urllib.request.Request(sys.argv[1], data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            print(json.dumps({"status": res.status, "contentType": res.headers.get("Content-Type"), "code": None}))
    except urllib.error.HTTPError as err:
        print(json.dumps({"status": err.code, "contentType": err.headers.get("Content-Type"), "code": json.loads(err.read()).get("code")}))
`;
    const out = await runProcess('python3', ['-I', '-c', script, `${base}${PATH}`]);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expectAll413(
      out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Answer),
    );
    await stillServes();
  });
});
