import { describe, expect, it } from 'vitest';
import {
  insideCap,
  KeySpace,
  QUOTA_INSIDE_FROM,
  QUOTA_SHARDS,
  quotaShardsFor,
  shardCap,
  UNITS_PER_SHARD,
} from '../../src/store/redis/keys.js';

/**
 * The quota caps the scripts are given, the names lockIdOf refuses to read a lock id from, and the
 * bounds of KeySpace's caches: a namespace's shard tags and quota keys are computed once (every lock
 * call names them), and the caches start over past a fixed size rather than grow with every namespace
 * ever seen.
 */
describe('Redis quota caps', () => {
  it("a shard's cap is the limit over the shards it is counted in, rounded up", () => {
    expect(quotaShardsFor(UNITS_PER_SHARD * 2)).toBe(2);
    expect(shardCap(UNITS_PER_SHARD * 2)).toBe(UNITS_PER_SHARD);
    expect(shardCap(UNITS_PER_SHARD * 2 + 1)).toBe(UNITS_PER_SHARD + 1);
    expect(shardCap(1300)).toBe(650);
    expect(shardCap(QUOTA_INSIDE_FROM)).toBe(UNITS_PER_SHARD);
    expect(shardCap(QUOTA_INSIDE_FROM * 2 + 1)).toBe(UNITS_PER_SHARD * 2 + 1);
    expect(shardCap(5)).toBe(5);
    expect(insideCap(QUOTA_SHARDS * 10 + 1)).toBe(11);
    expect(insideCap(1)).toBe(1);
  });

  it('a limit of 0 or less is no quota: cap 0, never a negative cap (acquire.lua reads -1 as counted around it)', () => {
    for (const limit of [0, -1, -5, -16, -9600]) {
      expect(shardCap(limit), `shardCap(${limit})`).toBe(0);
      expect(insideCap(limit), `insideCap(${limit})`).toBe(0);
    }
  });
});

describe('Redis key names: what is no lock hash', () => {
  const space = new KeySpace('kh:');

  it('reads a lock id only from a name under its own prefix', () => {
    const tag = space.shardTags('a')[0]!;
    expect(space.lockIdOf(`kh:{${tag}}/x`)).toBe('a/x');
    // Same length as the prefix, same shape after it: still another deployment's key.
    expect(space.lockIdOf(`zz:{${tag}}/x`)).toBeNull();
    expect(space.lockIdOf(`kh{${tag}}/x`)).toBeNull();
  });

  it("takes the tag only whole: a group, '#', the shard's number, and nothing around them", () => {
    for (const name of ['kh:{x/a#3}/k', 'kh:{x{a#3}/k', 'kh:{#a#3}/k', 'kh:{a#3x}/k', 'kh:{a#3#4}/k', 'kh:{a#}/k', 'kh:{a#-3}/k']) {
      expect(space.lockIdOf(name), name).toBeNull();
    }
    expect(space.lockIdOf('kh:{a#3}/k')).toBe('a/k');
    expect(space.lockIdOf('kh:{a#3}')).toBe('a');
  });

  it('a name after the tag is empty or holds a brace only in keys that are no lock hash', () => {
    for (const name of ['kh:{a#3}/', 'kh:{a#3}/x{y}', 'kh:{a#3}/x}', 'kh:{a#3}/{', 'kh:{a#3}s/']) {
      expect(space.lockIdOf(name), name).toBeNull();
    }
    expect(space.lockIdOf('kh:{a#3}s/', 's')).toBeNull();
    expect(space.lockIdOf('kh:{a#3}s/x', 's')).toBe('a/x');
  });
});

describe('Redis key names: cached once, bounded', () => {
  it("gives the same shard tags and quota keys on every call, each namespace's its own", () => {
    const space = new KeySpace('kh:');
    const tags = space.shardTags('a');
    const quotas = space.quotaShards('a');
    space.shardTags('b');
    space.quotaShards('b');
    expect(space.shardTags('a')).toBe(tags);
    const again = space.quotaShards('a');
    for (let i = 0; i < QUOTA_SHARDS; i++) expect(again[i]).toBe(quotas[i]);
    expect(space.lockKeys('a/x').quota).toBe(quotas[space.shardOf('x')]);
    // Frozen: one caller cannot change the keys every other caller is handed.
    expect(Object.isFrozen(quotas[0])).toBe(true);
  });

  it('keeps 10,000 namespaces (16 quota shards each) and starts over at the next one', () => {
    const space = new KeySpace('kh:');
    const firstTags = space.shardTags('g0');
    const firstQuotas = space.quotaShards('g0');
    for (let i = 1; i < 10_000; i++) space.quotaShards(`g${i}`);
    // Exactly full: 10,000 groups' tags and 160,000 quota shards, all still the ones computed first.
    expect(space.shardTags('g0')).toBe(firstTags);
    expect(space.quotaShards('g0')[QUOTA_SHARDS - 1]).toBe(firstQuotas[QUOTA_SHARDS - 1]);
    expect(space.shardTags('g9999')).toBe(space.shardTags('g9999'));

    // One lock of a new namespace: one more group's tags, one more quota shard.
    space.lockKeys('one-more/x');
    // Both caches were emptied: computed again, to the same names.
    const tags = space.shardTags('g0');
    expect(tags).not.toBe(firstTags);
    expect(tags).toEqual(firstTags);
    const quotas = space.quotaShards('g0');
    expect(quotas[0]).not.toBe(firstQuotas[0]);
    expect(quotas).toEqual(firstQuotas);
    // Half a second here; seconds under the mutation run, where every step of the 170,000 names' hash
    // slots is counted (and past its 15 s test time-out on a loaded machine).
  }, 60_000);
});
