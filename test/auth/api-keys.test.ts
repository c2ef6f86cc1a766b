import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashApiKey, KeyRing, KeysFileError, loadKeysFile, newApiKey, parseKeysFile, reloadKeyRing } from '../../src/auth/api-keys.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { makeKeys } from '../helpers/api-keys.js';

describe('API keys and the keys file', () => {
  it('new keys are 256-bit, kh_-prefixed, and different every time; the file holds only the hash', () => {
    const a = newApiKey();
    expect(a).toMatch(/^kh_[A-Za-z0-9_-]{43}$/);
    expect(newApiKey()).not.toBe(a);
    expect(hashApiKey(a)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hashApiKey(a)).not.toContain(a.slice(3));
  });

  it('reads YAML and JSON files alike', () => {
    const key = newApiKey();
    const entry = { id: 'team-a', hash: hashApiKey(key), namespace: 'team-a', scopes: ['locks'] };
    const yaml = `keys:\n  - id: team-a\n    hash: ${entry.hash}\n    namespace: team-a\n    scopes: [locks]\n`;
    expect(parseKeysFile(yaml, 'keys.yaml')).toEqual([entry]);
    expect(parseKeysFile(JSON.stringify({ keys: [entry] }), 'keys.json')).toEqual([entry]);
  });

  it.each([
    ['a plain key instead of a hash', (k: string) => ({ keys: [{ id: 'a', hash: k, namespace: 'a', scopes: ['locks'] }] }), 'hash'],
    ['an unknown scope', (k: string) => ({ keys: [{ id: 'a', hash: hashApiKey(k), namespace: 'a', scopes: ['root'] }] }), 'scopes'],
    ['no scopes', (k: string) => ({ keys: [{ id: 'a', hash: hashApiKey(k), namespace: 'a', scopes: [] }] }), 'scopes'],
    [
      'a namespace with a slash',
      (k: string) => ({ keys: [{ id: 'a', hash: hashApiKey(k), namespace: 'a/b', scopes: ['locks'] }] }),
      'namespace',
    ],
    ['an unknown field', (k: string) => ({ keys: [{ id: 'a', hash: hashApiKey(k), namespace: 'a', scopes: ['locks'], key: k }] }), 'key'],
    [
      'duplicate ids',
      (k: string) => ({
        keys: [
          { id: 'a', hash: hashApiKey(k), namespace: 'a', scopes: ['locks'] },
          { id: 'a', hash: hashApiKey(`${k}x`), namespace: 'a', scopes: ['locks'] },
        ],
      }),
      'duplicate id',
    ],
  ])('refuses %s, naming the field', (_name, build, field) => {
    expect(() => parseKeysFile(JSON.stringify(build(newApiKey())), 'keys.json')).toThrow(KeysFileError);
    expect(() => parseKeysFile(JSON.stringify(build(newApiKey())), 'keys.json')).toThrow(field);
  });

  it('refuses an unreadable or unparsable file with its path in the message', () => {
    expect(() => loadKeysFile('/nonexistent/keys.yaml')).toThrow('/nonexistent/keys.yaml');
    expect(() => parseKeysFile('keys: [', 'bad.yaml')).toThrow('bad.yaml');
  });

  it('authenticates exactly the configured keys', () => {
    const keys = makeKeys([
      { id: 'a', namespace: 'team-a', scopes: ['locks'] },
      { id: 'b', namespace: 'team-b', scopes: ['locks', 'admin'] },
    ]);
    const ring = keys.keyring();
    expect(ring.authenticate(keys.plain.a ?? '')).toMatchObject({ keyId: 'a', namespace: 'team-a', anonymous: false });
    expect([...(ring.authenticate(keys.plain.b ?? '')?.scopes ?? [])]).toEqual(['locks', 'admin']);
    expect(ring.authenticate(newApiKey())).toBeNull();
    expect(ring.authenticate('')).toBeNull();
    expect(ring.authenticate(`${keys.plain.a}x`)).toBeNull();
    // The hash itself is not a key.
    expect(ring.authenticate(keys.entries[0]?.hash ?? '')).toBeNull();
  });

  it('a key that authenticated before a reload that drops it is refused after it, each time', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyholder-keys-'));
    const first = makeKeys([{ id: 'a', namespace: 'team-a', scopes: ['locks'] }]);
    const path = first.writeFile(dir);
    const ring = new KeyRing(loadKeysFile(path));
    const key = first.plain.a ?? '';
    // Asked twice: the second answer is the remembered one.
    expect(ring.authenticate(key)).toMatchObject({ keyId: 'a' });
    expect(ring.authenticate(key)).toMatchObject({ keyId: 'a' });

    makeKeys([{ id: 'b', namespace: 'team-b', scopes: ['locks'] }]).writeFile(dir);
    expect(reloadKeyRing(ring, path, { info: () => undefined, error: () => undefined })).toBe(true);
    expect(ring.authenticate(key)).toBeNull();
    expect(ring.authenticate(key)).toBeNull();
  });

  it('a reload swaps the keys; a bad file keeps the old ones and logs an error', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyholder-keys-'));
    const first = makeKeys([{ id: 'a', namespace: 'team-a', scopes: ['locks'] }]);
    const second = makeKeys([{ id: 'b', namespace: 'team-b', scopes: ['locks'] }]);
    const path = first.writeFile(dir);
    const ring = new KeyRing(loadKeysFile(path));
    const logged: string[] = [];
    const log = { info: (_o: object, m: string) => logged.push(`info ${m}`), error: (_o: object, m: string) => logged.push(`error ${m}`) };

    second.writeFile(dir);
    expect(reloadKeyRing(ring, path, log)).toBe(true);
    expect(ring.authenticate(first.plain.a ?? '')).toBeNull();
    expect(ring.authenticate(second.plain.b ?? '')).not.toBeNull();

    writeFileSync(path, 'keys: [ {id: broken');
    expect(reloadKeyRing(ring, path, log)).toBe(false);
    expect(ring.authenticate(second.plain.b ?? '')).not.toBeNull();
    expect(logged.at(-1)).toMatch(/^error API keys NOT reloaded/);
  });
});

describe('auth configuration', () => {
  it('without a keys file the service is open (development)', () => {
    expect(loadConfig({}).auth).toEqual({ mode: 'open' });
    expect(loadConfig({ KEYHOLDER_API_KEYS_FILE: '/etc/keys.yaml' }).auth).toEqual({ mode: 'keys', keysFile: '/etc/keys.yaml' });
  });

  it('production without a keys file refuses to start, naming the variable, unless open mode is asked for', () => {
    const prod = { NODE_ENV: 'production', KEYHOLDER_STORE: 'memory' };
    expect(() => loadConfig(prod)).toThrow(ConfigError);
    expect(() => loadConfig(prod)).toThrow(/KEYHOLDER_API_KEYS_FILE: is not set and NODE_ENV=production/);
    expect(loadConfig({ ...prod, KEYHOLDER_AUTH: 'open' }).auth).toEqual({ mode: 'open' });
    expect(loadConfig({ ...prod, KEYHOLDER_API_KEYS_FILE: '/k.yaml' }).auth.mode).toBe('keys');
  });

  it('refuses contradictions and impossible timeouts', () => {
    expect(() => loadConfig({ KEYHOLDER_AUTH: 'keys' })).toThrow(/KEYHOLDER_API_KEYS_FILE: is required/);
    expect(() => loadConfig({ KEYHOLDER_AUTH: 'open', KEYHOLDER_API_KEYS_FILE: '/k.yaml' })).toThrow(/KEYHOLDER_AUTH/);
    expect(() => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' })).toThrow(/HTTP_HEADERS_TIMEOUT_MS/);
    expect(() => loadConfig({ RATE_LIMIT_MAX: '-1' })).toThrow(/RATE_LIMIT_MAX/);
  });

  it('has safe defaults for limits and timeouts', () => {
    const config = loadConfig({});
    expect(config.rateLimit).toEqual({ max: 20_000, windowMs: 10_000 });
    expect(config.limits.maxHeldLocksPerNamespace).toBe(10_000);
    expect(config.httpTimeouts).toEqual({
      requestTimeoutMs: 10_000,
      headersTimeoutMs: 5_000,
      keepAliveTimeoutMs: 5_000,
      connectionTimeoutMs: 75_000,
    });
  });
});
