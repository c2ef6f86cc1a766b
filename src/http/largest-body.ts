import { MAX_LOCK_SET_KEYS } from '../domain/lock-sets.js';
import { MAX_DURATION_MS } from './schemas/locks.js';

/** The longest key and holder label the schemas accept (LockKeyParams, Holder). */
const KEY_MAX_CHARS = 256;
const HOLDER_MAX_CHARS = 128;

/**
 * The largest body any route accepts as valid, in bytes: a lock set of MAX_LOCK_SET_KEYS keys of the
 * longest length, the longest holder label with every character sent as a JSON `\uXXXX` escape (6
 * bytes each, the longest way to write it), and every duration at its bound. Compact JSON: whitespace a
 * client adds is what the headroom in BODY_LIMIT_BYTES is for.
 */
export function largestValidBodyBytes(): number {
  const body = JSON.stringify({
    keys: Array.from({ length: MAX_LOCK_SET_KEYS }, (_, i) => String(i % 10).repeat(KEY_MAX_CHARS)),
    ttlMs: MAX_DURATION_MS,
    holder: 'h'.repeat(HOLDER_MAX_CHARS),
    waitMs: MAX_DURATION_MS,
    lockDelayMs: MAX_DURATION_MS,
  });
  return Buffer.byteLength(body) + HOLDER_MAX_CHARS * ('\\u0068'.length - 1);
}

/**
 * Twice the largest valid body, rounded up to a KiB: room for pretty-printed JSON (an indent and a
 * newline per key) and for the optional fields in any order, while a body far beyond anything valid is
 * still refused before it is read. A fixed limit below the largest valid body refused a valid 16-key
 * lock set of 256-character keys with 413.
 */
export const BODY_LIMIT_BYTES = Math.ceil((2 * largestValidBodyBytes()) / 1024) * 1024;
