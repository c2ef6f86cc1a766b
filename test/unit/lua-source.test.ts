import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCRIPTS, type ScriptName, scriptSource, withoutUnusedFunctions } from '../../src/store/redis/scripts.js';

/**
 * How a script's source is put together before Redis sees it. Redis runs a script's whole text on
 * every call, so the helpers a script never calls are left out; what is left must still be every
 * helper it does call.
 */
const DIR = new URL('../../src/store/redis/scripts/', import.meta.url);

describe('withoutUnusedFunctions', () => {
  it('drops helpers nothing calls (also when only a dropped helper called them) and keeps the rest', () => {
    const source = [
      '-- used() and unused() are named in this comment: that is not a use',
      'local function leaf(x)',
      '  return x + 1',
      'end',
      'local function onlyForUnused()',
      '  return 1',
      'end',
      'local function unused(x)',
      '  return leaf(x) + onlyForUnused()',
      'end',
      'local function used(x)',
      '  if x then',
      '    return leaf(x)',
      '  end',
      'end',
      'return used(1)',
    ].join('\n');
    const out = withoutUnusedFunctions(source);
    expect(out).toContain('local function leaf(');
    expect(out).toContain('local function used(');
    expect(out).not.toContain('local function unused(');
    expect(out).not.toContain('local function onlyForUnused(');
    expect(out).toContain('return used(1)');
  });

  it('drops the helpers made on demand that nothing calls, and keeps the ones called', () => {
    const source = [
      'local calledLater, neverCalled',
      'local function make()',
      '  function calledLater(x)',
      '    if x then',
      '      return 1',
      '    end',
      '  end',
      '  function neverCalled()',
      '    return calledLater(2)',
      '  end',
      'end',
      'make()',
      'return calledLater(1)',
    ].join('\n');
    const out = withoutUnusedFunctions(source);
    expect(out).toContain('  function calledLater(x)');
    expect(out).not.toContain('  function neverCalled(');
    expect(out).toContain('return calledLater(1)');
  });

  it('a script that names a wait-queue helper made on demand makes them (makeQueueHelpers) before it runs', () => {
    const handover = readFileSync(new URL('_handover.lua', DIR), 'utf8');
    const madeOnDemand = [...handover.matchAll(/^ {2}function (\w+)\(/gm)].map((m) => m[1] as string);
    expect(madeOnDemand).toContain('enqueue');
    for (const file of readdirSync(DIR).filter((f) => f.endsWith('.lua') && f !== '_handover.lua')) {
      // The permit scripts make them through _permits.lua, at its start.
      const code = readFileSync(new URL(file, DIR), 'utf8')
        .replace('--- @include "_permits"', () => readFileSync(new URL('_permits.lua', DIR), 'utf8'))
        .replace(/--\[\[[^]*?\]\]/g, '')
        .replace(/--[^\n]*/g, '');
      const names = madeOnDemand.filter((fn) => new RegExp(`\\b${fn}\\(`).test(code));
      if (names.length === 0) continue;
      const first = Math.min(...names.map((fn) => code.search(new RegExp(`\\b${fn}\\(`))));
      const made = code.indexOf('makeQueueHelpers()');
      expect(made, `${file} calls ${names.join(', ')} without makeQueueHelpers()`).toBeGreaterThanOrEqual(0);
      expect(made, `${file}: makeQueueHelpers() after its first use of ${names.join(', ')}`).toBeLessThan(first);
    }
  });

  it('every helper in the script files starts at column 0 and ends at an `end` line of its own', () => {
    for (const file of readdirSync(DIR).filter((f) => f.endsWith('.lua'))) {
      const lines = readFileSync(new URL(file, DIR), 'utf8').split('\n');
      lines.forEach((line, at) => {
        if (!/^\s*local function /.test(line)) return;
        expect(line, `${file}:${at + 1}: a helper inside another block`).toMatch(/^local function /);
        // Up to its `end` line, everything is indented (or a comment): nothing at column 0 that a
        // cut at the first `end` line would split.
        const end = lines.findIndex((l, i) => i > at && l === 'end');
        expect(end, `${file}:${at + 1}: no end line`).toBeGreaterThan(at);
        for (const inside of lines.slice(at + 1, end)) expect(inside, `${file}:${at + 1}`).toMatch(/^(\s|--|$)/);
      });
    }
  });

  it('each script keeps every helper it names in its code, and defines no helper it does not', () => {
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const source = scriptSource(name);
      const code = source.replace(/--\[\[[^]*?\]\]/g, '').replace(/--[^\n]*/g, '');
      const defined = [...code.matchAll(/^local function (\w+)\(/gm)].map((m) => m[1] as string);
      for (const fn of defined) {
        expect(code.match(new RegExp(`\\b${fn}\\b`, 'g'))?.length, `${name}: ${fn} is defined but never called`).toBeGreaterThan(1);
      }
      // Every call of a helper from the script files has its definition.
      const helpers = new Set(
        readdirSync(DIR)
          .filter((f) => f.endsWith('.lua'))
          .flatMap((f) => [...readFileSync(new URL(f, DIR), 'utf8').matchAll(/^local function (\w+)\(/gm)].map((m) => m[1] as string)),
      );
      for (const fn of helpers) {
        if (new RegExp(`\\b${fn}\\(`).test(code)) expect(defined, `${name} calls ${fn}`).toContain(fn);
      }
    }
  });
});
