import { describe, expect, it } from 'vitest';
import { FUNCTION_SCRIPTS, functionLibrary, withoutUnusedFunctions } from '../../src/store/redis/scripts.js';

/**
 * The hot path's function library as it is sent to Redis (FUNCTION LOAD): named after its own source,
 * so two versions of keyholder never replace each other's library, and registering one function per
 * hot-path script, each behind the entry that reads the clock and echoes the call's nonce.
 */
describe('the function library', () => {
  const library = functionLibrary();

  it('is named keyholder_ and 16 hex digits of its source hash, the same on every build', () => {
    expect(library.name).toMatch(/^keyholder_[0-9a-f]{16}$/);
    expect(functionLibrary().name).toBe(library.name);
    expect(library.source.startsWith(`#!lua name=${library.name}\n`)).toBe(true);
  });

  it('registers each hot-path script once, as a function named after the library, behind the entry', () => {
    expect(Object.keys(library.functions).sort()).toEqual([...FUNCTION_SCRIPTS].sort());
    for (const script of FUNCTION_SCRIPTS) {
      const fn = library.functions[script];
      expect(fn).toBe(`${library.name}_${script}`);
      const registered = library.source.split('\n').filter((line) => line.includes(`redis.register_function('${fn}'`));
      expect(registered, script).toEqual([`redis.register_function('${fn}', entry(${script}Script))`]);
      // The script's body is kept (it is named by its registration).
      expect(library.source, script).toContain(`local function ${script}Script(KEYS, ARGV)\n`);
    }
  });

  it("starts each call's own values afresh, and keeps the rest from the first call on", () => {
    expect(library.source).toContain('    knownText, knownBytes, publishedChanges = nil, nil, nil\n');
    expect(library.source).toMatch(/local function readApi\(\)\n[^]*? {2}kept, keptCount = \{\}, 0\nend\n/);
  });
});

describe('local functions named only in comments', () => {
  it('a name inside a block comment over several lines is no use: the function is dropped', () => {
    const source = [
      '--[[',
      '  unused() is named here only, inside a block comment',
      ']]',
      'local function unused()',
      '  return 1',
      'end',
      'local function used()',
      '  return 2',
      'end',
      '--[[ ]] return used()',
    ].join('\n');
    const out = withoutUnusedFunctions(source);
    expect(out).not.toContain('local function unused(');
    expect(out).toContain('local function used(');
  });

  it('a local function commented out inside a block comment is left out, and breaks nothing', () => {
    const source = ['--[[', 'local function old()', '  return 1', 'end', ']]', 'return 2'].join('\n');
    expect(withoutUnusedFunctions(source)).toBe(['--[[', ']]', 'return 2'].join('\n'));
  });
});
