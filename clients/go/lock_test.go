package keyholder

import (
	"context"
	"errors"
	"testing"
	"time"
)

const urlEnv = "KEYHOLDER_TEST_URL"

func TestAcquireRenewReleaseOfALock(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)

	grant, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 5 * time.Second, Holder: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if grant.Key != key || grant.Holder != "go" || grant.TTL != 5*time.Second || grant.OwnerToken == "" {
		t.Fatalf("unexpected grant %+v", grant)
	}
	renewal, err := kh.Renew(ctx, key, grant.OwnerToken, 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if renewal.FencingToken != grant.FencingToken || renewal.TTL != 8*time.Second {
		t.Fatalf("renewal %+v does not keep the grant's fencing token %d", renewal, grant.FencingToken)
	}
	status, err := kh.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !status.Held || status.FencingToken != grant.FencingToken || status.Holder == nil || *status.Holder != "go" {
		t.Fatalf("inspect %+v", status)
	}
	if err := kh.Release(ctx, key, grant.OwnerToken); err != nil {
		t.Fatal(err)
	}
	err = kh.Release(ctx, key, grant.OwnerToken)
	var kerr *Error
	if !errors.Is(err, ErrNotOwner) || !errors.As(err, &kerr) || kerr.Status != 409 || kerr.Code != "not_owner" {
		t.Fatalf("a second release: want 409 not_owner, got %v", err)
	}
	next, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if next.FencingToken <= grant.FencingToken {
		t.Fatalf("fencing token went from %d to %d", grant.FencingToken, next.FencingToken)
	}
	if _, err := kh.Renew(ctx, key, next.OwnerToken, 10*time.Millisecond); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a TTL under the server's bound: want ErrInvalidRequest, got %v", err)
	}

	// The same Idempotency-Key (a retry whose first answer was lost) gets the same grant back, not 409.
	again := AcquireOptions{TTL: time.Second, IdempotencyKey: newIdempotencyKey()}
	first, err := kh.AcquireGrant(ctx, key+"-idem", again)
	if err != nil {
		t.Fatal(err)
	}
	retried, err := kh.AcquireGrant(ctx, key+"-idem", again)
	if err != nil || retried.OwnerToken != first.OwnerToken || retried.FencingToken != first.FencingToken {
		t.Fatalf("an acquire with the same Idempotency-Key: %+v, %v, want the grant %+v", retried, err, first)
	}
}

func TestAHeldLockIsA409WithRetryAfter(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	if _, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 300 * time.Millisecond} {
		started := time.Now()
		_, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: time.Second, Wait: wait})
		var held *LockHeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLockHeld) {
			t.Fatalf("wait %v: want a *LockHeldError, got %v", wait, err)
		}
		if held.RetryAfter <= 0 || held.RetryAfter > 5*time.Second {
			t.Fatalf("wait %v: RetryAfter %v, want when the 5 s lease ends", wait, held.RetryAfter)
		}
		if held.Err.Status != 409 || held.Err.Code != "lock_held" || held.Err.Problem == nil {
			t.Fatalf("wait %v: %+v", wait, held.Err)
		}
		if elapsed := time.Since(started); elapsed < wait {
			t.Fatalf("a %v wait answered after %v", wait, elapsed)
		}
	}
}

func TestWithLockRenewsTheLeaseAndReleasesIt(t *testing.T) {
	url := serverURL(t, urlEnv)
	kh := newClient(t, Config{BaseURL: url})
	other := newClient(t, Config{BaseURL: url, RetryBudget: -1})
	ctx, key := testContext(t), testKey(t)
	const ttl = time.Second
	var token int64
	checks := 0
	err := kh.WithLock(ctx, key, AcquireOptions{TTL: ttl}, func(ctx context.Context, lease *Lease) error {
		token = lease.FencingToken
		// Held for three TTLs: only the renewals keep it.
		until := time.Now().Add(3 * ttl)
		for time.Now().Before(until) {
			status, err := kh.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if !status.Held || status.FencingToken != token {
				t.Errorf("after %d checks the lock is %+v, want held with token %d", checks, status, token)
				return nil
			}
			if lease.Err() != nil || ctx.Err() != nil {
				t.Errorf("lease lost while renewed: %v", lease.Err())
				return nil
			}
			checks++
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := other.AcquireGrant(ctx, key, AcquireOptions{TTL: ttl}); !errors.Is(err, ErrLockHeld) {
			t.Errorf("another caller's acquire while held: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checks < 5 {
		t.Fatalf("only %d checks in three TTLs", checks)
	}
	status, err := kh.Inspect(ctx, key)
	if err != nil || status.Held {
		t.Fatalf("after WithLock: %+v, %v (want released)", status, err)
	}
	// fn's own error comes back, and the lock is released all the same.
	boom := errors.New("boom")
	if err := kh.WithLock(ctx, key, AcquireOptions{TTL: ttl}, func(context.Context, *Lease) error { return boom }); err != boom {
		t.Fatalf("want fn's error back, got %v", err)
	}
	if status, err := kh.Inspect(ctx, key); err != nil || status.Held || status.FencingToken != 0 && status.FencingToken <= token {
		t.Fatalf("after a failing fn: %+v, %v (want released)", status, err)
	}
	// A panic in fn releases the lock on its way up.
	func() {
		defer func() { _ = recover() }()
		_ = kh.WithLock(ctx, key, AcquireOptions{TTL: ttl}, func(context.Context, *Lease) error { panic("boom") })
	}()
	if status, err := kh.Inspect(ctx, key); err != nil || status.Held {
		t.Fatalf("after a panic in fn: %+v, %v (want released)", status, err)
	}
}

func TestAForceReleaseCancelsTheContext(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	var lease *Lease
	err := kh.WithLock(ctx, key, AcquireOptions{TTL: 3 * time.Second}, func(ctx context.Context, l *Lease) error {
		lease = l
		evicted, err := kh.ForceRelease(ctx, key, "default")
		if err != nil {
			return err
		}
		if evicted.Evicted.FencingToken != l.FencingToken {
			t.Errorf("force release evicted %+v, want token %d", evicted, l.FencingToken)
		}
		// The next renewal (about a second in) is refused with not_owner, which must cancel ctx.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			t.Error("ctx was not cancelled within 10 s of a force release")
			return nil
		}
	})
	var lost *LeaseLostError
	if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &lost) || lost.Reason != LostNotOwner || !errors.Is(err, ErrNotOwner) {
		t.Fatalf("want a *LeaseLostError (not_owner) from WithLock, got %v", err)
	}
	select {
	case <-lease.Lost():
	default:
		t.Fatal("Lost() is not closed")
	}
}

func TestACutOffLeaseIsLostBeforeTheServerFreesIt(t *testing.T) {
	url := serverURL(t, urlEnv)
	direct := newClient(t, Config{BaseURL: url, RetryBudget: -1})
	proxy := startProxy(t, url[len("http://"):])
	kh := newClient(t, Config{BaseURL: proxy.url()})
	ctx, key := testContext(t), testKey(t)

	// A 2 s drift margin leaves the check below 2 s to see the lock still held on the server. A renewal's
	// round trip measured 2.6 ms median, 7 ms at most (100 renewals, load average 24 on 2 cores); the rest
	// is for a goroutine or a server process that such a machine leaves waiting.
	const ttl, drift = 4 * time.Second, 2 * time.Second
	sentAt := time.Now()
	lease, err := kh.Acquire(ctx, key, AcquireOptions{TTL: ttl, LeaseOptions: LeaseOptions{DriftMargin: drift}})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	proxy.partition()
	select {
	case <-lease.Lost():
	case <-time.After(2 * ttl):
		t.Fatalf("a lease cut off from the server was not lost within %v", 2*ttl)
	}
	lostAfter := time.Since(sentAt)
	var lost *LeaseLostError
	if !errors.As(lease.Err(), &lost) || lost.Reason != LostDeadline {
		t.Fatalf("want a deadline loss, got %v", lease.Err())
	}
	// Not before the safe deadline: a failed renewal alone does not end a lease that still has time.
	if lostAfter < ttl-drift {
		t.Fatalf("lost after %v, before the safe deadline %v", lostAfter, ttl-drift)
	}
	// Before the server frees it: nobody else can have the lock yet.
	if _, err := direct.AcquireGrant(ctx, key, AcquireOptions{TTL: time.Second}); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("the server no longer held the lease when the client gave it up (lost after %v): %v", lostAfter, err)
	}
}

// With the caller's own Idempotency-Key, a retry is answered with the earlier call's lease, its end
// unchanged: the Lease must not count its safe deadline from the retry's send (a whole TTL too late at
// worst), so Acquire renews such a grant before handing it out.
func TestAReplayedGrantsSafeDeadlineIsNotAfterTheServersEnd(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	opts := AcquireOptions{TTL: 3 * time.Second, IdempotencyKey: newIdempotencyKey()}
	// An earlier call (another process, or an Acquire whose answer was lost).
	if _, err := kh.AcquireGrant(ctx, key, opts); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2600 * time.Millisecond)
	opts.DisableAutoRenew = true
	lease, err := kh.Acquire(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	before := time.Now()
	believed := lease.Remaining()
	status, err := kh.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rtt := time.Since(before)
	server := time.Duration(status.TTLRemainingMs) * time.Millisecond
	if believed > server+rtt {
		t.Fatalf("the lease believes %v are left, the server %v (inspect took %v)", believed, server, rtt)
	}
}

// A waiting acquire granted after longer than its TTL (the holder before it let go late): the grant's own
// safe window has passed before the caller has it, so Acquire renews it and counts the window from that
// renewal. Before, the Lease was lost at once and the lock left held by nobody until its TTL.
func TestAWaitLongerThanTheTTLStillGivesALease(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	direct := newClient(t, Config{BaseURL: serverURL(t, urlEnv), RetryBudget: -1})
	ctx, key := testContext(t), testKey(t)
	first, err := kh.AcquireGrant(ctx, key, AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_ = direct.Release(context.Background(), key, first.OwnerToken)
	}()
	started := time.Now()
	lease, err := kh.Acquire(ctx, key, AcquireOptions{TTL: time.Second, Wait: 5 * time.Second})
	if err != nil {
		status, _ := direct.Inspect(ctx, key)
		t.Fatalf("after waiting %v for a 1 s lease: %v; the server: held=%v, %d ms left", time.Since(started), err, status.Held, status.TTLRemainingMs)
	}
	if lease.Err() != nil || lease.Remaining() <= 0 {
		t.Fatalf("the lease handed out: Err() = %v, Remaining() = %v", lease.Err(), lease.Remaining())
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Release whose ctx had already ended sent nothing: a second Release with a live ctx gives the lock back
// (before, it returned nil at once and the lock stayed held by nobody until its TTL).
func TestAReleaseRetriedAfterACancelledOneReleases(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	lease, err := kh.Acquire(ctx, key, AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	first := lease.Release(cancelled)
	second := lease.Release(ctx)
	status, err := kh.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if first == nil || second != nil || status.Held {
		t.Fatalf("Release(cancelled ctx) = %v, then Release(live ctx) = %v; the server holds the lock: %v (%d ms left)",
			first, second, status.Held, status.TTLRemainingMs)
	}
}
