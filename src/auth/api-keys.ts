import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { NAMESPACE_PATTERN } from '../domain/namespaces.js';

/**
 * API keys: who may call, in which namespace, with which scopes. Operators list keys in a file (YAML
 * or JSON) that holds only each key's hash; the plain key is shown once, when it is created.
 */

/** `locks`: acquire, renew, release and inspect in the key's namespace. `admin`: list and force-release in any namespace. */
export const SCOPES = ['locks', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export interface Principal {
  /** The key's id from the keys file ("anonymous" in open mode): logged, never secret. */
  readonly keyId: string;
  readonly namespace: string;
  readonly scopes: ReadonlySet<Scope>;
  /** True only in open mode, where no key was checked. */
  readonly anonymous: boolean;
}

/**
 * SHA-256, not a slow password hash: keys are 256 random bits, so no dictionary or brute-force attack
 * on a leaked hash can succeed whatever the hash speed, while scrypt or bcrypt would spend tens of ms
 * of CPU on every request and hand attackers a cheap way to burn it.
 */
const HASH_PREFIX = 'sha256:';
const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** 32 bytes = 256 bits from the OS CSPRNG; the `kh_` prefix makes leaked keys easy to grep for. */
const KEY_BYTES = 32;
const KEY_PREFIX = 'kh_';
/** kh_ + 43 base64url characters: anything else cannot be a key and is refused without hashing. */
const KEY_PATTERN = /^kh_[A-Za-z0-9_-]{43}$/;

export function newApiKey(): string {
  return KEY_PREFIX + randomBytes(KEY_BYTES).toString('base64url');
}

export function hashApiKey(key: string): string {
  return HASH_PREFIX + createHash('sha256').update(key, 'utf8').digest('hex');
}

const KeyEntrySchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1 to 64 characters of A-Z a-z 0-9 . _ -'),
  hash: z.string().regex(HASH_PATTERN, 'must be "sha256:" and 64 lowercase hex digits (npm run keys:new prints it)'),
  namespace: z.string().regex(NAMESPACE_PATTERN, 'must be 1 to 64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit'),
  scopes: z.array(z.enum(SCOPES)).min(1),
});

const KeysFileSchema = z.strictObject({ keys: z.array(KeyEntrySchema) }).superRefine((file, ctx) => {
  const ids = new Set<string>();
  const hashes = new Set<string>();
  file.keys.forEach((entry, i) => {
    if (ids.has(entry.id)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'id'], message: `duplicate id "${entry.id}"` });
    if (hashes.has(entry.hash)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'hash'], message: 'duplicate hash' });
    ids.add(entry.id);
    hashes.add(entry.hash);
  });
});

export type ApiKeyEntry = z.infer<typeof KeyEntrySchema>;

export class KeysFileError extends Error {
  override readonly name = 'KeysFileError';
}

/** Parses a keys file's text. YAML 1.2 is a superset of JSON, so one parser reads both. */
export function parseKeysFile(text: string, source: string): ApiKeyEntry[] {
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new KeysFileError(`${source}: not valid YAML or JSON: ${(err as Error).message}`);
  }
  const parsed = KeysFileSchema.safeParse(data);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.') || '(file)'}: ${issue.message}`);
    throw new KeysFileError(`${source}: invalid keys file:\n${lines.join('\n')}`);
  }
  return parsed.data.keys;
}

export function loadKeysFile(path: string): ApiKeyEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new KeysFileError(`${path}: cannot read the keys file: ${(err as Error).message}`);
  }
  return parseKeysFile(text, path);
}

/** Most keys `KeyRing` remembers as valid; past it, it forgets them all and starts again. */
const RECENT_KEYS_MAX = 1024;

interface RingEntry {
  readonly digest: Buffer;
  readonly principal: Principal;
}

/**
 * The keys in force. `authenticate` compares the presented key's hash with EVERY configured hash in
 * constant time and never stops early, so response time says nothing about which keys exist.
 * `replace` swaps the whole set at once (a reload), so a request sees either the old set or the new.
 */
export class KeyRing {
  private entries: readonly RingEntry[] = [];
  /**
   * Keys that authenticated since the last reload, so a client's every call does not hash its key and
   * compare it with every entry again (a measurable share of a lock call). Only valid keys enter, so a
   * caller sending made-up keys can neither fill it nor learn from it: a hit only answers faster for a
   * key the answer itself says is valid. Emptied by `replace`, so a revoked key stops working at the
   * reload, as before.
   */
  private readonly recent = new Map<string, Principal>();
  /** Called after each `replace`: whoever let a long call in re-checks it against the new keys. */
  private readonly replaced = new Set<() => void>();

  constructor(keys: readonly ApiKeyEntry[]) {
    this.replace(keys);
  }

  get size(): number {
    return this.entries.length;
  }

  replace(keys: readonly ApiKeyEntry[]): void {
    this.recent.clear();
    this.entries = keys.map((k) => ({
      digest: Buffer.from(k.hash.slice(HASH_PREFIX.length), 'hex'),
      principal: Object.freeze({ keyId: k.id, namespace: k.namespace, scopes: new Set(k.scopes), anonymous: false }),
    }));
    for (const listener of this.replaced) listener();
  }

  /** Calls `listener` after every replace, until the returned function is called. */
  onReplace(listener: () => void): () => void {
    this.replaced.add(listener);
    return () => this.replaced.delete(listener);
  }

  authenticate(presentedKey: string): Principal | null {
    const known = this.recent.get(presentedKey);
    if (known !== undefined) return known;
    if (!KEY_PATTERN.test(presentedKey)) return null;
    const digest = createHash('sha256').update(presentedKey, 'utf8').digest();
    let match: Principal | null = null;
    for (const entry of this.entries) {
      if (timingSafeEqual(entry.digest, digest) && match === null) match = entry.principal;
    }
    if (match !== null) {
      if (this.recent.size >= RECENT_KEYS_MAX) this.recent.clear();
      this.recent.set(presentedKey, match);
    }
    return match;
  }
}

/**
 * Re-reads the keys file into `ring` (on SIGHUP). A file that cannot be read or parsed changes
 * nothing: the keys in force stay, and the error is logged, so a typo cannot lock everyone out.
 */
export function reloadKeyRing(
  ring: KeyRing,
  path: string,
  log: { info(obj: object, msg: string): void; error(obj: object, msg: string): void },
): boolean {
  try {
    const keys = loadKeysFile(path);
    ring.replace(keys);
    log.info({ keysFile: path, keys: keys.length }, 'API keys reloaded');
    return true;
  } catch (err) {
    log.error(
      { keysFile: path, err: (err as Error).message },
      'API keys NOT reloaded: the file is invalid; the previous keys stay in force',
    );
    return false;
  }
}
