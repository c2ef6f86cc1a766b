package keyholder

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// leaseServer grants "k" for ttlMs, renews it, and counts the releases it is sent.
func leaseServer(t *testing.T, ttlMs string) (*Client, *atomic.Int32) {
	t.Helper()
	var releases atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/locks/k/acquire":
			writeGrant(w, `{"key":"k","ownerToken":"o","fencingToken":7,"ttlMs":`+ttlMs+`,"expiresAt":"2026-11-30T10:00:30.000Z","holder":null}`)
		case "/v1/locks/k/renew":
			writeGrant(w, `{"key":"k","fencingToken":7,"ttlMs":`+ttlMs+`,"expiresAt":"2026-11-30T10:00:30.000Z"}`)
		default:
			releases.Add(1)
			writeGrant(w, `{"key":"k","released":true}`)
		}
	}))
	t.Cleanup(server.Close)
	return newClient(t, Config{BaseURL: server.URL}), &releases
}

// failedRelease is a Release that gave nothing back: its ctx had ended before it was sent.
func failedRelease(t *testing.T, lease *Lease) {
	t.Helper()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lease.Release(cancelled); err == nil {
		t.Fatal("Release with an ended ctx returned nil")
	}
}

// Keep after a Release that failed keeps the lease as Keep does without it: a later Release (WithLock's own,
// say) sends nothing, so the key is not free for a caller asking late in the period.
func TestKeepAfterAFailedReleaseKeepsTheLease(t *testing.T) {
	kh, releases := leaseServer(t, "10000")
	lease, err := kh.Acquire(context.Background(), "k", AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	failedRelease(t, lease)
	lease.Keep()
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("Release after Keep: %v", err)
	}
	if n := releases.Load(); n != 0 {
		t.Errorf("%d release requests sent for a kept lease, want none", n)
	}
	if err := lease.Err(); err != nil {
		t.Errorf("a kept lease: Err() = %v, want nil", err)
	}
}

// A Release that failed gave nothing back and stopped the renewals: the lease runs out at its safe
// deadline, and Err() and Lost() say so (before, they stayed silent: work done after it passed for work
// done under the lock). A Release after that has nothing to give back and sends nothing.
func TestALeaseWhoseReleaseFailedIsLostAtItsSafeDeadline(t *testing.T) {
	kh, releases := leaseServer(t, "600")
	lease, err := kh.Acquire(context.Background(), "k", AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	failedRelease(t, lease)
	select {
	case <-lease.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("a lease whose Release failed was not lost 5 s after its 600 ms TTL")
	}
	var lost *LeaseLostError
	if !errors.As(lease.Err(), &lost) || lost.Reason != LostDeadline {
		t.Fatalf("Err() = %v, want a LeaseLostError (deadline)", lease.Err())
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	if n := releases.Load(); n != 0 {
		t.Errorf("%d release requests sent, want none", n)
	}
}
