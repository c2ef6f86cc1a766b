// One tenant's attack on a keyholder, run in its own process so its client-side work does not slow
// the measuring tenant's client. Usage: node tenant-attacks.mjs <mode> <baseUrl> <bearer key> [<second key>]
// Prints "ready" once the attack is under way, runs until SIGTERM, then prints a JSON summary of the
// answers it got (status counts) and exits.
//
// Modes:
//   fill-semaphore  acquire 9,999 of the 10,000 permits of semaphore "big" (then exit; no SIGTERM needed):
//                   the last one is the one the watchers' churn takes and gives back
//   inspect         take the last permit of "big" (all 10,000 held), then inspect it 40 times a second
//                   (4 callers each every 100 ms), up to 4 in flight
//   watchers        2,000 sockets each send a blocking query on "big" and never read; once ready, "big"
//                   changes every 100 ms (its last permit taken, then given back), under the second key
//   blocking        1,200 callers each repeat blocking queries on keys of their own (waitMs 60 s); refused, they wait 30 s
//   fake-tokens     renew and release with made-up owner tokens past B's limit, then 200 a second whatever the answers
import { Buffer } from 'node:buffer';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL } from 'node:url';

const [mode, base, key, secondKey] = process.argv.slice(2);
const url = new URL(base);
const auth = { authorization: `Bearer ${key}` };
const agent = new Agent({ keepAlive: true, maxSockets: 2_000 });
const statuses = {};
let stopping = false;

function call(method, path, body, as = auth) {
  return new Promise((resolve) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: { ...as, ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          let parsed = {};
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            // Not JSON (a connection cut mid-answer): the status alone is counted.
          }
          resolve({ status: res.statusCode, body: parsed, retryAfter: Number(res.headers['retry-after'] ?? 0) });
        });
        res.on('error', () => resolve({ status: 0, body: {} }));
      },
    );
    req.on('error', () => {
      statuses.error = (statuses.error ?? 0) + 1;
      resolve({ status: 0, body: {} });
    });
    req.end(payload);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function loop(concurrency, step) {
  await Promise.all(
    Array.from({ length: concurrency }, async (_v, w) => {
      for (let i = 0; !stopping; i++) await step(w, i);
    }),
  );
}

const SEMAPHORE = { limit: 10_000, ttlMs: 3_600_000 };
/**
 * The permits the fill takes: all but one. The last is the one that changes the semaphore for the
 * watchers (taken and given back); with all 10,000 held, every churn acquire was refused (409) and no
 * watcher was ever answered. The inspect attack takes it for its duration, so it inspects all 10,000.
 */
const FILLED = SEMAPHORE.limit - 1;

/**
 * Takes FILLED permits, 64 at a time. A 503 overloaded is the server's answer to that burst when the
 * machine is busy (more acquires queued for the store than it sends in time; seen at load 14), and a
 * 503 store_unavailable a store call past its timeout (load 12 beside stress-ng): the
 * permit is asked for again after the Retry-After it names, as any client does. The fill is the state
 * the attacks run on, before any of A's rounds; only the measured attacks must not be held back.
 */
async function fillSemaphore() {
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < FILLED) {
        next++;
        let r = await call('POST', '/v1/semaphores/big/acquire', SEMAPHORE);
        while (r.status === 503 && (r.body.code === 'overloaded' || r.body.code === 'store_unavailable')) {
          await sleep(r.body.retryAfterMs ?? r.retryAfter * 1000);
          r = await call('POST', '/v1/semaphores/big/acquire', SEMAPHORE);
        }
        if (r.status !== 200) throw new Error(`fill: ${r.status} ${JSON.stringify(r.body)}`);
      }
    }),
  );
  // A 503 store_unavailable (a Redis command past its timeout; seen at load 12 beside stress-ng) may
  // have granted the permit it refused: the fill then holds more than FILLED, and the churn would find
  // no permit to take. Said here, not found later as watchers never answered.
  const { body } = await call('GET', '/v1/semaphores/big');
  if (body.permitsHeld !== FILLED) throw new Error(`fill: ${body.permitsHeld} permits held, not ${FILLED}`);
}

/**
 * The churn's own calls: under team B's second key, as another of its services would, so they are not
 * refused by the rate limit the watchers' 2,000 queries spend (every churn call was a 429 when they
 * shared the attack's key). 10 a second, a hundredth of that key's limit.
 */
const churnAuth = { authorization: `Bearer ${secondKey}` };

/** Takes the last free permit of "big" (asking again after a 503 overloaded's delay); its owner token. */
async function takeLastPermit() {
  for (;;) {
    const r = await call('POST', '/v1/semaphores/big/acquire', SEMAPHORE, churnAuth);
    if (r.status === 200) return r.body.ownerToken;
    if (r.status !== 503 || r.body.code !== 'overloaded') throw new Error(`last permit: ${r.status} ${JSON.stringify(r.body)}`);
    await sleep(r.body.retryAfterMs ?? r.retryAfter * 1000);
  }
}

/** Every 100 ms, takes the last permit of "big" or gives it back: a change every watcher of "big" is told of. */
async function churn() {
  let held;
  while (!stopping) {
    if (held === undefined) {
      const grant = await call('POST', '/v1/semaphores/big/acquire', SEMAPHORE, churnAuth);
      if (grant.status === 200) held = grant.body.ownerToken;
    } else {
      const r = await call('POST', '/v1/semaphores/big/release', { ownerToken: held }, churnAuth);
      if (r.status === 200 || r.status === 409) held = undefined;
    }
    await sleep(100);
  }
  // The permit is given back: the next attack finds the same 9,999 held.
  if (held !== undefined) await call('POST', '/v1/semaphores/big/release', { ownerToken: held }, churnAuth);
}

/**
 * What the watchers' sockets received, read once the attack ends (nothing is read before): the answers
 * by status (the status lines in the bytes), and the sockets the server closed with answers unsent
 * (reset: what it does to a watcher over WATCHER_BACKLOG_MAX_BYTES).
 */
async function readWatchers(sockets) {
  const seen = { 200: 0, 429: 0, 503: 0, other: 0, reset: 0 };
  await Promise.all(
    sockets.map(
      (s) =>
        new Promise((resolve) => {
          let tail = '';
          let timer;
          const done = () => {
            clearTimeout(timer);
            s.destroy();
            resolve();
          };
          // Done once nothing more comes for a second (what the kernel held arrives at once, but 2,000
          // sockets' answers take a busy process a while to read: with 300 ms, some were cut unread).
          const quiet = () => {
            clearTimeout(timer);
            timer = setTimeout(done, 1_000);
          };
          s.on('data', (chunk) => {
            const text = tail + chunk.toString('latin1');
            for (const m of text.matchAll(/HTTP\/1\.1 (\d{3}) /g)) {
              const status = m[1];
              if (status in seen) seen[status]++;
              else seen.other++;
            }
            tail = text.slice(-16);
            quiet();
          });
          s.on('error', () => {
            seen.reset++;
            done();
          });
          s.on('end', done);
          s.on('close', done);
          quiet();
          s.resume();
        }),
    ),
  );
  return seen;
}

/** The watchers' sockets: one blocking query each. */
const WATCHERS = 2_000;

async function watchers() {
  const { body } = await call('GET', '/v1/semaphores/big');
  const before = await takenIn();
  const sockets = [];
  const bytes = `GET /v1/semaphores/big?index=${body.index}&waitMs=60000 HTTP/1.1\r\nhost: x\r\nauthorization: ${auth.authorization}\r\n\r\n`;
  for (let i = 0; i < WATCHERS; i++) {
    const s = connect(Number(url.port), url.hostname);
    s.on('error', () => undefined);
    // Never read: no data listener, and paused, so answers pile up wherever the server keeps them.
    s.pause();
    s.write(bytes);
    sockets.push(s);
    if (i % 200 === 199) await sleep(10);
  }
  await untilTakenIn(WATCHERS, before);
  let churning;
  return {
    // The semaphore changes only once the attack is measured: a change before it answered the
    // waiting watchers while A was not yet measured.
    start: () => (churning = churn()),
    finish: async () => {
      await churning;
      watchersSaw = await readWatchers(sockets);
    },
  };
}

/**
 * What the server has taken in of an opening: its callers with an open wait now (the waiting-callers
 * gauge) and its error answers so far (every code: rate_limited, too_many_waiters, overloaded...),
 * read from its metrics. Every query of an opening is, once the server has read it, either waiting or
 * refused.
 */
async function takenIn() {
  const { text } = await new Promise((resolve) => {
    const req = request({ host: url.hostname, port: url.port, path: '/metrics', agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', () => resolve({ text: '' }));
    });
    req.on('error', () => resolve({ text: '' }));
    req.end();
  });
  let refused = 0;
  for (const m of text.matchAll(/^keyholder_problems_total\{code="[a-z_]+"\} (\d+)/gm)) refused += Number(m[1]);
  return { waiting: Number(/^keyholder_waiting_callers (\d+)/m.exec(text)?.[1] ?? NaN), refused };
}

/**
 * Waits until the server has read all `callers` queries of an opening (each one waiting or refused
 * since `before`): a condition, not a time. Measured at load 7-13: 0.17-0.38 s for the watchers'
 * 2,000, 1.2 s for the blocking callers' ramp; the fixed 3 s (and 2 s after the blocking callers'
 * 200th refusal) it replaces waited longer than needed there and would not wait enough on a machine
 * busy enough: A's measured requests would queue behind the server still reading the opening, a
 * burst (load shedding's to answer, for every tenant alike), not what holding the waits costs.
 * Gives up after 120 s with an error: an opening never taken in is a finding, not a measure.
 */
async function untilTakenIn(callers, before) {
  const started = performance.now();
  for (;;) {
    const now = await takenIn();
    if (now.waiting + (now.refused - before.refused) >= callers) {
      takenInMs = Math.round(performance.now() - started);
      return;
    }
    if (performance.now() - started > 120_000) {
      throw new Error(`the server took in ${now.waiting} waiting + ${now.refused - before.refused} refused of ${callers} callers in 120 s`);
    }
    await sleep(50);
  }
}

/** How long the server took to take in the opening once it was sent (ms; printed with the summary). */
let takenInMs;

/** What the watchers' sockets received (readWatchers), printed with the summary. */
let watchersSaw;

/**
 * Made-up tokens at a fixed rate, 200 a second: twice the 100 a second (1,000 per 10 s) team B's
 * key is allowed in the test, never slowed by a 429. Fixed, not as fast as the process can go: at full
 * speed the attacker is a busy process on the same 2 cores as the server, and A's p99 then measured the
 * machine sharing its cores, not the server serving B (an attacker elsewhere costs the server only the
 * requests it sends). Up to 32 in flight: a server answering more slowly than that is not fed more.
 */
const FAKE_TOKENS_PER_SECOND = 200;
const FAKE_TOKENS_IN_FLIGHT = 32;

/** A made-up token the schema takes (16 to 128 of A-Z a-z 0-9 _ -): it reaches the store, which finds it holds nothing. */
const madeUpToken = (i) => `madeup${String(i).padStart(16, '0')}`;

const fakeTokenCall = (i) =>
  call('POST', `/v1/locks/b-${i % 4}/${i % 2 ? 'release' : 'renew'}`, {
    ownerToken: madeUpToken(i),
    ...(i % 2 ? {} : { ttlMs: 5_000 }),
  });

/**
 * Spends B's window first (4 at a time until the first 429): the flood is then one the rate limit
 * refuses. 2,000 at most, twice the window: a server that never refuses does not hold the attack back.
 */
async function overTheLimit() {
  let i = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (!statuses[429] && !stopping && i < 2_000) await fakeTokenCall(i++);
    }),
  );
}

/**
 * A keep-alive connection that writes a request's bytes as they are and reads only the status line and
 * content-length of each answer, one request at a time (as an http.Agent's socket). The flood's own CPU
 * runs on the same 2 cores as the server and team A, where an attacker elsewhere costs the server only
 * the requests it sends: through node:http the flood's client spent about 4x the CPU the server spent
 * answering it (1.19 s against 0.28 s over five attacked rounds, measured), and A's p99 measured that.
 */
class RawConnection {
  constructor() {
    this.socket = connect(Number(url.port), url.hostname);
    this.socket.setNoDelay(true);
    /** The bytes of an answer's head received so far, until its blank line. */
    this.head = EMPTY;
    /** The bytes of the answer's body still to come, once its head is read (undefined before). */
    this.bodyLeft = undefined;
    this.status = 0;
    this.answered = undefined;
    this.open = true;
    this.socket.on('data', (chunk) => this.read(chunk));
    const lost = () => {
      this.open = false;
      this.answered?.(0);
      this.answered = undefined;
    };
    this.socket.on('error', lost);
    this.socket.on('close', lost);
  }

  /** Resolves with the answer's status (0: the connection was lost first). */
  send(bytes) {
    return new Promise((resolve) => {
      this.answered = resolve;
      this.socket.write(bytes);
    });
  }

  /** The body is counted, never copied nor decoded: an inspect's answer is ~11 KB. */
  read(chunk) {
    let data = chunk;
    while (data.length > 0) {
      if (this.bodyLeft === undefined) {
        this.head = this.head.length === 0 ? data : Buffer.concat([this.head, data]);
        const headEnd = this.head.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const head = this.head.toString('latin1', 0, headEnd);
        this.status = Number(head.slice(9, 12));
        this.bodyLeft = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        data = this.head.subarray(headEnd + 4);
        this.head = EMPTY;
      }
      const taken = Math.min(this.bodyLeft, data.length);
      this.bodyLeft -= taken;
      data = data.subarray(taken);
      if (this.bodyLeft > 0) return;
      this.bodyLeft = undefined;
      const answered = this.answered;
      this.answered = undefined;
      answered?.(this.status);
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** The bytes of made-up token call `i`: the same request as fakeTokenCall's. */
function fakeTokenBytes(i) {
  const body = JSON.stringify({ ownerToken: madeUpToken(i), ...(i % 2 ? {} : { ttlMs: 5_000 }) });
  return (
    `POST /v1/locks/b-${i % 4}/${i % 2 ? 'release' : 'renew'} HTTP/1.1\r\nhost: ${url.host}\r\n` +
    `authorization: ${auth.authorization}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`
  );
}

const rawConnections = [];

/**
 * Sends `bytes` on an idle raw connection of `idle` (a new one when none is open), counts the answer's
 * status, and gives the connection back to `idle` if the server kept it open.
 */
function sendRaw(idle, bytes) {
  let connection = idle.pop();
  // One the server closed while idle (its keep-alive timeout) is let go of.
  while (connection !== undefined && !connection.open) {
    rawConnections.splice(rawConnections.indexOf(connection), 1);
    connection = idle.pop();
  }
  if (connection === undefined) {
    connection = new RawConnection();
    rawConnections.push(connection);
  }
  const used = connection;
  void used.send(bytes).then((status) => {
    if (status === 0) statuses.error = (statuses.error ?? 0) + 1;
    else statuses[status] = (statuses[status] ?? 0) + 1;
    if (used.open) idle.push(used);
    else rawConnections.splice(rawConnections.indexOf(used), 1);
  });
}

async function fakeTokens() {
  const idle = [];
  const started = performance.now();
  let sent = 0;
  while (!stopping) {
    const due = Math.floor(((performance.now() - started) * FAKE_TOKENS_PER_SECOND) / 1000);
    for (; sent < due && (idle.length > 0 || rawConnections.length < FAKE_TOKENS_IN_FLIGHT); sent++) {
      sendRaw(idle, fakeTokenBytes(sent));
    }
    // Sends the cap held back are dropped, not sent later in a burst.
    sent = Math.max(sent, due);
    await sleep(5);
  }
}

/**
 * Inspects of "big" at a fixed 40 a second (one every 25 ms), up to 4 in flight: what 4 callers each
 * inspecting every 100 ms send, on a fixed schedule rather than each after its last answer. Callers that
 * each wait for their answer fall into step (answered together, they ask together), and the server
 * answers callers asking together with one read (ChangeWatch.current): a hostile tenant spreads its
 * calls instead, so they are spread here. On raw keep-alive connections, as the made-up token flood
 * (RawConnection): through node:http the attacker's own client CPU, on the cores the server and team A
 * share, was a third of the server's.
 */
const INSPECTS_PER_SECOND = 40;
const INSPECTS_IN_FLIGHT = 4;

async function inspects() {
  const bytes = `GET /v1/semaphores/big HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: ${auth.authorization}\r\n\r\n`;
  const idle = [];
  const started = performance.now();
  for (let sent = 0; !stopping;) {
    const due = Math.floor(((performance.now() - started) * INSPECTS_PER_SECOND) / 1000) + 1;
    for (; sent < due && (idle.length > 0 || rawConnections.length < INSPECTS_IN_FLIGHT); sent++) {
      sendRaw(idle, bytes);
    }
    // Sends the cap held back are dropped, not sent later in a burst.
    sent = Math.max(sent, due);
    await sleep(Math.max(1, started + (sent * 1000) / INSPECTS_PER_SECOND - performance.now()));
  }
}

/** The blocking attack's callers: 200 more than team B's namespace may keep waiting. */
const BLOCKING_CALLERS = 1_200;
let blockingBefore;

async function main() {
  if (mode === 'fill-semaphore') {
    await fillSemaphore();
    process.stdout.write(`${JSON.stringify({ statuses })}\n`);
    return;
  }
  let work;
  let finish = async () => undefined;
  let startAfterReady = () => undefined;
  if (mode === 'inspect') {
    // All 10,000 permits held while B inspects: the fill's 9,999 and the last one, given back after.
    const last = await takeLastPermit();
    // 4 callers, each inspecting every 100 ms: up to 40 a second, four times the rate that cost other
    // teams their renewals when an inspect read every permit.
    work = inspects();
    finish = async () => {
      for (const c of rawConnections) c.socket.destroy();
      await call('POST', '/v1/semaphores/big/release', { ownerToken: last }, churnAuth);
    };
  } else if (mode === 'watchers') {
    const attack = await watchers();
    startAfterReady = attack.start;
    finish = attack.finish;
  } else if (mode === 'blocking') {
    blockingBefore = await takenIn();
    // 1,200 callers (200 more than its namespace may keep waiting), 50 more every 50 ms (a fleet
    // starting up, not one burst: a burst past the instance's in-flight budget is load shedding's to
    // answer, for every tenant alike).
    work = loop(BLOCKING_CALLERS, async (w, i) => {
      if (i === 0) await sleep(Math.floor(w / 50) * 50);
      const path = `/v1/locks/b-watch-${w}`;
      // Index 1: a key never held; the query waits the whole 60 s.
      const r = await call('GET', `${path}?index=1&waitMs=60000`);
      // A refused caller waits 30 s before it asks again: what is measured is what the open waits
      // cost, not a request flood (a tenant's request rate is its rate limit's to bound).
      if (r.status === 429 || r.status === 503) await sleep(30_000);
    });
  } else if (mode === 'fake-tokens') {
    await overTheLimit();
    work = fakeTokens();
    finish = async () => {
      for (const c of rawConnections) c.socket.destroy();
    };
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  // The attack is held once its opening burst has been taken in: the blocking callers' ramp (1.2 s),
  // the watchers' 2,000 connections and queries.
  // Opening thousands of requests at once is a burst, load shedding's to answer for every tenant
  // alike; what is measured here is what holding them costs the other team.
  // The blocking callers' opening is taken in once the server has read every caller's first query
  // (waiting or refused); the watchers' within watchers().
  if (mode === 'blocking') await untilTakenIn(BLOCKING_CALLERS, blockingBefore);
  process.stdout.write('ready\n');
  startAfterReady();
  // What is reported is the answers B got while A was measured, not its opening.
  const attackStartedAt = performance.now();
  const opening = { ...statuses };
  await new Promise((resolve) => process.once('SIGTERM', resolve));
  const attackMs = performance.now() - attackStartedAt;
  const attack = Object.fromEntries(Object.entries(statuses).map(([status, n]) => [status, n - (opening[status] ?? 0)]));
  const sent = Object.values(attack).reduce((a, b) => a + b, 0);
  stopping = true;
  // Before the agent's sockets are cut: a churn call cut in flight could leave the last permit taken.
  await finish();
  agent.destroy();
  await Promise.race([work, sleep(2_000)]);
  const summary = {
    statuses: attack,
    perSecond: Math.round((sent * 1000) / attackMs),
    ...(takenInMs === undefined ? {} : { takenInMs }),
    ...(watchersSaw ? { watchersSaw } : {}),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
