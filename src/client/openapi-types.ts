// Generated from openapi.yaml by openapi-typescript (npm run openapi). Do not edit: regenerate.

export interface paths {
    "/v1/locks/{key}/acquire": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Take a lock
         * @description Grants the lock if nobody holds a live lease on it. The reply carries a secret ownerToken (for renew and release) and a fencingToken to pass to the protected resource. If the lock is held, answers 409 lock_held with Retry-After: the time left on the current lease. With waitMs, a held lock is waited for in a fair FIFO queue (across all instances) and granted the moment it is released or expires; 409 when waitMs runs out. A retry carrying the same Idempotency-Key and body gets the same grant back while its lease is live; the same key with another body is a 422.
         */
        post: operations["acquireLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks/{key}/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Extend a held lease
         * @description Sets the lease to end ttlMs from now, only if ownerToken holds a live lease. The fencing token stays the one issued at acquire.
         */
        post: operations["renewLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks/{key}/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give a lock back
         * @description Frees the lock, only if ownerToken holds a live lease. A wrong or stale token changes nothing.
         */
        post: operations["releaseLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * See who holds a lock (or wait for it to change)
         * @description Reports whether the lock is held and, if so, by which holder label, fencing token and until when, with the lock's watch index. Never the owner token. A blocking query (like Consul's): with ?index=N&waitMs=M the answer comes at once if the index differs from N, otherwise as soon as the lock changes (grant, release, expiry, force release, hand-over), otherwise after M with the unchanged state.
         */
        get: operations["inspectLock"];
        put?: never;
        post?: never;
        /**
         * Force-release a stuck lock (admin)
         * @description Frees the lock whoever holds it and writes an audit log line (who, what, when, the evicted holder and fencing token). The evicted owner token can no longer renew or release (409 not_owner), and the next grant's fencing token is higher than the evicted one, so a protected resource that checks fencing tokens rejects the evicted holder's late writes. With ?fencingToken=N only the lease with that token is evicted, in the same atomic step: if the holder changed since the caller looked, the new holder keeps the lock (409 holder_changed).
         */
        delete: operations["forceReleaseLock"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/lock-sets/acquire": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Take several locks at once, all or none
         * @description Grants every key (1 to 16, of the caller's namespace) under one owner token, each with its own fencing token, or none of them. Each key of a held set is held for everyone (a plain acquire of it gets lock_held). Overlapping sets asked for in any order never deadlock: nothing is held while deciding or waiting.
         */
        post: operations["acquireLockSet"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/lock-sets/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Extend every lease of a set
         * @description Sets every key's lease to end ttlMs from now, only if ownerToken holds every one of them; otherwise nothing changes.
         */
        post: operations["renewLockSet"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/lock-sets/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give a set back
         * @description Frees every key of the set that ownerToken still holds, in one atomic step.
         */
        post: operations["releaseLockSet"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}/acquire": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Take a semaphore permit
         * @description Grants one permit if fewer than limit are held and nobody is queued. Each permit is a lease of its own, with its own ownerToken, fencingToken (increasing per semaphore) and expiry: a holder that crashes frees its permit when its TTL runs out. When all are held: 409 semaphore_full with Retry-After, or with waitMs a place in a FIFO queue, granted as soon as a permit frees. Every caller must send the semaphore's limit; another one is 409 limit_mismatch.
         */
        post: operations["acquireSemaphore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Extend a semaphore lease
         * @description Sets this lease of the semaphore to end ttlMs from now, only if ownerToken holds it live. The fencing token stays the one it was granted with; the other leases are untouched.
         */
        post: operations["renewSemaphore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give a semaphore lease back
         * @description Ends this lease of the semaphore, only if ownerToken holds it live, and hands the room to the first callers queued.
         */
        post: operations["releaseSemaphore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * See who holds a semaphore's permits (or wait for it to change)
         * @description The limit, the permits held and by whom (holder label, fencing token, expiry), the callers queued, and the semaphore's watch index. Never owner tokens. A blocking query, as for locks: with ?index=N&waitMs=M the answer comes at once if the index differs from N, otherwise as soon as the semaphore changes, otherwise after M.
         */
        get: operations["inspectSemaphore"];
        put?: never;
        post?: never;
        /**
         * Force-release every lease of a semaphore (admin)
         * @description Ends every live lease of the semaphore whoever holds them, writes an audit log line, and hands the room to the queue. The evicted owner tokens no longer renew or release; every later grant's fencing token is above the evicted ones. With ?fencingToken=N only the lease with that token ends (the others stay); if it is no longer live while others are, nothing changes (409 holder_changed).
         */
        delete: operations["forceReleaseSemaphore"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}/acquire": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Take a read/write lock for reading or writing
         * @description Many readers or one writer. A read is granted while no writer holds the lock and nobody is queued; a write only when nobody holds it and nobody is queued. Readers and writers wait in one FIFO queue (waitMs), so once a writer waits, later readers queue behind it: writers are not starved. Every grant gets the lock's next fencing token.
         */
        post: operations["acquireRwLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}/renew": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Extend a read/write lock lease
         * @description Sets this lease of the read/write lock to end ttlMs from now, only if ownerToken holds it live. The fencing token stays the one it was granted with; the other leases are untouched.
         */
        post: operations["renewRwLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}/release": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give a read/write lock lease back
         * @description Ends this lease of the read/write lock, only if ownerToken holds it live, and hands the room to the first callers queued.
         */
        post: operations["releaseRwLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * See who holds a read/write lock (or wait for it to change)
         * @description The mode it is held in, its leases (mode, holder label, fencing token, expiry), the callers queued, and the lock's watch index. Never owner tokens. A blocking query, as for locks: with ?index=N&waitMs=M the answer comes at once if the index differs from N, otherwise as soon as the lock changes, otherwise after M.
         */
        get: operations["inspectRwLock"];
        put?: never;
        post?: never;
        /**
         * Force-release every lease of a read/write lock (admin)
         * @description Ends every live lease of the read/write lock whoever holds them, writes an audit log line, and hands the room to the queue. The evicted owner tokens no longer renew or release; every later grant's fencing token is above the evicted ones. With ?fencingToken=N only the lease with that token ends (the others stay); if it is no longer live while others are, nothing changes (409 holder_changed).
         */
        delete: operations["forceReleaseRwLock"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List held locks (admin)
         * @description Pages through the locks held right now, in one namespace or all of them, with holder, fencing token and expiry; never owner tokens. Walks the store incrementally (Redis SCAN), so it never blocks the store.
         */
        get: operations["listLocks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks/{key}/release-request": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Ask a lock's holder to let go (admin)
         * @description Asks the holder of the lock lease with fencingToken to release it, without evicting it: the request (when, who, reason) is stored with that lease, and every renewal of it answers releaseRequested until the lease ends. The holder decides (clients surface it; keyholder run forwards it to its command as a signal). Asking again replaces the request. If that lease is no longer live while another is, nothing is asked (409 holder_changed).
         */
        post: operations["requestReleaseLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List held semaphores (admin)
         * @description Pages through the semaphores with live leases, in one namespace or all, with each lease's holder, fencing token and expiry; never owner tokens.
         */
        get: operations["listSemaphores"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}/release-request": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Ask a semaphore's holder to let go (admin)
         * @description Asks the holder of the semaphore lease with fencingToken to release it, without evicting it: the request (when, who, reason) is stored with that lease, and every renewal of it answers releaseRequested until the lease ends. The holder decides (clients surface it; keyholder run forwards it to its command as a signal). Asking again replaces the request. If that lease is no longer live while another is, nothing is asked (409 holder_changed).
         */
        post: operations["requestReleaseSemaphore"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List held read/write locks (admin)
         * @description Pages through the read/write locks with live leases, in one namespace or all, with each lease's holder, fencing token and expiry; never owner tokens.
         */
        get: operations["listRwLocks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}/release-request": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Ask a read/write lock's holder to let go (admin)
         * @description Asks the holder of the read/write lock lease with fencingToken to release it, without evicting it: the request (when, who, reason) is stored with that lease, and every renewal of it answers releaseRequested until the lease ends. The holder decides (clients surface it; keyholder run forwards it to its command as a signal). Asking again replaces the request. If that lease is no longer live while another is, nothing is asked (409 holder_changed).
         */
        post: operations["requestReleaseRwLock"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queue/{primitive}/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Who waits for a key (admin)
         * @description The callers queued for a lock, semaphore or read/write lock of any namespace, head first (at most 100): position, holder label, when each joined the queue (store clock) and, for a semaphore or read/write lock, the weight or mode it asks for. Only live waiters: not those whose wait ran out or who left. Never owner tokens.
         */
        get: operations["queueAdmin"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/locks/{key}/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Recent lease events of a lock
         * @description The recent lease events of this key, oldest first: granted, handed over (granted after waiting), renewed, released, expired, force-released (by which API key) and lock-delay, with holder label, fencing token, times, how long each caller waited and each lease was held. Never owner tokens. Expired and lock-delay are derived when read from a lease whose end passed without a release. Kept per key and per namespace within HISTORY_* bounds; events still in an instance's write buffer (HISTORY_FLUSH_MS) may be missing for a moment. With history off (recording: false), the list is empty.
         */
        get: operations["historyLock"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/semaphores/{key}/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Recent lease events of a semaphore
         * @description The recent lease events of this key, oldest first: granted, handed over (granted after waiting), renewed, released, expired, force-released (by which API key) and lock-delay, with holder label, fencing token, times, how long each caller waited and each lease was held. Never owner tokens. Expired and lock-delay are derived when read from a lease whose end passed without a release. Kept per key and per namespace within HISTORY_* bounds; events still in an instance's write buffer (HISTORY_FLUSH_MS) may be missing for a moment. With history off (recording: false), the list is empty.
         */
        get: operations["historySemaphore"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/rwlocks/{key}/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Recent lease events of a read/write lock
         * @description The recent lease events of this key, oldest first: granted, handed over (granted after waiting), renewed, released, expired, force-released (by which API key) and lock-delay, with holder label, fencing token, times, how long each caller waited and each lease was held. Never owner tokens. Expired and lock-delay are derived when read from a lease whose end passed without a release. Kept per key and per namespace within HISTORY_* bounds; events still in an instance's write buffer (HISTORY_FLUSH_MS) may be missing for a moment. With history off (recording: false), the list is empty.
         */
        get: operations["historyRwLock"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/history/{primitive}/{key}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Recent lease events of any key (admin)
         * @description As GET /v1/{primitive}/{key}/history, for a key of any namespace. The recent lease events of this key, oldest first: granted, handed over (granted after waiting), renewed, released, expired, force-released (by which API key) and lock-delay, with holder label, fencing token, times, how long each caller waited and each lease was held. Never owner tokens. Expired and lock-delay are derived when read from a lease whose end passed without a release. Kept per key and per namespace within HISTORY_* bounds; events still in an instance's write buffer (HISTORY_FLUSH_MS) may be missing for a moment. With history off (recording: false), the list is empty.
         */
        get: operations["historyAdmin"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/livez": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Is the process alive?
         * @description Always 200 while the process runs, even when the store is down: restarting would not help.
         */
        get: operations["liveness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Can the service grant locks now?
         * @description 200 when the store answers and the start-up warm-up has run; 503 store_unavailable when the store does not answer, 503 warming_up while a new instance warms up (load balancers should route elsewhere).
         */
        get: operations["readiness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This OpenAPI document, as JSON */
        get: operations["openApiJson"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/openapi.yaml": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This OpenAPI document, as YAML */
        get: operations["openApiYaml"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        AcquireRequest: {
            /**
             * @description Lease length in milliseconds. The server bounds it (by default 100 to 3,600,000); a value outside the bounds is a 400.
             * @example 30000
             */
            ttlMs: number;
            /**
             * @description Optional free-form label shown to others (for operators), e.g. a worker name. Not a secret. 1 to 128 characters; control characters (U+0000-U+001F, U+007F-U+009F) and bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are refused with 400 invalid_request (errors[].field `holder`).
             * @example consumer-7
             */
            holder?: string;
            /**
             * @description If the lock is held, wait up to this many milliseconds in a fair (FIFO) queue and be granted the moment it is released or expires. 0 or absent: answer 409 at once. The server bounds it (by default 60,000); above is a 400.
             * @example 10000
             */
            waitMs?: number;
            /**
             * @description Lock-delay: if this lease EXPIRES (its holder neither renewed nor released it), the lock stays unavailable for this many milliseconds after the lease end, for resources that cannot check fencing tokens. A release ends it at once. Default 0; the server bounds it (by default 60,000); above is a 400.
             * @example 5000
             */
            lockDelayMs?: number;
        };
        RenewRequest: {
            /**
             * @description The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * @description Lease length in milliseconds. The server bounds it (by default 100 to 3,600,000); a value outside the bounds is a 400.
             * @example 30000
             */
            ttlMs: number;
        };
        ReleaseRequest: {
            /**
             * @description The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
        };
        ReleaseRequestBody: {
            /**
             * Format: int64
             * @description The lease whose holder is asked (the one the operator looked at). When another lease holds the key instead, nothing is asked and the answer is 409 holder_changed: a request never reaches a newer holder.
             * @example 42
             */
            fencingToken: number;
            /**
             * @description Why the holder is asked to let go, 1 to 200 printable characters
             * @example deploy
             */
            reason?: string;
        };
        LockSetAcquireRequest: {
            /**
             * @description 1 to 16 distinct lock keys, in any order
             * @example [
             *       "account:17",
             *       "account:42"
             *     ]
             */
            keys: string[];
            /**
             * @description Lease length of every key, ms (bounded as for locks)
             * @example 30000
             */
            ttlMs: number;
            /**
             * @description Optional public label shown on every key of the set (the same rules as a lock's holder)
             * @example consumer-7
             */
            holder?: string;
            /** @description If some key is busy, keep trying for up to this long: the server waits for the busy key to change (no polling) and asks for the whole set again. Nothing is held meanwhile; no FIFO order among sets. 0 or absent: 409 at once. */
            waitMs?: number;
            /**
             * @description Lock-delay: if this lease EXPIRES (its holder neither renewed nor released it), the lock stays unavailable for this many milliseconds after the lease end, for resources that cannot check fencing tokens. A release ends it at once. Default 0; the server bounds it (by default 60,000); above is a 400.
             * @example 5000
             */
            lockDelayMs?: number;
        };
        LockSetRenewRequest: {
            /**
             * @description The set's secret owner token, returned by acquire
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * @description 1 to 16 distinct lock keys, in any order
             * @example [
             *       "account:17",
             *       "account:42"
             *     ]
             */
            keys: string[];
            /**
             * @description Lease length of every key, ms (bounded as for locks)
             * @example 30000
             */
            ttlMs: number;
        };
        LockSetReleaseRequest: {
            /**
             * @description The set's secret owner token, returned by acquire
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * @description 1 to 16 distinct lock keys, in any order
             * @example [
             *       "account:17",
             *       "account:42"
             *     ]
             */
            keys: string[];
        };
        SemaphoreAcquireRequest: {
            /**
             * @description Most permits held at once, 1 to 10000. Every caller of one semaphore must send the same limit: while permits are held, another limit is refused with 409 limit_mismatch.
             * @example 5
             */
            limit: number;
            /**
             * @description Lease length in milliseconds. The server bounds it (by default 100 to 3,600,000); a value outside the bounds is a 400.
             * @example 30000
             */
            ttlMs: number;
            /**
             * @description Optional free-form label shown to others (for operators), e.g. a worker name. Not a secret. 1 to 128 characters; control characters (U+0000-U+001F, U+007F-U+009F) and bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are refused with 400 invalid_request (errors[].field `holder`).
             * @example consumer-7
             */
            holder?: string;
            /**
             * @description If the lock is held, wait up to this many milliseconds in a fair (FIFO) queue and be granted the moment it is released or expires. 0 or absent: answer 409 at once. The server bounds it (by default 60,000); above is a 400.
             * @example 10000
             */
            waitMs?: number;
        };
        RwLockAcquireRequest: {
            /**
             * @description read: shared with other readers (at most 10000); write: exclusive.
             * @example read
             * @enum {string}
             */
            mode: "read" | "write";
            /**
             * @description Lease length in milliseconds. The server bounds it (by default 100 to 3,600,000); a value outside the bounds is a 400.
             * @example 30000
             */
            ttlMs: number;
            /**
             * @description Optional free-form label shown to others (for operators), e.g. a worker name. Not a secret. 1 to 128 characters; control characters (U+0000-U+001F, U+007F-U+009F) and bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) are refused with 400 invalid_request (errors[].field `holder`).
             * @example consumer-7
             */
            holder?: string;
            /**
             * @description If the lock is held, wait up to this many milliseconds in a fair (FIFO) queue and be granted the moment it is released or expires. 0 or absent: answer 409 at once. The server bounds it (by default 60,000); above is a 400.
             * @example 10000
             */
            waitMs?: number;
        };
        /** @description A granted lease. */
        LockGrant: {
            key: string;
            /**
             * @description The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * Format: int64
             * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
             * @example 1764496077123456
             */
            fencingToken: number;
            /** Format: int64 */
            ttlMs: number;
            /**
             * Format: date-time
             * @description When the lease ends (UTC), measured on the store clock.
             * @example 2026-11-30T10:00:30.000Z
             */
            expiresAt: string;
            holder: string | null;
        };
        /** @description A renewed lease. The fencing token is the one issued at acquire. */
        LockRenewal: {
            key: string;
            /**
             * Format: int64
             * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
             * @example 1764496077123456
             */
            fencingToken: number;
            /** Format: int64 */
            ttlMs: number;
            /**
             * Format: date-time
             * @description When the lease ends (UTC), measured on the store clock.
             * @example 2026-11-30T10:00:30.000Z
             */
            expiresAt: string;
            /** @description Present when the holder was asked to let go */
            releaseRequested?: components["schemas"]["ReleaseRequested"];
        };
        LockRelease: {
            key: string;
            /**
             * @constant
             * @enum {boolean}
             */
            released: true;
        };
        /** @description Who holds a lock right now. Never the owner token. */
        LockStatus: components["schemas"]["FreeLock"] | components["schemas"]["HeldLock"];
        /** @description An error, as RFC 9457 problem details (application/problem+json). */
        Problem: {
            /**
             * @description URI naming the problem type
             * @example urn:keyholder:problem:lock_held
             */
            type: string;
            /** @example Lock is held */
            title: string;
            /** @example 409 */
            status: number;
            /** @example lock "invoice:42" is held by another owner */
            detail: string;
            /**
             * @description Stable machine-readable error code
             * @enum {string}
             */
            code: "invalid_request" | "not_found" | "method_not_allowed" | "request_timeout" | "payload_too_large" | "headers_too_large" | "expectation_failed" | "unsupported_media_type" | "lock_held" | "too_many_waiters" | "not_owner" | "unauthenticated" | "forbidden" | "rate_limited" | "quota_exceeded" | "store_unavailable" | "overloaded" | "shutting_down" | "warming_up" | "internal_error" | "semaphore_full" | "limit_mismatch" | "rwlock_held" | "idempotency_key_reused" | "holder_changed";
            /** @description The request path */
            instance?: string;
            /**
             * Format: int64
             * @description lock_held, semaphore_full, limit_mismatch, rwlock_held, too_many_waiters, quota_exceeded, rate_limited, store_unavailable, overloaded and shutting_down: milliseconds after which a retry may succeed (Retry-After is the same, in whole seconds)
             */
            retryAfterMs?: number;
            /** @description invalid_request: each offending field and what is wrong with it */
            errors?: {
                field: string;
                message: string;
            }[];
            /**
             * @description store_unavailable on /readyz: the store kind
             * @enum {string}
             */
            store?: "memory" | "redis" | "etcd";
            /**
             * Format: int64
             * @description invalid_request for a waitMs out of bounds: the longest waitMs this server takes (LOCK_MAX_WAIT_MS), so a client that chose its wait itself can ask again within it
             */
            maxWaitMs?: number;
        };
        /** @description One page of held locks. Owner tokens are never shown. */
        LockList: {
            locks: {
                namespace: string;
                key: string;
                holder: string | null;
                /** Format: int64 */
                fencingToken: number;
                /** Format: date-time */
                expiresAt: string;
                /** Format: int64 */
                ttlRemainingMs: number;
                /** @description Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the watch index: a blocking query shows it in its next answer. */
                releaseRequested?: components["schemas"]["ReleaseRequested"];
                /**
                 * Format: int64
                 * @description Callers queued for this lock
                 */
                waiters: number;
            }[];
            /** @description Pass as cursor for the next page; null when the listing is complete */
            nextCursor: string | null;
        };
        /** @description The lock was freed; the evicted owner token no longer renews or releases it. */
        ForceRelease: {
            namespace: string;
            key: string;
            /**
             * @constant
             * @enum {boolean}
             */
            released: true;
            evicted: {
                holder: string | null;
                /**
                 * Format: int64
                 * @description The evicted lease's fencing token; every later grant of this lock has a higher one
                 */
                fencingToken: number;
            };
        };
        /** @description Stored with the lease: its holder's renewals carry it until the lease ends. Nothing was evicted. */
        ReleaseRequestAnswer: {
            namespace: string;
            key: string;
            /** Format: int64 */
            fencingToken: number;
            releaseRequested: components["schemas"]["ReleaseRequested"];
        };
        /** @description Every key of the set is held until expiresAt, under one owner token. */
        LockSetGrant: {
            /**
             * @description The set's secret owner token, returned by acquire
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /** @description Each key with its own fencing token (per-key sequence, as for locks), in the order asked */
            locks: {
                key: string;
                /** Format: int64 */
                fencingToken: number;
            }[];
            /** Format: int64 */
            ttlMs: number;
            /** Format: date-time */
            expiresAt: string;
            holder: string | null;
        };
        /** @description Every key of the set renewed; fencing tokens unchanged. */
        LockSetRenewal: {
            /** @description Each key with its own fencing token (per-key sequence, as for locks), in the order asked */
            locks: {
                key: string;
                /** Format: int64 */
                fencingToken: number;
            }[];
            /** Format: int64 */
            ttlMs: number;
            /** Format: date-time */
            expiresAt: string;
            /** @description Present when the holder of one of the keys was asked to let go */
            releaseRequested?: components["schemas"]["ReleaseRequested"];
        };
        LockSetRelease: {
            /**
             * @constant
             * @enum {boolean}
             */
            released: true;
        };
        /** @description A granted permit: a lease of its own, which ends by itself at expiresAt. */
        SemaphoreGrant: {
            key: string;
            /** Format: int64 */
            limit: number;
            /**
             * @description The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * Format: int64
             * @description Per-semaphore number, above every token granted before on this semaphore
             * @example 1764496077123456
             */
            fencingToken: number;
            /** Format: int64 */
            ttlMs: number;
            /**
             * Format: date-time
             * @description When the lease ends (UTC), measured on the store clock.
             * @example 2026-11-30T10:00:30.000Z
             */
            expiresAt: string;
            holder: string | null;
        };
        /** @description Who holds a semaphore's permits right now. Never owner tokens. */
        SemaphoreStatus: {
            key: string;
            /**
             * Format: int64
             * @description Watch index: a per-key number that rises on every grant, release, expiry, force release and hand-over (not on a renewal). Pass it back as ?index= to wait for the next change. Compare for inequality only: it is 0 once the key's state is forgotten after the fencing grace period.
             * @example 1796131701226485
             */
            index: number;
            /** @description The live permits' limit; null when no permit is held */
            limit: number | null;
            /**
             * Format: int64
             * @description Every live permit, shown in holders or not
             */
            permitsHeld: number;
            /** @description The live leases (never owner tokens), at most 100: when more are live, the 100 that end first. Listed in grant order (ascending fencing token). */
            holders: {
                holder: string | null;
                /**
                 * Format: int64
                 * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
                 * @example 1764496077123456
                 */
                fencingToken: number;
                /**
                 * Format: date-time
                 * @description When the lease ends (UTC), measured on the store clock.
                 * @example 2026-11-30T10:00:30.000Z
                 */
                expiresAt: string;
                /** Format: int64 */
                ttlRemainingMs: number;
                /** @description Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the watch index: a blocking query shows it in its next answer. */
                releaseRequested?: components["schemas"]["ReleaseRequested"];
            }[];
            /** @description true when more leases are live than holders shows (at most 100); the count says how many */
            truncated: boolean;
            /**
             * Format: int64
             * @description Callers queued for a permit
             */
            waiters: number;
            /** @description With ?queue=true: the first callers queued, head first (at most 100), never owner tokens */
            queue?: components["schemas"]["QueuedCaller"][];
        };
        /** @description A granted read or write lease. */
        RwLockGrant: {
            key: string;
            /**
             * @description read: shared with other readers (at most 10000); write: exclusive.
             * @example read
             * @enum {string}
             */
            mode: "read" | "write";
            /**
             * @description The secret returned by acquire. Proves the caller holds this lease; never shown to anyone else.
             * @example q3HbVfYJm3cS1kQxv7x8XA
             */
            ownerToken: string;
            /**
             * Format: int64
             * @description Per-lock number, above every token granted before on this lock (a write's is above every earlier read's and write's)
             * @example 1764496077123456
             */
            fencingToken: number;
            /** Format: int64 */
            ttlMs: number;
            /**
             * Format: date-time
             * @description When the lease ends (UTC), measured on the store clock.
             * @example 2026-11-30T10:00:30.000Z
             */
            expiresAt: string;
            holder: string | null;
        };
        /** @description Who holds a read/write lock right now. Never owner tokens. */
        RwLockStatus: {
            key: string;
            /**
             * Format: int64
             * @description Watch index: a per-key number that rises on every grant, release, expiry, force release and hand-over (not on a renewal). Pass it back as ?index= to wait for the next change. Compare for inequality only: it is 0 once the key's state is forgotten after the fencing grace period.
             * @example 1796131701226485
             */
            index: number;
            /** @description read (one or more readers), write (one writer), or null when free */
            mode: ("read" | "write") | null;
            /** @description The live leases (never owner tokens), at most 100: when more are live, the 100 that end first. Listed in grant order (ascending fencing token). */
            holders: {
                holder: string | null;
                /**
                 * Format: int64
                 * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
                 * @example 1764496077123456
                 */
                fencingToken: number;
                /**
                 * Format: date-time
                 * @description When the lease ends (UTC), measured on the store clock.
                 * @example 2026-11-30T10:00:30.000Z
                 */
                expiresAt: string;
                /** Format: int64 */
                ttlRemainingMs: number;
                /** @description Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the watch index: a blocking query shows it in its next answer. */
                releaseRequested?: components["schemas"]["ReleaseRequested"];
                /**
                 * @description read: shared with other readers (at most 10000); write: exclusive.
                 * @example read
                 * @enum {string}
                 */
                mode: "read" | "write";
            }[];
            /**
             * Format: int64
             * @description Every live lease, shown in holders or not
             */
            holderCount: number;
            /** @description true when more leases are live than holders shows (at most 100); the count says how many */
            truncated: boolean;
            /**
             * Format: int64
             * @description Callers queued, readers and writers in one FIFO queue
             */
            waiters: number;
            /** @description With ?queue=true: the first callers queued, head first (at most 100), never owner tokens */
            queue?: components["schemas"]["QueuedCaller"][];
        };
        /** @description One page of held semaphores or read/write locks. Owner tokens are never shown. */
        PermitList: {
            entries: {
                namespace: string;
                key: string;
                /**
                 * Format: int64
                 * @description A semaphore's limit (a read/write lock's reader cap)
                 */
                capacity: number;
                /** @description The live leases (never owner tokens), at most 100: when more are live, the 100 that end first. Listed in grant order (ascending fencing token). */
                holders: {
                    holder: string | null;
                    /**
                     * Format: int64
                     * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
                     * @example 1764496077123456
                     */
                    fencingToken: number;
                    /**
                     * Format: date-time
                     * @description When the lease ends (UTC), measured on the store clock.
                     * @example 2026-11-30T10:00:30.000Z
                     */
                    expiresAt: string;
                    /** Format: int64 */
                    ttlRemainingMs: number;
                    /** @description Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the watch index: a blocking query shows it in its next answer. */
                    releaseRequested?: components["schemas"]["ReleaseRequested"];
                    /** Format: int64 */
                    weight: number;
                }[];
                /**
                 * Format: int64
                 * @description Every live lease, shown in holders or not
                 */
                holderCount: number;
                /** @description true when more leases are live than holders shows (at most 100); the count says how many */
                truncated: boolean;
                /** Format: int64 */
                waiters: number;
            }[];
            /** @description Pass as cursor for the next page; null when the listing is complete */
            nextCursor: string | null;
        };
        /** @description Every live lease was ended; their owner tokens no longer renew or release. */
        PermitForceRelease: {
            namespace: string;
            key: string;
            /**
             * @constant
             * @enum {boolean}
             */
            released: true;
            evicted: {
                holder: string | null;
                /** Format: int64 */
                fencingToken: number;
            }[];
        };
        Liveness: {
            /**
             * @constant
             * @enum {string}
             */
            status: "ok";
        };
        /** @description The service can grant locks; store says which store it uses. */
        Readiness: {
            /**
             * @constant
             * @enum {string}
             */
            status: "ready";
            /** @enum {string} */
            store: "memory" | "redis" | "etcd";
        };
        /** @description A key's recent lease events */
        KeyHistory: {
            key: string;
            /** @description false: lease history is off on this instance (HISTORY=off), so nothing is recorded and events is empty */
            recording: boolean;
            /** @description Oldest first */
            events: components["schemas"]["HistoryEvent"][];
            /** @description Older events of the range were left out (limit) */
            truncated: boolean;
        };
        /** @description Who waits for a key, in queue order. Owner tokens are never shown. */
        AdminQueue: {
            namespace: string;
            key: string;
            /** @description The first callers queued (at most 100), head first; empty when none */
            queue: components["schemas"]["QueuedCaller"][];
        };
        /** @description Someone asked this lease's holder to let go (POST .../release-request). Not an eviction: the lease stays until its holder releases it or stops renewing. The request ends with the lease. */
        ReleaseRequested: {
            /**
             * Format: date-time
             * @description When it was asked (UTC, store clock)
             */
            at: string;
            /** @description The API key id that asked */
            by: string;
            reason: string | null;
        };
        /** @description Nobody holds the lock. */
        FreeLock: {
            key: string;
            /**
             * @constant
             * @enum {boolean}
             */
            held: false;
            /**
             * Format: int64
             * @description Watch index: a per-key number that changes on every grant, release, expiry, force release and hand-over (2 x fencingToken while held, 2 x last fencingToken + 1 while free). Pass it back as ?index= to wait for the next change. Compare for inequality only: it drops to 1 when a free key's state is forgotten after the fencing grace period.
             * @example 3528064724432477
             */
            index: number;
            /**
             * Format: date-time
             * @description Present while the lock-delay of an expired lease runs: the lock cannot be taken before this (UTC).
             * @example 2026-11-30T10:00:30.000Z
             */
            lockDelayUntil?: string;
        };
        /** @description The lock is held: by which holder label, with which fencing token, until when. */
        HeldLock: {
            key: string;
            /**
             * @constant
             * @enum {boolean}
             */
            held: true;
            /**
             * Format: int64
             * @description Watch index: a per-key number that changes on every grant, release, expiry, force release and hand-over (2 x fencingToken while held, 2 x last fencingToken + 1 while free). Pass it back as ?index= to wait for the next change. Compare for inequality only: it drops to 1 when a free key's state is forgotten after the fencing grace period.
             * @example 3528064724432477
             */
            index: number;
            holder: string | null;
            /**
             * Format: int64
             * @description Per-key number, strictly greater than every token issued before for this key. Pass it to the protected resource, which must reject any write carrying a lower token than it has seen.
             * @example 1764496077123456
             */
            fencingToken: number;
            /**
             * Format: date-time
             * @description When the lease ends (UTC), measured on the store clock.
             * @example 2026-11-30T10:00:30.000Z
             */
            expiresAt: string;
            /** Format: int64 */
            ttlRemainingMs: number;
            /** @description Present when this lease's holder was asked to let go (POST .../release-request). Making the request does not change the watch index: a blocking query shows it in its next answer. */
            releaseRequested?: components["schemas"]["ReleaseRequested"];
            /**
             * Format: int64
             * @description Callers queued for this lock
             */
            waiters: number;
            /** @description With ?queue=true: the first callers queued, head first (at most 100), never owner tokens */
            queue?: components["schemas"]["QueuedCaller"][];
        };
        QueuedCaller: {
            /**
             * Format: int64
             * @description 1 for the head of the queue
             */
            position: number;
            holder: string | null;
            /**
             * Format: date-time
             * @description When the caller joined the queue (UTC, store clock)
             * @example 2026-11-30T10:00:30.000Z
             */
            waitingSince: string;
            /**
             * Format: int64
             * @description Semaphores and read/write locks: how much of the capacity it asks for
             */
            weight?: number;
            /**
             * @description Read/write locks: the mode it waits for
             * @enum {string}
             */
            mode?: "read" | "write";
        };
        /** @description One event of a lease (never its owner token) */
        HistoryEvent: {
            /**
             * @description granted; handed_over (granted to a caller that waited while another lease of the key ended); renewed; release_requested (an operator asked the holder to let go; the lease goes on); released; expired (derived: its end passed with no release); force_released; lock_delay (derived: after an expiry, the pause the lease asked for before the key is granted again)
             * @enum {string}
             */
            type: "granted" | "handed_over" | "renewed" | "release_requested" | "released" | "expired" | "force_released" | "lock_delay";
            /**
             * Format: date-time
             * @description When (UTC): the store clock for grants, renewals and expiries, the instance clock otherwise
             */
            at: string;
            /** @description The lease (null: a release whose grant is no longer kept) */
            fencingToken: number | null;
            /** @description The lease's holder label */
            holder: string | null;
            /**
             * Format: date-time
             * @description granted, handed_over, renewed: when the lease was to end
             */
            expiresAt?: string;
            /**
             * Format: int64
             * @description granted, handed_over: how long the caller waited (callers that asked to wait)
             */
            waitedMs?: number;
            /**
             * Format: int64
             * @description released, expired, force_released: how long the lease was held
             */
            heldMs?: number;
            /** @description force_released, release_requested: the id of the API key that did it */
            by?: string;
            /** @description release_requested: why (null: no reason given) */
            reason?: string | null;
            /**
             * Format: date-time
             * @description lock_delay: when the key could be granted again
             */
            until?: string;
            /**
             * @description Read/write locks: the mode of the lease
             * @enum {string}
             */
            mode?: "read" | "write";
            /**
             * @description granted, handed_over: taken as part of a lock set
             * @constant
             * @enum {boolean}
             */
            lockSet?: true;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    acquireLock: {
        parameters: {
            query?: never;
            header?: {
                /**
                 * @description Makes a retried acquire safe (the IETF httpapi Idempotency-Key header). While the lease an acquire granted is live, an acquire with the same Idempotency-Key and body from the same API key answers 200 with that same grant (same ownerToken, fencingToken, ttlMs, expiresAt and holder) instead of 409, so a caller whose first answer was lost cannot lock itself out; the same key with another ttlMs, holder or lockDelayMs is 422 idempotency_key_reused (waitMs may differ). Kept only as long as that lease; a lease handed over after waiting in the queue does not keep it. Send a fresh random value (e.g. a UUID) for each logical acquire.
                 * @example 4f6b8a52-0d5e-4a9b-9a51-6f1c0c1e2d3a
                 */
                "Idempotency-Key"?: string;
            };
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AcquireRequest"];
            };
        };
        responses: {
            /** @description Granted: the caller holds the lock until expiresAt unless it renews */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockGrant"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held: another owner holds the lock (or others are queued); retryAfterMs and Retry-After say when its lease ends */
            409: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description idempotency_key_reused: this Idempotency-Key was sent with another body (ttlMs, holder or lockDelayMs) and the lease it granted is live; nothing was changed. Send the original body, or a new key for a new acquire. */
            422: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters: the wait queue of this lock, of this namespace on this instance, or of this instance is full; rate_limited: too many requests for this API key; or quota_exceeded: the namespace holds its limit of locks at once. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renewLock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewRequest"];
            };
        };
        responses: {
            /** @description Renewed: the lease now ends at expiresAt; the fencing token is unchanged */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRenewal"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token does not hold the lock (its lease expired, was released, or was taken over) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    releaseLock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequest"];
            };
        };
        responses: {
            /** @description Released: the lock is free for the next caller */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRelease"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token does not hold the lock (its lease expired, was released, or was taken over) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    inspectLock: {
        parameters: {
            query?: {
                /**
                 * @description Blocking query: the index from a previous answer. If the lock's index differs, the answer comes at once; otherwise when it changes, or after waitMs with the unchanged state.
                 * @example 3528064724432477
                 */
                index?: number;
                /**
                 * @description With index: wait up to this long for a change (default 0: answer at once). The server bounds it like an acquire's waitMs (by default 60,000); above is a 400.
                 * @example 30000
                 */
                waitMs?: number;
                /** @description true: the answer also lists the callers queued (position, holder label, waiting since, weight or mode), one more store read. Not with a blocking query (index and waitMs): a 400. */
                queue?: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The lock's current state */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockStatus"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters (a blocking query only): this key, this namespace on this instance, or this instance has as many open waits (queued acquires, waiting lock sets, blocking queries) as it may; or rate_limited: too many requests for this API key. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    forceReleaseLock: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the lock to free (required: an override names its target in full)
                 * @example team-a
                 */
                namespace: string;
                /**
                 * @description Evict only the lease with this fencing token (the one the operator looked at). When another lease holds the key instead, nothing is changed and the answer is 409 holder_changed.
                 * @example 42
                 */
                fencingToken?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Freed */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ForceRelease"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: nobody holds this lock; nothing changed */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: a body was sent, and it is over the limit (this route takes none) */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: a body was sent that is not application/json (this route takes none) */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    acquireLockSet: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LockSetAcquireRequest"];
            };
        };
        responses: {
            /** @description Granted: every key is held until expiresAt */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockSetGrant"];
                };
            };
            /** @description invalid_request: a field is missing or malformed, or a key is repeated (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description lock_held: some key of the set is held, in its lock-delay, or has callers queued; nothing was taken. Retry-After: the longest time left. */
            409: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters (with waitMs): this namespace on this instance, this instance, or the busy key has as many open waits as it may; rate_limited: too many requests for this API key; or quota_exceeded: the namespace would hold more than its limit of locks. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renewLockSet: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LockSetRenewRequest"];
            };
        };
        responses: {
            /** @description Renewed, every key */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockSetRenewal"];
                };
            };
            /** @description invalid_request: a field is missing or malformed, or a key is repeated (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token does not hold every key of the set (a lease expired, was released or force-released) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    releaseLockSet: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LockSetReleaseRequest"];
            };
        };
        responses: {
            /** @description Released */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockSetRelease"];
                };
            };
            /** @description invalid_request: a field is missing or malformed, or a key is repeated (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token holds none of these keys */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    acquireSemaphore: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SemaphoreAcquireRequest"];
            };
        };
        responses: {
            /** @description Granted: the caller holds one permit until expiresAt unless it renews */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SemaphoreGrant"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description semaphore_full: every permit is held (or others are queued); retryAfterMs and Retry-After say when the first one ends. limit_mismatch: the live permits were granted with another limit; Retry-After says when the last of them ends. */
            409: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters: the wait queue of this key, of this namespace on this instance, or of this instance is full; rate_limited: too many requests for this API key; or quota_exceeded: the namespace holds its limit of leases at once. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renewSemaphore: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewRequest"];
            };
        };
        responses: {
            /** @description Renewed: the lease now ends at expiresAt */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRenewal"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token holds no live lease here (it expired, was released, or was evicted) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    releaseSemaphore: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequest"];
            };
        };
        responses: {
            /** @description Released */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRelease"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token holds no live lease here (it expired, was released, or was evicted) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    inspectSemaphore: {
        parameters: {
            query?: {
                /**
                 * @description Blocking query: the index from a previous answer. If the lock's index differs, the answer comes at once; otherwise when it changes, or after waitMs with the unchanged state.
                 * @example 3528064724432477
                 */
                index?: number;
                /**
                 * @description With index: wait up to this long for a change (default 0: answer at once). The server bounds it like an acquire's waitMs (by default 60,000); above is a 400.
                 * @example 30000
                 */
                waitMs?: number;
                /** @description true: the answer also lists the callers queued (position, holder label, waiting since, weight or mode), one more store read. Not with a blocking query (index and waitMs): a 400. */
                queue?: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The semaphore's current state */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SemaphoreStatus"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters (a blocking query only): this key, this namespace on this instance, or this instance has as many open waits (queued acquires, waiting lock sets, blocking queries) as it may; or rate_limited: too many requests for this API key. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    forceReleaseSemaphore: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the lock to free (required: an override names its target in full)
                 * @example team-a
                 */
                namespace: string;
                /**
                 * @description Evict only the lease with this fencing token (the one the operator looked at). When another lease holds the key instead, nothing is changed and the answer is 409 holder_changed.
                 * @example 42
                 */
                fencingToken?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Freed */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermitForceRelease"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: no live lease on this key; nothing changed */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: a body was sent, and it is over the limit (this route takes none) */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: a body was sent that is not application/json (this route takes none) */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    acquireRwLock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RwLockAcquireRequest"];
            };
        };
        responses: {
            /** @description Granted: the caller holds a read or write lease until expiresAt */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RwLockGrant"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rwlock_held: held in a mode that excludes this one (a writer; or readers, for a write), or a writer is queued ahead; retryAfterMs and Retry-After say when the first lease ends */
            409: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters: the wait queue of this key, of this namespace on this instance, or of this instance is full; rate_limited: too many requests for this API key; or quota_exceeded: the namespace holds its limit of leases at once. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    renewRwLock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RenewRequest"];
            };
        };
        responses: {
            /** @description Renewed: the lease now ends at expiresAt */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRenewal"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token holds no live lease here (it expired, was released, or was evicted) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    releaseRwLock: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequest"];
            };
        };
        responses: {
            /** @description Released */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockRelease"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_owner: this token holds no live lease here (it expired, was released, or was evicted) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: this API key is over its request rate, and this call failed (not_owner: a token that holds nothing). Failed renewals and releases count against the rate limit; correct ones never do. Retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    inspectRwLock: {
        parameters: {
            query?: {
                /**
                 * @description Blocking query: the index from a previous answer. If the lock's index differs, the answer comes at once; otherwise when it changes, or after waitMs with the unchanged state.
                 * @example 3528064724432477
                 */
                index?: number;
                /**
                 * @description With index: wait up to this long for a change (default 0: answer at once). The server bounds it like an acquire's waitMs (by default 60,000); above is a 400.
                 * @example 30000
                 */
                waitMs?: number;
                /** @description true: the answer also lists the callers queued (position, holder label, waiting since, weight or mode), one more store read. Not with a blocking query (index and waitMs): a 400. */
                queue?: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The read/write lock's current state */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RwLockStatus"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description too_many_waiters (a blocking query only): this key, this namespace on this instance, or this instance has as many open waits (queued acquires, waiting lock sets, blocking queries) as it may; or rate_limited: too many requests for this API key. Retry after Retry-After. */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    forceReleaseRwLock: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the lock to free (required: an override names its target in full)
                 * @example team-a
                 */
                namespace: string;
                /**
                 * @description Evict only the lease with this fencing token (the one the operator looked at). When another lease holds the key instead, nothing is changed and the answer is 409 holder_changed.
                 * @example 42
                 */
                fencingToken?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Freed */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermitForceRelease"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: no live lease on this key; nothing changed */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: a body was sent, and it is over the limit (this route takes none) */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: a body was sent that is not application/json (this route takes none) */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listLocks: {
        parameters: {
            query?: {
                /**
                 * @description Only this namespace. Without it, every namespace is listed (and prefix must be empty).
                 * @example team-a
                 */
                namespace?: string;
                /**
                 * @description Only lock keys starting with this (needs namespace)
                 * @example invoice:
                 */
                prefix?: string;
                /** @description Page size, 1 to 1000 (default 100). The embedded store returns at most this many; the Redis store about this many (its SCAN COUNT), and may show a lock on two pages. */
                limit?: number;
                /** @description nextCursor from the previous page; omit for the first page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of held locks */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LockList"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    requestReleaseLock: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the key whose holder is asked (required, as for a force release)
                 * @example team-a
                 */
                namespace: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequestBody"];
            };
        };
        responses: {
            /** @description Asked: the holder sees it in its next renewal */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReleaseRequestAnswer"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: no live lease on this key; nothing was asked */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listSemaphores: {
        parameters: {
            query?: {
                /**
                 * @description Only this namespace. Without it, every namespace is listed (and prefix must be empty).
                 * @example team-a
                 */
                namespace?: string;
                /**
                 * @description Only lock keys starting with this (needs namespace)
                 * @example invoice:
                 */
                prefix?: string;
                /** @description Page size, 1 to 1000 (default 100). The embedded store returns at most this many; the Redis store about this many (its SCAN COUNT), and may show a lock on two pages. */
                limit?: number;
                /** @description nextCursor from the previous page; omit for the first page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of held semaphores */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermitList"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    requestReleaseSemaphore: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the key whose holder is asked (required, as for a force release)
                 * @example team-a
                 */
                namespace: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequestBody"];
            };
        };
        responses: {
            /** @description Asked: the holder sees it in its next renewal */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReleaseRequestAnswer"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: no live lease on this key; nothing was asked */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    listRwLocks: {
        parameters: {
            query?: {
                /**
                 * @description Only this namespace. Without it, every namespace is listed (and prefix must be empty).
                 * @example team-a
                 */
                namespace?: string;
                /**
                 * @description Only lock keys starting with this (needs namespace)
                 * @example invoice:
                 */
                prefix?: string;
                /** @description Page size, 1 to 1000 (default 100). The embedded store returns at most this many; the Redis store about this many (its SCAN COUNT), and may show a lock on two pages. */
                limit?: number;
                /** @description nextCursor from the previous page; omit for the first page */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of held read/write locks */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PermitList"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    requestReleaseRwLock: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the key whose holder is asked (required, as for a force release)
                 * @example team-a
                 */
                namespace: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReleaseRequestBody"];
            };
        };
        responses: {
            /** @description Asked: the holder sees it in its next renewal */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReleaseRequestAnswer"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description not_found: no live lease on this key; nothing was asked */
            404: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description holder_changed: fencingToken was given and another lease holds the key now (the holder changed since it was read); nothing changed */
            409: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description payload_too_large: the body is over the limit */
            413: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unsupported_media_type: the body is not application/json */
            415: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    queueAdmin: {
        parameters: {
            query: {
                /**
                 * @description The namespace of the key
                 * @example team-a
                 */
                namespace: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
                /** @description The key's primitive, as in its routes' paths */
                primitive: "locks" | "semaphores" | "rwlocks";
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key's queue */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AdminQueue"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    historyLock: {
        parameters: {
            query?: {
                /**
                 * @description Only events from this time on (UTC), and every event of a lease live at this time. Default: the retention.
                 * @example 2026-12-01T14:00:00Z
                 */
                since?: string;
                /**
                 * @description Only events up to this time (UTC), and every event of a lease live at this time. Default: now.
                 * @example 2026-12-01T14:05:00Z
                 */
                until?: string;
                /** @description At most this many events: the most recent ones (truncated says whether older ones were left out) */
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key's recent events */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyHistory"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    historySemaphore: {
        parameters: {
            query?: {
                /**
                 * @description Only events from this time on (UTC), and every event of a lease live at this time. Default: the retention.
                 * @example 2026-12-01T14:00:00Z
                 */
                since?: string;
                /**
                 * @description Only events up to this time (UTC), and every event of a lease live at this time. Default: now.
                 * @example 2026-12-01T14:05:00Z
                 */
                until?: string;
                /** @description At most this many events: the most recent ones (truncated says whether older ones were left out) */
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key's recent events */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyHistory"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    historyRwLock: {
        parameters: {
            query?: {
                /**
                 * @description Only events from this time on (UTC), and every event of a lease live at this time. Default: the retention.
                 * @example 2026-12-01T14:00:00Z
                 */
                since?: string;
                /**
                 * @description Only events up to this time (UTC), and every event of a lease live at this time. Default: now.
                 * @example 2026-12-01T14:05:00Z
                 */
                until?: string;
                /** @description At most this many events: the most recent ones (truncated says whether older ones were left out) */
                limit?: number;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key's recent events */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyHistory"];
                };
            };
            /** @description invalid_request: a field is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `locks` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not give a certain answer; overloaded: this instance is over its load budget and refused before any store work. Either way nothing was granted; retry after Retry-After. */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    historyAdmin: {
        parameters: {
            query: {
                /**
                 * @description Only events from this time on (UTC), and every event of a lease live at this time. Default: the retention.
                 * @example 2026-12-01T14:00:00Z
                 */
                since?: string;
                /**
                 * @description Only events up to this time (UTC), and every event of a lease live at this time. Default: now.
                 * @example 2026-12-01T14:05:00Z
                 */
                until?: string;
                /** @description At most this many events: the most recent ones (truncated says whether older ones were left out) */
                limit?: number;
                /**
                 * @description The namespace of the key
                 * @example team-a
                 */
                namespace: string;
            };
            header?: never;
            path: {
                /**
                 * @description Lock name: 1 to 256 characters from A-Z a-z 0-9 . _ - : @
                 * @example user_email_send_lock:42
                 */
                key: string;
                /** @description The key's primitive, as in its routes' paths */
                primitive: "locks" | "semaphores" | "rwlocks";
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key's recent events */
            200: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["KeyHistory"];
                };
            };
            /** @description invalid_request: a parameter is missing or malformed (the problem names it) */
            400: {
                headers: {
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description unauthenticated: no API key, or not a valid one (WWW-Authenticate: Bearer) */
            401: {
                headers: {
                    /** @description The scheme to authenticate with: Bearer (RFC 6750) */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description forbidden: the API key lacks the `admin` scope */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description rate_limited: too many requests for this API key; retry after Retry-After */
            429: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    /** @description Counted requests this API key may make per window (not sent when the rate limit is off) */
                    "X-RateLimit-Limit"?: number;
                    /** @description Counted requests left in the current window */
                    "X-RateLimit-Remaining"?: number;
                    /** @description Seconds until the current window ends */
                    "X-RateLimit-Reset"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description store_unavailable: the store did not answer; nothing was changed for certain. overloaded: this instance is over its load budget and refused before any store work */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    liveness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The process is alive */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Liveness"];
                };
            };
        };
    };
    readiness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready: the store answers */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
            /** @description store_unavailable: the store does not answer; warming_up: the instance has just started and is still warming up */
            503: {
                headers: {
                    /** @description Seconds after which a retry may succeed (retryAfterMs rounded up, at least 1) */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    openApiJson: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI 3.1 document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        openapi: string;
                    } & {
                        [key: string]: unknown;
                    };
                };
            };
        };
    };
    openApiYaml: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI 3.1 document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/yaml": string;
                };
            };
        };
    };
}
