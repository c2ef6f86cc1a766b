import { withReleaseRequest } from '../../domain/permit-values.js';
import { releaseRequestedView } from './admin.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { LockSetService } from '../../domain/lock-sets.js';
import { principalOf } from '../auth.js';
import { confirmBeforeSending, registerFreshAnswers } from '../fresh-answers.js';
import { historyOf } from '../lease-history.js';
import {
  LockSetAcquireRequest,
  LockSetGrant,
  LockSetRelease,
  LockSetReleaseRequest,
  LockSetRenewal,
  LockSetRenewRequest,
} from '../schemas/lock-sets.js';
import { NoQuery } from '../schemas/locks.js';
import { callerGone } from './lease-routes.js';
import { iso, jsonResponse, routeRule, STORE_UNAVAILABLE } from './responses.js';

const COMMON_ERRORS = {
  400: 'invalid_request: a field is missing or malformed, or a key is repeated (the problem names it)',
  413: 'payload_too_large: the body is over the limit',
  415: 'unsupported_media_type: the body is not application/json',
  503: STORE_UNAVAILABLE,
} as const;
const NOT_OWNER = 'not_owner: this token does not hold every key of the set (a lease expired, was released or force-released)';

const acquireRule = routeRule('locks', {
  ...COMMON_ERRORS,
  409: 'lock_held: some key of the set is held, in its lock-delay, or has callers queued; nothing was taken. Retry-After: the longest time left.',
  429:
    'too_many_waiters (with waitMs): this namespace on this instance, this instance, or the busy key has as many open waits as it may; ' +
    'rate_limited: too many requests for this API key; or quota_exceeded: the namespace would hold more than its limit of locks.',
});
const renewRule = routeRule('locks', { ...COMMON_ERRORS, 409: NOT_OWNER }, { rateLimited: false, noRetryAfter: true });
const releaseRule = routeRule(
  'locks',
  { ...COMMON_ERRORS, 409: 'not_owner: this token holds none of these keys' },
  { rateLimited: false, noRetryAfter: true },
);

export const lockSetRoutes: FastifyPluginAsyncZod<{ lockSets: LockSetService }> = async (app, { lockSets }) => {
  // A grant or renewal is checked once more just before it is written, as a lock's is (fresh-answers.ts).
  registerFreshAnswers(app, 'lock', (namespace, lease) => lockSets.confirmFresh(namespace, lease));
  app.post(
    '/v1/lock-sets/acquire',
    {
      config: acquireRule.config,
      schema: {
        operationId: 'acquireLockSet',
        summary: 'Take several locks at once, all or none',
        description:
          "Grants every key (1 to 16, of the caller's namespace) under one owner token, each with its own fencing token, " +
          'or none of them. Each key of a held set is held for everyone (a plain acquire of it gets lock_held). Overlapping ' +
          'sets asked for in any order never deadlock: nothing is held while deciding or waiting.',
        tags: ['lock sets'],
        querystring: NoQuery,
        body: LockSetAcquireRequest,
        response: { 200: jsonResponse(LockSetGrant, 'Granted: every key is held until expiresAt'), ...acquireRule.errors },
      },
    },
    async (request, reply) => {
      const { keys, ttlMs, holder, waitMs, lockDelayMs } = request.body;
      const namespace = principalOf(request).namespace;
      const startedMs = waitMs ? performance.now() : undefined;
      const grant = await lockSets.acquire(namespace, keys, ttlMs, {
        holder: holder ?? null,
        waitMs,
        lockDelayMs,
        signal: waitMs ? callerGone(reply) : undefined,
      });
      confirmBeforeSending(request, namespace, {
        key: keys[0] as string,
        keys,
        ownerToken: grant.ownerToken,
        ttlMs,
        decidedAt: grant.decidedAt,
      });
      const history = historyOf(request);
      for (const lock of grant.locks) history?.granted('lock', namespace, { ...grant, ...lock }, { startedMs, lockDelayMs, set: true });
      return {
        ownerToken: grant.ownerToken,
        locks: [...grant.locks],
        ttlMs: grant.ttlMs,
        expiresAt: iso(grant.expiresAtMs),
        holder: grant.holder,
      };
    },
  );

  app.post(
    '/v1/lock-sets/renew',
    {
      config: renewRule.config,
      schema: {
        operationId: 'renewLockSet',
        summary: 'Extend every lease of a set',
        description: "Sets every key's lease to end ttlMs from now, only if ownerToken holds every one of them; otherwise nothing changes.",
        tags: ['lock sets'],
        querystring: NoQuery,
        body: LockSetRenewRequest,
        response: { 200: jsonResponse(LockSetRenewal, 'Renewed, every key'), ...renewRule.errors },
      },
    },
    async (request) => {
      const { ownerToken, keys, ttlMs } = request.body;
      const namespace = principalOf(request).namespace;
      const renewal = await lockSets.renew(namespace, keys, ownerToken, ttlMs);
      confirmBeforeSending(request, namespace, {
        key: keys[0] as string,
        keys,
        ownerToken,
        ttlMs,
        decidedAt: renewal.decidedAt,
        renewal: true,
      });
      const history = historyOf(request);
      for (const lock of renewal.locks) history?.renewed('lock', namespace, { ...renewal, ...lock }, ownerToken);
      const renewed = { locks: [...renewal.locks], ttlMs: renewal.ttlMs, expiresAt: iso(renewal.expiresAtMs) };
      return withReleaseRequest(renewed, renewal.releaseRequested && releaseRequestedView(renewal.releaseRequested));
    },
  );

  app.post(
    '/v1/lock-sets/release',
    {
      config: releaseRule.config,
      schema: {
        operationId: 'releaseLockSet',
        summary: 'Give a set back',
        description: 'Frees every key of the set that ownerToken still holds, in one atomic step.',
        tags: ['lock sets'],
        querystring: NoQuery,
        body: LockSetReleaseRequest,
        response: { 200: jsonResponse(LockSetRelease, 'Released'), ...releaseRule.errors },
      },
    },
    async (request) => {
      const { ownerToken, keys } = request.body;
      const namespace = principalOf(request).namespace;
      const history = historyOf(request);
      const sentAt = history?.now() ?? 0;
      await lockSets.release(namespace, keys, ownerToken);
      // Every key named (the store says only whether the token held any): one this token did not hold
      // is left out when read (see timeline; a set's release is marked as such).
      for (const key of keys) history?.released('lock', namespace, key, ownerToken, sentAt, true);
      return { released: true as const };
    },
  );
};
