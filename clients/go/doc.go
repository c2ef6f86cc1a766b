// Package keyholder is a client for the keyholder lock service, standard library only (Go 1.19+).
//
//	kh, err := keyholder.New(keyholder.Config{BaseURL: "http://127.0.0.1:3000", APIKey: os.Getenv("KEYHOLDER_API_KEY")})
//	err = kh.WithLock(ctx, "invoice:42", keyholder.AcquireOptions{TTL: 10 * time.Second, Wait: 5 * time.Second},
//		func(ctx context.Context, lease *keyholder.Lease) error {
//			// ctx is cancelled when the lease is lost; the resource rejects tokens lower than it has seen.
//			return charge(ctx, invoice, lease.FencingToken)
//		})
//	var held *keyholder.LockHeldError
//	if errors.As(err, &held) { /* try again after held.RetryAfter */ }
//
// A Lease renews itself at about a third of its TTL and closes Lost() the moment it can no longer be
// trusted: a renewal refused (not_owner, e.g. force-released), or its safe deadline passed without a
// confirmed renewal. The safe deadline is the send time of the last confirmed acquire or renewal on the
// monotonic clock, plus the TTL, minus a drift margin; the server started the lease no earlier than that
// send time, so a client cut off from the server stops before the lease can be granted to someone else.
//
// 503 and 429 answers and lost connections are retried with backoff and jitter, never sooner than the
// server's Retry-After, until a deadline. Every lock acquire carries an Idempotency-Key, the same on each
// retry, so a retried acquire whose first answer was lost gets back the same grant. Errors are *Error
// values (errors.As) matching one sentinel each (errors.Is): ErrLockHeld, ErrNotOwner, ErrUnavailable, ...
// A grant is accepted only from a 200 whose body parses with its tokens present, and redirects are never
// followed (they would carry the API key and owner tokens elsewhere).
package keyholder
