/**
 * Namespaces isolate teams: the same lock name in two namespaces is two different locks. This module
 * is the one place that turns (namespace, key) into the store's internal lock id, so the store, the
 * Lua scripts and anything else below the lock service never see namespaces at all.
 */

/**
 * 1 to 64 characters, starting with a letter or digit. It cannot contain `/` (the separator) or braces
 * (Redis hash tags), so an internal id always splits back into exactly one (namespace, key) pair.
 */
export const NAMESPACE_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * `/` separates namespace and key. Lock keys may not contain it (the API allows A-Z a-z 0-9 . _ - : @,
 * and a `/` would be a path separator in the URL anyway), so `team-a` + `x/y` can never collide with
 * `team-a/x` + `y`.
 */
export const NAMESPACE_SEPARATOR = '/';

/** The namespace every caller shares when the service runs open (no API keys configured). */
export const DEFAULT_NAMESPACE = 'default';

/** The store's id for lock `key` in `namespace`. */
export function lockId(namespace: string, key: string): string {
  return `${namespace}${NAMESPACE_SEPARATOR}${key}`;
}

/** Splits an internal lock id back into its namespace and key; null for an id no namespace produced. */
export function parseLockId(id: string): { namespace: string; key: string } | null {
  const at = id.indexOf(NAMESPACE_SEPARATOR);
  if (at <= 0) return null;
  const namespace = id.slice(0, at);
  const key = id.slice(at + 1);
  if (!NAMESPACE_PATTERN.test(namespace) || key === '' || key.includes(NAMESPACE_SEPARATOR)) return null;
  return { namespace, key };
}
