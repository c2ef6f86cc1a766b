package keyholder

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSemaphorePermits(t *testing.T) {
	kh := newClient(t, Config{BaseURL: serverURL(t, urlEnv)})
	ctx, key := testContext(t), testKey(t)
	const ttl = time.Second
	opts := PermitOptions{Limit: 2, TTL: ttl, Holder: "go"}

	first, err := kh.AcquirePermit(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := kh.AcquirePermit(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Limit != 2 || second.FencingToken <= first.FencingToken || first.OwnerToken == second.OwnerToken {
		t.Fatalf("permits %+v and %+v", first, second)
	}

	_, err = kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 2, TTL: ttl})
	var full *LockHeldError
	if !errors.As(err, &full) || !errors.Is(err, ErrSemaphoreFull) || full.RetryAfter <= 0 || full.Err.Code != "semaphore_full" {
		t.Fatalf("a third permit of 2: want a *LockHeldError (semaphore_full) with RetryAfter, got %v", err)
	}
	if _, err := kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 3, TTL: ttl}); !errors.Is(err, ErrLimitMismatch) {
		t.Fatalf("another limit: want ErrLimitMismatch, got %v", err)
	}

	// Three TTLs later both permits are still held: the leases renewed them.
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		status, err := kh.InspectSemaphore(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if status.PermitsHeld != 2 || status.Limit == nil || *status.Limit != 2 || first.Err() != nil || second.Err() != nil {
			t.Fatalf("semaphore %+v (lost: %v, %v), want both permits held", status, first.Err(), second.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kh.ReleasePermit(ctx, key, first.OwnerToken); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a released permit's token: want ErrNotOwner, got %v", err)
	}
	third, err := kh.AcquirePermitGrant(ctx, key, PermitOptions{Limit: 2, TTL: ttl})
	if err != nil {
		t.Fatalf("a permit freed by release: %v", err)
	}
	if _, err := kh.RenewPermit(ctx, key, third.OwnerToken, 2*ttl); err != nil {
		t.Fatal(err)
	}
	if err := kh.ReleasePermit(ctx, key, third.OwnerToken); err != nil {
		t.Fatal(err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	status, err := kh.InspectSemaphore(ctx, key)
	if err != nil || status.PermitsHeld != 0 {
		t.Fatalf("after every release: %+v, %v", status, err)
	}

	err = kh.WithPermit(ctx, key, opts, func(ctx context.Context, lease *Lease) error {
		status, err := kh.InspectSemaphore(ctx, key)
		if err == nil && (status.PermitsHeld != 1 || status.Holders[0].FencingToken != lease.FencingToken) {
			t.Errorf("inside WithPermit: %+v", status)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if status, err := kh.InspectSemaphore(ctx, key); err != nil || status.PermitsHeld != 0 {
		t.Fatalf("after WithPermit: %+v, %v", status, err)
	}
}
