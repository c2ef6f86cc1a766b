import { readFileSync } from 'node:fs';
// Node's own, not the global: a test's fake timers must not hold back the writes to Redis.
import { setImmediate as afterThisTurn } from 'node:timers';
import { randomBase64url } from '../../domain/random.js';
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Cluster, Command as RedisCommand, Redis, ReplyError } from 'ioredis';
import type { RedisClient } from './client.js';
import { masterGate } from './nodes.js';
import { ownerTokenHex } from './owner-bytes.js';
import type { LockKeys, PermitKeys, QuotaKeys } from './keys.js';
import { unwrapEcho } from './replies.js';

/**
 * The Lua scripts, one file per atomic operation, in ONE table: each entry names its file and builds
 * the script's KEYS and ARGV, in the order its header comment lists them, from named arguments. The
 * scripts are registered once per connection with ioredis `defineCommand` (EVALSHA, falling back to
 * EVAL after a Redis restart flushed the script cache) and called through `Scripts.run`.
 *
 * Every script is _common.lua (the clock read once, number formatting, the live-lease test) followed
 * by its own file, in which a line `--- @include "name"` stands for name.lua (as in BullMQ).
 */

type Arg = string | number;

/** What a script that may hand the lock to a waiter needs to do so. */
export interface HandOverArgs {
  /** How long a lock's hash (and so its last fencing token) outlives its lease, ms. */
  readonly graceMs: number;
  /** Prefix of the pub/sub channels hand-overs are announced on (the instance id completes it). */
  readonly channelPrefix: string;
  /** The lock's id, as the hand-over message names it. */
  readonly lockName: string;
}

/** What an acquire that may queue its caller needs (locks and permits alike). */
export interface WaitArgs extends HandOverArgs {
  /** 0 = do not wait. */
  readonly waitMs: number;
  /** Unique per waiting call; "-" when not waiting. */
  readonly waiterId: string;
  readonly instanceId: string;
  readonly maxWaiters: number;
  readonly livenessMs: number;
}

export interface AcquireArgs extends WaitArgs {
  readonly keys: LockKeys;
  readonly ownerToken: string;
  readonly ttlMs: number;
  /** "" for none. */
  readonly holder: string;
  /** "" for none. */
  readonly idempotencyKey: string;
  /** Most quota units the lock's quota shard may count (the namespace's limit over the shards, rounded up); 0 = no quota. */
  readonly maxQuotaSlots: number;
  /** 0 or absent = none. */
  readonly lockDelayMs?: number;
}

/** A lock set: each lock's keys and name (its id), in the set's order. */
export interface LockSetMember {
  readonly keys: LockKeys;
  readonly name: string;
}

export interface LockSetAcquireArgs {
  readonly members: readonly LockSetMember[];
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly holder: string;
  readonly graceMs: number;
  readonly lockDelayMs: number;
  readonly channelPrefix: string;
}

export interface LockSetRenewArgs {
  readonly lockKeys: readonly string[];
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly graceMs: number;
}

export interface LockSetReleaseArgs {
  readonly members: readonly LockSetMember[];
  readonly ownerToken: string;
  readonly graceMs: number;
  readonly channelPrefix: string;
}

export interface RenewArgs {
  readonly lockKey: string;
  /** The lock's quota shard (the lease's unit moves with it). */
  readonly quota: QuotaKeys;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly graceMs: number;
}

export interface ReleaseArgs extends HandOverArgs {
  readonly keys: LockKeys;
  readonly ownerToken: string;
  /** The calling instance's id: a waiter of it handed the lock is named in the reply, not sent a message (absent: none). */
  readonly instanceId?: string;
}

export interface CancelArgs {
  readonly keys: LockKeys;
  readonly waiterId: string;
  readonly ownerToken: string;
}

export interface HeartbeatArgs extends HandOverArgs {
  readonly keys: LockKeys;
  readonly livenessMs: number;
  /** This instance's waiters on the lock. */
  readonly waiters: ReadonlyArray<{ readonly id: string; readonly ownerToken: string }>;
}

export interface ForceReleaseArgs extends HandOverArgs {
  readonly keys: LockKeys;
  /** Evict only the lease with this fencing token; undefined for whichever is live. */
  readonly fencingToken?: number;
}

export interface QuotaReserveArgs {
  readonly quota: QuotaKeys;
  readonly quotaSlotId: string;
  readonly ttlMs: number;
  readonly maxQuotaSlots: number;
}

export interface QuotaExtendArgs {
  readonly quota: QuotaKeys;
  readonly quotaSlotId: string;
  readonly expiresAtMs: number;
}

/** numberOfKeys of a script whose key count varies: its args then start with the count (ioredis's convention). */
const VARIABLE_KEYS = -1;
export interface PermitAcquireArgs extends WaitArgs {
  readonly keys: PermitKeys;
  readonly ownerToken: string;
  readonly ttlMs: number;
  /** "" for none. */
  readonly holder: string;
  readonly weight: number;
  readonly capacity: number;
}

export interface PermitRenewArgs {
  readonly keys: PermitKeys;
  readonly ownerToken: string;
  readonly ttlMs: number;
  readonly graceMs: number;
}

export interface PermitReleaseArgs extends HandOverArgs {
  readonly keys: PermitKeys;
  readonly ownerToken: string;
}

export interface PermitCancelArgs extends HandOverArgs {
  readonly keys: PermitKeys;
  readonly waiterId: string;
  readonly ownerToken: string;
}

export interface PermitHeartbeatArgs extends HandOverArgs {
  readonly keys: PermitKeys;
  readonly livenessMs: number;
  readonly waiters: ReadonlyArray<{ readonly id: string; readonly ownerToken: string }>;
}

export interface RateAllowanceArgs {
  readonly windowKey: string;
  readonly windowMs: number;
  readonly max: number;
  readonly wanted: number;
}

interface ScriptSpec<A> {
  readonly file: string;
  /** VARIABLE_KEYS: the first arg is the count. */
  readonly numberOfKeys: number;
  /** KEYS then ARGV, in the order of the script's header. */
  readonly args: (a: A) => Arg[];
}

const spec = <A>(file: string, numberOfKeys: number, args: (a: A) => Arg[]): ScriptSpec<A> => ({ file, numberOfKeys, args });
const queueKeys = (k: LockKeys): Arg[] => [k.lock, k.queue, k.waiters];
const permitKeys = (k: PermitKeys): Arg[] => [k.pool, k.queue, k.waiters, k.expiries];
const handOver = (a: HandOverArgs): Arg[] => [a.graceMs, a.channelPrefix, a.lockName];
const allKeys = (k: LockKeys): Arg[] => [k.lock, k.queue, k.waiters, k.quota.count, k.quota.ends];
/** The waiting arguments, in the order both acquire scripts list them (fencing grace first, the name last). */
const waitArgs = (a: WaitArgs): Arg[] => [
  a.graceMs,
  a.waitMs,
  a.waiterId,
  a.instanceId,
  a.maxWaiters,
  a.livenessMs,
  a.channelPrefix,
  a.lockName,
];
/** A lock set's key count, then each lock's hash, queue and waiter records. */
const setKeys = (members: readonly LockSetMember[]): Arg[] => [members.length * 5, ...members.flatMap((m) => allKeys(m.keys))];
const setNames = (members: readonly LockSetMember[]): Arg[] => members.map((m) => m.name);

export const SCRIPTS = {
  // The two calls of every lock pair build their arrays in one literal, without spreading helpers'
  // arrays into it: cheaper, and they run on every request.
  acquire: spec<AcquireArgs>('acquire.lua', 5, (a) => [
    a.keys.lock,
    a.keys.queue,
    a.keys.waiters,
    a.keys.quota.count,
    a.keys.quota.ends,
    a.ownerToken,
    a.ttlMs,
    a.holder,
    a.graceMs,
    // The waiting in one argument, read by the script only when it does not grant at once.
    `${a.waitMs}|${a.maxWaiters}|${a.livenessMs}|${a.waiterId}|${a.instanceId}`,
    a.channelPrefix,
    a.lockName,
    a.idempotencyKey,
    a.maxQuotaSlots,
    a.lockDelayMs ?? 0,
    ownerTokenHex(a.ownerToken),
  ]),
  renew: spec<RenewArgs>('renew.lua', 3, (a) => [
    a.lockKey,
    a.quota.count,
    a.quota.ends,
    a.ownerToken,
    a.ttlMs,
    a.graceMs,
    ownerTokenHex(a.ownerToken),
  ]),
  release: spec<ReleaseArgs>('release.lua', 5, (a) => [
    a.keys.lock,
    a.keys.queue,
    a.keys.waiters,
    a.keys.quota.count,
    a.keys.quota.ends,
    a.ownerToken,
    a.graceMs,
    a.channelPrefix,
    a.lockName,
    a.instanceId ?? '',
    ownerTokenHex(a.ownerToken),
  ]),
  inspect: spec<{ readonly keys: LockKeys }>('inspect.lua', 3, (a) => queueKeys(a.keys)),
  cancel: spec<CancelArgs>('cancel.lua', 5, (a) => [...allKeys(a.keys), a.waiterId, a.ownerToken]),
  heartbeat: spec<HeartbeatArgs>('heartbeat.lua', 5, (a) => [
    ...allKeys(a.keys),
    a.livenessMs,
    a.graceMs,
    a.channelPrefix,
    a.lockName,
    ...a.waiters.flatMap((w) => [w.id, w.ownerToken]),
  ]),
  forceRelease: spec<ForceReleaseArgs>('force-release.lua', 5, (a) => [
    ...allKeys(a.keys),
    a.graceMs,
    a.channelPrefix,
    a.lockName,
    a.fencingToken ?? '',
  ]),
  requestRelease: spec<{
    readonly lockKey: string;
    readonly fencingToken: number;
    readonly payload: string;
    readonly channelPrefix: string;
    readonly lockName: string;
  }>('request-release.lua', 1, (a) => [a.lockKey, a.fencingToken, a.payload, a.channelPrefix, a.lockName]),
  quotaReserve: spec<QuotaReserveArgs>('quota-reserve.lua', 2, (a) => [
    a.quota.count,
    a.quota.ends,
    a.quotaSlotId,
    a.ttlMs,
    a.maxQuotaSlots,
  ]),
  quotaExtend: spec<QuotaExtendArgs>('quota-extend.lua', 2, (a) => [a.quota.count, a.quota.ends, a.quotaSlotId, a.expiresAtMs]),
  quotaAdd: spec<{ readonly quota: QuotaKeys; readonly endMs: number; readonly quotaSlotId: string }>('quota-add.lua', 2, (a) => [
    a.quota.count,
    a.quota.ends,
    a.endMs,
    a.quotaSlotId,
  ]),
  // retiredUntilMs: the end of a lease gone for good (force-released), its unit retired until then; absent
  // for a plain give-back, which sends no argument more.
  quotaFree: spec<{ readonly quota: QuotaKeys; readonly quotaSlotId: string; readonly retiredUntilMs?: number }>(
    'quota-free.lua',
    2,
    (a) =>
      a.retiredUntilMs === undefined
        ? [a.quota.count, a.quota.ends, a.quotaSlotId]
        : [a.quota.count, a.quota.ends, a.quotaSlotId, a.retiredUntilMs],
  ),
  lockDelay: spec<{ readonly lockKey: string; readonly ownerToken: string; readonly lockDelayMs: number }>('lock-delay.lua', 1, (a) => [
    a.lockKey,
    a.ownerToken,
    a.lockDelayMs,
  ]),
  // Lock sets take a variable number of keys: numberOfKeys is given per call (VARIABLE_KEYS).
  lockSetAcquire: spec<LockSetAcquireArgs>('lock-set-acquire.lua', VARIABLE_KEYS, (a) => [
    ...setKeys(a.members),
    ...[a.ownerToken, a.ttlMs, a.holder, a.graceMs, a.lockDelayMs, a.channelPrefix],
    ...setNames(a.members),
  ]),
  lockSetRenew: spec<LockSetRenewArgs>('lock-set-renew.lua', VARIABLE_KEYS, (a) => [
    a.lockKeys.length,
    ...a.lockKeys,
    a.ownerToken,
    a.ttlMs,
    a.graceMs,
  ]),
  lockSetRelease: spec<LockSetReleaseArgs>('lock-set-release.lua', VARIABLE_KEYS, (a) => [
    ...setKeys(a.members),
    ...[a.ownerToken, a.graceMs, a.channelPrefix],
    ...setNames(a.members),
  ]),
  permitAcquire: spec<PermitAcquireArgs>('permit-acquire.lua', 4, (a) => [
    ...permitKeys(a.keys),
    ...[a.ownerToken, a.ttlMs, a.holder, a.weight, a.capacity],
    ...waitArgs(a),
  ]),
  permitRenew: spec<PermitRenewArgs>('permit-renew.lua', 4, (a) => [...permitKeys(a.keys), a.ownerToken, a.ttlMs, a.graceMs]),
  permitRelease: spec<PermitReleaseArgs>('permit-release.lua', 4, (a) => [...permitKeys(a.keys), a.ownerToken, ...handOver(a)]),
  permitCancel: spec<PermitCancelArgs>('permit-cancel.lua', 4, (a) => [...permitKeys(a.keys), a.waiterId, a.ownerToken, ...handOver(a)]),
  permitHeartbeat: spec<PermitHeartbeatArgs>('permit-heartbeat.lua', 4, (a) => [
    ...permitKeys(a.keys),
    a.livenessMs,
    ...handOver(a),
    ...a.waiters.flatMap((w) => [w.id, w.ownerToken]),
  ]),
  permitInspect: spec<{ readonly keys: PermitKeys; readonly shown: number }>('permit-inspect.lua', 4, (a) => [
    ...permitKeys(a.keys),
    a.shown,
  ]),
  permitForceRelease: spec<HandOverArgs & { readonly keys: PermitKeys; readonly fencingToken?: number }>(
    'permit-force-release.lua',
    4,
    (a) => [...permitKeys(a.keys), ...handOver(a), a.fencingToken ?? ''],
  ),
  permitRequestRelease: spec<{
    readonly keys: PermitKeys;
    readonly fencingToken: number;
    readonly payload: string;
    readonly channelPrefix: string;
  }>('permit-request-release.lua', 4, (a) => [...permitKeys(a.keys), a.fencingToken, a.payload, a.channelPrefix]),
  queue: spec<{
    readonly keys: { readonly lock: string; readonly queue: string; readonly waiters: string };
    readonly limit: number;
    readonly layout: 'lock' | 'permit';
  }>('queue.lua', 3, (a) => [a.keys.lock, a.keys.queue, a.keys.waiters, a.limit, a.layout]),
  watchMark: spec<{ readonly lockKey: string; readonly keepMs: number }>('watch-mark.lua', 1, (a) => [a.lockKey, a.keepMs]),
  rateAllowance: spec<RateAllowanceArgs>('rate-allowance.lua', 1, (a) => [a.windowKey, a.windowMs, a.max, a.wanted]),
} as const;

export type ScriptName = keyof typeof SCRIPTS;
export type ScriptArgs<N extends ScriptName> = Parameters<(typeof SCRIPTS)[N]['args']>[0];

/** A script file of ./scripts as written (no prelude, no includes expanded). */
export function loadScript(name: string): string {
  return readFileSync(new URL(`./scripts/${name}`, import.meta.url), 'utf8');
}

const INCLUDE = /^--- @include "([\w-]+)"$/gm;

/**
 * A script's full source: the prelude, then its file with each include replaced by that file. Includes
 * may include others (_handover includes _lock, _watch and _delay); each file is pulled in once, at its first
 * include. The helpers the script never calls are then left out (withoutUnusedFunctions).
 */
export function scriptSource(name: ScriptName): string {
  const expand = includeExpander();
  return withoutUnusedFunctions(`${loadScript('_common.lua')}\n${expand(loadScript(SCRIPTS[name].file))}`);
}

/** Replaces each include line by its file (and that file's includes), each file once per expander. */
function includeExpander(): (text: string) => string {
  const included = new Set<string>();
  const expand = (text: string): string =>
    text.replace(INCLUDE, (_line, include: string) => {
      if (included.has(include)) return '';
      included.add(include);
      return expand(loadScript(`${include}.lua`));
    });
  return expand;
}

/**
 * The scripts the hot path runs (the acquire, release and renew of a lock, a semaphore and a read/write
 * lock), loaded into Redis as one function library where the server allows it (FUNCTION LOAD, Redis 7) and then called with FCALL.
 *
 * Why: Redis runs an EVAL script's whole text on every call, so every helper of the includes is made
 * anew as a closure each time, however little of it the call uses. A library's top level runs once, at
 * its load: its helpers live as long as the library, and a call runs only its own function. Measured on
 * Redis 7.0 (callgrind, 2,000 acquire + release pairs): 312k against 276k instructions per pair; Redis
 * time per pair (INFO commandstats, 30,000 pairs, 5 rounds interleaved) 29.2-31.6 against 26.5-29.1 us. A
 * semaphore's acquire + release (limit 5): 380.4k-382.7k against 338.5k-342.6k instructions.
 */
export const FUNCTION_SCRIPTS = [
  'acquire',
  'release',
  'renew',
  'permitAcquire',
  'permitRelease',
  'permitRenew',
] as const satisfies readonly ScriptName[];
export type FunctionScript = (typeof FUNCTION_SCRIPTS)[number];

/** _common.lua's clock read, which an EVAL script runs at its start; a library runs it at each call's. */
const CLOCK_READ = /^do\n {2}local t = call\('TIME'\)\n([^]*?)^end\n/m;
/**
 * _common.lua's read of the Redis and Lua functions it keeps as locals, which an EVAL script runs at its
 * start; a library at its first call (its top level runs at its load, where Redis gives it only the
 * loading API: redis.register_function, no redis.call, no math or string).
 */
const API_READ = /^do\n( {2}call, [^]*?)^end\n/m;
/**
 * The includes' top-level values that a call sets (the rest are helpers, made once): a library keeps them
 * between calls, so each call starts them afresh, as an EVAL script's run would. publishedChanges is the
 * one that must (a second notice of a lock in a later call would be taken for a repeat); the owner
 * token's text and bytes would still read right, but are not left from another caller.
 */
const PER_CALL_VALUES = ['knownText', 'knownBytes', 'publishedChanges'] as const;
/**
 * What the library keeps between calls, made at its first call (an EVAL script leaves it nil): the digits
 * fmt made and the owner tokens' bytes knowOwner worked out (kept, _common.lua).
 */
const KEPT_VALUES = { kept: '{}', keptCount: '0' } as const;

export interface FunctionLibrary {
  /** keyholder_ and 16 hex digits of the source's SHA1: a version's library never clashes with another's. */
  readonly name: string;
  readonly source: string;
  /** Each script's function name (FCALL's first argument). */
  readonly functions: Readonly<Record<FunctionScript, string>>;
}

/**
 * The hot path's library: _common.lua (its clock read made a function run at each call), the includes
 * the scripts use (each once), then each script's file as a function of (KEYS, ARGV) and a registered
 * function that reads the clock, starts PER_CALL_VALUES afresh, takes the nonce off ARGV and answers
 * {nonce, reply}, as withEcho does for an EVAL script.
 */
export function functionLibrary(): FunctionLibrary {
  const common = loadScript('_common.lua');
  const clock = CLOCK_READ.exec(common);
  if (clock === null) throw new Error("_common.lua: its clock read (do ... call('TIME') ... end) is not where the library expects it");
  const api = API_READ.exec(common);
  if (api === null)
    throw new Error('_common.lua: its read of the functions it keeps (do call, ... end) is not where the library expects it');
  const expand = includeExpander();
  const bodies = FUNCTION_SCRIPTS.map((script) => {
    const file = loadScript(SCRIPTS[script].file);
    const includes = (file.match(INCLUDE) ?? []).map((line) => expand(line)).join('\n');
    return { script, includes, body: file.replace(INCLUDE, '') };
  });
  const helpers = `${common.replace(CLOCK_READ, '').replace(API_READ, '')}\n${bodies.map((b) => b.includes).join('\n')}`;
  for (const value of [...PER_CALL_VALUES, ...Object.keys(KEPT_VALUES)]) {
    if (!new RegExp(`^local [\\w, ]*\\b${value}\\b`, 'm').test(helpers)) throw new Error(`function library: ${value} is not declared`);
  }
  const code = [
    helpers,
    `local function readApi()\n${api[1]}  ${Object.keys(KEPT_VALUES).join(', ')} = ${Object.values(KEPT_VALUES).join(', ')}\nend`,
    `local function readClock()\n  local t = call('TIME')\n${clock[1]}end`,
    ...bodies.map(({ script, body }) => `local function ${script}Script(KEYS, ARGV)\n${body}\nend`),
    [
      'local function entry(script)',
      '  return function(KEYS, ARGV)',
      // call is nil until the first call has read the functions (API_READ).
      '    if not call then',
      '      readApi()',
      '    end',
      '    readClock()',
      `    ${PER_CALL_VALUES.join(', ')} = ${PER_CALL_VALUES.map(() => 'nil').join(', ')}`,
      '    local n = #ARGV',
      '    local nonce = ARGV[n]',
      '    ARGV[n] = nil',
      '    local reply = script(KEYS, ARGV)',
      '    return {nonce, reply}',
      '  end',
      'end',
    ].join('\n'),
  ].join('\n');
  const name = `keyholder_${createHash('sha1').update(code).digest('hex').slice(0, 16)}`;
  const functions = Object.fromEntries(FUNCTION_SCRIPTS.map((script) => [script, `${name}_${script}`])) as Record<FunctionScript, string>;
  const registered = FUNCTION_SCRIPTS.map((script) => `redis.register_function('${functions[script]}', entry(${script}Script))`);
  return { name, functions, source: `#!lua name=${name}\n${withoutUnusedFunctions(`${code}\n${registered.join('\n')}`)}\n` };
}

/** A top-level helper as the script files write them: `local function name(` at the line start, up to the first `end` line. */
const TOP_LEVEL_FUNCTION = /^local function (\w+)\([^]*?^end$\n?/gm;
/**
 * A helper made on demand (the wait-queue helpers, _handover.lua's makeQueueHelpers): declared with the
 * other top-level locals, defined as `function name(` two spaces in, up to the first `end` line there.
 */
const MADE_ON_DEMAND_FUNCTION = /^ {2}function (\w+)\([^]*?^ {2}end$\n?/gm;

/**
 * Drops the top-level `local function`s that nothing else in the source names, until none is left, and
 * the helpers made on demand (MADE_ON_DEMAND_FUNCTION) that nothing names. Redis runs a script's whole
 * text on every call, so each helper an include brings costs a closure per call even when the script
 * never calls it: release, for one, would otherwise build the queueing helpers on every call (measured:
 * about 1 us of Redis time per call). The script files keep the layout this relies on (a test checks
 * it): helpers start at column 0 and end at an `end` line of their own at column 0; helpers made on
 * demand start at two spaces and end at an `end` line at two spaces.
 */
export function withoutUnusedFunctions(source: string): string {
  let text = source;
  for (;;) {
    // Names in comments (the includes' headers list what they define) are not uses.
    const code = withoutComments(text);
    const named = (fn: string) => code.match(new RegExp(`\\b${fn}\\b`, 'g'))?.length ?? 0;
    let dropped = false;
    // Named once: its own definition. (A helper that only calls itself would be kept; none does.)
    text = text.replace(TOP_LEVEL_FUNCTION, (block: string, fn: string) => {
      if (named(fn) > 1) return block;
      dropped = true;
      return '';
    });
    // Named twice: its declaration and its definition.
    text = text.replace(MADE_ON_DEMAND_FUNCTION, (block: string, fn: string) => {
      if (named(fn) > 2) return block;
      dropped = true;
      return '';
    });
    if (!dropped) return text;
  }
}

/** Lua source without its comments (block `--[[ ]]` and line `--`); the scripts put no `--` inside a string. */
function withoutComments(source: string): string {
  return source.replace(/--\[\[[^]*?\]\]/g, '').replace(/--[^\n]*/g, '');
}

/**
 * Every script runs inside this wrapper: the caller passes a one-off nonce as the last argument (taken
 * off ARGV before the script body runs, so each script's header stays true) and the reply comes back as
 * {nonce, reply}. Replies on a connection are matched to calls by order alone; if one is ever lost (a
 * proxy dropping bytes, a reply skipped after a timeout), every later reply would answer the wrong call,
 * and an acquire could be told it was granted another call's lease. The echo makes that impossible.
 * The nonce is taken off by index, not with table.remove (a C function call): 1.4k fewer instructions
 * per lock pair in Redis (callgrind, 300 pairs).
 */
export function withEcho(body: string): string {
  return `local __n = #ARGV\nlocal __nonce = ARGV[__n]\nARGV[__n] = nil\nlocal __reply = (function()\n${body}\nend)()\nreturn {__nonce, __reply}\n`;
}

/** 12 random bytes: unique per call for all practical purposes, cheap to send. */
function newNonce(): string {
  return randomBase64url(12);
}

/** The scripts as registered on one connection. */
export interface Scripts {
  /**
   * Runs a script with a fresh nonce; resolves to its own reply, or rejects with MisalignedReplyError.
   * `atOnce`: the call leaves for Redis now, with whatever this turn wrote before it, instead of at the
   * end of the turn (see tickBatcher): for a release that may hand the lock to a waiter, so the requests
   * read after it in the same turn (on a hot key, the releaser's next acquire, read together with the new
   * holder's release) are not parsed and sent first, and Redis does not run their scripts before
   * answering it. Each such call is a socket write of its own.
   */
  run<N extends ScriptName>(name: N, args: ScriptArgs<N>, atOnce?: boolean): Promise<unknown>;
}

type Command = (...args: Array<Arg | Arg[]>) => Promise<unknown>;

/** Each script's ioredis command name: `acquire` -> `khAcquire`. */
const COMMANDS = Object.fromEntries(
  Object.keys(SCRIPTS).map((name) => [name, `kh${name.charAt(0).toUpperCase()}${name.slice(1)}`]),
) as Record<ScriptName, string>;

/** Every script's full source behind the echo wrapper, its SHA1 (as EVALSHA names it), and the function library. */
interface BuiltScripts {
  readonly sources: Readonly<Record<ScriptName, string>>;
  readonly shas: Readonly<Record<ScriptName, string>>;
  readonly library: FunctionLibrary;
}

let built: BuiltScripts | undefined;

/**
 * Built once per process, at the first connection that defines the scripts: the script files do not change
 * while it runs, and each connection (the store's, the rate limiter's) would otherwise expand, prune and
 * hash all of them again (some 55 ms).
 */
function builtScripts(): BuiltScripts {
  if (built !== undefined) return built;
  const sources = {} as Record<ScriptName, string>;
  const shas = {} as Record<ScriptName, string>;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    sources[name] = withEcho(scriptSource(name));
    shas[name] = createHash('sha1').update(sources[name]).digest('hex');
  }
  built = { sources, shas, library: functionLibrary() };
  return built;
}

/**
 * Registers every script on `redis` behind the echo wrapper, as command `kh<Name>`. `masterWaitMs`, on
 * a Cluster: how long a call may wait for the connection to its keys' master to be ready before it is
 * sent (masterGate, nodes.ts); without it a call is sent as things are.
 */
export function defineScripts(redis: RedisClient, options: { masterWaitMs?: number } = {}): Scripts {
  // The commands are reached through an index signature: ioredis adds them at run time.
  const commands = redis as unknown as Record<string, Command>;
  const { sources, shas, library } = builtScripts();
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    const { numberOfKeys } = SCRIPTS[name];
    // Without numberOfKeys, ioredis takes the first argument as the key count.
    redis.defineCommand(COMMANDS[name], { lua: sources[name], ...(numberOfKeys === VARIABLE_KEYS ? {} : { numberOfKeys }) });
    // ioredis groups auto-pipelined calls by the slot of their first argument, which for these is the
    // key count: on a Cluster such a call shared a pipeline with calls of other masters, and ioredis
    // refused the whole pipeline ("...same slots allocation group"), so every call in it answered 503.
    // Sent on their own, they are routed by their keys.
    // A new list, not a push: the client's default list is ioredis's one array shared by every Cluster client.
    if (numberOfKeys === VARIABLE_KEYS && redis instanceof Cluster) {
      const ignored = redis.options.autoPipeliningIgnoredCommands ?? [];
      if (!ignored.includes(COMMANDS[name])) redis.options.autoPipeliningIgnoredCommands = [...ignored, COMMANDS[name]];
    }
  }
  const writes = tickBatcher(redis);
  const direct = directSender(redis, sources, shas, library);
  const gate = options.masterWaitMs === undefined ? null : masterGate(redis, options.masterWaitMs);
  return {
    async run<N extends ScriptName>(name: N, args: ScriptArgs<N>, atOnce = false): Promise<unknown> {
      writes.batch();
      const buildArgs = SCRIPTS[name].args as (a: ScriptArgs<N>) => Arg[];
      const nonce = newNonce();
      const argv = buildArgs(args);
      argv.push(nonce);
      if (direct !== null) {
        // EVALSHA sha numkeys keys... args...; a variable-keys script's arguments start with their key count.
        const numberOfKeys = SCRIPTS[name].numberOfKeys;
        if (numberOfKeys === VARIABLE_KEYS) argv.unshift(direct.sha(name));
        else argv.unshift(direct.sha(name), numberOfKeys);
        let raw: unknown;
        try {
          const sent = direct.send(name, argv, false);
          if (atOnce) writes.flush();
          raw = await sent;
        } catch (err) {
          if (!isNoScript(err) && !direct.functionMissing(err)) throw err;
          // A copy: the first command owns argv (its numbers made strings, its SHA1 maybe replaced by the source
          // or a function's name). Nothing ran: Redis refused the call before the script or function started.
          raw = await direct.send(name, argv.slice(), true);
        }
        return unwrapEcho(name, raw, nonce);
      }
      if (gate !== null) {
        // Every key of a script shares one slot (keys.ts): its first key names the master.
        const waiting = gate(String(SCRIPTS[name].numberOfKeys === VARIABLE_KEYS ? argv[1] : argv[0]));
        if (waiting !== undefined) await waiting;
      }
      const command = commands[COMMANDS[name]] as Command;
      // One array argument: ioredis flattens it, so the arguments are not spread into the call.
      const sent = command.call(redis, argv);
      if (atOnce) writes.flush();
      return unwrapEcho(name, await sent, nonce);
    },
  };
}

/** The NOSCRIPT error: Redis no longer has the script (its cache was flushed); EVAL sends it again. */
const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.includes('NOSCRIPT');

/** FCALL refused: the library is gone (FUNCTION FLUSH, a restart without persistence) or FCALL is not allowed here. */
const FUNCTION_REFUSED = /Function not found|unknown command .?fcall|NOPERM.*fcall/i;
/** Of those, the ones that last: a Redis before 7 or a user whose ACL lacks FCALL. */
const FUNCTIONS_UNAVAILABLE = /unknown command|NOPERM/i;
/**
 * A load refused for the moment, as Redis refuses any write while it lasts: over maxmemory, too few
 * replicas (min-replicas-to-write), a failed save, a busy script, a primary demoted or still loading.
 */
const LOAD_REFUSED_FOR_NOW = /^(OOM|NOREPLICAS|MISCONF|BUSY|READONLY|MASTERDOWN|LOADING)\b/;
/** How long after a load refused for the moment it is sent again at the earliest. */
const LOAD_RETRY_MS = 1000;
/**
 * FCALL refused before it ran because Redis takes no writes for now: a function without flags counts as
 * one that may write (and add memory), so Redis refuses it up front, where a script is refused only at
 * its first write (that may add memory): an acquire of a held lock writes nothing and answers "held", a
 * permit release's first write frees memory. Over maxmemory, too few replicas in sync
 * (min-replicas-to-write), a failed save (stop-writes-on-bgsave-error). The bare errors: one raised
 * inside a function ends with the function's name (" script: ...").
 */
const FUNCTION_REFUSED_WRITES =
  /^(OOM command not allowed when used memory > 'maxmemory'|NOREPLICAS Not enough good replicas to write|MISCONF [^:]*)\.?$/;

/**
 * On one Redis connection without auto-pipelining or an ioredis key prefix (how the store connects to a
 * single Redis, directly or through Sentinel), a script call is one command sent straight to the client:
 * the same command and reply as through the `kh<Name>` command ioredis defines, without the extra
 * promise that command chains onto every call (for its NOSCRIPT retry, done here only when that error
 * comes) and the copies of the arguments it makes. As in ioredis, the first call of a script on each
 * socket is an EVAL carrying its source, so a new connection (after a Redis restart) never gets NOSCRIPT;
 * a cache flushed under an open connection answers NOSCRIPT once, and the call is sent again as an EVAL.
 *
 * The hot path's scripts (FUNCTION_SCRIPTS) are called as functions (FCALL) on a socket that has been
 * sent the library (FUNCTION LOAD, once per socket, written ahead of the call that first needs it; a
 * library already there, loaded by another instance or before a failover, is as good). Whether a call
 * is an FCALL or an EVALSHA is decided as it is written, by its socket: a call written to a socket the
 * library was not sent on (a reconnect in between) goes as a script. A load Redis refuses (Redis 6, an
 * ACL without FUNCTION) turns functions off for this client: the calls written after it are refused
 * (FUNCTION_REFUSED, before anything runs) and sent again as EVAL, and later ones go as scripts; one
 * refused for the moment (over maxmemory, NOREPLICAS) is sent again on a call a second later. A
 * library gone under an open socket (FUNCTION FLUSH) is sent again before the next call. An FCALL
 * refused because Redis takes no writes for now is sent again as EVAL (FUNCTION_REFUSED_WRITES). Null: use the defined
 * commands.
 */
function directSender(
  redis: RedisClient,
  sources: Readonly<Record<ScriptName, string>>,
  shas: Readonly<Record<ScriptName, string>>,
  library: FunctionLibrary,
): DirectSender | null {
  if (!(redis instanceof Redis) || redis.options.enableAutoPipelining === true || redis.options.keyPrefix) return null;
  const client = redis;
  const loaded = {} as Record<ScriptName, WeakSet<object>>;
  for (const name of Object.keys(sources) as ScriptName[]) loaded[name] = new WeakSet();
  const functionOf: Partial<Record<ScriptName, string>> = library.functions;
  /** The sockets the library was written to; `loading`: a load is on its way to the current one. */
  let librarySent = new WeakSet<object>();
  let loading = false;
  let functionsOff = false;
  /** After a load Redis refused for the moment (performance.now()): no load is sent again before then. */
  let loadAgainAt = 0;

  /** FUNCTION LOAD of the library; marks its socket as it is written, so every call written after it may be an FCALL. */
  class LibraryLoad extends RedisCommand {
    /** The socket it was written to. */
    socket: object | undefined;

    constructor() {
      super('function', ['LOAD', library.source], { replyEncoding: 'utf8' });
    }

    override toWritable(socket: object): string | Buffer {
      this.socket = socket;
      librarySent.add(socket);
      loading = false;
      return super.toWritable(socket);
    }
  }

  /** Sends the library ahead of the next call unless the current socket has it or a load is already on its way. */
  function loadLibrary(): void {
    if (functionsOff || loading || (client.stream !== undefined && librarySent.has(client.stream))) return;
    if (performance.now() < loadAgainAt) return;
    loading = true;
    const load = new LibraryLoad();
    load.promise.catch((err: unknown) => {
      loading = false;
      // Another instance (or this one, before a reconnect) loaded this version: as good as ours. A
      // connection lost under the load (not a reply) says nothing of Redis: the next socket is sent it.
      if (!(err instanceof ReplyError) || (err as Error).message.includes('already exists')) return;
      // The calls written behind a refused load are refused and sent again as EVAL (functionMissing).
      // Refused for the moment (LOAD_REFUSED_FOR_NOW): that socket goes on with scripts, and the load is
      // sent again on a call after LOAD_RETRY_MS, not on every call while the refusal lasts. Turned off
      // for good, a brief refusal cost the functions for the instance's life.
      if (LOAD_REFUSED_FOR_NOW.test((err as Error).message)) {
        if (load.socket !== undefined) librarySent.delete(load.socket);
        loadAgainAt = performance.now() + LOAD_RETRY_MS;
        return;
      }
      // Redis refused it otherwise (an old Redis, an ACL): scripts from here on.
      functionsOff = true;
    });
    void client.sendCommand(load);
  }

  /** EVALSHA, EVAL with the source on a socket that has not run this script yet, or FCALL (see above). */
  class ScriptCommand extends RedisCommand {
    /**
     * Takes `args` as they are (this command owns the array from here on). ioredis's constructor copies
     * its arguments with Array.prototype.flat, which costs about 3 us for the 22 of an acquire on Node 20
     * (more than the rest of the command): it is handed no arguments, and these are set after it, each
     * number made a string as ioredis would have (stringifyArguments).
     */
    constructor(
      readonly script: ScriptName,
      args: Arg[],
      /** Always as an EVAL with the source (a call sent again after NOSCRIPT or a refused FCALL). */
      private readonly asEval: boolean,
    ) {
      super('evalsha', NO_ARGS, { replyEncoding: 'utf8' });
      this.args = args;
      this.stringifyArguments();
    }

    override toWritable(socket: object): string | Buffer {
      const fn = functionOf[this.script];
      if (this.asEval) {
        this.name = 'eval';
        this.args[0] = sources[this.script];
        loaded[this.script].add(socket);
      } else if (fn !== undefined && !functionsOff && librarySent.has(socket)) {
        this.name = 'fcall';
        this.args[0] = fn;
      } else {
        // Decided at each write: a call written again after a reconnect goes as that socket allows.
        const seen = loaded[this.script];
        this.name = seen.has(socket) ? 'evalsha' : 'eval';
        this.args[0] = seen.has(socket) ? shas[this.script] : sources[this.script];
        seen.add(socket);
      }
      // Every argument is a string by now: an Arg is a string or a number, and stringifyArguments made
      // the numbers strings (no Buffer, so none of ioredis's buffer mode).
      return commandText(this.name, this.args as string[]);
    }
  }
  return {
    sha: (name) => shas[name],
    send(name, args, asEval) {
      if (!asEval && functionOf[name] !== undefined) loadLibrary();
      const command = new ScriptCommand(name, args, asEval);
      void redis.sendCommand(command);
      return command.promise;
    },
    functionMissing(err) {
      if (!(err instanceof Error)) return false;
      // Writes refused for now: sent again as a script, which Redis judges write by write; the library stays.
      if (FUNCTION_REFUSED_WRITES.test(err.message) && (err as { command?: { name?: string } }).command?.name === 'fcall') return true;
      if (!FUNCTION_REFUSED.test(err.message)) return false;
      if (FUNCTIONS_UNAVAILABLE.test(err.message)) functionsOff = true;
      // Gone from Redis: sent again before the next call, whatever socket had it.
      else librarySent = new WeakSet();
      return true;
    },
  };
}

/** `$<n>\r\n`, the head of a bulk string of n bytes, for the lengths most arguments have (made once, not per argument). */
const BULK_HEADS = Array.from({ length: 256 }, (_, n) => `$${n}\r\n`);

/**
 * The RESP text of a command whose arguments are all strings: the same bytes ioredis's toWritable
 * writes (`*<count>`, then `$<bytes>` and the text of the name and of each argument), built as one
 * flat string by a join. ioredis adds the pieces to a string one `+` at a time, which makes a string
 * object for each of the four pieces of every argument (an acquire has 22), and the socket write then
 * copies the whole chain once more into a flat string: about 5.5 KB allocated per acquire and release
 * pair, the largest allocation of the store's call path, against about 2 KB here.
 */
export function commandText(name: string, args: readonly string[]): string {
  // Stryker disable next-line ArrayDeclaration: every part is assigned below; the preset length only spares the array's growth
  const parts = new Array<string>(args.length * 3 + 1);
  parts[0] = `*${args.length + 1}\r\n$${Buffer.byteLength(name)}\r\n${name}\r\n`;
  let at = 1;
  for (const arg of args) {
    const bytes = Buffer.byteLength(arg);
    parts[at++] = BULK_HEADS[bytes] ?? `$${bytes}\r\n`;
    parts[at++] = arg;
    parts[at++] = '\r\n';
  }
  return parts.join('');
}

/** The arguments ScriptCommand hands ioredis's constructor: none (it sets its own after; ioredis only copies this array). */
const NO_ARGS: Arg[] = [];

/** Script calls sent as commands of their own (see directSender). */
interface DirectSender {
  /** The SHA1 of the script's source, as EVALSHA names it. */
  sha(name: ScriptName): string;
  /**
   * Sends FCALL, EVALSHA, or EVAL with the source (when `asEval`, or on a socket that has not run it) with
   * `args` (sha, numkeys, keys, args; the first replaced by the function's name or the source as sent).
   */
  send(name: ScriptName, args: Arg[], asEval: boolean): Promise<unknown>;
  /**
   * Whether `err` is an FCALL refused before it ran (FUNCTION_REFUSED, FUNCTION_REFUSED_WRITES), which the call survives
   * as an EVAL; notes what it says.
   */
  functionMissing(err: unknown): boolean;
}

/** How script calls reach the socket: batched per turn of the event loop (see tickBatcher). */
interface WriteBatcher {
  /** Holds this turn's writes until the turn ends (on the first call of a turn). */
  batch(): void;
  /** Sends what this turn has written so far now; later writes of the turn are held again. */
  flush(): void;
}

/**
 * On one Redis connection without ioredis's auto-pipelining: the script calls of one turn of the event
 * loop leave in one socket write. The first call corks the socket and a setImmediate (after the turn's
 * I/O callbacks, as auto-pipelining waits) uncorks it, so Node sends everything written in between with
 * one writev: the batching of auto-pipelining without its pipeline object and promises per batch. A
 * Cluster keeps ioredis's auto-pipelining (one socket per node).
 */
function tickBatcher(redis: RedisClient): WriteBatcher {
  if (!(redis instanceof Redis) || redis.options.enableAutoPipelining === true) return { batch: () => undefined, flush: () => undefined };
  let corked: Socket | undefined;
  return {
    batch() {
      if (corked !== undefined) return;
      // The socket of this moment: after a reconnect the next tick corks the new one.
      const socket = redis.stream;
      if (socket === undefined) return;
      corked = socket;
      socket.cork();
      afterThisTurn(() => {
        corked = undefined;
        socket.uncork();
      });
    },
    flush() {
      // Uncorked, the held writes leave in one writev; corked again, the turn's later writes wait for
      // its end as before (the setImmediate above undoes this cork).
      corked?.uncork();
      corked?.cork();
    },
  };
}
