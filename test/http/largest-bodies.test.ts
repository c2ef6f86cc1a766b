import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LOCK_SET_KEYS } from '../../src/domain/lock-sets.js';
import { BODY_LIMIT_BYTES, largestValidBodyBytes } from '../../src/http/largest-body.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';

/**
 * The body limit is sized from the largest valid body: the largest request any route accepts gets its
 * answer, never a 413, however a client writes its JSON; a body far beyond it still gets 413.
 */
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => {
  await t.close();
});

/** A 256-character key, distinct per index. */
const longKey = (i: number) => `${String(i).padStart(2, '0')}:${'k'.repeat(253)}`;
/** The holder label of 128 characters, every one written as a JSON escape (the longest way to send it). */
const escapedHolder = `"${'\\u00e9'.repeat(128)}"`;

function lockSetBody(indent: number): string {
  const keys = Array.from({ length: MAX_LOCK_SET_KEYS }, (_, i) => longKey(i));
  const pretty = JSON.stringify({ keys, ttlMs: 30_000, holder: 'HOLDER', waitMs: DEFAULT_LIMITS.maxWaitMs, lockDelayMs: 0 }, null, indent);
  return pretty.replace('"HOLDER"', escapedHolder);
}

describe('largest valid bodies', () => {
  it('the limit is above the largest valid body with room for whitespace', () => {
    expect(largestValidBodyBytes()).toBeGreaterThan(MAX_LOCK_SET_KEYS * 256);
    expect(BODY_LIMIT_BYTES).toBeGreaterThanOrEqual(2 * largestValidBodyBytes());
  });

  for (const indent of [0, 2, 8]) {
    it(`a lock set of ${MAX_LOCK_SET_KEYS} keys of 256 characters, the longest escaped holder, indent ${indent}: granted, not 413`, async () => {
      const body = lockSetBody(indent);
      expect(Buffer.byteLength(body)).toBeGreaterThan(4096);
      const res = await request(t.app.server).post('/v1/lock-sets/acquire').set('content-type', 'application/json').send(body);
      expect(res.status).toBe(200);
      expect(res.body.locks).toHaveLength(MAX_LOCK_SET_KEYS);
      expect(res.body.holder).toBe('é'.repeat(128));
      const keys = Array.from({ length: MAX_LOCK_SET_KEYS }, (_, i) => longKey(i));
      await request(t.app.server).post('/v1/lock-sets/release').send({ ownerToken: res.body.ownerToken, keys }).expect(200);
    });
  }

  it('a body far beyond the largest valid one is still refused with 413 before it is parsed', async () => {
    const res = await request(t.app.server)
      .post('/v1/lock-sets/acquire')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ keys: ['a'], ttlMs: 1000, pad: 'p'.repeat(BODY_LIMIT_BYTES) }));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
  });
});
