import { Redis } from 'ioredis';
import { RedisServer } from '../test/helpers/redis-server.js';
import { readRecords } from '../src/domain/history.js';
import type { LoopResult, Task, TaskResult } from './protocol.js';
import { startKeyholder, type OwnedProcess } from './procs.js';
import { pin, placement, type Placement } from './pin.js';

/**
 * `npm run bench -- --only history`: what lease history costs. Two keyholder instances on one Redis, one
 * with HISTORY=on and one with HISTORY=off, take turns at the `pairs` loop (acquire + release), A/B/A/B,
 * so a change in the machine's load hits both alike; then the history the `on` instance wrote is
 * weighed in Redis (MEMORY USAGE of its lists and indexes, over the events they hold).
 *
 * The load worker sends the API key it was started with (KEYHOLDER_BENCH_API_KEY, read when it loads):
 * the caller makes the key and its file before it forks the worker, and passes the file here (`access`).
 */
export interface HistoryBenchSettings {
  readonly rounds: number;
  readonly concurrency: number;
  readonly warmMs: number;
  readonly durationMs: number;
  /** The unrecorded run of each instance after it starts, ms (after warmMs). */
  readonly warmUpMs: number;
  /** Start the HISTORY=on instance first in even rounds, off first in odd ones (default: the other way). */
  readonly reverseStart?: boolean;
  /** Pin the processes (see bench/pin.ts; default: where the scheduler puts them). */
  readonly pin?: boolean;
}

interface SideResult {
  pairsPerSecond: number[];
  cpuMsPerPair: number[];
  redisUsPerPair: number[];
  /** Redis calls per pair by command (INFO commandstats), one map per round. */
  redisCallsPerPair: Record<string, number>[];
}

export interface HistoryBenchResult {
  readonly on: SideResult;
  readonly off: SideResult;
  events: number;
  /** The list entries that hold them (fewer than the events: folded pairs). */
  records: number;
  lists: number;
  redisBytes: number;
  encodedBytesPerEvent: number;
  /** Where the processes ran: null, left to the scheduler. */
  placement: Placement | null;
}

interface Worker {
  readonly pid: number;
  run<T extends TaskResult>(task: Task): Promise<T>;
}

/**
 * Rounds run: an even count, so each side is started (and measured) first in as many rounds as the other.
 * The process started second, measured first, read 1.1 to 3x the pairs/s of the other in 5 of 5 rounds at
 * load ~13: an odd count would hand that to one side once more than to the other.
 */
const balancedRounds = (rounds: number) => 2 * Math.ceil(rounds / 2);

/**
 * The on/off ratio of each two consecutive rounds (one with each start order): the geometric mean of their
 * ratios, in which an effect of the start order that multiplies one side's figure cancels.
 */
const pairedRatios = (ratios: number[]) =>
  Array.from({ length: Math.floor(ratios.length / 2) }, (_, i) => Math.sqrt((ratios[2 * i] as number) * (ratios[2 * i + 1] as number)));

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

export async function measureHistory(
  settings: HistoryBenchSettings,
  dir: string,
  access: Record<string, string>,
  nodeFlags: { on: string[]; off: string[] },
  worker: Worker,
  owned: OwnedProcess[],
  progress: (line: string) => void,
): Promise<{ result: HistoryBenchResult; text: string }> {
  const redis = await RedisServer.start();
  try {
    const common = { ...access, NAMESPACE_MAX_HELD_LOCKS: '20000' };
    const start = (name: 'on' | 'off') =>
      startKeyholder(
        `keyholder-history-${name}`,
        redis.url,
        dir,
        { ...common, HISTORY: name, REDIS_KEY_PREFIX: `kh${name}:` },
        nodeFlags[name],
      );
    // Opt-in (--pin): both instances on one CPU set, Redis and the load worker on the other.
    const cpus = settings.pin ? placement() : null;
    if (cpus) for (const pid of [redis.pid, worker.pid]) if (pid !== undefined) pin(pid, cpus.rest);
    const side = (): SideResult => ({ pairsPerSecond: [], cpuMsPerPair: [], redisUsPerPair: [], redisCallsPerPair: [] });
    const result: HistoryBenchResult = {
      on: side(),
      off: side(),
      events: 0,
      records: 0,
      lists: 0,
      redisBytes: 0,
      encodedBytesPerEvent: 0,
      placement: cpus,
    };
    type Instance = Awaited<ReturnType<typeof startKeyholder>>;
    const loop = (name: 'on' | 'off', target: Instance, round: number, durationMs: number) =>
      worker.run<LoopResult>({
        kind: 'loop',
        scenario: 'pairs',
        target: target.url,
        concurrency: settings.concurrency,
        warmMs: settings.warmMs,
        durationMs,
        tag: `history-${name}-${round}`,
        serverPid: target.proc.pid,
        redisPid: redis.pid,
        redisUrl: redis.url,
      });
    for (let round = 1; round <= balancedRounds(settings.rounds); round++) {
      // Both instances started afresh every round, in an order that alternates with the round (reverseStart
      // flips it): whatever the process started first gains (its CPU placement next to Redis and the load
      // worker, its JIT warming first) goes to each side in turn, not to one side for a whole run. Started
      // once for a run, the on/off ratio moved by some 10% with the start order.
      const onFirst = round % 2 === 1 ? !settings.reverseStart : Boolean(settings.reverseStart);
      const started: Partial<Record<'on' | 'off', Instance>> = {};
      for (const name of onFirst ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const instance = await start(name);
        owned.push(instance.proc);
        if (cpus) pin(instance.proc.pid, cpus.servers);
        started[name] = instance;
      }
      const on = started.on as Instance;
      const off = started.off as Instance;
      // Each instance warmed (its JIT's first compilations, its connections' start) before either is
      // measured: a process's first seconds read a fraction of its pairs/s on a busy machine. In start order.
      for (const [name, target] of onFirst
        ? ([
            ['on', on],
            ['off', off],
          ] as const)
        : ([
            ['off', off],
            ['on', on],
          ] as const)) {
        const r = await loop(name, target, round, settings.warmUpMs);
        target.proc.truncateLog();
        progress(`history round ${round} warm-up ${name}: ${r.unitsPerSecond.toFixed(0)} pairs/s (not counted)`);
      }
      // The measured runs in the other order (the instance started second runs first).
      for (const [name, target] of onFirst
        ? ([
            ['off', off],
            ['on', on],
          ] as const)
        : ([
            ['on', on],
            ['off', off],
          ] as const)) {
        const r = await loop(name, target, round, settings.durationMs);
        // A round with no pair done (every call refused, say a 401) is a broken bench, not a figure.
        if (r.units === 0) {
          throw new Error(
            `history ${name} round ${round}: no pair completed; errors ${JSON.stringify(r.errors)}\n${target.proc.tailLog()}`,
          );
        }
        target.proc.truncateLog();
        result[name].pairsPerSecond.push(r.unitsPerSecond);
        result[name].cpuMsPerPair.push(((r.serverCpuSeconds ?? 0) * 1000) / r.units);
        result[name].redisUsPerPair.push(((r.redisCpuSeconds ?? 0) * 1e6) / r.units);
        result[name].redisCallsPerPair.push(
          Object.fromEntries(Object.entries(r.redisCommands ?? {}).map(([command, calls]) => [command, calls / r.units])),
        );
        progress(
          `history round ${round}/${settings.rounds} ${name} (started ${onFirst === (name === 'on') ? 'first' : 'second'}): ${r.unitsPerSecond.toFixed(0)} pairs/s`,
        );
      }
      for (const instance of [on, off]) {
        await instance.proc.stop();
        owned.splice(owned.indexOf(instance.proc), 1);
      }
    }
    // What the history of the `on` instance weighs in Redis: its lists and its shard indexes.
    const client = new Redis(redis.url);
    try {
      let cursor = '0';
      const keys: string[] = [];
      do {
        const [next, batch] = await client.scan(cursor, 'MATCH', 'khon:*', 'COUNT', 1000);
        cursor = next;
        keys.push(...batch.filter((k) => /\}(h[lsr]\/|H$)/.test(k)));
      } while (cursor !== '0');
      let sampledChars = 0;
      let sampled = 0;
      for (const key of keys) {
        result.redisBytes += Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
        if (/\}h[lsr]\//.test(key)) {
          result.lists++;
          // Events, not records: a grant with its release folded in is two (readRecords gives both back).
          const records = await client.lrange(key, 0, -1);
          const events = readRecords(records, 0, Number.MAX_SAFE_INTEGER).length;
          result.events += events;
          result.records += records.length;
          if (sampled < 2_000) {
            sampledChars += records.reduce((n, e) => n + Buffer.byteLength(e), 0);
            sampled += events;
          }
        }
      }
      result.encodedBytesPerEvent = sampled ? sampledChars / sampled : 0;
    } finally {
      client.disconnect();
    }
    return { result, text: renderHistory(settings, result) };
  } finally {
    await redis.stop();
  }
}

function renderHistory(settings: HistoryBenchSettings, r: HistoryBenchResult): string {
  const onPairs = median(r.on.pairsPerSecond);
  const offPairs = median(r.off.pairsPerSecond);
  const onCpu = median(r.on.cpuMsPerPair);
  const offCpu = median(r.off.cpuMsPerPair);
  const onRedis = median(r.on.redisUsPerPair);
  const offRedis = median(r.off.redisUsPerPair);
  const calls = (s: SideResult) => {
    const names = [...new Set(s.redisCallsPerPair.flatMap((m) => Object.keys(m)))].sort();
    return names.map((n) => `${n} ${median(s.redisCallsPerPair.map((m) => m[n] ?? 0)).toFixed(2)}`).join(', ');
  };
  const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`;
  // The cost as it is judged: the pairs/s a host gives up. pairs/s moves by more than that between rounds on
  // a busy machine, so also from CPU: a host whose CPU runs out does pairs in inverse proportion to the
  // server + Redis CPU a pair takes, so it gives up 1 - off/on of them.
  const ratios = r.on.pairsPerSecond.map((x, i) => x / (r.off.pairsPerSecond[i] ?? NaN));
  // Server CPU per pair, on over off, per round (the two runs of a round back to back, on one machine
  // load): the judge on a busy machine, where a median of each side over rounds moves with the load.
  const cpuRatios = r.on.cpuMsPerPair.map((x, i) => x / (r.off.cpuMsPerPair[i] ?? NaN));
  const redisRatios = r.on.redisUsPerPair.map((x, i) => x / (r.off.redisUsPerPair[i] ?? NaN));
  // Odd rounds start `on` first (even ones `off`), or the other way with reverseStart.
  const orderRatios = ratios.map((x, i) => ((i % 2 === 0) !== Boolean(settings.reverseStart) ? 1 / x : x));
  const geomean = (xs: number[]) => Math.exp(xs.reduce((n, x) => n + Math.log(x), 0) / xs.length);
  const offTotal = offCpu * 1000 + offRedis;
  const onTotal = onCpu * 1000 + onRedis;
  // Server + Redis CPU per pair, on over off, per round; judged two by two as pairs/s is. The medians of
  // each side over rounds (offTotal, onTotal) move with the load of rounds they were not paired in: one run
  // read -4.7 % from them where its rounds two by two read +6 %.
  const totalRatios = r.on.cpuMsPerPair.map(
    (x, i) => (x * 1000 + (r.on.redisUsPerPair[i] ?? NaN)) / ((r.off.cpuMsPerPair[i] ?? NaN) * 1000 + (r.off.redisUsPerPair[i] ?? NaN)),
  );
  const totalPaired = median(pairedRatios(totalRatios));
  return [
    `## Lease history: cost (HISTORY=on vs off)`,
    '',
    `\`pairs\` (acquire + release, 10,000 distinct keys in turn) at concurrency ${settings.concurrency}, ${settings.rounds} rounds of ` +
      `${settings.durationMs} ms each, A/B alternating; medians. Both instances started afresh each round, ${settings.reverseStart ? 'off' : 'on'} first in odd rounds; ` +
      (r.placement
        ? `both instances pinned to CPU ${r.placement.servers}, Redis and the load worker to CPU ${r.placement.rest}.`
        : 'unpinned.'),
    '',
    '| | pairs/s | server CPU ms per pair | Redis CPU µs per pair |',
    '|---|---:|---:|---:|',
    `| HISTORY=off | ${offPairs.toFixed(0)} | ${offCpu.toFixed(3)} | ${offRedis.toFixed(1)} |`,
    `| HISTORY=on | ${onPairs.toFixed(0)} | ${onCpu.toFixed(3)} | ${onRedis.toFixed(1)} |`,
    `| change | ${pct(onPairs, offPairs)} | ${pct(onCpu, offCpu)} | ${pct(onRedis, offRedis)} |`,
    '',
    `Every round (pairs/s): off ${r.off.pairsPerSecond.map((x) => x.toFixed(0)).join(', ')}; on ${r.on.pairsPerSecond.map((x) => x.toFixed(0)).join(', ')}.`,
    `On/off ratio of pairs/s per round (each pair of runs back to back): ${r.on.pairsPerSecond
      .map((x, i) => (x / (r.off.pairsPerSecond[i] ?? NaN)).toFixed(3))
      .join(', ')}.`,
    `Rounds two by two (one with each start order; geometric mean): pairs/s on/off ${pairedRatios(ratios)
      .map((x) => x.toFixed(3))
      .join(', ')}, **median ${median(pairedRatios(ratios)).toFixed(3)}**; server CPU per pair on/off ${pairedRatios(cpuRatios)
      .map((x) => x.toFixed(3))
      .join(', ')}, **median ${median(pairedRatios(cpuRatios)).toFixed(3)}**; Redis CPU per pair on/off ${pairedRatios(redisRatios)
      .map((x) => x.toFixed(3))
      .join(', ')}, **median ${median(pairedRatios(redisRatios)).toFixed(3)}**.`,
    `Start order: the instance started second over the one started first, pairs/s per round ${orderRatios
      .map((x) => x.toFixed(2))
      .join(', ')} (geometric mean ${geomean(orderRatios).toFixed(3)}: the bias the pairing cancels).`,
    `Server CPU per pair, on/off per round: ${cpuRatios.map((x) => x.toFixed(3)).join(', ')}; ` +
      `**median ${median(cpuRatios).toFixed(3)}** (${pct(median(cpuRatios), 1)} server CPU per pair with history on).`,
    '',
    `**Cost of HISTORY=on**: pairs/s on/off ${median(pairedRatios(ratios)).toFixed(3)} (median over rounds two by two, above); server + Redis CPU per pair ` +
      `${offTotal.toFixed(0)} µs off, ${onTotal.toFixed(0)} µs on (medians of each side), on/off over rounds two by two ${pairedRatios(
        totalRatios,
      )
        .map((x) => x.toFixed(3))
        .join(', ')}, **median ${totalPaired.toFixed(3)}**: a host that runs out of ` +
      `CPU gives up **${((1 - 1 / totalPaired) * 100).toFixed(1)}% of its pairs/s** (negative: less than the noise).`,
    '',
    `Redis calls per pair: off ${calls(r.off)}; on ${calls(r.on)}.`,
    '',
    `Redis memory of the history written: ${r.redisBytes} bytes for ${r.events} events (${r.records} records) in ${r.lists} lists (and their indexes): ` +
      `**${r.events ? (r.redisBytes / r.events).toFixed(0) : '-'} bytes per event** in Redis; ${r.encodedBytesPerEvent.toFixed(0)} bytes per event encoded.`,
    '',
  ].join('\n');
}
