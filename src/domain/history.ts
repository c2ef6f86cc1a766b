import { hash } from 'node:crypto';
import type { PermitKind } from './permit-values.js';

/**
 * Lease history: what happened to a key's leases recently (granted, renewed, released, force-released,
 * and, derived when read, handed over, expired and lock-delay), for "who held invoices:42 yesterday
 * 14:00-14:05, and how did each lease end?".
 *
 * History is a record of the lease rules' answers, not a part of them: it is written after an answer is
 * decided, through an in-process buffer flushed in batches (HistoryRecorder), so it adds no round trip
 * to a grant and a store that cannot take it never refuses a lease. What a crash can lose is bounded by
 * the buffer (docs/operations.md#lease-history).
 */

/** The primitive a key belongs to (a lock, or a kind of PERMIT_KINDS); a lock set's keys are locks. */
export type HistoryPrimitive = 'lock' | PermitKind;

/** What is written: the events an answer proves. The rest is derived when read (see timeline). */
export type RecordedKind = 'granted' | 'renewed' | 'released' | 'force_released' | 'release_requested';

/** One recorded event, as the stores keep it (never an owner token: `lease` is a one-way digest of it). */
export interface HistoryRecord {
  readonly kind: RecordedKind;
  /** When, in ms since the epoch: the store's clock for grants and renewals, the instance's otherwise. */
  readonly at: number;
  /** The lease's id (leaseIdOf): pairs a release, which names no fencing token, with its grant. */
  readonly lease?: string;
  readonly fencingToken?: number;
  readonly holder?: string | null;
  /** Grants and renewals: when the lease ends unless renewed. */
  readonly expiresAt?: number;
  /** Grants: how long the caller waited for it (only callers that asked to wait). */
  readonly waitedMs?: number;
  /** Grants: the lock-delay the lease asked for after an expiry. */
  readonly lockDelayMs?: number;
  /** Read/write locks: which mode the lease holds. */
  readonly mode?: 'read' | 'write';
  /** Force releases and release requests: the API key that did it. */
  readonly by?: string;
  /** Release requests: why (null: no reason given). */
  readonly reason?: string | null;
  /** Grants of a lock set's key. */
  readonly set?: true;
  /**
   * Grants only: the lease's release, folded into its grant (when the release came in the batch its grant
   * was in, with no other event of the key between). One stored record for the two events of a short pair;
   * readRecords gives the two back. Its time, as a release's: the instance's clock.
   */
  readonly releasedAt?: number;
  /**
   * The lease's grant time, on a record of the lease kept after its grant was trimmed (carryLeaseFacts):
   * its time held is still known when it ends.
   */
  readonly grantedAt?: number;
}

/** Which key a history belongs to. */
export interface HistoryKey {
  readonly namespace: string;
  readonly primitive: HistoryPrimitive;
  readonly key: string;
}

export interface HistoryAppend extends HistoryKey {
  readonly record: HistoryRecord;
}

/** What a store keeps, and for how long. */
export interface HistoryLimits {
  /** Events kept per key: the oldest go first. */
  readonly eventsPerKey: number;
  /** Keys with a history per namespace: the least recently written go first (Redis: see its store). */
  readonly keysPerNamespace: number;
  /** Events older than this are never returned, and a key idle this long is dropped. */
  readonly retentionMs: number;
}

/** The port every store implements once: append batches, read one key. */
export interface HistoryStore {
  /** Writes a batch; events of one key keep their order. */
  append(batch: readonly HistoryAppend[]): Promise<void>;
  /** A key's events, oldest first, none older than the retention. */
  read(key: HistoryKey): Promise<HistoryRecord[]>;
  close(): Promise<void>;
}

/**
 * A lease's id in the history: the first 12 bytes of SHA-256 of its owner token. One-way (the token is
 * 16 random bytes, so nothing short of the token finds it), yet the same for a grant, its renewals and its release.
 */
export function leaseIdOf(ownerToken: string): string {
  // The one-shot crypto.hash: no Hash object per call (two per pair, on the request's path).
  return hash('sha256', ownerToken, 'base64url').slice(0, 16);
}

const KIND_CODES: Record<RecordedKind, string> = { granted: 'g', renewed: 'n', released: 'r', force_released: 'f', release_requested: 'q' };
const CODE_KINDS: Record<string, RecordedKind> = { g: 'granted', n: 'renewed', r: 'released', f: 'force_released', q: 'release_requested' };

/** What a stored string may not hold raw: the field separator, the escape itself, and etcd's line break. */
const UNSAFE = /[|%\n]/;
const UNSAFE_ALL = /[|%\n]/g;
const ESCAPES: Record<string, string> = { '|': '%7C', '%': '%25', '\n': '%0A' };
const escapeText = (s: string): string => (UNSAFE.test(s) ? s.replace(UNSAFE_ALL, (c) => ESCAPES[c] as string) : s);
const DIGITS36 = '0123456789abcdefghijklmnopqrstuvwxyz';
/** Two base-36 digits a string: '00' to 'zz', the digits of 0 to 36 * 36 - 1. */
const PAIRS36: readonly string[] = Array.from({ length: 36 * 36 }, (_, i) => `${DIGITS36[Math.floor(i / 36)]}${DIGITS36[i % 36]}`);
/**
 * n.toString(36) for the non-negative integers every event has (4 a pair), at a fraction of its cost: two
 * digits a step from PAIRS36 (a folded grant's encoding 198 and 286 ns against 348 and 454 with a digit a step).
 */
function int36(n: number): string {
  if (n < 0) return n.toString(36);
  if (n < 36) return DIGITS36[n] as string;
  let out = '';
  while (n >= 36 * 36) {
    const q = Math.floor(n / (36 * 36));
    out = (PAIRS36[n - q * 36 * 36] as string) + out;
    n = q;
  }
  // The leading one or two digits: no leading zero.
  return (n < 36 ? (DIGITS36[n] as string) : (PAIRS36[n] as string)) + out;
}
const INT36 = /^-?[0-9a-z]{1,11}$/;

/**
 * The stored form, one line: the kind's letter and `at`, then `|` and a letter per present field (bytes
 * per event: see docs/operations.md). Integers in base 36, `expiresAt` as its distance from `at` (the
 * lease's TTL), text with `|`, `%` and line breaks percent-escaped; `H`/`Y`: holder/reason null. A grant
 * is about 46 bytes, a release 27 (the JSON form this replaced: about 100 and 50). A record with a
 * number that is not a safe integer (none is, today) is kept in that JSON form, which decodeRecord reads
 * as well (and every record written before this form).
 */
export function encodeRecord(r: HistoryRecord): string {
  if (!integral(r)) return encodeJson(r);
  let out = KIND_CODES[r.kind] + int36(r.at);
  if (r.lease !== undefined) out += `|l${r.lease}`;
  if (r.fencingToken !== undefined) out += `|f${int36(r.fencingToken)}`;
  if (r.holder !== undefined) out += r.holder === null ? '|H' : `|h${escapeText(r.holder)}`;
  if (r.expiresAt !== undefined) out += `|e${int36(r.expiresAt - r.at)}`;
  if (r.waitedMs !== undefined) out += `|w${int36(r.waitedMs)}`;
  if (r.lockDelayMs !== undefined) out += `|d${int36(r.lockDelayMs)}`;
  if (r.mode !== undefined) out += r.mode === 'read' ? '|mr' : '|mw';
  if (r.by !== undefined) out += `|b${escapeText(r.by)}`;
  if (r.reason !== undefined) out += r.reason === null ? '|Y' : `|y${escapeText(r.reason)}`;
  if (r.set) out += '|s';
  // As its distance from the grant (a few ms, mostly; negative if the clocks differ): some 3 bytes.
  if (r.releasedAt !== undefined) out += `|r${int36(r.releasedAt - r.at)}`;
  // Whole (a grant's own time, as its line starts with it): history-append.lua hands it on as written.
  if (r.grantedAt !== undefined) out += `|a${int36(r.grantedAt)}`;
  return out;
}

const safe = (n: number | undefined): boolean => n === undefined || Number.isSafeInteger(n);

function integral(r: HistoryRecord): boolean {
  return (
    Number.isSafeInteger(r.at) &&
    safe(r.fencingToken) &&
    safe(r.expiresAt) &&
    (r.expiresAt === undefined || Number.isSafeInteger(r.expiresAt - r.at)) &&
    safe(r.waitedMs) &&
    safe(r.lockDelayMs) &&
    safe(r.releasedAt) &&
    (r.releasedAt === undefined || Number.isSafeInteger(r.releasedAt - r.at)) &&
    safe(r.grantedAt) &&
    (r.lease === undefined || !UNSAFE.test(r.lease))
  );
}

/** The JSON form: short field names, absent fields left out. */
function encodeJson(r: HistoryRecord): string {
  const out: Record<string, unknown> = { k: KIND_CODES[r.kind], t: r.at };
  if (r.lease !== undefined) out.l = r.lease;
  if (r.fencingToken !== undefined) out.f = r.fencingToken;
  if (r.holder !== undefined) out.h = r.holder;
  if (r.expiresAt !== undefined) out.e = r.expiresAt;
  if (r.waitedMs !== undefined) out.w = r.waitedMs;
  if (r.lockDelayMs !== undefined) out.d = r.lockDelayMs;
  if (r.mode !== undefined) out.m = r.mode;
  if (r.by !== undefined) out.b = r.by;
  if (r.reason !== undefined) out.y = r.reason;
  if (r.set) out.s = 1;
  if (r.releasedAt !== undefined) out.r = r.releasedAt;
  if (r.grantedAt !== undefined) out.a = r.grantedAt;
  return JSON.stringify(out);
}

type MutableRecord = { -readonly [K in keyof HistoryRecord]: HistoryRecord[K] };

/** Reads a stored record back (either form); null for anything unreadable (skipped, never a failed read). */
export function decodeRecord(text: string): HistoryRecord | null {
  return text.startsWith('{') ? decodeJson(text) : decodeCompact(text);
}

function decodeCompact(text: string): HistoryRecord | null {
  const fields = text.split('|');
  const head = fields[0] as string;
  const kind = CODE_KINDS[head.charAt(0)];
  const at = parse36(head.slice(1));
  if (kind === undefined || at === undefined) return null;
  const record: MutableRecord = { kind, at };
  try {
    for (let i = 1; i < fields.length; i++) {
      const field = fields[i] as string;
      const value = field.slice(1);
      switch (field.charAt(0)) {
        case 'l':
          record.lease = value;
          break;
        case 'f': {
          const n = parse36(value);
          if (n !== undefined) record.fencingToken = n;
          break;
        }
        case 'h':
          record.holder = unescapeText(value);
          break;
        case 'H':
          record.holder = null;
          break;
        case 'e': {
          const ttl = parse36(value);
          if (ttl !== undefined) record.expiresAt = at + ttl;
          break;
        }
        case 'w': {
          const n = parse36(value);
          if (n !== undefined) record.waitedMs = n;
          break;
        }
        case 'd': {
          const n = parse36(value);
          if (n !== undefined) record.lockDelayMs = n;
          break;
        }
        case 'm':
          if (value === 'r') record.mode = 'read';
          else if (value === 'w') record.mode = 'write';
          break;
        case 'b':
          record.by = unescapeText(value);
          break;
        case 'y':
          record.reason = unescapeText(value);
          break;
        case 'Y':
          record.reason = null;
          break;
        case 's':
          record.set = true;
          break;
        case 'r': {
          const gap = parse36(value);
          if (gap !== undefined && kind === 'granted') record.releasedAt = at + gap;
          break;
        }
        case 'a': {
          const n = parse36(value);
          if (n !== undefined) record.grantedAt = n;
          break;
        }
        // An unknown letter: a field a later version added; skipped.
      }
    }
  } catch {
    // A broken escape (decodeURIComponent): the record is unreadable.
    return null;
  }
  return record;
}

function parse36(text: string): number | undefined {
  if (!INT36.test(text)) return undefined;
  const n = parseInt(text, 36);
  return Number.isSafeInteger(n) ? n : undefined;
}

const unescapeText = (s: string): string => (s.includes('%') ? decodeURIComponent(s) : s);

function decodeJson(text: string): HistoryRecord | null {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return null;
  }
  const kind = typeof o.k === 'string' ? CODE_KINDS[o.k] : undefined;
  if (kind === undefined || typeof o.t !== 'number') return null;
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const record: MutableRecord = { kind, at: o.t };
  if (str(o.l) !== undefined) record.lease = str(o.l);
  if (num(o.f) !== undefined) record.fencingToken = num(o.f);
  if (o.h === null || typeof o.h === 'string') record.holder = o.h;
  if (num(o.e) !== undefined) record.expiresAt = num(o.e);
  if (num(o.w) !== undefined) record.waitedMs = num(o.w);
  if (num(o.d) !== undefined) record.lockDelayMs = num(o.d);
  if (o.m === 'read' || o.m === 'write') record.mode = o.m;
  if (str(o.b) !== undefined) record.by = str(o.b);
  if (o.y === null || typeof o.y === 'string') record.reason = o.y;
  if (o.s === 1) record.set = true;
  if (num(o.r) !== undefined && kind === 'granted') record.releasedAt = num(o.r);
  if (num(o.a) !== undefined) record.grantedAt = num(o.a);
  return record;
}

/**
 * A key's events from its stored records (oldest first), as every store's read answers them: each
 * record decoded (the unreadable skipped), a grant with its release folded in given back as the two
 * events it stands for, none older than `oldest`, and the last `eventsPerKey` of them. A store keeps
 * at most eventsPerKey records, so these are the key's last eventsPerKey events, as if each had been
 * stored alone. A grant left out hands its lock-delay, holder and time on (carryLeaseFacts).
 */
export function readRecords(lines: readonly string[], oldest: number, eventsPerKey: number): HistoryRecord[] {
  const all: HistoryRecord[] = [];
  let from = 0;
  let old = 0;
  for (const line of lines) {
    const r = decodeRecord(line);
    if (r === null) continue;
    if (r.releasedAt === undefined) {
      if (r.at < oldest) old++;
      all.push(r);
      continue;
    }
    const { releasedAt, ...grant } = r;
    if (grant.at < oldest) old++;
    if (releasedAt < oldest) old++;
    all.push(grant, { kind: 'released', at: releasedAt, ...(grant.lease !== undefined ? { lease: grant.lease } : {}) });
  }
  // Stryker disable next-line ArithmeticOperator: old is never negative, so + only runs the loop below more often; it finds the same start
  if (all.length - old > eventsPerKey) {
    // The last eventsPerKey of the events within the retention: those from the one at `from` on.
    let kept = 0;
    for (from = all.length; from > 0 && kept < eventsPerKey;) if ((all[--from] as HistoryRecord).at >= oldest) kept++;
  }
  if (old === 0 && from === 0) return all;
  const keep = (i: number) => i >= from && (all[i] as HistoryRecord).at >= oldest;
  carryLeaseFacts(all, keep);
  return all.filter((_, i) => keep(i));
}

/** Whether a record leaves its lease going: a grant with no release folded in, a renewal, a release request. */
const goesOn = (r: HistoryRecord): boolean =>
  (r.kind === 'granted' && r.releasedAt === undefined) || r.kind === 'renewed' || r.kind === 'release_requested';

/** Whether two records name one lease: its id (grants, renewals, releases) or its fencing token (the others). */
const sameLease = (a: HistoryRecord, b: HistoryRecord): boolean =>
  (a.lease !== undefined && a.lease === b.lease) || (a.fencingToken !== undefined && a.fencingToken === b.fencingToken);

/**
 * What a lease's records that go (`keep(i)` false: trimmed past the events kept per key, or past the
 * retention) know of it and its later records may not: its lock-delay, its holder label and its grant time,
 * all recorded with the grant alone. They are handed on to the lease's next record (its lock-delay only to
 * one that leaves the lease going: a renewal, a release request): a lease renewed past the events kept
 * would else expire with no lock-delay after it (the key seen free when it was shut), and end with no
 * holder and no time held (who held the key, for how long, unknown). Record to record, so they reach the
 * lease's first record kept;
 * never past another lease's grant (a lock's leases follow one another, so that grant came after this
 * lease ended, and a key whose leases all expire costs a look at one record, not the key's all; of a
 * semaphore's or a read lock's leases granted between, a lease's facts stop there). Replaces the records
 * it changes (never changes one in place); returns whether it changed any. Work only for a record that
 * goes with such a fact: none when nothing goes. history-append.lua does the same on Redis's lists.
 */
export function carryLeaseFacts(records: (HistoryRecord | null)[], keep: (i: number) => boolean): boolean {
  let changed = false;
  for (let j = 0; j < records.length; j++) {
    const r = records[j];
    if (r == null || keep(j) || !goesOn(r)) continue;
    const grantedAt = r.kind === 'granted' ? r.at : r.grantedAt;
    if (r.lockDelayMs === undefined && r.holder === undefined && grantedAt === undefined) continue;
    for (let k = j + 1; k < records.length; k++) {
      const next = records[k];
      if (next == null) continue;
      if (!sameLease(r, next)) {
        if (next.kind === 'granted') break;
        continue;
      }
      // The lease's next record: its holder and grant time go to it whatever it is (its release names it by
      // its digest alone), its lock-delay only to one that leaves it going (after a release there is none).
      if (next.kind !== 'granted') {
        const carried: MutableRecord = { ...next };
        if (goesOn(next) && next.lockDelayMs === undefined && r.lockDelayMs !== undefined) carried.lockDelayMs = r.lockDelayMs;
        if (next.holder === undefined && r.holder !== undefined) carried.holder = r.holder;
        if (next.grantedAt === undefined && grantedAt !== undefined) carried.grantedAt = grantedAt;
        if (carried.lockDelayMs !== next.lockDelayMs || carried.holder !== next.holder || carried.grantedAt !== next.grantedAt) {
          records[k] = carried;
          changed = true;
        }
      }
      break;
    }
  }
  return changed;
}

/**
 * carryLeaseFacts over stored lines: the lines before `keep` go (a number), or those it marks false; the
 * lines kept that take a fact on are written anew in place. Nothing is decoded unless a line that goes may
 * hold one.
 */
export function carryLeaseFactsInLines(lines: string[], keep: number | readonly boolean[]): void {
  const kept = typeof keep === 'number' ? (i: number) => i >= keep : (i: number) => keep[i] === true;
  // Stryker disable next-line BooleanLiteral: true skips only the look for a line with a fact to hand on: all are decoded, same result
  let any = false;
  const last = typeof keep === 'number' ? Math.min(keep, lines.length) : lines.length;
  for (let i = 0; i < last && !any; i++) if (!kept(i) && mayHandOn(lines[i] as string)) any = true;
  if (!any) return;
  const records = lines.map(decodeRecord);
  const before = [...records];
  if (!carryLeaseFacts(records, kept)) return;
  for (let i = 0; i < lines.length; i++) if (records[i] !== before[i] && kept(i)) lines[i] = encodeRecord(records[i] as HistoryRecord);
}

/**
 * Whether a line may hold a fact to hand on (carryLeaseFacts): a grant with no release folded in, or a
 * record that took a lock-delay or a grant time on. The compact form (no text holds a raw `|`), or the JSON form.
 */
const mayHandOn = (line: string): boolean =>
  line.startsWith('{')
    ? line.includes('"d"') || line.includes('"a"') || (line.includes('"k":"g"') && !line.includes('"r"'))
    : line.includes('|d') || line.includes('|a') || (line.startsWith('g') && !line.includes('|r'));

/** The name a store files a key's history under: one per primitive, namespace and key. */
export function historyName(key: HistoryKey): string {
  return `${key.primitive}:${key.namespace}/${key.key}`;
}

/** A buffered event: its record still filled in (a lease id at flush, a folded release). */
interface Pending extends HistoryAppend {
  readonly record: MutableRecord;
  /** A grant a timer's flush left for the next one (see takeBatch): it is never left twice. */
  carried?: true;
}

/**
 * The events some records stand for: one each, and two for a grant with its release folded in (counted only
 * when records are lost, never on the way of a write).
 */
function eventsIn(records: readonly HistoryAppend[]): number {
  let events = records.length;
  for (const { record } of records) if (record.releasedAt !== undefined) events++;
  return events;
}

/** What the recorder reports: batches that could not be written, events dropped from a full buffer. */
export interface HistoryObserver {
  /** `events`: as read back, so a grant with its release folded in counts as its two events. */
  lost?(events: number, reason: 'store' | 'buffer'): void;
}

export interface RecorderOptions {
  /** How long an event waits in the buffer before its batch is written. */
  readonly flushMs: number;
  /** Events buffered at most; past it the oldest are dropped (a store that is down must not grow memory). */
  readonly maxBuffered: number;
  readonly observer?: HistoryObserver;
}

/**
 * The in-process buffer between the routes and a HistoryStore: `record` costs an array push; a timer
 * writes what gathered every `flushMs` as one batch (one pipelined round trip on Redis). At most one
 * batch is in flight; events that come meanwhile wait for the next. A batch the store refuses is
 * dropped and counted, never retried: history must not grow without bound while the store is away.
 *
 * A lease's grant, renewals and release (addLeaseEvent, addRelease) hold its owner token here, in memory, until the
 * batch is written: its lease id (a digest) is worked out then, once for a grant and the release folded
 * into it, and off the request's path. No token leaves this buffer: the store is handed the digest.
 */
export class HistoryRecorder {
  private buffer: Pending[] = [];
  /** Per buffered event, in step with `buffer`: the owner token its lease id is the digest of, if any. */
  private tokens: (string | undefined)[] = [];
  /** Per key name, the index in `buffer` of its last event: a release folds only into the key's last event. */
  private readonly lastOfKey = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private closed = false;

  constructor(
    readonly store: HistoryStore,
    private readonly options: RecorderOptions,
  ) {}

  record(key: HistoryKey, record: HistoryRecord): void {
    this.add({ namespace: key.namespace, primitive: key.primitive, key: key.key, record });
  }

  /** As record, with the entry the buffer keeps made by the caller (one object less per event). */
  add(entry: HistoryAppend): void {
    this.push(entry, undefined);
  }

  /**
   * An event of a lease (a grant, a renewal), its `lease` left out: the digest of `ownerToken`, worked out
   * when the batch is written. Only a grant has a release folded into it.
   */
  addLeaseEvent(entry: HistoryAppend, ownerToken: string): void {
    this.push(entry, ownerToken);
  }

  /**
   * A release. Folded into its grant (releasedAt) when the grant is the last event of the key still
   * buffered: one record for the two, the short pair's common case. Else an event of its own.
   */
  addRelease(key: HistoryKey, ownerToken: string, at: number, set?: true): void {
    if (this.closed) return;
    const last = this.lastOfKey.get(key.key);
    if (last !== undefined && this.tokens[last] === ownerToken) {
      const grant = this.buffer[last] as Pending;
      if (
        grant.record.kind === 'granted' &&
        grant.record.releasedAt === undefined &&
        grant.namespace === key.namespace &&
        grant.primitive === key.primitive
      ) {
        grant.record.releasedAt = at;
        return;
      }
    }
    const record: MutableRecord = { kind: 'released', at };
    if (set) record.set = true;
    this.push({ namespace: key.namespace, primitive: key.primitive, key: key.key, record }, ownerToken);
  }

  private push(entry: Pending, ownerToken: string | undefined): void {
    if (this.closed) return;
    this.lastOfKey.set(entry.key, this.buffer.length);
    this.buffer.push(entry);
    this.tokens.push(ownerToken);
    if (this.buffer.length > this.options.maxBuffered) {
      const over = this.buffer.length - this.options.maxBuffered;
      const dropped = this.buffer.splice(0, over);
      this.tokens.splice(0, over);
      // The indexes moved: no release folds into what is left (rare: a store that is away).
      this.lastOfKey.clear();
      this.options.observer?.lost?.(eventsIn(dropped), 'buffer');
    }
    this.arm();
  }

  /** The timer's flush, after flushMs: it leaves a young grant still open for the next one (takeBatch). */
  private arm(): void {
    this.timer ??= setTimeout(() => void this.flush(true), this.options.flushMs).unref();
  }

  /**
   * The buffer as the batch to write. A timer's flush (`carry`) leaves in the buffer, for the next flush,
   * each grant recorded less than half a flushMs ago (by its `at`, the store's clock) whose release has not
   * come and that is its key's last event: its release, mostly a few ms away, then folds into it instead of
   * being a record of its own in the next batch (a pair straddling a flush cost a second record and list
   * write: 28% of the pairs of the history A/B at load 20, 7% at load 2). Once only, so a grant waits at
   * most twice flushMs (1.5 times when the clocks agree); a read or a close writes everything.
   */
  private takeBatch(carry: boolean): { batch: Pending[]; tokens: (string | undefined)[] } {
    const batch = this.buffer;
    const tokens = this.tokens;
    const last = this.lastOfKey;
    this.buffer = [];
    this.tokens = [];
    if (!carry || last.size === 0) {
      last.clear();
      return { batch, tokens };
    }
    const youngFrom = Date.now() - this.options.flushMs / 2;
    const written: Pending[] = [];
    const writtenTokens: (string | undefined)[] = [];
    const carried: number[] = [];
    for (let i = 0; i < batch.length; i++) {
      const entry = batch[i] as Pending;
      const { record } = entry;
      if (
        record.kind === 'granted' &&
        record.releasedAt === undefined &&
        entry.carried === undefined &&
        record.at >= youngFrom &&
        tokens[i] !== undefined &&
        last.get(entry.key) === i
      ) {
        carried.push(i);
      } else {
        written.push(entry);
        writtenTokens.push(tokens[i]);
      }
    }
    last.clear();
    for (const i of carried) {
      const entry = batch[i] as Pending;
      // Stryker disable next-line BooleanLiteral: any value but undefined marks it carried (takeBatch asks === undefined): false as well
      entry.carried = true;
      last.set(entry.key, this.buffer.length);
      this.buffer.push(entry);
      this.tokens.push(tokens[i]);
    }
    if (carried.length > 0) this.arm();
    return { batch: written, tokens: writtenTokens };
  }

  /**
   * Writes what is buffered now (after the batch in flight); resolves when it is written or dropped.
   * `carry`: the timer's flush, which may leave young open grants for the next one (takeBatch).
   */
  async flush(carry = false): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.inFlight) await this.inFlight;
    if (this.buffer.length === 0) return;
    const { batch, tokens } = this.takeBatch(carry && !this.closed);
    if (batch.length === 0) return;
    for (let i = 0; i < batch.length; i++) {
      const token = tokens[i];
      if (token !== undefined) (batch[i] as Pending).record.lease = leaseIdOf(token);
    }
    this.inFlight = this.store.append(batch).then(
      () => undefined,
      () => this.options.observer?.lost?.(eventsIn(batch), 'store'),
    );
    try {
      await this.inFlight;
    } finally {
      this.inFlight = null;
    }
    // Events recorded while the batch was in flight found the timer set, or set it: nothing to do here.
  }

  /** A key's events as written so far: the buffer is flushed first, so a caller reads its own writes. */
  async read(key: HistoryKey): Promise<HistoryRecord[]> {
    await this.flush();
    return this.store.read(key);
  }

  /** Writes what is left and closes the store. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    await this.store.close();
  }
}

/** One entry of a key's timeline, as the API answers it. */
export type TimelineKind =
  'granted' | 'handed_over' | 'renewed' | 'release_requested' | 'released' | 'expired' | 'force_released' | 'lock_delay';

export interface TimelineEntry {
  readonly type: TimelineKind;
  readonly at: number;
  readonly fencingToken: number | null;
  readonly holder: string | null;
  /** granted, handed_over, renewed: when the lease was to end. */
  readonly expiresAt?: number;
  /** granted, handed_over: how long the caller waited. */
  readonly waitedMs?: number;
  /** released, expired, force_released: from the grant to this end (when the grant is still kept). */
  readonly heldMs?: number;
  /** force_released, release_requested: the API key that did it. */
  readonly by?: string;
  /** release_requested: why (null: no reason given). */
  readonly reason?: string | null;
  /** lock_delay: when the key could be granted again. */
  readonly until?: number;
  readonly mode?: 'read' | 'write';
  readonly lockSet?: true;
}

/** How far the instance's clock (releases) may be from the store's (grants, expiries) before it counts. */
const CLOCK_SKEW_MS = 1000;

/**
 * The slack of the hand-over test: small, so a caller that asked to wait and found the key free just after
 * a lease ended is not taken for one handed the key (same-host clocks agree to well under this).
 */
const HANDOVER_SLACK_MS = 20;

interface LeaseTrack {
  readonly fencingToken: number | null;
  readonly grant: HistoryRecord | null;
  /** When it was granted: its grant's time, or, the grant trimmed, the time a later record carries (grantedAt). */
  grantedAt: number | null;
  holder: string | null;
  expiresAt: number | null;
  lockDelayMs: number;
  mode?: 'read' | 'write';
  end: number | null;
}

/**
 * A key's records by time, each lease's after its grant: a grant is dated on the store's clock and a release
 * or release request on the instance's, so a short lease's release can be dated a little before its grant
 * (the instance's clock behind). Such a record is taken as made at its grant's time (as it was, at the
 * earliest), where sorted by its own date it came first and read as the end of a lease never granted.
 */
function inGrantOrder(records: readonly HistoryRecord[]): HistoryRecord[] {
  // Each lease's grant (its time, and where it is among the records) by its digest and by its fencing
  // token (a string and a number: one map).
  const granted = new Map<string | number, { at: number; index: number }>();
  const note = (id: string | number | undefined, at: number, index: number) => {
    if (id !== undefined && !((granted.get(id)?.at ?? Infinity) <= at)) granted.set(id, { at, index });
  };
  records.forEach((r, index) => {
    if (r.kind !== 'granted') return;
    note(r.lease, r.at, index);
    note(r.fencingToken, r.at, index);
  });
  const moved = new Set<HistoryRecord>();
  const dated = records.map((r, index) => {
    if (r.kind === 'granted') return r;
    const grant =
      (r.lease !== undefined ? granted.get(r.lease) : undefined) ??
      (r.fencingToken !== undefined ? granted.get(r.fencingToken) : undefined);
    // In its grant's millisecond, a record stored before the grant (a release request recorded before the
    // grant's own record was written) is moved too: the lease it names begins with that grant.
    if (grant === undefined || r.at > grant.at || (r.at === grant.at && index > grant.index)) return r;
    const later = { ...r, at: grant.at };
    moved.add(later);
    return later;
  });
  // A record moved to its grant's time goes after it (and after whatever else is dated then).
  const rank = (r: HistoryRecord) => (moved.has(r) ? 1 : 0);
  return dated.sort((a, b) => a.at - b.at || rank(a) - rank(b));
}

/**
 * A key's timeline from its records: the recorded events, plus what no call reports and the records
 * prove: a lease whose end time passed with no release or force release EXPIRED at its last expiresAt
 * (and its lock-delay, if it asked for one, ran from then); a grant to a caller that waited while
 * another lease of the key ended is HANDED_OVER. Only records in `[since, until]`, and every record
 * of a lease that overlaps it (who held the key at `since`, and how that lease ended), are kept.
 */
export function timeline(records: readonly HistoryRecord[], nowMs: number, since = -Infinity, until = Infinity): TimelineEntry[] {
  const sorted = inGrantOrder(records);
  const byToken = new Map<number, LeaseTrack>();
  const byLease = new Map<string, LeaseTrack>();
  // Stryker disable next-line ArrayDeclaration: a stray element's end is undefined: passed over as ended, and it ends no hand-over
  const tracks: LeaseTrack[] = [];
  const entries: { entry: TimelineEntry; track: LeaseTrack | null }[] = [];

  const trackOf = (r: HistoryRecord, create: boolean): LeaseTrack | null => {
    const known =
      (r.lease !== undefined ? byLease.get(r.lease) : undefined) ??
      (r.fencingToken !== undefined ? byToken.get(r.fencingToken) : undefined);
    if (known) {
      // A lease known by one of its ids so far (its grant trimmed: renewals of an older version named only
      // its fencing token) is found by the other from here on.
      // Stryker disable next-line LogicalOperator: a known lease id maps to `known` already (looked up first); no lookup is by undefined
      if (r.lease !== undefined && !byLease.has(r.lease)) byLease.set(r.lease, known);
      if (r.fencingToken !== undefined && !byToken.has(r.fencingToken)) byToken.set(r.fencingToken, known);
      return known;
    }
    if (!create) return null;
    const track: LeaseTrack = {
      fencingToken: r.fencingToken ?? null,
      grant: r.kind === 'granted' ? r : null,
      grantedAt: r.kind === 'granted' ? r.at : (r.grantedAt ?? null),
      holder: r.holder ?? null,
      expiresAt: r.expiresAt ?? null,
      // Stryker disable next-line LogicalOperator: the record's lockDelayMs is set on the track just after; none reads as 0 (> 0 is false)
      lockDelayMs: r.lockDelayMs ?? 0,
      mode: r.mode,
      end: null,
    };
    if (r.lease !== undefined) byLease.set(r.lease, track);
    if (r.fencingToken !== undefined) byToken.set(r.fencingToken, track);
    tracks.push(track);
    return track;
  };

  for (const r of sorted) {
    // A lock set's release is recorded on every key it named; on a key where none of its lease's records
    // is kept (its grant and renewals name it), the set did not hold that key: nothing happened there,
    // unless the release carries its grant's facts, handed on from a grant on this key trimmed since
    // (carryLeaseFacts): then it ended a lease held here.
    const track = trackOf(r, r.kind !== 'released' || (r.lease !== undefined && (r.set !== true || r.grantedAt !== undefined)));
    // A lease's lock-delay, holder and grant time are on its grant, or, the grant trimmed, on its first
    // record kept (carryLeaseFacts).
    if (track && r.lockDelayMs !== undefined) track.lockDelayMs = r.lockDelayMs;
    if (track && track.grantedAt === null && r.grantedAt !== undefined) track.grantedAt = r.grantedAt;
    if (track && track.holder === null && r.holder != null) track.holder = r.holder;
    if (r.kind === 'released' && r.set === true && track === null) continue;
    // The store refuses the release of a lease that has ended, so a lock set's release recorded well after
    // its lease's end on this key names a key this token no longer held: nothing happened. A lease's own
    // release the store took ended a live lease, whatever end was recorded for it: a renewal can go
    // unrecorded (answered too late and kept, or in a batch the store refused).
    // Stryker disable next-line OptionalChaining: a lock set's release without a track was skipped above: track is never null here
    if (r.kind === 'released' && r.set === true && track?.expiresAt != null && r.at > track.expiresAt + CLOCK_SKEW_MS) continue;
    // Nor can a release end a lease that already ended (force-released by an operator, or released): a lock
    // set's release naming such a key freed nothing there, and a grant given back as too late after an
    // operator evicted it (recorded released, as every give-back is) is no second end of that lease.
    if (r.kind === 'released' && track?.end != null) continue;
    const base = { at: r.at, fencingToken: track?.fencingToken ?? r.fencingToken ?? null, holder: track?.holder ?? r.holder ?? null };
    const mode = track?.mode ?? r.mode;
    const extra = mode ? { mode } : {};
    // A lease's grant recorded again (an Idempotency-Key's retry answered with it): one grant, the first.
    // Stryker disable next-line OptionalChaining: trackOf makes a track for every grant: track is never null here
    if (r.kind === 'granted' && track?.grant != null && track.grant !== r) continue;
    if (r.kind === 'granted') {
      entries.push({
        entry: {
          type: 'granted',
          ...base,
          holder: r.holder ?? null,
          ...extra,
          ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}),
          ...(r.waitedMs !== undefined ? { waitedMs: r.waitedMs } : {}),
          ...(r.set ? { lockSet: true as const } : {}),
        },
        track,
      });
    } else if (r.kind === 'renewed') {
      if (track && r.expiresAt !== undefined) track.expiresAt = r.expiresAt;
      entries.push({
        entry: { type: 'renewed', ...base, ...extra, ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}) },
        track,
      });
    } else if (r.kind === 'release_requested') {
      // An ask, not an end: the lease goes on until it is released, evicted or expires.
      entries.push({
        entry: { type: 'release_requested', ...base, ...extra, ...(r.by !== undefined ? { by: r.by } : {}), reason: r.reason ?? null },
        track,
      });
    } else {
      if (track) track.end ??= r.at;
      const held = track?.grantedAt != null ? { heldMs: Math.max(0, r.at - track.grantedAt) } : {};
      entries.push({
        entry: { type: r.kind, ...base, ...extra, ...held, ...(r.by !== undefined ? { by: r.by } : {}) },
        track,
      });
    }
  }

  // Leases that ended without a word: expired at their last expiresAt, then their lock-delay.
  for (const track of tracks) {
    if (track.end !== null || track.expiresAt === null || track.expiresAt > nowMs) continue;
    const at = track.expiresAt;
    track.end = at;
    const base = { at, fencingToken: track.fencingToken, holder: track.holder, ...(track.mode ? { mode: track.mode } : {}) };
    entries.push({
      entry: { type: 'expired', ...base, ...(track.grantedAt !== null ? { heldMs: Math.max(0, at - track.grantedAt) } : {}) },
      track,
    });
    if (track.lockDelayMs > 0) entries.push({ entry: { type: 'lock_delay', ...base, until: at + track.lockDelayMs }, track });
  }

  // A grant to a caller that waited, while another lease of the key ended: handed over.
  const ends = tracks.filter((t) => t.end !== null).map((t) => ({ track: t, end: t.end as number }));
  const out = entries.map(({ entry, track }) => {
    if (entry.type !== 'granted' || !entry.waitedMs) return { entry, track };
    // Within a little slack: a grant is on the store's clock, a release on the instance's.
    const arrived = entry.at - entry.waitedMs - HANDOVER_SLACK_MS;
    const handed = ends.some((e) => e.track !== track && e.end >= arrived && e.end <= entry.at + HANDOVER_SLACK_MS);
    return { entry: handed ? { ...entry, type: 'handed_over' as const } : entry, track };
  });

  const overlaps = (track: LeaseTrack | null, entry: TimelineEntry) => {
    if (entry.at >= since && entry.at <= until) return true;
    if (track?.grantedAt == null) return false;
    const end = track.end ?? track.expiresAt ?? Infinity;
    return track.grantedAt <= until && end >= since;
  };
  return out
    .filter(({ entry, track }) => overlaps(track, entry))
    .map(({ entry }) => entry)
    .sort((a, b) => a.at - b.at);
}
